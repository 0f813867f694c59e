#include "replay/histogram.h"

#include <algorithm>

namespace iotwin::replay {

int Histogram::BucketOf(uint64_t v) {
  if (v < 64) return static_cast<int>(v);
  int e = 63 - __builtin_clzll(v);  // >= 6
  int sub = static_cast<int>((v >> (e - kSubBits)) & ((1 << kSubBits) - 1));
  return 64 + (e - 6) * (1 << kSubBits) + sub;
}

uint64_t Histogram::BucketLow(int b) {
  if (b < 64) return static_cast<uint64_t>(b);
  int e = (b - 64) / (1 << kSubBits) + 6;
  uint64_t sub = static_cast<uint64_t>((b - 64) % (1 << kSubBits));
  return (1ull << e) + (sub << (e - kSubBits));
}

uint64_t Histogram::BucketHigh(int b) {
  if (b < 64) return static_cast<uint64_t>(b) + 1;
  int e = (b - 64) / (1 << kSubBits) + 6;
  return BucketLow(b) + (1ull << (e - kSubBits));
}

void Histogram::Add(uint64_t v) {
  buckets_[BucketOf(v)]++;
  count_++;
  sum_ += v;
  min_ = std::min(min_, v);
  max_ = std::max(max_, v);
}

void Histogram::Merge(const Histogram& o) {
  for (int i = 0; i < kBuckets; i++) buckets_[i] += o.buckets_[i];
  count_ += o.count_;
  sum_ += o.sum_;
  min_ = std::min(min_, o.min_);
  max_ = std::max(max_, o.max_);
}

uint64_t Histogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(count_ - 1)) + 1;
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; b++) {
    seen += buckets_[b];
    if (seen >= rank) {
      uint64_t lo = BucketLow(b), hi = BucketHigh(b);
      uint64_t mid = lo + (hi - lo - 1) / 2;
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;
}

}  // namespace iotwin::replay
