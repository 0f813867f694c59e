// Histogram: log-linear buckets over nanosecond values (32 sub-buckets per power of two, so a
// reported percentile is within ~3% of the true value), fixed memory, mergeable.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

namespace iotwin::replay {

class Histogram {
 public:
  static constexpr int kSubBits = 5;
  static constexpr int kBuckets = 64 + (64 - 6) * (1 << kSubBits);

  void Add(uint64_t v);
  void Merge(const Histogram& o);
  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  double mean() const { return count_ ? static_cast<double>(sum_) / count_ : 0; }
  // Value at quantile q in [0, 1] (the midpoint of its bucket, clamped to [min, max]).
  uint64_t Quantile(double q) const;

  static int BucketOf(uint64_t v);
  static uint64_t BucketLow(int b);
  static uint64_t BucketHigh(int b);  // exclusive

 private:
  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0, sum_ = 0, min_ = UINT64_MAX, max_ = 0;
};

}  // namespace iotwin::replay
