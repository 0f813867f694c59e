// Access-pattern classification of one stream of requests (one thread's reads or writes of one
// file): each request is sequential (it starts where the previous one ended), strided (it
// skips the same non-zero distance as the previous request did), or random; the first request
// of a stream has nothing to compare with and is counted apart.
#pragma once

#include <cstdint>

namespace iotwin::analysis {

enum class Access : uint8_t { kFirst = 0, kSequential = 1, kStrided = 2, kRandom = 3 };
inline constexpr int kAccessKinds = 4;

struct StreamState {
  uint64_t next = 0;     // end of the previous request
  int64_t last_gap = 0;  // offset - previous end, of the previous request
  bool seen = false;
  bool has_gap = false;
};

// Classifies a request [offset, offset + length) and advances the stream. *gap receives the
// seek distance (offset - previous end; 0 for the first request).
inline Access ClassifyAccess(StreamState& s, uint64_t offset, uint64_t length, int64_t* gap) {
  // Branch-free: on a random mix of requests the kind is unpredictable, and a mispredicted
  // branch costs more than computing every case.
  const int64_t g = s.seen ? static_cast<int64_t>(offset - s.next) : 0;
  const int sequential = g == 0;
  const int strided = !sequential & s.has_gap & (g == s.last_gap);
  // First 0; else sequential 1, strided 2, random 3.
  const auto a = static_cast<Access>(static_cast<int>(s.seen) * (3 - 2 * sequential - strided));
  s.last_gap = g;  // 0 (its initial value) while unseen
  s.has_gap = s.seen;
  s.seen = true;
  s.next = offset + length;
  *gap = g;
  return a;
}

}  // namespace iotwin::analysis
