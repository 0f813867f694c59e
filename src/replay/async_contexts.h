// Live asynchronous contexts of a replay: one per recorded io_uring instance or libaio context
// (model::AsyncContext, keyed by the recorded process and ring / context identity), shared by
// the workers of that process's threads, as the original's threads shared it: any worker may
// submit to it, any may reap from it, completions are reaped by whichever worker's recorded
// call collects them, and a context torn down at its recorded close is never touched again.
//
// The engines (backend.h) are not thread-safe, as liburing's rings are not: each context has
// one lock, `mu`, that guards all of the engine's user-space state (the submission queue's
// entries and tail, the completion queue's head, libaio's slots) and the pending table, as the
// original application had to hold one around its own ring. It is held only for work that does
// not block: queueing, submitting, collecting what has completed. A worker stages the requests
// of a recorded batch and submits them under the lock with the call that carried them, so
// batches of different threads never mix. A wait in the kernel (a recorded io_uring_enter with
// GETEVENTS, io_getevents, a teardown's or a thread end's wait for its requests) is made
// WITHOUT the lock (AsyncEngine::ArmWait / BlockWait / FinishWait), on the ring's descriptor or
// the libaio context, which the kernel serializes itself: while one worker waits, the others
// submit to the same ring, and the queue depth stays what the original's threads made it. The
// waiter borrows the engine (LendEngine), so a teardown meanwhile cannot unmap the ring under
// it.
//
// A recorded waiting call (io_uring_enter with GETEVENTS, io_getevents) waits only for
// completions that can come: first until the requests the original had completed by the
// call's end are submitted in the replay (by whichever worker submits them), bounded by a
// watchdog; then, in the kernel, for no more completions than the context has in flight.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "model/trace_model.h"
#include "replay/backend.h"

namespace iotwin::replay {

// A request submitted and not yet collected: who submitted it, so that whichever worker reaps
// its completion accounts it against the recorded op.
struct PendingRequest {
  uint32_t thread = 0;     // model thread of the submitting worker
  uint32_t index = 0;      // op index in that thread
  uint64_t submitted = 0;  // live submission time
  bool moves_data = false;
  // A libaio request whose completion the original reaped with a recorded io_getevents (the
  // only way a libaio completion reaches the trace): left to that call, never polled before it.
  bool reaped_by_call = false;
};

// The token an engine carries for a request: its submitting thread and op index.
inline uint64_t RequestToken(uint32_t thread, uint32_t index) {
  return (static_cast<uint64_t>(thread) << 32) | index;
}

class SharedAsyncContext {
 public:
  // `ends`: the recorded completion instants of the context's replayable requests; `uses`: the
  // recorded instants of its uses (requests and the calls that name it); both sorted.
  SharedAsyncContext(std::vector<uint64_t> ends, std::vector<uint64_t> uses)
      : ends_(std::move(ends)), uses_(std::move(uses)) {}

  // Held around every use of engine() and of the pending table, never across a wait in the
  // kernel. Taken before the engine's abort lock (a setup that fails under it fails the
  // replay), never after it.
  Mutex mu;

  // The live engine; null before setup, when setup failed, and after the teardown. The pointer
  // is used under `mu` only (the engine's user-space queues are what `mu` guards), except by a
  // waiter that borrowed it (LendEngine) for its wait in the kernel.
  AsyncEngine* engine() const REQUIRES(mu) { return engine_.get(); }
  // The engine, kept alive by the caller while it waits without the lock.
  std::shared_ptr<AsyncEngine> LendEngine() const REQUIRES(mu) { return engine_; }
  void SetEngine(std::unique_ptr<AsyncEngine> e) REQUIRES(mu) { engine_ = std::move(e); }
  bool failed() const REQUIRES(mu) { return failed_; }
  void MarkFailed() REQUIRES(mu) { failed_ = true; }
  // Torn down at its recorded close / io_destroy: later uses are skipped.
  bool closed() const REQUIRES(mu) { return closed_; }
  void Close() REQUIRES(mu) {
    engine_.reset();
    closed_ = true;
  }

  // ---- requests (under mu) ----
  void AddPending(uint64_t token, const PendingRequest& p) REQUIRES(mu) {
    pending_.emplace(token, p);
    if (p.reaped_by_call) by_call_++;
    pending_count_.store(pending_.size(), std::memory_order_relaxed);
  }
  // Removes and returns the request of `token`; false when it is not pending (already taken).
  bool TakePending(uint64_t token, PendingRequest* out) REQUIRES(mu);
  // Requests `thread` submitted that are still pending.
  size_t PendingOf(uint32_t thread) const REQUIRES(mu);
  bool AwaitsRecordedWait() const REQUIRES(mu) { return by_call_ > 0; }
  // Removes and returns every pending request of `thread`.
  std::vector<PendingRequest> TakePendingOf(uint32_t thread) REQUIRES(mu);
  // Drops every pending request (teardown).
  void DropAllPending() REQUIRES(mu);
  // Workers waiting in the kernel without the lock (Worker::WaitOutsideLock): polls leave the
  // completions to them.
  unsigned kernel_waiters() const REQUIRES(mu) { return kernel_waiters_; }
  void AddKernelWaiter(int d) REQUIRES(mu) {
    kernel_waiters_ = static_cast<unsigned>(static_cast<int>(kernel_waiters_) + d);
  }
  // Completions collected live so far (any worker).
  uint64_t collected() const REQUIRES(mu) { return collected_; }
  void AddCollected(uint64_t n) REQUIRES(mu) { collected_ += n; }

