// Fixed-size histograms used by report and compare: memory does not grow with the trace.
//
//  - SizeHistogram: power-of-two buckets labelled by their upper bound (bucket "≤128K" holds
//    (64 KiB, 128 KiB]), so the usual power-of-two request sizes land alone in a bucket.
//  - LogLinearHistogram: HDR-style buckets (exact below 128, then 64 sub-buckets per power of
//    two: relative bucket width ≤ 1/64 = 1.6%) for percentiles and distribution distances.
//  - TopValues: the most frequent exact values (Space-Saving); exact while the number of
//    distinct values stays within capacity, with a known error bound beyond.
//  - TimeSeries: per-bucket sums over time with auto-sized buckets: the bucket width doubles
//    (neighbours merged) whenever a timestamp falls beyond the last bucket.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "analysis/flat_map.h"
#include "base/hdr_histogram.h"

namespace iotwin::analysis {

class SizeHistogram {
 public:
  static constexpr int kBuckets = 66;  // 0, 1, ≤2, ≤4, ..., ≤2^64

  // Bucket 0 holds 0; bucket b ≥ 1 holds (2^(b-2), 2^(b-1)], i.e. values whose ceil(log2) is b-1.
  static int BucketOf(uint64_t v) {
    if (v <= 1) return static_cast<int>(v);
    return 2 + Log2Floor(v - 1);
  }
  // Largest value of bucket b (its label); bucket 65's bound 2^64 is reported as UINT64_MAX.
  static uint64_t BucketUpper(int b) {
    if (b <= 1) return static_cast<uint64_t>(b);
    if (b - 1 >= 64) return UINT64_MAX;
    return uint64_t{1} << (b - 1);
  }

  void Add(uint64_t v, uint64_t n = 1) {
    int b = BucketOf(v);
    counts_[b] += n;
    sums_[b] += v * n;
    total_ += n;
  }
  void Merge(const SizeHistogram& o);

  uint64_t count(int b) const { return counts_[b]; }
  uint64_t sum(int b) const { return sums_[b]; }  // sum of values (bytes) in bucket b
  uint64_t total() const { return total_; }

 private:
  std::array<uint64_t, kBuckets> counts_{};
  std::array<uint64_t, kBuckets> sums_{};
  uint64_t total_ = 0;
};

// HDR-style buckets, 64 per power of two (base/hdr_histogram.h): relative bucket width at most
// 1/64 = 1.6%.
using LogLinearHistogram = HdrHistogram<6>;

class TopValues {
 public:
  struct Entry {
    uint64_t value = 0;
    uint64_t count = 0;
    uint64_t error = 0;  // over-count bound inherited on replacement (0 while exact)
  };

  explicit TopValues(size_t capacity = 64) : capacity_(capacity) {}

  void Add(uint64_t value, uint64_t n = 1) {
    // Fast path, inline: the value of one of the last two distinct values seen (consecutive
    // requests of one size, or a mix of two sizes).
    if (last_pos_ >= 0 && entries_[static_cast<size_t>(last_pos_)].value == value) {
      total_ += n;
      entries_[static_cast<size_t>(last_pos_)].count += n;
      return;
    }
    if (prev_pos_ >= 0 && entries_[static_cast<size_t>(prev_pos_)].value == value) {
      total_ += n;
      entries_[static_cast<size_t>(prev_pos_)].count += n;
      std::swap(last_pos_, prev_pos_);
      return;
    }
    AddSlow(value, n);
  }
  void Merge(const TopValues& o);

