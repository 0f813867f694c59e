#include "common.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <thread>
#include <vector>

namespace iotwin::workload {

RunContext::RunContext(const CommonOptions& common, size_t main_reserve)
    : common_(common),
      log_(!common.log_path.empty()),
      main_log_(log_.NewThread(main_reserve)),
      main_io_(*main_log_) {
  main_log_->BindCurrentThread();
}

Status RunContext::Parallel(int n, size_t reserve_per_thread,
                            const std::function<Status(int, ThreadIo&)>& fn) {
  std::vector<ThreadLog*> logs;
  for (int i = 0; i < n; i++) logs.push_back(log_.NewThread(reserve_per_thread));
  std::vector<Status> results(static_cast<size_t>(n));
  std::vector<IoCounters> counters(static_cast<size_t>(n));
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; i++) {
    workers.emplace_back([&, i] {
      const auto k = static_cast<size_t>(i);
      logs[k]->BindCurrentThread();
      // A thread's first malloc creates its glibc arena (mmap + munmap): do it now, before the
      // first logged operation, so that it cannot appear among them.
      void* volatile warm = std::malloc(64);
      std::free(warm);
      ThreadIo io(*logs[k]);
      results[k] = fn(i, io);
      counters[k] = io.counters();
    });
  }
  for (auto& w : workers) w.join();
  for (const auto& c : counters) worker_totals_.Add(c);
  for (auto& r : results) {
    if (!r.ok()) return r;
  }
  return Status::Ok();
}

IoCounters RunContext::Totals() const {
  IoCounters t = worker_totals_;
  t.Add(main_io_.counters());
  return t;
}

AlignedBuffer& RunContext::MainBuffer(size_t size) {
  main_buffers_.push_back(std::make_unique<AlignedBuffer>(size));
  return *main_buffers_.back();
}

Status RunContext::EnsureDir(const std::string& path) {
  const long r = main_io_.MkdirAt(path, 0755);
  if (r == 0) return Status::Ok();
  if (r == -EEXIST) {
    struct stat st;
    const long s = main_io_.Stat(path, &st);
    if (s == 0 && S_ISDIR(st.st_mode)) return Status::Ok();
    return Status::Invalid("{} exists and is not a directory", path);
  }
  if (r == -ENOENT) {
    return Status::NotFound("cannot create {}: its parent directory does not exist", path);
  }
  return SyscallError(r, "mkdir", path);
}

Status DirectOpenError(long ret, const std::string& path) {
  if (ret == -EINVAL) {
    return Status::Unsupported(
        "O_DIRECT open of {} failed with EINVAL: this filesystem does not support direct I/O "
        "(tmpfs?); use --dir on a disk filesystem such as /var/tmp",
        path);
  }
  return SyscallError(ret, "open (O_DIRECT)", path);
}

}  // namespace iotwin::workload
