// ReplayEngine: one worker thread per traced thread, each issuing its thread's operations in
// recorded order with recorded arguments, paced (pacer.h) and held back only by the model's
// cross-thread dependencies.
//
// Processes are replayed as descriptor tables inside one replaying process: every traced
// process has its own table mapping recorded descriptors to live ones, copied at fork (each
// live descriptor duplicated), trimmed at exec (close-on-exec) and closed when the process
// exits; its mappings are recreated likewise. Those implicit kernel actions are performed by a
// bookkeeping thread, not by the workers, so a recording of the replay (--record, restricted to
// the workers' thread ids) holds exactly the replayed calls.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "replay/async_contexts.h"
#include "replay/backend.h"
#include "replay/options.h"
#include "replay/payload_pool.h"
#include "replay/plan.h"
#include "replay/stats.h"

namespace iotwin::replay {

class WriteBudget;  // write_budget.h

// A worker that could not go on: what it was replaying and where in the trace. The first one
// stops the replay (the others stop at their next op), and the summary and --json say it.
struct WorkerFailure {
  std::string op;         // the op's name (OpLabel)
  std::string args;       // its recorded arguments, as text
  std::string path;       // the path it names ("" when none)
  uint32_t tid = 0;       // recorded thread
  uint32_t worker = 0;    // worker (model thread) index
  uint32_t index = 0;     // the op's position in its thread
  uint64_t ts_ns = 0;     // its recorded start, from the trace's start
  std::string error;      // what went wrong
  std::string ToString() const;
};

class ReplayEngine {
 public:
  ReplayEngine(const ReplayPlan& plan, const ReplayOptions& options, Backend* backend);
  ~ReplayEngine();
  ReplayEngine(const ReplayEngine&) = delete;
  ReplayEngine& operator=(const ReplayEngine&) = delete;

  // Before Setup: the I/O buffer pools the engines of one replay share (without it the engine
  // makes its own), and the budget its writes draw on (none: unbounded).
  void UsePayload(PayloadPools pools) { payload_ = std::move(pools); }
  void UseWriteBudget(WriteBudget* budget) { write_budget_ = budget; }

  // Builds the live tables, opens the descriptors and mappings an attached process already had,
  // starts the workers and parks them at the start gate. A thread the system refuses to start
  // is an error (the threads started are released by the destructor).
  Status Setup();
  // Thread ids of the workers (after Setup): what --record traces. Same order as
  // model.threads(): worker i replays model thread i.
  std::vector<pid_t> WorkerTids() const;
  // After Wait(): each worker's ops replayed and its active window, from its first call or
  // request to the end of its last op (ns; 0 when it issued none). Same order as WorkerTids().
  struct WorkerWindow {
    uint64_t ops = 0, window_ns = 0;
  };
  std::vector<WorkerWindow> WorkerWindows() const;
  // Opens the gate: recorded time start_ts() maps to `live_start` (CLOCK_MONOTONIC ns).
  void Start(uint64_t live_start);
  // Waits until every worker has finished its ops; closes what is still open. Workers stay
  // parked (alive) until Release(), so that their thread exits stay out of a recording.
  void Wait();
  // Lets the parked workers exit and joins them (also done by the destructor).
  void Release();
  // Stops all workers at their next op (strict mode, signals). Any thread.
  void Abort(const std::string& why) EXCLUDES(abort_mu_);
  // A worker failed (WorkerFailure): kept if it is the first, and the replay stops.
  void Fail(WorkerFailure failure) EXCLUDES(abort_mu_);
  // The first failure, if any (after Wait).
  const WorkerFailure* failure() const;
  bool aborted() const { return abort_.load(std::memory_order_relaxed); }
  std::string abort_reason() const EXCLUDES(abort_mu_);

  // Merged statistics (after Wait).
  const ReplayStats& stats() const { return merged_; }
  uint64_t live_start() const { return live_start_; }
  // Workers in SCHED_FIFO (--rt-priority) when Setup finished, as the kernel reports them.
  uint32_t fifo_workers() const { return fifo_workers_; }
  // After Setup: "" when every worker is confined to its base (Sandbox::ConfineThread), else a
  // warning saying how many are not, and why.
  std::string ConfinementNote() const;
  uint64_t live_end() const { return live_end_; }
  // The first and last call or request any worker issued (0 when none), after Wait().
  uint64_t first_issue() const { return first_issue_; }
  uint64_t last_issue() const { return last_issue_; }

