// ReplayEngine::Worker: replays one traced thread's operations in recorded order (engine.h).
//
// Each op goes through the same steps: wait for its cross-thread dependencies, wait for its
// due time (pacing), translate its recorded arguments into live ones (descriptors, paths,
// buffers, addresses), issue it through the back end, apply its effects on the live tables
// (new descriptors, closes, mappings), and check its result against the recorded one.
// Process markers (fork, exec, exit) are handed to the engine's bookkeeper; async requests go
// to one AsyncEngine per recorded context, their completions reaped where the original reaped
// them.
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
#include "replay/backend.h"
#include "replay/engine.h"
#include "replay/fill.h"
#include "replay/pacer.h"
#include "replay/stats.h"

namespace iotwin::replay {

// An async request in flight.
struct Outstanding {
  uint32_t index;      // op index in the thread
  uint64_t rec_end;    // recorded completion
  uint64_t submitted;  // live submission time
  AsyncEngine* engine;
  bool moves_data;     // reads or writes file data: its result is a byte count
  // A libaio request whose completion the original reaped with a recorded io_getevents (the
  // only way a libaio completion reaches the trace): reaped there in the replay too, never by a
  // poll before it, or the replay would leave the call out.
  bool reaped_by_call;
};

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
  void RecordMismatch(const model::Op& op, uint32_t index, int64_t recorded, int64_t live,
                      Mismatch kind);

  // ---- async requests and the calls that carry them (`inline`: forced inline too) ----
  inline void SubmitAsync(const model::Op& op, uint32_t index);
  inline bool NextOpCarries(uint32_t index) const;
  inline void ReplayAsyncSyscall(const model::Op& op, uint32_t index);
  void CloseRing(const model::Op& op, uint32_t index);
  bool ReplayRingCall(const model::Op& op);
  void DestroyAioContext(const model::Op& op, uint32_t index);
  void TearDownEngine(uint32_t context);
  bool AwaitsRecordedWait(const AsyncEngine* e) const;
  void EnsureEngine(uint32_t context);
  void FinishEngineCall(const model::Op& op, uint32_t index, uint64_t t0);
  void HandleCompletions(AsyncEngine* e, int n);
  void ReapAvailable();
  void WaitCompletionsUntil(uint64_t rec_time, int max_events);
  int FlushAll();
  void DrainOutstanding();

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
  std::vector<std::unique_ptr<AsyncEngine>> engines_;  // per async context
  std::vector<bool> engine_failed_;
  std::vector<Outstanding> outstanding_;
  AsyncCompletion comps_[64];

  // Pacing state of the current run.
  Pacer pacer_;
  uint64_t gap_floor_ = 0;       // gaps mode (pacer.h)
  uint64_t prev_rec_end_ = 0;    // recorded completion of the previous replayed op
  uint64_t prev_live_done_ = 0;  // its live completion
  bool first_ = true;
  bool carried_batch_ = false;  // the last op was a request left queued for the next to carry
  int64_t late_ = 0;  // lateness of the op being issued
};

}  // namespace iotwin::replay
