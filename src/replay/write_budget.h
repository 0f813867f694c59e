// What a replay writes: the figures planned from the trace (--dry-run, and the free-space check
// before anything is written) and the budget the workers draw on while they run (--max-write,
// and the free space of the target's file systems less a reserve).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "model/trace_model.h"

namespace iotwin::replay {

// The length a replayed write issues of `length` recorded bytes: at most the kernel's
// MAX_RW_COUNT (fill.h kMaxIoBytes), and for a write whose result the trace holds, at most that
// result (the original wrote no more; a longer length is a short write or a forged number). A
// write that failed in the trace is issued with its length.
uint64_t IssuedWriteLength(const model::Op& op, uint64_t length);

// The file data one replayed op writes at most. `file`/`end`: the file and the byte past the
// last written, where the model knows them.
struct PlannedWrite {
  uint64_t bytes = 0;  // 0: the op writes no file data
  uint32_t file = model::kNone;
  uint64_t end = 0;
};
// Writes, pwrites, vectored writes, async writes, copy_file_range, sendfile and fallocate (which
// allocates); page faults write inside a mapped file and grow nothing.
PlannedWrite PlanWrite(const model::TraceModel& model, const model::Op& op);

// The running budget. Admit() is called before every data-writing call with what it may write;
// it says no when that would pass --max-write, or when it would leave a watched file system with
// less than its reserve (statvfs f_bavail, which excludes root's reserved blocks, less
// max(1 MiB, 1% of the file system)). statvfs is asked when the bytes admitted since the last
// look reach half of the headroom it found, or 100 ms after it (others may write to the same
// file system), so most calls cost an atomic add and a coarse clock read.
class WriteBudget {
 public:
  // `max_bytes`: --max-write (0: none). `dirs`: directories whose file systems are watched
  // (the sandbox bases), held open here: the workers that ask are confined to their own root,
  // where these paths do not resolve. None: free space is not watched.
  WriteBudget(uint64_t max_bytes, std::vector<std::string> dirs);
  ~WriteBudget();
  WriteBudget(const WriteBudget&) = delete;
  WriteBudget& operator=(const WriteBudget&) = delete;
  // Thread-safe. False once the budget is spent; why() says what stopped it.
  bool Admit(uint64_t bytes) EXCLUDES(mu_);
  uint64_t admitted() const { return admitted_.load(std::memory_order_relaxed); }
  uint64_t max_bytes() const { return max_bytes_; }
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }
  std::string why() const EXCLUDES(mu_);

 private:
  bool Look(uint64_t total, uint64_t bytes) REQUIRES(mu_);
  void Stop(std::string why) EXCLUDES(mu_);

  const uint64_t max_bytes_;
  const std::vector<std::string> dirs_;
  std::vector<int> fds_;  // O_PATH descriptors of dirs_ (-1: could not open); set at construction
  // Atomics read without the lock on every Admit (the fast path). next_look_ and next_look_ns_
  // are stored under mu_ only (Look), so one worker at a time asks statvfs; a stale read
  // merely sends a worker to the lock, where it looks again.
  std::atomic<uint64_t> admitted_{0};
  std::atomic<uint64_t> next_look_{0};     // admitted bytes
  std::atomic<uint64_t> next_look_ns_{0};  // CLOCK_MONOTONIC_COARSE
  std::atomic<bool> stopped_{false};       // set under mu_, with why_ written before it
  mutable Mutex mu_;
  std::string why_ GUARDED_BY(mu_);
};

}  // namespace iotwin::replay
