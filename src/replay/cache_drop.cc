#include "replay/cache_drop.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "base/fd.h"
#include "base/page_cache.h"
#include "replay/pacer.h"
#include "replay/stats.h"

namespace iotwin::replay {

namespace {

// Deeper trees than this are not a workload's data set; the walk stops there.
constexpr int kMaxDepth = 128;

void EvictFile(int fd, CacheDropResult* r) {
  r->files++;
  const bool measured = CachestatAvailable();
  uint64_t before = 0;
  if (measured) {
    auto cs = CachestatRange(fd, 0, 0);
    if (!cs.ok()) {
      r->errors++;
      return;
    }
    if (cs->cached == 0) return;
    if (cs->dirty > 0 || cs->writeback > 0) {
      r->dirty_files_kept++;
      r->pages_before += cs->cached;
      r->pages_left += cs->cached;
      return;
    }
    before = cs->cached;
  }
  if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) {
    r->errors++;
    return;
  }
  r->evicted_files++;
  if (!measured) return;
  r->pages_before += before;
  auto after = CachestatRange(fd, 0, 0);
  if (after.ok()) r->pages_left += after->cached;
}

// `dirfd` is owned by the DIR stream made from it.
void Walk(int dirfd, int depth, CacheDropResult* r) {
  DIR* d = fdopendir(dirfd);
  if (!d) {
    close(dirfd);
    r->errors++;
    return;
  }
  while (dirent* e = readdir(d)) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      r->errors++;
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      if (depth >= kMaxDepth) continue;
      int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) {
        r->errors++;
        continue;
      }
      Walk(sub, depth + 1, r);
    } else if (S_ISREG(st.st_mode)) {
      UniqueFd f(openat(dirfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      if (!f.valid()) {
        r->errors++;
        continue;
      }
      EvictFile(f.get(), r);
    }
  }
  closedir(d);
}

}  // namespace

CacheDropResult DropPageCacheBeneath(const std::vector<std::string>& bases) {
  CacheDropResult r;
  for (const auto& base : bases) {
    int fd = open(base.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      r.errors++;
      continue;
    }
    Walk(fd, 0, &r);
  }
  return r;
}

void ReplayPageCacheDrop(const std::vector<std::string>& bases, ReplayStats* stats) {
  const uint64_t t0 = NowNs();
  // On a thread of its own: the walk's calls are the replayer's, not the workload's, and
  // --record keeps only the workers' calls. A thread shares its creator's root, cwd and mount
  // namespace, so it sees the worker's confined view.
  CacheDropResult r;
  std::thread walker([&] { r = DropPageCacheBeneath(bases); });
  walker.join();
  OpStats& s = stats->Op("page_cache_drop");
  s.count++;
  s.latency.Add(NowNs() - t0);
  if (r.errors > 0) s.errors++;
}

}  // namespace iotwin::replay
