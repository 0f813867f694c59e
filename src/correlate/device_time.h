// Device time of requests, shared by the layers report's sections (docs/block-layer.md): the
// NVMe command where recorded, else D -> C; unions of such intervals within a window.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "correlate/correlate.h"

namespace iotwin::correlate {

// Union length of intervals clipped to [lo, hi).
inline uint64_t UnionWithin(std::vector<std::pair<uint64_t, uint64_t>> iv, uint64_t lo,
                            uint64_t hi) {
  std::sort(iv.begin(), iv.end());
  uint64_t total = 0, cur_lo = 0, cur_hi = 0;
  bool open = false;
  for (auto [a, b] : iv) {
    a = std::max(a, lo);
    b = std::min(b, hi);
    if (b <= a) continue;
    if (!open || a > cur_hi) {
      if (open) total += cur_hi - cur_lo;
      cur_lo = a;
      cur_hi = b;
      open = true;
    } else {
      cur_hi = std::max(cur_hi, b);
    }
  }
  if (open) total += cur_hi - cur_lo;
  return total;
}

// Device time of a request: its NVMe commands where recorded, else D -> C.
inline std::vector<std::pair<uint64_t, uint64_t>> DeviceIntervals(const Request& q) {
  std::vector<std::pair<uint64_t, uint64_t>> iv;
  for (const NvmeCommand& n : q.nvme) {
    if (n.setup_ts && n.complete_ts > n.setup_ts) iv.push_back({n.setup_ts, n.complete_ts});
  }
  if (iv.empty() && q.d_ts && q.c_ts > q.d_ts) iv.push_back({q.d_ts, q.c_ts});
  return iv;
}

}  // namespace iotwin::correlate
