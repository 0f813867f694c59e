// What every scenario shares: the common options, the run context (op log, threads, counters,
// markers) and small path/validation helpers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "io.h"
#include "oplog.h"

namespace iotwin::workload {

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * 1024;

struct CommonOptions {
  std::string dir;
  uint64_t seed = 1;
  int threads = 1;
  std::string log_path;
  bool quiet = false;
};

// One run of one scenario. Thread 0 of the op log is the main thread (setup, markers between
// phases); each Parallel() call starts workers with the next thread numbers.
class RunContext {
 public:
  RunContext(const CommonOptions& common, size_t main_reserve);

  const CommonOptions& common() const { return common_; }
  ThreadIo& main() { return main_io_; }
  OpLog& log() { return log_; }

  // Runs fn(worker_index, io) for worker_index 0..n-1, each on its own new thread with its own op
  // log (reserved for `reserve_per_thread` entries), joins them all, and returns the first error.
  Status Parallel(int n, size_t reserve_per_thread,
                  const std::function<Status(int worker, ThreadIo& io)>& fn);

  // Counters of the main thread and every finished worker.
  IoCounters Totals() const;

  // A buffer for main-thread work that lives as long as the run context, so freeing it cannot
  // put an allocator munmap among the logged operations.
  AlignedBuffer& MainBuffer(size_t size);

  // Creates `path` as a directory (mkdirat, mode 0755) unless it already is one.
  Status EnsureDir(const std::string& path);

 private:
  CommonOptions common_;
  OpLog log_;
  ThreadLog* main_log_;
  ThreadIo main_io_;
  IoCounters worker_totals_;
  std::vector<std::unique_ptr<AlignedBuffer>> main_buffers_;
};

// What a scenario reports for the summary line, besides the counters.
struct ScenarioResult {
  uint64_t files = 0;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

// O_DIRECT is refused with EINVAL by filesystems without direct I/O (tmpfs): say so plainly.
Status DirectOpenError(long ret, const std::string& path);

// "Invalid option" errors: exit status 2.
template <typename... Args>
Status BadOption(fmt::format_string<Args...> f, Args&&... args) {
  return Status::Invalid(f, std::forward<Args>(args)...);
}

inline uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
inline uint64_t RoundUp(uint64_t a, uint64_t b) { return CeilDiv(a, b) * b; }

}  // namespace iotwin::workload