  // Entries by descending count (ties: smaller value first).
  std::vector<Entry> Sorted() const;
  // True while every distinct value seen has its own exact counter.
  bool exact() const { return !overflowed_; }
  uint64_t total() const { return total_; }
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_;
  std::vector<Entry> entries_;
  FlatMap<uint32_t> index_;  // value -> position in entries_
  uint64_t total_ = 0;
  void AddSlow(uint64_t value, uint64_t n);
  bool overflowed_ = false;
  // Fast path: the positions of the last value added and of the distinct one before it.
  int64_t last_pos_ = -1, prev_pos_ = -1;
};

// Signed distances (seek distances) in log2 buckets: bucket kZero holds 0, kZero+1+k holds
// [2^k, 2^(k+1)), kZero-1-k holds (-2^(k+1), -2^k].
class SeekHistogram {
 public:
  static constexpr int kZero = 64;
  static constexpr int kBuckets = 129;
  // Branch-free (seek signs are unpredictable): kZero + sign(d) * (1 + floor(log2 |d|)).
  static int BucketOf(int64_t d) {
    const uint64_t magnitude = d < 0 ? uint64_t{0} - static_cast<uint64_t>(d)
                                     : static_cast<uint64_t>(d);
    const int sign = (d > 0) - (d < 0);
    return kZero + sign * (1 + Log2Floor(magnitude | 1));
  }
  // Smallest magnitude of bucket b (signed): 0, ±2^k.
  static int64_t BucketLow(int b) {
    if (b == kZero) return 0;
    int k = b > kZero ? b - kZero - 1 : kZero - 1 - b;
    uint64_t m = uint64_t{1} << k;
    return b > kZero ? static_cast<int64_t>(m) : -static_cast<int64_t>(m);
  }
  void Add(int64_t d, uint64_t n = 1) {
    counts_[BucketOf(d)] += n;
    total_ += n;
  }
  void Merge(const SeekHistogram& o) {
    for (int b = 0; b < kBuckets; b++) counts_[b] += o.counts_[b];
    total_ += o.total_;
  }
  uint64_t count(int b) const { return counts_[b]; }
  uint64_t total() const { return total_; }

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t total_ = 0;
};

// Sums per time bucket of a few parallel series (e.g. read ops, write ops, read bytes, ...).
class TimeSeries {
 public:
  static constexpr size_t kMaxBuckets = 1024;

  TimeSeries(size_t series, uint64_t initial_width_ns = 1'000'000)
      : width_(initial_width_ns), data_(series, std::vector<uint64_t>(kMaxBuckets, 0)) {}

  void SetStart(uint64_t start_ns) {
    start_ = start_ns;
    last_low_ = 0;
    last_bucket_ = 0;
  }
  uint64_t start() const { return start_; }

  // Adds `v` to series `s` at time `ts` (times before start count in the first bucket).
  void Add(size_t s, uint64_t ts, uint64_t v) { data_[s][Bucket(ts)] += v; }
  // One operation of `bytes` at `ts`, into an ops series and a bytes series (one bucket lookup).
  void AddOpAndBytes(size_t ops_series, size_t bytes_series, uint64_t ts, uint64_t bytes) {
    const size_t b = Bucket(ts);
    data_[ops_series][b] += 1;
    data_[bytes_series][b] += bytes;
  }

  uint64_t width_ns() const { return width_; }
  size_t used_buckets() const { return used_; }
  size_t series() const { return data_.size(); }
  uint64_t at(size_t s, size_t b) const { return data_[s][b]; }
  std::vector<uint64_t> Series(size_t s) const;
  // A series re-binned to `width_ns` (a multiple of width_ns()), `buckets` long.
  std::vector<uint64_t> Rebinned(size_t s, uint64_t width_ns, size_t buckets) const;

 private:
  // The bucket of time `ts`, growing the buckets' width when `ts` lies beyond the last.
  size_t Bucket(uint64_t ts) {
    uint64_t rel = ts > start_ ? ts - start_ : 0;
    uint64_t b;
    if (rel - last_low_ < width_) {
      // Same bucket as the previous sample (the usual case: times advance slowly): no division.
      b = last_bucket_;
    } else {
      b = rel / width_;
      if (b >= kMaxBuckets) {
        Grow(rel);
        b = rel / width_;
      }
      last_bucket_ = b;
      last_low_ = b * width_;
    }
    if (b + 1 > used_) used_ = b + 1;
    return static_cast<size_t>(b);
  }
  void Grow(uint64_t rel);
  uint64_t start_ = 0;
  uint64_t width_;
  size_t used_ = 0;
  uint64_t last_low_ = 0, last_bucket_ = 0;  // the bucket of the previous Add: [low, low+width)
  std::vector<std::vector<uint64_t>> data_;
};

}  // namespace iotwin::analysis
