// ReplayEngine::Worker: replays one traced thread's operations in recorded order (engine.h).
//
// Each op goes through the same steps: wait for its cross-thread dependencies, wait for its
// due time (pacing), translate its recorded arguments into live ones (descriptors, paths,
// buffers, addresses), issue it through the back end, apply its effects on the live tables
// (new descriptors, closes, mappings), and check its result against the recorded one.
// Process markers (fork, exec, exit) are handed to the engine's bookkeeper; async requests go
// to one live context per recorded one, shared by the workers of its process
// (async_contexts.h), their completions reaped where the original reaped them.
//
// Only the worker's own thread touches its state between the start gate and the end of its
// ops, except the progress counters (done_ops, lateness), which others read.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "base/thread_annotations.h"
#include "replay/async_contexts.h"
#include "replay/backend.h"
#include "replay/engine.h"
#include "replay/fill.h"
#include "replay/pacer.h"
#include "replay/stats.h"

namespace iotwin::replay {

struct ReplayEngine::Worker {
  Worker(ReplayEngine& engine, uint32_t thread);

  // On the engine's thread, during Setup: maps the I/O buffers for the thread's largest calls
  // from `pools` (none for the null back end); adds the thread's replayed ops to `*ops_total`.
  Status Allocate(const PayloadPools& pools, uint64_t* ops_total);
  // The thread body: prepares, parks at the start gate, replays, parks until released.
  void Run();
  void NoteIssued(uint64_t t) {
    if (first_issue_ns == 0) first_issue_ns = t;
    last_issue_ns = t;
  }

  // No lock guards a worker: its plain members are written by its own thread only and read by
  // the engine's thread at points a gate orders after the writes: in_root and confine_error
  // before tid is published (release; Setup waits for it with acquire), stats, finish_ns and
  // the issue instants before the worker reports finished_ (Wait reads them after all have).
  // done_ops and lateness are atomics, read at any time for progress.
  const uint32_t thread;
  std::thread th;
  std::atomic<pid_t> tid{0};
  bool in_root = false;       // confined to its base (Sandbox::ConfineThread)
  std::string confine_error;  // why not, when the back end is real
  ReplayStats stats;
  alignas(64) std::atomic<uint64_t> done_ops{0};
  std::atomic<int64_t> lateness{0};
  uint64_t finish_ns = 0;
  // The first and last system call or async request this worker issued (0: none): the
  // replay's active window, as compare measures it on a recording of the replay.
  uint64_t first_issue_ns = 0, last_issue_ns = 0;

 private:
  // An op's live arguments, or why they cannot be built.
  struct Translation {
    LiveArgs args;
    bool live_ok = true;
    LiveSkip why = LiveSkip::kLiveFdMissing;
    bool outside_mapping = false;    // a length or offset past the replay's own mapping
    bool bad_name = false;           // a recorded name no system call can carry (a NUL inside)
    const char* SkipReason() const;  // nullptr when the op can be issued
  };

  // ---- before the gate ----
  void Prepare();
  uint64_t RecordedGapFloor() const;

  // ---- steps of one op ----
  // The steps every replayed system call goes through are `inline` and defined (forced inline)
  // in worker.cc: as separate calls their entries and exits cost about as much as the rest of
  // the engine's work per op (bench/replay_engine_bench.cc).
  void ReplayOps();
  inline void WaitForDependencies(const model::Op& op);
  // Waits until the op is due; returns the live issue time (0 when not paced).
  inline uint64_t Pace(const model::Op& op);
  void Skip(std::string_view reason, const model::Op& op, uint32_t index);
  // False (the op skipped, the replay stopped) when the write budget refuses `bytes`.
  bool AdmitWrite(const model::Op& op, uint64_t bytes, uint32_t index);
  inline void ReplaySyncOp(const model::Op& op, uint32_t index, uint64_t issued);
  inline void Translate(const model::Op& op, Translation* t);
  void TranslateFault(const model::Op& op, Translation* t);
  inline void TranslateDescriptors(const model::Op& op, Translation* t);
  inline void TranslatePaths(const model::Op& op, Translation* t);
  void TranslateSymlinkText(const model::Op& op, Translation* t);
  void TranslateSecondFd(const model::Op& op, Translation* t);
  inline void TranslateBuffers(const model::Op& op, Translation* t);
  void TranslateMemory(const model::Op& op, Translation* t);
  void TranslateCloseRange(const model::Op& op, Translation* t);
  inline void ApplyEffects(const model::Op& op, const LiveArgs& a, int64_t result);
  inline void CheckResult(const model::Op& op, uint32_t index, int64_t result);
  // The op is over: counted, and the thread's pacing and published progress moved past it.
  inline void Complete(const model::Op& op, uint32_t index, uint64_t live_done);
  inline void MarkDone(uint32_t index);
  inline OpStats& StatsFor(const model::Op& op);
  // `tid`: the recorded thread of the op when it is not this worker's (a completion reaped
  // for another thread); 0: this worker's.
  void RecordMismatch(const model::Op& op, uint32_t index, int64_t recorded, int64_t live,
                      Mismatch kind, uint32_t tid = 0);
  // This worker cannot go on with op `index` (ReplayEngine::Fail): the replay stops, and says
  // `error` with the op, its recorded arguments, the thread and the trace position.
  void Fail(const model::Op& op, uint32_t index, std::string error);
  // The ops, and any error escaping them (an internal error) as a failure of the op at hand.
  void ReplayOpsGuarded();

