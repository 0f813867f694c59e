#include "replay/histogram.h"

#include <algorithm>

namespace iotwin::replay {

uint64_t Histogram::Quantile(double q) const {
  if (total() == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(total() - 1)) + 1;
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; b++) {
    seen += count(b);
    if (seen >= rank) {
      const uint64_t lo = BucketLow(b), last = HdrHistogram::BucketHigh(b);
      return std::clamp(lo + (last - lo) / 2, min(), max());
    }
  }
  return max();
}

}  // namespace iotwin::replay
