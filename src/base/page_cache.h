// Page-cache residency of a file: how many of its pages are in the page cache right now.
//
// The cachestat system call (Linux 6.5+) answers without touching the file; older kernels fall
// back to mapping the file and asking mincore(2), which maps nothing in and reads nothing.
// Neither reads the data, so measuring never changes what it measures.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace iotwin {

struct Residency {
  uint64_t fsize = 0;
  uint64_t total_pages = 0;     // ceil(fsize / page size)
  uint64_t resident_pages = 0;  // pages of [0, fsize) in the page cache
  uint64_t dirty_pages = 0;     // of those, dirty (cachestat only; 0 with mincore)
  bool by_cachestat = false;
};

// Measures the regular file open at `fd`.
Result<Residency> MeasureResidency(int fd);

// Whether this kernel has cachestat (probed once).
bool CachestatAvailable();

// cachestat of one byte range: dirty or under write-back? (false when unknown).
struct RangeCacheState {
  uint64_t cached = 0, dirty = 0, writeback = 0;
};
Result<RangeCacheState> CachestatRange(int fd, uint64_t offset, uint64_t length);

}  // namespace iotwin
