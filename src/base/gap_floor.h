// The gap floor of a thread: the original program's own cost of leaving one system call and
// entering the next (the kernel's return and entry paths, with a tracer's probes), as its trace
// shows it. A replay pays that cost again around its own calls: gaps pacing takes the floor out of
// every recorded gap (replay/pacer.h), and compare's model of a paced replay (analysis/
// compare_timing.h) puts it between a late call and the one before, where the replayer cannot
// issue the next call in no time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace iotwin {

// At most this: a call's return and entry cost microseconds at most, so a larger floor is the
// program's think time (a thread that always waits 5 ms between calls) and is kept.
inline constexpr uint64_t kMaxGapFloorNs = 2'000;

// The floor from a thread's recorded gaps between consecutive calls (ns): a low quantile (the
// 5th percentile), so that a few gaps shortened by clock skew between CPUs do not decide it,
// capped at kMaxGapFloorNs. 0 with fewer than 16 gaps. Reorders `gaps`.
inline uint64_t GapFloor(std::vector<uint64_t>& gaps) {
  if (gaps.size() < 16) return 0;
  auto at = gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 20);
  std::nth_element(gaps.begin(), at, gaps.end());
  return std::min(*at, kMaxGapFloorNs);
}

}  // namespace iotwin
