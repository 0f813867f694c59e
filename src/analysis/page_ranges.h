// PageRanges: a set of page indices of one file, held as disjoint half-open ranges [first, end).
// The report keeps, per file, the pages that entered the page cache during the trace and that
// the program has not read yet: the first read of such a page (by a call or a fault) is a miss.
// Memory follows the number of separate ranges, not the number of pages.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>

namespace iotwin::analysis {

class PageRanges {
 public:
  // [first, first + count) with its end saturated at 2^64 - 1 (never a reversed range).
  static uint64_t End(uint64_t first, uint64_t count) {
    return count > UINT64_MAX - first ? UINT64_MAX : first + count;
  }

  // Adds [first, first + count); returns how many of those pages were not in the set.
  uint64_t Add(uint64_t first, uint64_t count) {
    const uint64_t end = End(first, count);
    if (first >= end) return 0;
    const uint64_t before = pages_;
    uint64_t lo = first, hi = end;
    // Merge with every range that overlaps or touches [lo, hi).
    auto it = ranges_.upper_bound(lo);
    if (it != ranges_.begin() && std::prev(it)->second >= lo) --it;
    while (it != ranges_.end() && it->first <= hi) {
      lo = std::min(lo, it->first);
      hi = std::max(hi, it->second);
      pages_ -= it->second - it->first;
      it = ranges_.erase(it);
    }
    ranges_.emplace(lo, hi);
    pages_ += hi - lo;
    return pages_ - before;
  }

  // Removes [first, first + count); returns how many of those pages were in the set.
  uint64_t Take(uint64_t first, uint64_t count) {
    const uint64_t end = End(first, count);
    if (first >= end || ranges_.empty()) return 0;
    uint64_t taken = 0;
    auto it = ranges_.upper_bound(first);
    if (it != ranges_.begin() && std::prev(it)->second > first) --it;
    while (it != ranges_.end() && it->first < end) {
      const uint64_t lo = it->first, hi = it->second;
      const uint64_t cut_lo = std::max(lo, first), cut_hi = std::min(hi, end);
      taken += cut_hi - cut_lo;
      it = ranges_.erase(it);
      if (lo < cut_lo) ranges_.emplace(lo, cut_lo);
      if (cut_hi < hi) it = ranges_.emplace(cut_hi, hi).first;
    }
    pages_ -= taken;
    return taken;
  }

  bool empty() const { return ranges_.empty(); }
  size_t ranges() const { return ranges_.size(); }
  uint64_t pages() const { return pages_; }

 private:
  std::map<uint64_t, uint64_t> ranges_;  // first -> end, disjoint, not touching
  uint64_t pages_ = 0;
};

}  // namespace iotwin::analysis
