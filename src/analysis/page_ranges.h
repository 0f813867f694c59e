// PendingPages: pages of files that entered the page cache during the trace and that the
// program has not read yet; the first read of such a page (by a call or a fault) is a miss.
// Pages are kept as 64-page bitmaps in an open-addressing map keyed by (file, page / 64): an
// insertion or a read costs one probe per 64 pages it spans, whatever else is pending (random
// reads with readahead leave pending pages scattered over whole files).
//
// Bounded: at most `max_chunks` bitmaps (default 16,384: 1 M pages, about 512 KiB with the
// map's slack, which keeps it in cache on the per-read path); pages that do not
// fit, of files numbered from 2^20 on or at page indices from 2^50 on, are not followed and
// are counted in untracked(). One access examines at most kMaxChunksPerAccess bitmaps (2 GiB of
// 4 KiB pages, the most one read(2) moves): a range a trace claims beyond that is cut there.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "analysis/flat_map.h"

namespace iotwin::analysis {

class PendingPages {
 public:
  static constexpr uint64_t kMaxChunksPerAccess = 8192;
  static constexpr uint32_t kMaxFiles = 1u << 20;
  static constexpr uint64_t kMaxPage = uint64_t{1} << 50;

  explicit PendingPages(size_t max_chunks = size_t{1} << 14) : max_chunks_(max_chunks) {}

  // [first, end) with end saturated at 2^64 - 1.
  static uint64_t End(uint64_t first, uint64_t count) {
    return count > UINT64_MAX - first ? UINT64_MAX : first + count;
  }

  // Pages [first, end) of `file` entered the cache; returns how many were not pending yet.
  uint64_t Add(uint32_t file, uint64_t first, uint64_t end) {
    if (first >= end) return 0;
    if (!Trackable(file, first, end)) {
      untracked_ += end - first;
      return 0;
    }
    const uint64_t before = pages_;
    ForChunks(first, end, [&](uint64_t chunk, uint64_t mask) {
      uint64_t* bits = map_.Find(Key(file, chunk));
      if (!bits) {
        if (map_.size() >= max_chunks_) {
          untracked_ += static_cast<uint64_t>(std::popcount(mask));
          return;
        }
        bits = &map_.FindOrInsert(Key(file, chunk));
      }
      pages_ += static_cast<uint64_t>(std::popcount(mask & ~*bits));
      *bits |= mask;
    });
    return pages_ - before;
  }

  // Pages [first, end) of `file` were read, written or evicted: returns how many were pending,
  // and they are no longer.
  uint64_t Take(uint32_t file, uint64_t first, uint64_t end) {
    if (first >= end || pages_ == 0 || !Trackable(file, first, end)) return 0;
    uint64_t taken = 0;
    ForChunks(first, end, [&](uint64_t chunk, uint64_t mask) {
      uint64_t* bits = map_.Find(Key(file, chunk));
      if (!bits || !(*bits & mask)) return;
      taken += static_cast<uint64_t>(std::popcount(*bits & mask));
      *bits &= ~mask;
      if (*bits == 0) map_.Erase(Key(file, chunk));
    });
    pages_ -= taken;
    return taken;
  }

  uint64_t pages() const { return pages_; }
  uint64_t untracked() const { return untracked_; }
  size_t chunks() const { return map_.size(); }

 private:
  static bool Trackable(uint32_t file, uint64_t first, uint64_t end) {
    (void)end;
    return file < kMaxFiles && first < kMaxPage;
  }
  static uint64_t Key(uint32_t file, uint64_t chunk) {
    return (static_cast<uint64_t>(file) << 44) | chunk;  // chunk < 2^44 (page < 2^50)
  }
  // Calls visit(chunk, mask of the range's pages in it) for the chunks [first, end) spans,
  // at most kMaxChunksPerAccess of them, below kMaxPage.
  template <typename F>
  static void ForChunks(uint64_t first, uint64_t end, F&& visit) {
    end = std::min(end, kMaxPage);
    const uint64_t last_chunk = std::min((end - 1) >> 6, (first >> 6) + kMaxChunksPerAccess - 1);
    for (uint64_t chunk = first >> 6; chunk <= last_chunk; chunk++) {
      const uint64_t lo = std::max(first, chunk << 6) - (chunk << 6);
      const uint64_t hi = std::min(end, (chunk + 1) << 6) - (chunk << 6);  // 1..64
      const uint64_t mask = (hi == 64 ? ~uint64_t{0} : (uint64_t{1} << hi) - 1) &
                            ~((uint64_t{1} << lo) - 1);
      visit(chunk, mask);
    }
  }

  FlatMap<uint64_t> map_;
  size_t max_chunks_;
  uint64_t pages_ = 0, untracked_ = 0;
};

}  // namespace iotwin::analysis