  // ---- async requests and the calls that carry them (`inline`: forced inline too) ----
  // Contexts are shared by the workers of a process (async_contexts.h); "Locked" functions run
  // under the context's lock.
  inline void SubmitAsync(const model::Op& op, uint32_t index);
  inline bool NextOpCarries(uint32_t index) const;
  inline void ReplayAsyncSyscall(const model::Op& op, uint32_t index);
  uint32_t RingClosedBy(const model::Op& op) const;
  void CloseRing(uint32_t context, const model::Op& op, uint32_t index);
  // A recorded io_uring_enter / io_uring_register one for one; false when the context's engine
  // does not replay ring calls (the caller then submits and waits by what requests need).
  enum class RingCall { kGeneric, kReplayed, kSkipped };
  RingCall ReplayRingCall(const model::Op& op, uint32_t index, uint32_t context);
  void DestroyAioContext(const model::Op& op, uint32_t index);
  // At recorded teardown `op`: waits until the uses of the context recorded before it are
  // replayed (watchdog), lets its requests complete, then closes it.
  void TearDownContext(uint32_t context, const model::Op& op, uint32_t index);
  // Collects the context's pending requests from its completion ring in user space, without a
  // system call, until none is pending or `deadline` (CLOCK_MONOTONIC ns).
  void PollPending(SharedAsyncContext* c, uint64_t deadline);
  // A recorded call that uses a context (AsyncContextTable::UseContext) is over.
  void NoteContextUse(const model::Op& op);
  SharedAsyncContext* Context(uint32_t context) const;
  // The context's engine, set up on first use; a setup that fails is a failure of `op`.
  AsyncEngine* EngineLocked(uint32_t context, SharedAsyncContext* c, const model::Op& op,
                            uint32_t index) REQUIRES(c->mu);
  // The context a recorded io_uring_enter / io_getevents / io_submit acts on.
  uint32_t CallContext(const model::Op& op) const;
  void FinishEngineCall(const model::Op& op, uint32_t index, uint64_t t0);
  void HandleCompletionsLocked(SharedAsyncContext* c, int n) REQUIRES(c->mu);
  void FailStagedLocked(SharedAsyncContext* c, int64_t res) REQUIRES(c->mu);
  // Queues the staged batch of `context` into `e` (a request the engine refuses ends with
  // -EAGAIN); returns how many were staged.
  size_t QueueStagedLocked(uint32_t context, SharedAsyncContext* c, AsyncEngine* e)
      REQUIRES(c->mu);
  void AccountRequest(const PendingRequest& p, int64_t res, uint64_t now);
  void FlushStaged();
  void LeaveOutRequest(uint32_t context, SharedAsyncContext* c);
  size_t StagedFor(uint32_t context) const { return staged_ctx_ == context ? staged_.size() : 0; }
  void ReapAvailable();
  // Before a recorded waiting call at `op`: waits until the requests the original had
  // completed by the call's end are submitted (watchdog: max(1 s, 8 x the recorded wait)).
  void AwaitSubmissions(SharedAsyncContext* c, const model::Op& op, uint32_t index,
                        uint32_t context);
  void WaitCompletionsUntil(const model::Op& op, uint32_t index, uint32_t context,
                            int max_events);
  // Waits until every request this worker submitted has completed, whoever reaps it.
  void DrainOwn();
  // The wait `w` armed (AsyncEngine::ArmWait) under c->mu, made without it, its completions
  // collected under it again (held again on return); returns how many were collected. A wait
  // that cannot end is given up at the watchdog, max(10 s, 8 x `recorded_ns`), counted as
  // wait_timed_out against `op` (none: dropped quietly), and re-armed every
  // max(1 s, 2 x `recorded_ns`) until then, as other threads may collect what it waits for.
  int WaitOutsideLock(SharedAsyncContext* c, AsyncWait* w, uint64_t recorded_ns,
                      const model::Op* op, uint32_t index) REQUIRES(c->mu);

  ReplayEngine& engine_;
  const model::TraceModel& model_;
  const model::Thread& th_;
  Backend* const backend_;
  const bool null_backend_;
  const bool paced_;

  AlignedBuffer rbuf_, wbuf_;
  std::vector<iovec> iov_;
  std::vector<int> fds_;
  std::string scratch_;
  std::array<OpStats*, IOT_OP_MAX + 3> fast_{};  // syscalls by code, then faults (read, write)
  std::unordered_map<uint32_t, OpStats*> async_stats_;
  std::vector<std::shared_ptr<SharedAsyncContext>> contexts_;  // per model context, on first use
  std::vector<uint32_t> used_;                                  // contexts this worker submitted to
  std::vector<AsyncRequest> staged_;  // the batch being built, submitted by the call carrying it
  uint32_t staged_ctx_ = UINT32_MAX;
  AsyncCompletion comps_[64];

  // Pacing state of the current run.
  Pacer pacer_;
  uint64_t gap_floor_ = 0;       // gaps mode (pacer.h)
  uint64_t capture_cost_ = 0;    // recorded ns per call the capture added (pacer.h)
  uint64_t prev_rec_end_ = 0;    // recorded completion of the previous replayed op
  uint64_t prev_live_done_ = 0;  // its live completion
  bool first_ = true;
  bool carried_batch_ = false;  // the last op was a request left queued for the next to carry
  uint32_t current_ = 0;        // the op being replayed (its index in the thread)
  int64_t late_ = 0;  // lateness of the op being issued
};

}  // namespace iotwin::replay
