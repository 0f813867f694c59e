#include "base/page_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <vector>

namespace iotwin {
namespace {

// cachestat(2) is number 451 on every architecture (it was added after the tables merged);
// Debian 12's headers predate it.
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif

struct CachestatRangeArg {
  uint64_t off;
  uint64_t len;
};
struct CachestatResult {
  uint64_t nr_cache;
  uint64_t nr_dirty;
  uint64_t nr_writeback;
  uint64_t nr_evicted;
  uint64_t nr_recently_evicted;
};

// -1 unknown, 0 no, 1 yes
std::atomic<int> g_cachestat{-1};

long Cachestat(int fd, uint64_t off, uint64_t len, CachestatResult* out) {
  CachestatRangeArg r{off, len};
  return syscall(__NR_cachestat, fd, &r, out, 0);
}

Result<Residency> MeasureByMincore(int fd, uint64_t fsize) {
  Residency res;
  res.fsize = fsize;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  res.total_pages = (fsize + page - 1) / page;
  // In windows of 1 GiB, so a huge file needs neither a huge mapping nor a huge vector.
  constexpr uint64_t kWindow = 1ull << 30;
  std::vector<unsigned char> vec;
  for (uint64_t off = 0; off < fsize; off += kWindow) {
    uint64_t len = std::min(kWindow, fsize - off);
    void* m = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(off));
    if (m == MAP_FAILED) return Status::FromErrno(errno, "mapping the file for mincore");
    vec.assign((len + page - 1) / page, 0);
    int rc = mincore(m, len, vec.data());
    int err = errno;
    munmap(m, len);
    if (rc != 0) return Status::FromErrno(err, "mincore");
    for (unsigned char v : vec) res.resident_pages += v & 1;
  }
  return res;
}

}  // namespace

bool CachestatAvailable() {
  int known = g_cachestat.load();
  if (known >= 0) return known == 1;
  // Any descriptor answers whether the call exists: ENOSYS means it does not.
  int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  CachestatResult cs{};
  long rc = fd >= 0 ? Cachestat(fd, 0, 0, &cs) : -1;
  int err = errno;
  if (fd >= 0) close(fd);
  bool yes = rc == 0 || (fd >= 0 && err != ENOSYS);
  g_cachestat.store(yes ? 1 : 0);
  return yes;
}

Result<Residency> MeasureResidency(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return Status::FromErrno(errno, "fstat");
  if (!S_ISREG(st.st_mode)) return Status::Invalid("not a regular file");
  const uint64_t fsize = static_cast<uint64_t>(st.st_size);
  if (CachestatAvailable()) {
    CachestatResult cs{};
    if (Cachestat(fd, 0, 0, &cs) == 0) {
      Residency res;
      res.fsize = fsize;
      const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
      res.total_pages = (fsize + page - 1) / page;
      res.resident_pages = cs.nr_cache;
      res.dirty_pages = cs.nr_dirty;
      res.by_cachestat = true;
      return res;
    }
    // e.g. EOPNOTSUPP on some file systems: mincore still works
  }
  return MeasureByMincore(fd, fsize);
}

Result<RangeCacheState> CachestatRange(int fd, uint64_t offset, uint64_t length) {
  if (!CachestatAvailable()) return Status::Unsupported("no cachestat system call");
  CachestatResult cs{};
  if (Cachestat(fd, offset, length, &cs) != 0) return Status::FromErrno(errno, "cachestat");
  RangeCacheState r;
  r.cached = cs.nr_cache;
  r.dirty = cs.nr_dirty;
  r.writeback = cs.nr_writeback;
  return r;
}

}  // namespace iotwin
