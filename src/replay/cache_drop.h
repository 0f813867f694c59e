// A workload's write to /proc/sys/vm/drop_caches, reproduced on the sandbox's own files.
//
// The replay never drops the host's page cache: it evicts the clean cached pages of every regular
// file beneath the sandbox's bases (POSIX_FADV_DONTNEED), which is what the drop did to the
// workload's files. drop_caches leaves dirty pages alone and starts no write-back, while
// DONTNEED on a file with dirty pages starts its write-back first; so a file that cachestat(2)
// shows dirty or under write-back is left as it is and counted. Without cachestat (kernels before
// 6.5) every file is evicted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace iotwin::replay {

struct CacheDropResult {
  uint64_t files = 0;            // regular files visited
  uint64_t evicted_files = 0;    // files that had cached pages and were evicted
  uint64_t pages_before = 0;     // cached pages found before the eviction (cachestat only)
  uint64_t pages_left = 0;       // cached pages still there after it (cachestat only)
  uint64_t dirty_files_kept = 0; // files left alone: dirty pages or pages under write-back
  uint64_t errors = 0;           // entries that could not be opened or measured
};

// Walks each base without following symbolic links. A file system mounted beneath a base is
// walked too: a worker confined to the sandbox sees its --map targets bound there.
CacheDropResult DropPageCacheBeneath(const std::vector<std::string>& bases);

class ReplayStats;
// The replayed drop: evicts beneath `bases` on a short-lived thread (its calls stay out of a
// --record trace, as the original's drop made none on the workload's files) and counts it as op
// "page_cache_drop" (its latency; an error when an entry could not be opened or measured).
void ReplayPageCacheDrop(const std::vector<std::string>& bases, ReplayStats* stats);

}  // namespace iotwin::replay
