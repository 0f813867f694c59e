#include "analysis/histogram.h"

#include <algorithm>

namespace iotwin::analysis {

void SizeHistogram::Merge(const SizeHistogram& o) {
  for (int b = 0; b < kBuckets; b++) {
    counts_[b] += o.counts_[b];
    sums_[b] += o.sums_[b];
  }
  total_ += o.total_;
}

void TopValues::AddSlow(uint64_t value, uint64_t n) {
  total_ += n;
  if (uint32_t* pos = index_.Find(value)) {
    entries_[*pos].count += n;
    prev_pos_ = last_pos_;
    last_pos_ = *pos;
    return;
  }
  if (entries_.size() < capacity_) {
    index_.FindOrInsert(value) = static_cast<uint32_t>(entries_.size());
    prev_pos_ = last_pos_;
    last_pos_ = static_cast<int64_t>(entries_.size());
    entries_.push_back({value, n, 0});
    return;
  }
  // Space-Saving: the new value takes over the smallest counter, inheriting its count as error.
  overflowed_ = true;
  size_t min_pos = 0;
  for (size_t i = 1; i < entries_.size(); i++)
    if (entries_[i].count < entries_[min_pos].count) min_pos = i;
  Entry& e = entries_[min_pos];
  index_.Erase(e.value);
  e.error = e.count;
  e.count += n;
  e.value = value;
  index_.FindOrInsert(value) = static_cast<uint32_t>(min_pos);
  if (last_pos_ != static_cast<int64_t>(min_pos)) prev_pos_ = last_pos_;
  last_pos_ = static_cast<int64_t>(min_pos);
}

void TopValues::Merge(const TopValues& o) {
  for (const Entry& e : o.entries_) Add(e.value, e.count);
  // Add() counted o's samples once; o's total may exceed its entries' sum after overflow.
  uint64_t entries_sum = 0;
  for (const Entry& e : o.entries_) entries_sum += e.count;
  total_ += o.total_ - std::min(o.total_, entries_sum);
  overflowed_ = overflowed_ || o.overflowed_;
}

std::vector<TopValues::Entry> TopValues::Sorted() const {
  std::vector<Entry> out = entries_;
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    return a.count != b.count ? a.count > b.count : a.value < b.value;
  });
  return out;
}

void TimeSeries::Grow(uint64_t rel) {
  while (rel / width_ >= kMaxBuckets) {
    for (auto& d : data_) {
      for (size_t i = 0; i < kMaxBuckets / 2; i++) d[i] = d[2 * i] + d[2 * i + 1];
      std::fill(d.begin() + kMaxBuckets / 2, d.end(), 0);
    }
    used_ = (used_ + 1) / 2;
    width_ *= 2;
  }
}

std::vector<uint64_t> TimeSeries::Series(size_t s) const {
  std::vector<uint64_t> out(used_);
  for (size_t i = 0; i < used_; i++) out[i] = data_[s][i];
  return out;
}

std::vector<uint64_t> TimeSeries::Rebinned(size_t s, uint64_t width_ns, size_t buckets) const {
  std::vector<uint64_t> out(buckets, 0);
  uint64_t factor = width_ns / width_;
  if (factor == 0) factor = 1;
  for (size_t b = 0; b < used_; b++) {
    size_t o = b / factor;
    if (o < buckets) out[o] += data_[s][b];
  }
  return out;
}

}  // namespace iotwin::analysis