  // Lock-free read for the hot path: the size of the pending table as of its last change under
  // `mu` (an atomic copy). Read without the lock only as a hint (skip a context with nothing
  // pending, pick a context with requests); what is decided on it is done under `mu`.
  size_t pending_count() const { return pending_count_.load(std::memory_order_relaxed); }

  // ---- submission progress (any thread, without mu: atomic counters that only grow) ----
  // A replayable request was submitted, or given up (skipped, failed): waits stop counting on it.
  // Also uses done (UseDone): a request's use is over once it is submitted.
  void Resolved(uint64_t n) {
    resolved_.fetch_add(n, std::memory_order_release);
    uses_done_.fetch_add(n, std::memory_order_release);
  }
  uint64_t resolved() const { return resolved_.load(std::memory_order_acquire); }
  // Requests the original had completed by recorded instant `t`.
  uint64_t CompletedBy(uint64_t t) const;
  // A recorded use (AsyncContextTable::UseContext) was replayed or skipped, by any worker; the
  // uses recorded before instant `t`. A teardown waits for those.
  void UseDone() { uses_done_.fetch_add(1, std::memory_order_release); }
  uint64_t uses_done() const { return uses_done_.load(std::memory_order_acquire); }
  uint64_t UsesBefore(uint64_t t) const;

 private:
  std::shared_ptr<AsyncEngine> engine_ GUARDED_BY(mu);
  bool failed_ GUARDED_BY(mu) = false;
  bool closed_ GUARDED_BY(mu) = false;
  std::unordered_map<uint64_t, PendingRequest> pending_ GUARDED_BY(mu);
  size_t by_call_ GUARDED_BY(mu) = 0;
  unsigned kernel_waiters_ GUARDED_BY(mu) = 0;
  uint64_t collected_ GUARDED_BY(mu) = 0;
  std::atomic<size_t> pending_count_{0};  // written under mu, read anywhere (pending_count())
  std::atomic<uint64_t> resolved_{0};
  std::atomic<uint64_t> uses_done_{0};
  // Set at construction, read-only after: no lock.
  const std::vector<uint64_t> ends_;
  const std::vector<uint64_t> uses_;
};

// All live contexts of a replay, made on first use. The recorded ring descriptors are resolved
// to their context here too: a recorded io_uring_enter names its ring only by descriptor.
class AsyncContextTable {
 public:
  // Indexes `model` once (the first call; later calls must pass the same model).
  void Init(const model::TraceModel& model);
  // Tears down every context still open (the workers are done with them).
  void CloseAll();
  // The shared context of model context `index` (never null after Init for a valid index).
  std::shared_ptr<SharedAsyncContext> Get(uint32_t index) const;
  // The context of the ring a recorded io_uring_enter / io_uring_register `op` of `process`
  // names by its descriptor: the last one seen on that descriptor by the call's start (its
  // setup, or requests submitted through it), else the first one seen later; model::kNone
  // when none is known.
  uint32_t RingOf(uint32_t process, const model::Op& op) const;
  // The context a recorded io_setup / io_uring_setup set up: the model's link when the same
  // thread used it first, else the first context of the process used after the call with the
  // address it returned (libaio) or through the descriptor it returned (io_uring); model::kNone
  // when none is known.
  uint32_t SetupContext(const model::Op& op) const;
  // The libaio contexts of `process` (io_getevents names its context by address only, which
  // the trace does not keep).
  const std::vector<uint32_t>& AioContextsOf(uint32_t process) const;
  // Request kinds (engine << 8 | opcode) of each context, and one op of each, for the workers
  // to prepare their statistics before the start gate.
  const std::vector<const model::Op*>& RequestKinds(uint32_t index) const;
  // The contexts of `process` (all engines).
  const std::vector<uint32_t>& ContextsOf(uint32_t process) const;
  // The context a replayable recorded op uses, as counted for teardowns: a request's, a ring
  // call's ring (RingOf), the only libaio context of the process for io_getevents; model::kNone
  // for any other op.
  uint32_t UseContext(const model::Op& op) const;

 private:
  void IndexRings(const model::TraceModel& model);

  // Everything below is written once, inside Init's call_once, before any worker starts, and
  // only read after (no lock: call_once and the workers' thread start order the writes before
  // the reads). The contexts themselves are shared and locked (SharedAsyncContext::mu).
  std::once_flag once_;
  std::vector<std::shared_ptr<SharedAsyncContext>> contexts_;
  std::vector<std::vector<const model::Op*>> kinds_;
  std::vector<uint64_t> first_use_;  // per context: its first recorded use (UINT64_MAX: none)
  const model::TraceModel* model_ = nullptr;
  // (process, recorded fd) -> (first instant seen, context), in time order.
  std::unordered_map<uint64_t, std::vector<std::pair<uint64_t, uint32_t>>> rings_;
  std::unordered_map<uint32_t, std::vector<uint32_t>> aio_by_process_, by_process_;
  const std::vector<uint32_t> none_{};
};

}  // namespace iotwin::replay
