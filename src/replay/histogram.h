// Histogram: replay latencies and schedule errors (ns) in HDR-style buckets with 32 sub-buckets
// per power of two (base/hdr_histogram.h), so a reported quantile is within ~3% of the true
// value; fixed memory, mergeable.
#pragma once

#include <cstdint>

#include "base/hdr_histogram.h"

namespace iotwin::replay {

class Histogram : public HdrHistogram<5> {
 public:
  using HdrHistogram::count;  // count(b): the samples in bucket b
  uint64_t count() const { return total(); }
  // Value at quantile q in [0, 1]: the sample of rank floor(q * (N - 1)) + 1, reported as the
  // midpoint of its bucket clamped to [min, max]. 0 for an empty histogram.
  uint64_t Quantile(double q) const;

  // Replay states bucket bounds half-open: the end of bucket b is one past its largest value
  // (0, wrapped, for the last bucket).
  static uint64_t BucketHigh(int b) { return HdrHistogram::BucketHigh(b) + 1; }
};

}  // namespace iotwin::replay
