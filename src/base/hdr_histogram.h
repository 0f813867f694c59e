// HdrHistogram<kSubBits>: counts of 64-bit values in log-linear buckets (the layout of
// HdrHistogram, http://hdrhistogram.org): values below 2^(kSubBits+1) have a bucket each, and
// every power of two above is cut into 2^kSubBits equal buckets, so a bucket is at most
// 1/2^kSubBits of its low end wide. Fixed memory (kBuckets counters), mergeable; the exact sum
// (128 bits), minimum and maximum ride along for the mean and for clamping percentiles.
//
// The report (analysis::LogLinearHistogram, 64 sub-buckets) and the replay
// (replay::Histogram, 32 sub-buckets) count with it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace iotwin {

inline int Log2Floor(uint64_t v) { return 63 - __builtin_clzll(v); }  // v > 0

template <int SubBits>
class HdrHistogram {
 public:
  static_assert(SubBits >= 1 && SubBits < 63);
  static constexpr int kSubBits = SubBits;
  static constexpr uint64_t kSub = uint64_t{1} << kSubBits;
  static constexpr int kBuckets = static_cast<int>(kSub + (64 - kSubBits) * kSub);

  static int BucketOf(uint64_t v) {
    if (v < kSub) return static_cast<int>(v);
    const int shift = Log2Floor(v) - kSubBits;
    const uint64_t mant = (v >> shift) - kSub;  // in [0, kSub)
    return static_cast<int>(kSub + static_cast<uint64_t>(shift) * kSub + mant);
  }
  // Smallest and largest value of bucket b.
  static uint64_t BucketLow(int b) {
    if (b < static_cast<int>(kSub)) return static_cast<uint64_t>(b);
    const uint64_t shift = (static_cast<uint64_t>(b) - kSub) / kSub;
    const uint64_t mant = (static_cast<uint64_t>(b) - kSub) % kSub;
    return (kSub + mant) << shift;
  }
  static uint64_t BucketHigh(int b) {
    if (b < static_cast<int>(kSub)) return static_cast<uint64_t>(b);
    const uint64_t shift = (static_cast<uint64_t>(b) - kSub) / kSub;
    return BucketLow(b) + ((uint64_t{1} << shift) - 1);
  }

  HdrHistogram() : counts_(kBuckets, 0) {}

  void Add(uint64_t v) {
    counts_[BucketOf(v)] += 1;
    total_ += 1;
    AddToSum(v);
    if (v < min_) min_ = v;
    if (v > max_) max_ = v;
  }
  void Merge(const HdrHistogram& o) {
    for (int b = 0; b < kBuckets; b++) counts_[b] += o.counts_[b];
    total_ += o.total_;
    AddToSum(o.sum_low_);
    sum_high_ += o.sum_high_;
    min_ = std::min(min_, o.min_);
    max_ = std::max(max_, o.max_);
  }

  uint64_t total() const { return total_; }
  uint64_t min() const { return total_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  double mean() const {
    if (!total_) return 0.0;
    return (static_cast<double>(sum_high_) * 0x1p64 + static_cast<double>(sum_low_)) /
           static_cast<double>(total_);
  }
  // The mean rounded to the nearest integer, from the exact sum: it lies within [min, max], so
  // it fits where the double mean of values near 2^64 would not convert back.
  uint64_t MeanRounded() const {
    if (!total_) return 0;
    const unsigned __int128 sum = (static_cast<unsigned __int128>(sum_high_) << 64) | sum_low_;
    return static_cast<uint64_t>((sum + total_ / 2) / total_);
  }
  uint64_t count(int b) const { return counts_[b]; }
  const std::vector<uint64_t>& counts() const { return counts_; }

  // Nearest-rank percentile (p in [0, 100]): the value of the ceil(p/100 * N)-th smallest
  // sample, reported as the highest value of its bucket clamped to the observed [min, max]
  // (HdrHistogram's convention: never below the true value, at most one bucket width above
  // it; exact for values with a bucket each and for the extremes). 0 for an empty histogram.
  uint64_t Percentile(double p) const {
    if (total_ == 0) return 0;
    p = std::clamp(p, 0.0, 100.0);
    uint64_t rank = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(total_)));
    if (rank < 1) rank = 1;
    if (rank >= total_) return max_;
    uint64_t seen = 0;
    for (int b = 0; b < kBuckets; b++) {
      seen += counts_[b];
      if (seen >= rank) return std::clamp(BucketHigh(b), min_, max_);
    }
    return max_;
  }

  // Fraction of samples ≤ v (bucket resolution: a bucket counts as ≤ v when its low end is).
  double CdfAt(uint64_t v) const {
    if (total_ == 0) return 0;
    uint64_t below = 0;
    const int last = BucketOf(v);
    for (int b = 0; b <= last; b++) below += counts_[b];
    return static_cast<double>(below) / static_cast<double>(total_);
  }

 private:
  // The exact sum of the values, in 128 bits (an integer add per sample, where a double costs
  // a conversion and rounds).
  void AddToSum(uint64_t v) { sum_high_ += __builtin_add_overflow(sum_low_, v, &sum_low_); }

  std::vector<uint64_t> counts_;
  uint64_t total_ = 0;
  uint64_t sum_low_ = 0, sum_high_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
};

}  // namespace iotwin
