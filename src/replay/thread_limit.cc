#include "replay/thread_limit.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "base/checked_math.h"

namespace iotwin::replay {

namespace {

// The first number after `key` in a /proc file of "Key: value" lines (0 when absent).
uint64_t ProcField(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::strtoull(line.c_str() + key.size(), nullptr, 10);
  }
  return 0;
}

uint64_t ThreadsMax() {
  std::ifstream in("/proc/sys/kernel/threads-max");
  uint64_t v = 0;
  in >> v;
  return v;
}

// Threads the real uid runs now (what RLIMIT_NPROC counts).
uint64_t ThreadsOfUid(uid_t uid) {
  uint64_t n = 0;
  DIR* d = opendir("/proc");
  if (!d) return 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const std::string status = std::string("/proc/") + e->d_name + "/status";
    std::ifstream in(status);
    std::string line;
    uint64_t threads = 0;
    bool mine = false;
    while (std::getline(in, line)) {
      if (line.rfind("Uid:", 0) == 0) mine = std::strtoull(line.c_str() + 4, nullptr, 10) == uid;
      if (line.rfind("Threads:", 0) == 0) threads = std::strtoull(line.c_str() + 8, nullptr, 10);
    }
    if (mine) n += threads;
  }
  closedir(d);
  return n;
}

void Lower(ThreadLimit* l, uint64_t value, std::string why) {
  if (value < l->limit) {
    l->limit = value;
    l->why = std::move(why);
  }
}

}  // namespace

ThreadLimit ReplayThreadLimit(uint64_t asked) {
  ThreadLimit l;
  l.limit = asked ? asked : kDefaultMaxThreads;
  l.why = asked ? fmt::format("--max-threads {}", asked)
                : fmt::format("the default ceiling (--max-threads {})", kDefaultMaxThreads);
  if (uint64_t tm = ThreadsMax(); tm > 0) {
    Lower(&l, tm / 2, fmt::format("half of /proc/sys/kernel/threads-max ({})", tm));
  }
  // The kernel does not hold root (nor CAP_SYS_RESOURCE/CAP_SYS_ADMIN) to RLIMIT_NPROC.
  rlimit rl{};
  if (getuid() != 0 && getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    const uint64_t used = ThreadsOfUid(getuid());
    const uint64_t cap = rl.rlim_cur > used ? rl.rlim_cur - used : 0;
    Lower(&l, cap, fmt::format("RLIMIT_NPROC of uid {} ({}, {} in use; ulimit -u)", getuid(),
                               rl.rlim_cur, used));
  }
  if (uint64_t kib = ProcField("/proc/meminfo", "MemAvailable:"); kib > 0) {
    const uint64_t bytes = SaturatingMul(kib, 1024);
    Lower(&l, bytes / kThreadMemoryBytes,
          fmt::format("available memory ({} MiB at {} KiB a thread)", bytes >> 20,
                      kThreadMemoryBytes >> 10));
  }
  return l;
}

uint64_t ReplayThreadsNeeded(const model::TraceModel& model, int amplify) {
  return SaturatingMul(SaturatingAdd(uint64_t{model.threads().size()}, uint64_t{1}),
                       static_cast<uint64_t>(std::max(amplify, 1)));
}

Status CheckThreadLimit(uint64_t needed, const ThreadLimit& limit) {
  if (needed <= limit.limit) return Status::Ok();
  return Status::Invalid(
      "this replay needs {} threads (one per traced thread and a bookkeeper, per copy), more than "
      "the {} this replay may start, set by {}. Traced threads are never run on shared threads "
      "(that would change the workload): raise the limit named",
      needed, limit.limit, limit.why);
}

}  // namespace iotwin::replay