  // Progress, readable at any time from another thread.
  uint64_t ops_done() const;
  uint64_t ops_total() const { return ops_total_; }
  int64_t lag_ns() const;  // latest lateness seen by any worker
  uint64_t mismatches_so_far() const { return mismatch_count_.load(std::memory_order_relaxed); }

  struct Worker;  // worker.h

 private:
  // --rt-priority: puts `th` in SCHED_FIFO at that priority (nothing without the option).
  Status MakeRealtime(std::thread& th, const std::string& what);
  // Starts `th` running `fn`; the system's refusal (EAGAIN: RLIMIT_NPROC, threads-max, memory)
  // becomes an error naming `what`.
  Status StartThread(std::thread* th, std::function<void()> fn, const std::string& what);
  struct Progress;
  struct LiveTable;
  // For the workers: the start gate, the end of their ops, the exit gate.
  void WaitForStart();
  void ReportFinished();
  void WaitForRelease();
  // Publishes `thread` as `count` ops done, waking anyone waiting (its end, or an abort).
  void PublishAllDone(uint32_t thread, uint32_t count);
  // The kernel's implicit work at a fork, exec or exit marker of `process`, done by the
  // bookkeeper.
  void ApplyProcessMarker(uint32_t process, const model::Op& op);
  void Bookkeep(std::function<void()> fn) EXCLUDES(bk_mu_);
  void BookkeeperLoop() EXCLUDES(bk_mu_);
  void WaitFor(uint32_t thread, uint32_t count);
  void MarkDone(uint32_t thread, uint32_t count);
  void CloseProcess(uint32_t process);
  void UnmapProcess(uint32_t process);
  int LiveFd(uint32_t process, int recorded) const;
  void SetLiveFd(uint32_t process, int recorded, int live);

  // Locks: abort_mu_ (the first abort reason and failure) and bk_mu_ (the bookkeeper's
  // queue) guard what is marked GUARDED_BY below; each async context has its own
  // (SharedAsyncContext::mu, taken before abort_mu_). The rest is shared without a lock, by
  // how the replay runs:
  // - written during Setup on the engine's thread, before the workers and the bookkeeper
  //   start (thread start orders the writes before their reads), read-only after: the tables'
  //   and maps' containers, progress_, awaited_, workers_, ops_total_, payload_, options_;
  // - atomics, each read and written by many threads (the gates, abort_, progress counters,
  //   the live descriptor and mapping slots);
  // - written by one thread at a point ordered by a gate before the only reader: live_start_
  //   (Start, before gate_ opens), live_end_, first/last_issue_, merged_ (Wait, after every
  //   worker reported finished_, read by the engine's owner after Wait).
  const ReplayPlan& plan_;
  const model::TraceModel& model_;
  ReplayOptions options_;
  Backend* backend_;
  PayloadPools payload_;
  WriteBudget* write_budget_ = nullptr;
  std::vector<std::unique_ptr<LiveTable>> tables_;   // per process
  std::unique_ptr<std::atomic<uint64_t>[]> maps_;    // per mapping: live base address (0: none)
  std::unique_ptr<Progress[]> progress_;             // per thread
  std::vector<bool> awaited_;                        // per thread: some op depends on it
  // The live async contexts, shared by the workers of each process (before workers_: they go
  // after the workers).
  AsyncContextTable async_contexts_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<int> reserved_next_{0};                // dup2/dup3 targets not otherwise mapped
  int sink_fd_ = -1;                                 // sendfile to an unknown descriptor
  uint64_t ops_total_ = 0;
  uint64_t live_start_ = 0, live_end_ = 0;
  uint64_t first_issue_ = 0, last_issue_ = 0;

  std::atomic<bool> started_{false};
  std::atomic<uint32_t> gate_{0};
  uint32_t fifo_workers_ = 0;
  std::atomic<uint32_t> finished_{0};
  std::atomic<uint32_t> exit_gate_{0};
  std::atomic<bool> abort_{false};
  std::atomic<uint64_t> mismatch_count_{0};
  mutable Mutex abort_mu_;
  std::string abort_reason_ GUARDED_BY(abort_mu_);
  std::optional<WorkerFailure> failure_ GUARDED_BY(abort_mu_);

  Mutex bk_mu_;
  CondVar bk_cv_;  // signalled on a job queued or bk_stop_ set
  std::deque<std::function<void()>*> bk_queue_ GUARDED_BY(bk_mu_);
  bool bk_stop_ GUARDED_BY(bk_mu_) = false;
  std::thread bookkeeper_;

  ReplayStats merged_;
};

}  // namespace iotwin::replay
