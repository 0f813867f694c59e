// Access-pattern classification of one stream of requests (one thread's reads or writes of one
// file, as fio keeps one position per file, job and direction; one device's reads or writes for
// the block layer): each request is sequential, strided or random by its seek distance from the
// previous request of the stream; the first request of a stream has nothing to compare with and
// is counted apart.
//
// Seek distance, as btt computes it (seek.c, default mode) but in bytes: 0 when the request
// starts where the previous one ended or inside it (stdio re-reading the block it seeked into,
// fio's rw=read); the distance forward from the previous end when it starts past it; the
// distance backward from the previous start when it starts before it (btt also counts a request
// that only ends inside the previous one as no seek; fio never issues one in a sequential job,
// and here it moved backwards). Sequential: distance 0. Strided: the same non-zero distance as
// the previous request's (fio's rw=read:N, "sequential with holes", reading back to front).
// Random: any other distance.
#pragma once

#include <cstdint>

namespace iotwin::analysis {

enum class Access : uint8_t { kFirst = 0, kSequential = 1, kStrided = 2, kRandom = 3 };
inline constexpr int kAccessKinds = 4;

struct StreamState {
  uint64_t start = 0;    // start of the previous request
  uint64_t next = 0;     // end of the previous request
  int64_t last_gap = 0;  // seek distance of the previous request
  bool seen = false;
  bool has_gap = false;
};

// The seek distance of a request starting at `offset` after the stream's previous request.
inline int64_t SeekDistance(const StreamState& s, uint64_t offset) {
  const auto forward = static_cast<int64_t>(offset - s.next);
  const auto backward = static_cast<int64_t>(offset - s.start);
  const bool touches = s.start <= offset && offset <= s.next;
  return touches ? 0 : offset > s.next ? forward : backward;
}

// Classifies a request [offset, offset + length) and advances the stream. *gap receives the
// seek distance (0 for the first request). `length` must not carry the end past 2^64
// (ClampedLength).
inline Access ClassifyAccess(StreamState& s, uint64_t offset, uint64_t length, int64_t* gap) {
  // Branch-free: on a random mix of requests the kind is unpredictable, and a mispredicted
  // branch costs more than computing every case.
  const int64_t g = s.seen ? SeekDistance(s, offset) : 0;
  const int sequential = g == 0;
  const int strided = !sequential & s.has_gap & (g == s.last_gap);
  // First 0; else sequential 1, strided 2, random 3.
  const auto a = static_cast<Access>(static_cast<int>(s.seen) * (3 - 2 * sequential - strided));
  s.last_gap = g;  // 0 (its initial value) while unseen
  s.has_gap = s.seen;
  s.seen = true;
  s.start = offset;
  s.next = offset + length;
  *gap = g;
  return a;
}

}  // namespace iotwin::analysis
