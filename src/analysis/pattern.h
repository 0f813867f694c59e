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
  Access a;
  int64_t g = 0;
  if (!s.seen) {
    a = Access::kFirst;
    s.seen = true;
  } else {
    g = static_cast<int64_t>(offset - s.next);
    if (g == 0) {
      a = Access::kSequential;
    } else if (s.has_gap && g == s.last_gap) {
      a = Access::kStrided;
    } else {
      a = Access::kRandom;
    }
    s.last_gap = g;
    s.has_gap = true;
  }
  s.next = offset + length;
  *gap = g;
  return a;
}

}  // namespace iotwin::analysis
