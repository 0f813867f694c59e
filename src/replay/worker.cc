#include "replay/worker.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/io_uring.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "base/checked_math.h"
#include "format/op_info.h"
#include "format/records.h"
#include "model/op_fields.h"
#include "model/path.h"
#include "replay/cache_drop.h"
#include "replay/sandbox.h"
#include "replay/write_budget.h"

namespace iotwin::replay {

using model::FdState;
using model::Op;
using model::OpKind;

namespace {

// Whether [offset, offset + length) lies inside the live twin of `mp` (its recorded length,
// rounded up to pages as the kernel rounds munmap/madvise/msync). A trace's lengths are not
// trusted: the replay only unmaps, advises, syncs, remaps or touches memory it mapped itself.
bool WithinMapping(const model::Mapping& mp, uint64_t offset, uint64_t length) {
  constexpr uint64_t kPage = 4096;
  if (mp.length > UINT64_MAX - kPage) return false;
  const uint64_t live = (mp.length + kPage - 1) / kPage * kPage;
  return offset <= live && length <= live - offset;
}

const char* LiveSkipName(LiveSkip why) {
  switch (why) {
    case LiveSkip::kLiveFdMissing: return "live_fd_missing";
    case LiveSkip::kMappingMissing: return "mapping_missing";
    case LiveSkip::kAsyncEngine: return "async_engine";
    case LiveSkip::kCount: break;
  }
  return "live_fd_missing";
}

// Calls the async engines carry out instead of issuing them (setup, submission, waiting).
bool IsAsyncEngineCall(uint16_t op) { return GetOpInfo(op).replay == OpReplay::kAsyncEngine; }

// Calls whose result counts bytes moved between memory and files, or between files.
bool IsDataTransfer(uint16_t op) {
  const OpInfo& i = GetOpInfo(op);
  return i.direction != OpDirection::kNone && i.replay == OpReplay::kReissued;
}

// Calls that submit the requests staged before them, and calls that wait for completions.
bool SubmitsRequests(uint16_t op) {
  const AsyncCall a = GetOpInfo(op).async;
  return a == AsyncCall::kSubmit || a == AsyncCall::kEnter;
}
bool Reaps(const iot_syscall& sc) {
  const AsyncCall a = GetOpInfo(sc.op).async;
  return a == AsyncCall::kReap || (a == AsyncCall::kEnter && (sc.flags & IORING_ENTER_GETEVENTS));
}
// io_uring_enter and io_uring_register name their ring by descriptor.
bool NamesRing(uint16_t op) { return GetOpInfo(op).fd == FdRole::kRing; }

// What request `a` does. The back end runs every engine but libaio as io_uring, so the opcodes
// of any other engine are read as io_uring's, as the model reads them. AsyncOp's answers are
// tabled once: a request's kind is asked on the hot path.
iotwin::AsyncKind RequestKind(const iot_async_io& a) {
  static const std::array<iotwin::AsyncKind, 512> kinds = [] {
    std::array<iotwin::AsyncKind, 512> k{};
    for (unsigned opcode = 0; opcode < 256; opcode++) {
      k[opcode] = AsyncOp(IOT_AIO_ENGINE_URING, static_cast<uint8_t>(opcode)).kind;
      k[256 + opcode] = AsyncOp(IOT_AIO_ENGINE_LIBAIO, static_cast<uint8_t>(opcode)).kind;
    }
    return k;
  }();
  return kinds[(a.engine == IOT_AIO_ENGINE_LIBAIO ? 256 : 0) + a.opcode];
}
bool AsyncIsWriteOp(const iot_async_io& a) { return RequestKind(a) == iotwin::AsyncKind::kWrite; }

// A wait in the kernel without the context's lock (WaitOutsideLock): re-armed after a slice, as
// another thread may have collected what it waits for; given up at the watchdog.
constexpr uint64_t kKernelWaitSliceNs = 1'000'000'000;
constexpr uint64_t kKernelWaitWatchdogNs = 10'000'000'000;

// What a wait in the kernel may return without anything being wrong: a signal, its timeout,
// completions the kernel cannot post yet (EBUSY: its overflow list), no memory for a moment.
// io_uring keeps a request's SQE flags at their IOSQE_* bit positions in the request flags the
// capture records (the kernel's REQ_F_*_BIT are defined as the IOSQE_*_BIT): the flags that
// order requests and cancel a failed link's successors are replayed.
uint8_t UringChainFlags(const iot_async_io& a) {
  if (a.engine != IOT_AIO_ENGINE_URING) return 0;
  return static_cast<uint8_t>(a.flags &
                              (IOSQE_IO_LINK | IOSQE_IO_HARDLINK | IOSQE_IO_DRAIN | IOSQE_ASYNC));
}

bool IsTransientWaitError(int r) {
  return r == -EINTR || r == -ETIME || r == -EAGAIN || r == -EBUSY;
}

// How long a recorded call took (0 when it never returned).
uint64_t RecordedDuration(const Op& op) {
  return op.end != UINT64_MAX && op.end > op.ts ? op.end - op.ts : 0;
}

bool IsReplayableKind(OpKind kind) {
  return kind == OpKind::kSyscall || kind == OpKind::kPageFault || kind == OpKind::kAsyncSubmit;
}

}  // namespace

const char* ReplayEngine::Worker::Translation::SkipReason() const {
  if (live_ok) return nullptr;
  if (bad_name) return "unrepresentable_path";
  if (outside_mapping) return "outside_mapping";
  return LiveSkipName(why);
}

ReplayEngine::Worker::Worker(ReplayEngine& engine, uint32_t thread)
    : thread(thread),
      engine_(engine),
      model_(engine.model_),
      th_(engine.model_.threads()[thread]),
      backend_(engine.backend_),
      null_backend_(engine.options_.backend == BackendKind::kNull),
      paced_(engine.options_.pace != PaceMode::kFast),
      pacer_(engine.options_.pace, engine.options_.speed, 0, 0) {
  engine.async_contexts_.Init(engine.model_);
}

Status ReplayEngine::Worker::Allocate(const PayloadPools& pools, uint64_t* ops_total) {
  uint64_t rmax = 0, wmax = 0;
  for (const auto& op : th_.ops) {
    if (op.kind == OpKind::kSyscall) {
      const auto& sc = op.sc;
      uint64_t len = sc.length;
      if (op.extra_count && (OpIsRead(sc.op) || OpIsWrite(sc.op))) {
        len = 0;
        for (uint32_t k = 0; k < op.extra_count; k++) {
          len = std::min(len + std::min(model_.ExtraBegin(op)[k], kMaxIoBytes), kMaxIoBytes);
        }
      }
      const OpBuffer buffer = GetOpInfo(sc.op).buffer;
      if (buffer == OpBuffer::kFilled) rmax = std::max(rmax, len);
      if (buffer == OpBuffer::kDrained) wmax = std::max(wmax, IssuedWriteLength(op, len));
      ++*ops_total;
    } else if (op.kind == OpKind::kAsyncSubmit) {
      if (AsyncIsWriteOp(op.aio)) wmax = std::max(wmax, IssuedWriteLength(op, op.aio.length));
      else rmax = std::max(rmax, op.aio.length);
      ++*ops_total;
    } else if (op.kind == OpKind::kPageFault) {
      ++*ops_total;
    }
  }
  if (null_backend_) return Status::Ok();
  // Lengths are the trace's word: buffers are views of pools every worker shares, so memory
  // stays bounded whatever the thread count and whatever a call claims (payload_pool.h).
  rbuf_ = pools.read->View(rmax, thread);
  wbuf_ = pools.write->View(wmax, thread);
  if (!rbuf_.data() || !wbuf_.data()) {
    return Status::Io("cannot map replay buffers for thread {} ({} / {} bytes): {}", th_.tid, rmax,
                      wmax, strerror(errno));
  }
  return Status::Ok();
}

void ReplayEngine::Worker::Run() {
  Prepare();
  // Confined before its tid is published, so before a --record tracer attaches.
  if (!null_backend_ && engine_.plan_.sandbox) {
    Status st = Sandbox::ConfineThread(engine_.plan_.mapper);
    in_root = st.ok();
    if (!st.ok()) confine_error = st.ToString();
  }
  tid.store(gettid(), std::memory_order_release);
  prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
  engine_.WaitForStart();
  if (engine_.abort_.load()) {
    finish_ns = NowNs();
    engine_.ReportFinished();
    return;
  }
  ReplayOpsGuarded();
  // Anything left unfinished counts as done for threads waiting on it (abort path).
  engine_.PublishAllDone(thread, static_cast<uint32_t>(th_.ops.size()));
  finish_ns = NowNs();
  engine_.ReportFinished();
  // Stay alive until released: a thread's exit makes calls of its own (glibc returns the stack
  // with madvise) that a recording of the replay must not see.
  engine_.WaitForRelease();
}

void ReplayEngine::Worker::ReplayOpsGuarded() {
  try {
    ReplayOps();
    // Requests still in flight complete before the thread ends.
    DrainOwn();
  } catch (const std::exception& e) {
    // Not one of the trace's errors (those are results, compared): the replay's own (a bug, or
    // memory refused), which must stop the replay with its place rather than end the process.
    if (current_ < th_.ops.size()) {
      Fail(th_.ops[current_], current_, fmt::format("internal error: {}", e.what()));
    } else {
      engine_.Abort(fmt::format("failed: internal error in worker {}: {}", thread, e.what()));
    }
  }
}

void ReplayEngine::Worker::Fail(const Op& op, uint32_t index, std::string error) {
  WorkerFailure f;
  f.op = OpLabel(op);
  switch (op.kind) {
    case OpKind::kSyscall:
      f.args = fmt::format("fd {}, fd2 {}, offset {}, length {}, aux {}, flags {:#x}, mode {:#o}, "
                           "recorded result {}",
                           op.sc.fd, op.sc.fd2, op.sc.offset, op.sc.length, op.sc.aux, op.sc.flags,
                           op.sc.mode, op.result);
      break;
    case OpKind::kAsyncSubmit:
      f.args = fmt::format("context {}, fd {}, offset {}, length {}, rw_flags {:#x}, recorded "
                           "result {}",
                           op.async_ctx, op.aio.fd, op.aio.offset, op.aio.length, op.aio.rw_flags,
                           op.result);
      break;
    default: f.args = "recorded result " + std::to_string(op.result); break;
  }
  if (op.path != model::kNone && op.path < model_.paths().size()) f.path = model_.path(op.path);
  f.tid = th_.tid;
  f.worker = thread;
  f.index = index;
  f.ts_ns = op.ts > model_.start_ts() ? op.ts - model_.start_ts() : 0;
  f.error = std::move(error);
  engine_.Fail(std::move(f));
}

// Everything that allocates is done before the gate: the first malloc of a thread maps an
// arena, which must not appear among the replayed calls of a recorded replay.
void ReplayEngine::Worker::Prepare() {
  for (const auto& op : th_.ops) {
    if (op.kind == OpKind::kSyscall || op.kind == OpKind::kPageFault ||
        op.kind == OpKind::kAsyncSubmit) {
      StatsFor(op);
    }
    if (op.extra_count > iov_.size()) iov_.resize(op.extra_count);
    if (op.kind == OpKind::kSyscall &&
        GetOpInfo(op.sc.op).fd_effect == FdEffect::kClosesRange) {
      fds_.reserve(std::max<size_t>(fds_.capacity(), op.extra_count));
    }
  }
  scratch_.reserve(4096);
  // Completions this worker may reap for any thread of its process are counted under their
  // ops' names: the entries are made here, before the gate.
  for (uint32_t c : engine_.async_contexts_.ContextsOf(th_.process)) {
    for (const Op* kind : engine_.async_contexts_.RequestKinds(c)) StatsFor(*kind);
  }
  staged_.reserve(256);
  used_.reserve(8);
  if (!engine_.options_.raw_gaps) capture_cost_ = CaptureCostNs(model_.meta());
  if (engine_.options_.pace == PaceMode::kGaps) gap_floor_ = RecordedGapFloor();
  for (const auto& reason : {"unknown_fd", "unknown_path", "pseudo_fs", "unknown_mapping",
                             "unsupported", "live_fd_missing", "mapping_missing",
                             "outside_mapping", "unrepresentable_path", "async_engine",
                             "write_budget"}) {
    stats.AddSkip(reason, "");  // creates the map nodes; the "" entries are dropped later
  }
}

// The gaps of this thread between consecutive system calls it replays, as recorded, reduced to
// their floor (pacer.h).
uint64_t ReplayEngine::Worker::RecordedGapFloor() const {
  std::vector<uint64_t> gaps;
  const Op* prev = nullptr;
  for (const auto& op : th_.ops) {
    if (op.kind != OpKind::kSyscall || op.skip != model::Skip::kReplayable) continue;
    if (prev && prev->end != UINT64_MAX && op.ts >= prev->end) {
      gaps.push_back(CompensatedGap(op.ts - prev->end, capture_cost_));
    }
    prev = &op;
  }
  return GapFloor(gaps);
}

void ReplayEngine::Worker::ReplayOps() {
  const uint64_t trace_start = model_.start_ts();
  pacer_ = Pacer(engine_.options_.pace, engine_.options_.speed, trace_start, engine_.live_start_,
                 gap_floor_, capture_cost_);
  prev_rec_end_ = th_.start_ts;
  prev_live_done_ = engine_.live_start_;
  if (engine_.options_.pace != PaceMode::kOriginal && th_.start_ts > trace_start) {
    // Threads that start later begin from their creation point: when the creator's fork or
    // thread-start op is done in the replay. Taken before the first op's other dependencies,
    // which may hold it for longer than its recorded gap: that wait counts against the gap
    // instead of coming on top of it. Without a creator whose progress is published, from
    // the first op's dependencies (Pace).
    prev_live_done_ = 0;
    const uint32_t creator = th_.creator;
    if (creator != model::kNone && creator < engine_.awaited_.size() && engine_.awaited_[creator] &&
        th_.creator_op != model::kNone) {
      engine_.WaitFor(creator, th_.creator_op + 1);
      prev_live_done_ = NowNs();
    }
  }
  first_ = true;

  for (uint32_t i = 0; i < th_.ops.size(); i++) {
    if (engine_.abort_.load(std::memory_order_relaxed)) break;
    current_ = i;
    const Op& op = th_.ops[i];
    const bool replayable_kind = IsReplayableKind(op.kind);
    // Dependencies first, even for an op that is skipped: the model reduces waits, so later ops
    // of this thread rely on the ones made here.
    WaitForDependencies(op);
    if (replayable_kind && op.skip != model::Skip::kReplayable) {
      if (op.drops_page_cache && engine_.options_.backend != BackendKind::kNull) {
        // A confined worker's "/" is the sandbox, its --map targets bound inside.
        ReplayPageCacheDrop(in_root ? std::vector<std::string>{"/"} : engine_.plan_.mapper.Bases(),
                            &stats);
      }
      Skip(model::SkipName(op.skip), op, i);
      continue;
    }
    // A request carried by the same call as the one before it was recorded inside that call
    // (its submission instant is the kernel's, one per request as the call works through the
    // batch): it is queued at once, never waited for, or each batch would wait for the time the
    // original call spent submitting it before the call even starts.
    const bool carried = carried_batch_ && op.kind == OpKind::kAsyncSubmit;
    carried_batch_ = false;  // SubmitAsync sets it again
    const uint64_t issued = carried ? 0 : Pace(op);
    if (!replayable_kind) {
      // Markers: the kernel's implicit work, done by the bookkeeper.
      engine_.ApplyProcessMarker(th_.process, op);
      MarkDone(i);
      continue;
    }
    if (paced_ && !carried) stats.AddSchedule(static_cast<uint64_t>(late_));
    if (op.kind == OpKind::kAsyncSubmit) {
      SubmitAsync(op, i);
    } else if (op.kind == OpKind::kSyscall && IsAsyncEngineCall(op.sc.op)) {
      ReplayAsyncSyscall(op, i);
    } else if (op.kind == OpKind::kSyscall &&
               GetOpInfo(op.sc.op).fd_effect == FdEffect::kCloses &&
               RingClosedBy(op) != model::kNone) {
      CloseRing(RingClosedBy(op), op, i);
    } else {
      ReplaySyncOp(op, i, issued);
    }
  }
}

// The steps of every op are forced inline (worker.h says why).
[[gnu::always_inline]]
void ReplayEngine::Worker::WaitForDependencies(const Op& op) {
  for (uint32_t k = 0; k < op.dep_count; k++) {
    const model::Dep& d = model_.DepsBegin(op)[k];
    engine_.WaitFor(d.thread, d.count);
  }
}

[[gnu::always_inline]]
uint64_t ReplayEngine::Worker::Pace(const Op& op) {
  if (!paced_) {
    if (!used_.empty()) ReapAvailable();
    return 0;
  }
  uint64_t now = NowNs();
  if (first_) {
    if (prev_live_done_ == 0) prev_live_done_ = now;
    first_ = false;
  }
  uint64_t due = pacer_.Due(op.ts, prev_rec_end_, prev_live_done_, now);
  // An op already due (back-to-back calls, or a late replay) is issued without another clock
  // read; otherwise the waiter's last read is the issue time.
  uint64_t issued = now;
  if (!used_.empty()) {
    ReapAvailable();
    issued = NowNs();
  }
  // A long pause is slept in slices, so that an abort (a signal, --strict) ends it.
  constexpr uint64_t kAbortSlice = 100'000'000;
  bool aborted = false;
  while (issued < due && due - issued > kAbortSlice &&
         !(aborted = engine_.abort_.load(std::memory_order_relaxed))) {
    issued = WaitUntil(issued + kAbortSlice, 0);
  }
  if (issued < due && !aborted) issued = WaitUntil(due, engine_.options_.spin_ns);
  pacer_.Issued(due, issued);
  late_ = static_cast<int64_t>(issued > due ? issued - due : 0);
  lateness.store(late_, std::memory_order_relaxed);
  return issued;
}

// The write budget (write_budget.h): a call it refuses is skipped and stops the replay.
bool ReplayEngine::Worker::AdmitWrite(const Op& op, uint64_t bytes, uint32_t index) {
  if (bytes == 0 || engine_.write_budget_->Admit(bytes)) return true;
  engine_.Abort(engine_.write_budget_->why());
  Skip("write_budget", op, index);
  return false;
}

void ReplayEngine::Worker::Skip(std::string_view reason, const Op& op, uint32_t index) {
  stats.AddSkip(std::string(reason), OpLabel(op));
  done_ops.store(done_ops.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  MarkDone(index);
}

[[gnu::always_inline]]
void ReplayEngine::Worker::MarkDone(uint32_t index) { engine_.MarkDone(thread, index + 1); }

// A system call or page touch: translated, issued, its effects applied, its result checked.
[[gnu::always_inline]]
void ReplayEngine::Worker::ReplaySyncOp(const Op& op, uint32_t index, uint64_t issued) {
  Translation t;
  Translate(op, &t);
  if (const char* reason = t.SkipReason()) {
    Skip(reason, op, index);
    return;
  }
  if (engine_.write_budget_ && !AdmitWrite(op, PlanWrite(model_, op).bytes, index)) return;
  // Issued just now when paced (the clock read is reused); otherwise read it here.
  const uint64_t t0 = paced_ ? issued : NowNs();
  if (op.kind == OpKind::kSyscall) NoteIssued(t0);
  const int64_t result = backend_->Execute(t.args);
  const uint64_t t1 = NowNs();
  if (op.kind == OpKind::kSyscall) ApplyEffects(op, t.args, result);
  OpStats& s = StatsFor(op);
  s.count++;
  s.latency.Add(t1 - t0);
  if (result < 0) s.errors++;
  else if (op.kind == OpKind::kSyscall && IsDataTransfer(op.sc.op)) {
    s.bytes += static_cast<uint64_t>(result);
  }
  if (!op.interrupted) CheckResult(op, index, result);
  Complete(op, index, t1);
  // A fault's record has no duration (it ends where it starts): the touch's own time stands for
  // it, so the recorded spacing to the next op, which holds the original fault, is not waited
  // on top of the replayed one (gaps pacing).
  if (op.kind == OpKind::kPageFault) prev_rec_end_ = SaturatingAdd(op.ts, t1 - t0);
}

[[gnu::always_inline]]
void ReplayEngine::Worker::Complete(const Op& op, uint32_t index, uint64_t live_done) {
  done_ops.store(done_ops.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  prev_rec_end_ = op.end == UINT64_MAX ? op.ts : op.end;
  prev_live_done_ = live_done;
  MarkDone(index);
}

// ---- translation: recorded arguments -> live ones ----------------------------------------

[[gnu::always_inline]]
void ReplayEngine::Worker::Translate(const Op& op, Translation* t) {
  t->args.op = &op;
  t->args.sandbox = engine_.plan_.sandbox.get();
  t->args.in_root = in_root;
  t->args.recorded = op.result;
  if (op.kind == OpKind::kPageFault) {
    TranslateFault(op, t);
    return;
  }
  // Every part is translated even once one has failed: the parts' side effects (a reserved
  // dup2 target) do not depend on the others. Each part is entered only by the ops it concerns.
  const OpInfo& info = GetOpInfo(op.sc.op);
  TranslateDescriptors(op, t);
  TranslatePaths(op, t);
  if (info.path == PathRole::kVerbatim) TranslateSymlinkText(op, t);
  if (info.direction == OpDirection::kCopy || info.fd2 == FdRole::kCreated) {
    TranslateSecondFd(op, t);
  }
  if (info.buffer != OpBuffer::kNone) TranslateBuffers(op, t);
  if (info.mapping != OpMapping::kNone) TranslateMemory(op, t);
  if (info.fd_effect == FdEffect::kClosesRange) TranslateCloseRange(op, t);
}

void ReplayEngine::Worker::TranslateFault(const Op& op, Translation* t) {
  uint64_t base = engine_.maps_[op.mapping].load(std::memory_order_acquire);
  if (base == 0) {
    t->live_ok = false;
    t->why = LiveSkip::kMappingMissing;
  } else if (!WithinMapping(model_.mappings()[op.mapping], op.map_offset, 1)) {
    t->live_ok = false;
    t->outside_mapping = true;
  }
  t->args.addr = reinterpret_cast<uint8_t*>(base + op.map_offset);
}

[[gnu::always_inline]]
void ReplayEngine::Worker::TranslateDescriptors(const Op& op, Translation* t) {
  const uint32_t proc = th_.process;
  if (op.fd_state == FdState::kKnown && model::OpHasDataFd(op.sc)) {
    t->args.fd = engine_.LiveFd(proc, model::DataFd(op.sc));
    if (t->args.fd < 0) t->live_ok = false;
  }
  if (op.empty_path) {
    t->args.dirfd = engine_.LiveFd(proc, model::PathDirFd(op.sc));
    if (t->args.dirfd < 0) t->live_ok = false;
    t->args.path = "";
  }
}

[[gnu::always_inline]]
void ReplayEngine::Worker::TranslatePaths(const Op& op, Translation* t) {
  const iot_syscall& sc = op.sc;
  const uint32_t proc = th_.process;
  const std::vector<std::string>& names =
      in_root ? engine_.plan_.confined : engine_.plan_.targets;
  if (model::OpTakesPath(sc.op) && !op.empty_path) {
    const std::string& target = names[op.path];
    if (target.empty()) {
      t->live_ok = false;
      t->bad_name |= model_.path(op.path).find('\0') != std::string::npos;
    }
    t->args.path = target.c_str();
    int dfd = model::PathDirFd(sc);
    if (dfd != model::kAtFdcwd) {
      int live = engine_.LiveFd(proc, dfd);
      t->args.dirfd = live >= 0 ? live : AT_FDCWD;
    }
  }
  if (model::OpTakesPath2(sc.op)) {
    const std::string& target = names[op.path2];
    if (target.empty()) {
      t->live_ok = false;
      t->bad_name |= model_.path(op.path2).find('\0') != std::string::npos;
    }
    t->args.path2 = target.c_str();
    int dfd = model::Path2DirFd(sc);
    if (dfd != model::kAtFdcwd) {
      int live = engine_.LiveFd(proc, dfd);
      t->args.dirfd2 = live >= 0 ? live : AT_FDCWD;
    }
  }
}

// A symlink's text, re-rooted; a NUL in it would cut the name the kernel sees.
void ReplayEngine::Worker::TranslateSymlinkText(const Op& op, Translation* t) {
  const std::string& text = model_.path(op.path);
  if (text.find('\0') != std::string::npos) {
    t->live_ok = false;
    t->bad_name = true;
  }
  if (in_root) {
    // Absolute in the worker's root: the back end writes it relative to the directory the
    // kernel puts the link in (Sandbox::SymlinkInRoot).
    const std::string link = model::NormalizePath(model_.path(op.path2));
    scratch_ = model::ResolvePath(model::ParentPath(link), text);
  } else {
    scratch_ = engine_.plan_.mapper.MapSymlinkTarget(model_.path(op.path2), text);
  }
  t->args.path = scratch_.c_str();
}

void ReplayEngine::Worker::TranslateSecondFd(const Op& op, Translation* t) {
  const iot_syscall& sc = op.sc;
  const uint32_t proc = th_.process;
  // The second descriptor is the one the op table names (copy_file_range's fd_out,
  // sendfile's out_fd); the record field it sits in differs per op.
  const OpInfo& info = GetOpInfo(sc.op);
  const int second = model::SecondFd(sc);
  if (info.direction == OpDirection::kCopy && !info.writes_any_fd) {
    t->args.fd2 = engine_.LiveFd(proc, second);
    if (t->args.fd2 < 0) t->live_ok = false;
  } else if (info.direction == OpDirection::kCopy) {
    t->args.fd2 = op.fd2_state == FdState::kKnown ? engine_.LiveFd(proc, second) : engine_.sink_fd_;
    if (t->args.fd2 < 0) t->args.fd2 = engine_.sink_fd_;
  } else if (info.fd2 == FdRole::kCreated) {
    t->args.fd2 = engine_.LiveFd(proc, sc.fd2);
    if (t->args.fd2 < 0) t->args.fd2 = null_backend_ ? sc.fd2 : engine_.reserved_next_.fetch_add(1);
  }
}

[[gnu::always_inline]]
void ReplayEngine::Worker::TranslateBuffers(const Op& op, Translation* t) {
  const bool write = GetOpInfo(op.sc.op).buffer == OpBuffer::kDrained;
  const AlignedBuffer& buf = write ? wbuf_ : rbuf_;
  uint8_t* base = buf.data();
  t->args.buf = base;
  // Never past the buffer: the kernel would cut the call to kMaxIoBytes anyway. A write moves
  // no more than the original did (IssuedWriteLength).
  const uint64_t room =
      write ? std::min<uint64_t>(buf.size(), IssuedWriteLength(op, UINT64_MAX)) : buf.size();
  t->args.len = std::min<uint64_t>(op.sc.length, room);
  if (!op.extra_count) return;
  if (iov_.size() < op.extra_count) iov_.resize(op.extra_count);
  uint64_t off = 0;
  for (uint32_t k = 0; k < op.extra_count; k++) {
    uint64_t l = std::min<uint64_t>(model_.ExtraBegin(op)[k], room - off);
    iov_[k] = iovec{base + off, l};
    off += l;
  }
  t->args.iov = iov_.data();
  t->args.iovcnt = static_cast<int>(op.extra_count);
}

void ReplayEngine::Worker::TranslateMemory(const Op& op, Translation* t) {
  const iot_syscall& sc = op.sc;
  const OpMapping what = GetOpInfo(sc.op).mapping;
  if (what != OpMapping::kMaps) {
    uint64_t base = engine_.maps_[op.mapping].load(std::memory_order_acquire);
    if (base == 0) {
      t->live_ok = false;
      t->why = LiveSkip::kMappingMissing;
    }
    t->args.addr = reinterpret_cast<uint8_t*>(base + op.map_offset);
    t->args.mem_len = model::MemLength(sc);
    if (base != 0 &&
        !WithinMapping(model_.mappings()[op.mapping], op.map_offset, t->args.mem_len)) {
      t->live_ok = false;
      t->outside_mapping = true;
    }
  }
  if (what == OpMapping::kMaps && op.fixed_in != model::kNone) {
    // MAP_FIXED inside a mapping this replay made: the same place of its live twin.
    // Only wholly inside it: MAP_FIXED replaces whatever else lies in its range.
    uint64_t base = engine_.maps_[op.fixed_in].load(std::memory_order_acquire);
    if (base != 0 && WithinMapping(model_.mappings()[op.fixed_in], op.map_offset, sc.length)) {
      t->args.addr = reinterpret_cast<uint8_t*>(base + op.map_offset);
    }
  }
}

void ReplayEngine::Worker::TranslateCloseRange(const Op& op, Translation* t) {
  fds_.clear();
  for (uint32_t k = 0; k < op.extra_count; k++) {
    int live = engine_.LiveFd(th_.process, static_cast<int>(model_.ExtraBegin(op)[k]));
    if (live >= 0) fds_.push_back(live);
  }
  t->args.fds = fds_.data();
  t->args.nfds = static_cast<int>(fds_.size());
  if (fds_.empty() && op.extra_count) t->live_ok = false;
}

// ---- effects and results -----------------------------------------------------------------

// The live tables follow what the call did: descriptors it made or closed, mappings it made,
// removed or moved.
[[gnu::always_inline]]
void ReplayEngine::Worker::ApplyEffects(const Op& op, const LiveArgs& a, int64_t result) {
  const iot_syscall& sc = op.sc;
  const OpInfo& info = GetOpInfo(sc.op);
  const uint32_t proc = th_.process;
  if (model::OpReturnsFd(sc)) {
    if (op.result >= 0 && result >= 0) {
      int recorded_fd = static_cast<int>(op.result);
      int old = engine_.LiveFd(proc, recorded_fd);
      bool replaced_by_kernel = info.fd2 == FdRole::kCreated && old == a.fd2;
      // A stale live descriptor (its close failed or was skipped) is released by the
      // bookkeeper: the worker issues only recorded calls.
      if (old >= 0 && old != result && !replaced_by_kernel) {
        engine_.Bookkeep([&] { backend_->CloseFd(old); });
      }
      engine_.SetLiveFd(proc, recorded_fd, static_cast<int>(result));
    } else if (result >= 0 && !null_backend_) {
      int leaked = static_cast<int>(result);  // failed in the trace: do not leak it
      engine_.Bookkeep([&] { backend_->CloseFd(leaked); });
    }
  } else if (info.fd_effect == FdEffect::kCloses) {
    engine_.SetLiveFd(proc, sc.fd, -1);
  } else if (info.fd_effect == FdEffect::kClosesRange && !(sc.flags & CLOSE_RANGE_CLOEXEC)) {
    for (uint32_t k = 0; k < op.extra_count; k++) {
      engine_.SetLiveFd(proc, static_cast<int>(model_.ExtraBegin(op)[k]), -1);
    }
  } else if (info.mapping == OpMapping::kMaps) {
    if (result >= 0 && op.mapping != model::kNone) {
      engine_.maps_[op.mapping].store(static_cast<uint64_t>(result), std::memory_order_release);
    } else if (result >= 0 && !null_backend_) {
      uint8_t* extra = reinterpret_cast<uint8_t*>(result);
      uint64_t len = sc.length;
      engine_.Bookkeep([&] { backend_->Unmap(extra, len); });
    }
  } else if (info.mapping == OpMapping::kUnmaps && result == 0) {
    // The kernel unmaps whole pages: munmap(p, 60179) of a 61440-byte mapping (ld.so's of its
    // cache) removes it all, and a slot left holding its address would be unmapped again at
    // the process's end, over whatever the kernel has put there since.
    const model::Mapping& mp = model_.mappings()[op.mapping];
    constexpr uint64_t kPage = 4096;
    const uint64_t pages =
        a.mem_len > UINT64_MAX - kPage ? UINT64_MAX : (a.mem_len + kPage - 1) / kPage * kPage;
    if (op.map_offset == 0 && pages >= mp.length) engine_.maps_[op.mapping].store(0);
  } else if (info.mapping == OpMapping::kRemaps && result >= 0 && op.extra_count) {
    uint32_t nm = static_cast<uint32_t>(model_.ExtraBegin(op)[0]);
    engine_.maps_[nm].store(static_cast<uint64_t>(result));
    engine_.maps_[op.mapping].store(0);
  }
}

[[gnu::always_inline]]
void ReplayEngine::Worker::CheckResult(const Op& op, uint32_t index, int64_t result) {
  Mismatch mk;
  bool count = op.kind == OpKind::kSyscall && model::OpResultIsCount(op.sc.op);
  int64_t recorded = op.kind == OpKind::kPageFault ? 0 : op.result;
  if (result == -EFAULT && op.kind == OpKind::kPageFault) {
    RecordMismatch(op, index, recorded, result, Mismatch::kFault);
  } else if (CompareResult(recorded, result, count, &mk)) {
    RecordMismatch(op, index, recorded, result, mk);
  }
}

[[gnu::always_inline]]
OpStats& ReplayEngine::Worker::StatsFor(const Op& op) {
  OpStats** slot;
  if (op.kind == OpKind::kSyscall) {
    slot = &fast_[op.sc.op <= IOT_OP_MAX ? op.sc.op : 0];
  } else if (op.kind == OpKind::kPageFault) {
    slot = &fast_[IOT_OP_MAX + 1 + ((op.pf.flags & IOT_PFF_WRITE) ? 1 : 0)];
  } else {
    slot = &async_stats_[(static_cast<uint32_t>(op.aio.engine) << 8) | op.aio.opcode];
  }
  if (!*slot) *slot = &stats.Op(OpLabel(op));
  return **slot;
}

void ReplayEngine::Worker::RecordMismatch(const Op& op, uint32_t index, int64_t recorded,
                                          int64_t live, Mismatch kind, uint32_t tid) {
  MismatchExample ex;
  ex.op = OpLabel(op);
  ex.tid = tid != 0 ? tid : th_.tid;
  ex.index = index;
  ex.path = op.path != model::kNone ? model_.path(op.path) : "";
  ex.recorded = recorded;
  ex.live = live;
  stats.AddMismatch(kind, ex.op, ex, engine_.options_.max_examples);
  engine_.mismatch_count_.fetch_add(1, std::memory_order_relaxed);
  if (engine_.options_.strict) {
    engine_.Abort(fmt::format("--strict: {} of thread {} (op {}, {}) returned {} in the replay, "
                              "{} in the trace",
                              ex.op, ex.tid, index, ex.path, live, recorded));
  }
}

// ---- async requests ------------------------------------------------------------------------

[[gnu::always_inline]]
void ReplayEngine::Worker::SubmitAsync(const Op& op, uint32_t index) {
  SharedAsyncContext* c = Context(op.async_ctx);
  if (!c) {
    Skip(LiveSkipName(LiveSkip::kAsyncEngine), op, index);
    return;
  }
  const iotwin::AsyncKind kind = RequestKind(op.aio);
  const bool write = kind == iotwin::AsyncKind::kWrite;
  AsyncRequest req;
  req.token = RequestToken(thread, index);
  req.engine = op.aio.engine;
  req.opcode = op.aio.opcode;
  req.fd = engine_.LiveFd(th_.process, op.aio.fd);
  req.offset = op.aio.offset;
  req.len = std::min<uint64_t>(write ? IssuedWriteLength(op, op.aio.length) : op.aio.length,
                               write ? wbuf_.size() : rbuf_.size());
  req.rw_flags = op.aio.rw_flags;
  req.sqe_flags = UringChainFlags(op.aio);
  req.recorded = op.result;
  req.buf = write ? wbuf_.data() : rbuf_.data();
  req.iov_lens = op.extra_count ? model_.ExtraBegin(op) : nullptr;  // the recorded iovec shape
  req.iov_count = op.extra_count;
  // A NOP needs no descriptor (the model binds it to none): it goes to the ring with fd -1.
  const bool nop = kind == iotwin::AsyncKind::kOther && op.aio.engine == IOT_AIO_ENGINE_URING &&
                   AsyncOp(IOT_AIO_ENGINE_URING, op.aio.opcode).nop;
  if (req.fd < 0 && !null_backend_ && !nop) {
    LeaveOutRequest(op.async_ctx, c);
    Skip(LiveSkipName(LiveSkip::kLiveFdMissing), op, index);
    return;
  }
  if (write && engine_.write_budget_ && !AdmitWrite(op, req.len, index)) {
    LeaveOutRequest(op.async_ctx, c);
    return;
  }
  const bool moves_data = write || kind == iotwin::AsyncKind::kRead;
  const uint64_t queued = NowNs();
  const bool reaped_by_call = op.aio.engine == IOT_AIO_ENGINE_LIBAIO && op.end != UINT64_MAX;
  {
    MutexLock lock(&c->mu);
    if (!EngineLocked(op.async_ctx, c, op, index)) {
      LeaveOutRequest(op.async_ctx, c);
      Skip(LiveSkipName(LiveSkip::kAsyncEngine), op, index);
      return;
    }
    c->AddPending(req.token, PendingRequest{thread, index, queued, moves_data, reaped_by_call});
  }
  NoteIssued(queued);
  // Staged, and submitted with the rest of its recorded batch by the call that carries it.
  if (staged_ctx_ != op.async_ctx) FlushStaged();
  staged_ctx_ = op.async_ctx;
  staged_.push_back(req);
  if (std::find(used_.begin(), used_.end(), op.async_ctx) == used_.end()) {
    used_.push_back(op.async_ctx);
  }
  carried_batch_ = NextOpCarries(index);
  if (!carried_batch_) FlushStaged();
  prev_rec_end_ = std::max(prev_rec_end_, op.ts);
  prev_live_done_ = NowNs();
  MarkDone(index);
}

// A request that never reaches its ring: no recorded wait waits for it, and it ends its chain
// (the staged request linked to it would otherwise be linked to the next one staged).
void ReplayEngine::Worker::LeaveOutRequest(uint32_t ctx, SharedAsyncContext* c) {
  c->Resolved(1);
  if (staged_.empty() || staged_ctx_ != ctx) return;
  staged_.back().sqe_flags &= static_cast<uint8_t>(~(IOSQE_IO_LINK | IOSQE_IO_HARDLINK));
}

// Whether the op after request `index` carries it (another request of its context, or the
// submitting call); otherwise the request ends its recorded batch and is flushed at once.
[[gnu::always_inline]]
bool ReplayEngine::Worker::NextOpCarries(uint32_t index) const {
  if (index + 1 >= th_.ops.size()) return false;
  const Op& op = th_.ops[index];
  const Op& next = th_.ops[index + 1];
  // Requests queued before a submitting call are all carried by it, whatever their recorded
  // instants (the model's batches follow submission timestamps).
  return (next.kind == OpKind::kAsyncSubmit && next.async_ctx == op.async_ctx) ||
         (next.kind == OpKind::kSyscall &&
          SubmitsRequests(next.sc.op));
}

// Setup/teardown: a context's engine is set up at the recorded setup (whichever thread made it),
// else at its first use, by whichever worker comes first. Submitting and
// waiting calls submit and reap as the original did, on the context they name.
[[gnu::always_inline]]
void ReplayEngine::Worker::ReplayAsyncSyscall(const Op& op, uint32_t index) {
  uint64_t t0 = NowNs();
  NoteIssued(t0);
  const AsyncCall call = GetOpInfo(op.sc.op).async;
  if (call == AsyncCall::kSetup) {
    const uint32_t set_up = engine_.async_contexts_.SetupContext(op);
    if (SharedAsyncContext* c = Context(set_up)) {
      MutexLock lock(&c->mu);
      EngineLocked(set_up, c, op, index);
    }
  }
  if (call == AsyncCall::kDestroy) {
    DestroyAioContext(op, index);
    return;
  }
  const uint32_t context = CallContext(op);
  if (NamesRing(op.sc.op)) {
    switch (ReplayRingCall(op, index, context)) {
      case RingCall::kReplayed:
        FinishEngineCall(op, index, t0);
        NoteContextUse(op);
        return;
      case RingCall::kSkipped: NoteContextUse(op); return;
      case RingCall::kGeneric: break;
    }
  }
  bool waits = Reaps(op.sc);
  // io_uring_enter submits and waits in one call: the wait submits what it waits for, and
  // what is left queued (nothing due) is submitted after.
  // io_getevents(ctx, min_nr, nr): the recorded nr (length) bounds one call, as it did.
  int max_events = 64;
  if (call == AsyncCall::kReap) {
    max_events = static_cast<int>(std::clamp<uint64_t>(op.sc.length, 1, 64));
  }
  if (waits) WaitCompletionsUntil(op, index, context, max_events);
  if (SubmitsRequests(op.sc.op)) FlushStaged();
  FinishEngineCall(op, index, t0);
  NoteContextUse(op);
}

void ReplayEngine::Worker::NoteContextUse(const Op& op) {
  if (SharedAsyncContext* c = Context(engine_.async_contexts_.UseContext(op))) c->UseDone();
}

// The context of a recorded call: io_uring_enter/register name their ring by descriptor;
// io_getevents names its context by an address the trace does not keep (the process's only
// libaio context, else the one this thread last submitted to, else one with requests pending);
// io_submit carries the staged batch.
uint32_t ReplayEngine::Worker::CallContext(const Op& op) const {
  const AsyncCall call = GetOpInfo(op.sc.op).async;
  const AsyncContextTable& table = engine_.async_contexts_;
  if (NamesRing(op.sc.op)) {
    const uint32_t ring = table.RingOf(th_.process, op);
    if (ring != model::kNone) return ring;
  } else if (call == AsyncCall::kReap) {
    const std::vector<uint32_t>& aio = table.AioContextsOf(th_.process);
    if (aio.size() == 1) return aio.front();
    // Several: the one this thread submitted to last with requests pending (a context per
    // thread), else one with requests pending (a reaping thread's).
    const auto& contexts = model_.async_contexts();
    for (auto it = used_.rbegin(); it != used_.rend(); ++it) {
      if (contexts[*it].engine == IOT_AIO_ENGINE_LIBAIO && table.Get(*it)->pending_count() > 0) {
        return *it;
      }
    }
    for (uint32_t c : aio) {
      if (table.Get(c)->pending_count() > 0) return c;
    }
    for (auto it = used_.rbegin(); it != used_.rend(); ++it) {
      if (contexts[*it].engine == IOT_AIO_ENGINE_LIBAIO) return *it;
    }
    if (!aio.empty()) return aio.front();
  }
  if (!staged_.empty()) return staged_ctx_;
  if (!used_.empty()) return used_.back();
  const std::vector<uint32_t>& all = table.ContextsOf(th_.process);
  return all.size() == 1 ? all.front() : model::kNone;
}

// io_uring_enter / io_uring_register one for one, with the recorded arguments, on the ring the
// call names. A waiting enter waits for at least the requests whose completion the original had
// by the call's end (a program reaps them from the ring in user space, without a call), of
// every thread: waiting for only the recorded min_complete, a slower target would pile up more
// requests in flight than the original had, until the ring overflowed. kGeneric when the
// context's engine does not replay ring calls (the caller then submits and waits by what the
// requests need).
ReplayEngine::Worker::RingCall ReplayEngine::Worker::ReplayRingCall(const Op& op, uint32_t index,
                                                                    uint32_t context) {
  SharedAsyncContext* c = Context(context);
  if (!c) return RingCall::kGeneric;
  const bool waits = Reaps(op.sc);
  if (waits) AwaitSubmissions(c, op, index, context);
  MutexLock lock(&c->mu);
  AsyncEngine* e = EngineLocked(context, c, op, index);
  if (!e) {
    // Torn down (or never set up): nothing touches the ring after its recorded end.
    const size_t staged = StagedFor(context);
    if (staged) FailStagedLocked(c, -EBADF);
    if (staged) staged_.clear();
    c->Resolved(staged);
    Skip(LiveSkipName(LiveSkip::kAsyncEngine), op, index);
    return RingCall::kSkipped;
  }
  if (!e->replays_ring_calls()) return RingCall::kGeneric;
  const size_t staged = QueueStagedLocked(context, c, e);
  if (GetOpInfo(op.sc.op).async == AsyncCall::kRegister) {
    e->Register(op.sc.mode, static_cast<unsigned>(op.sc.length));
    if (staged) staged_.clear();
    c->Resolved(staged);
    return RingCall::kReplayed;
  }
  const uint64_t completed = c->CompletedBy(op.end);
  const uint64_t due = completed > c->collected() ? completed - c->collected() : 0;
  const unsigned min_complete =
      std::max(op.sc.mode, static_cast<uint32_t>(std::min<uint64_t>(due, UINT32_MAX)));
  // The call submits what it carried and waits, without the lock (async_contexts.h): the
  // batch is published now, so waits of other threads may count on it.
  AsyncWait w;
  w.call = true;
  w.flags = op.sc.flags;
  e->ArmWait(&w, min_complete, /*submit=*/true);
  if (staged) staged_.clear();
  c->Resolved(staged);
  WaitOutsideLock(c, &w, RecordedDuration(op), &op, index);
  return RingCall::kReplayed;
}

// Waits for what `w` was armed with, without the context's lock; a call the kernel interrupts
// or a slice that ends is re-armed for the completions still missing.
int ReplayEngine::Worker::WaitOutsideLock(SharedAsyncContext* c, AsyncWait* w,
                                          uint64_t recorded_ns, const Op* op, uint32_t index) {
  const std::shared_ptr<AsyncEngine> engine = c->LendEngine();  // alive while unlocked
  AsyncEngine* e = engine.get();
  const uint64_t deadline = SaturatingAdd(
      NowNs(), std::max<uint64_t>(kKernelWaitWatchdogNs, SaturatingMul(recorded_ns, 8)));
  const uint64_t slice = std::max<uint64_t>(kKernelWaitSliceNs, SaturatingMul(recorded_ns, 2));
  unsigned left = w->want;
  int collected = 0;
  while (true) {
    c->AddKernelWaiter(1);
    c->mu.Unlock();
    const uint64_t before = NowNs();
    const uint64_t timeout =
        std::max<uint64_t>(std::min(slice, deadline > before ? deadline - before : 0), 1);
    const int r = e->BlockWait(w, timeout);
    // The call ended at its timeout or a signal, not because what it waited for came.
    const bool cut = r == -ETIME || r == -EINTR || NowNs() - before >= timeout;
    const bool resubmit = r < 0 && w->to_submit > 0;  // the kernel took none of the batch
    c->mu.Lock();
    c->AddKernelWaiter(-1);
    int n = e->FinishWait(w, comps_, AsyncWait::kMaxTaken);
    if (n > 0) HandleCompletionsLocked(c, n);
    collected += std::max(n, 0);
    left = static_cast<unsigned>(n) >= left ? 0 : left - static_cast<unsigned>(n);
    while (n == AsyncWait::kMaxTaken && (n = e->Reap(comps_, 64, 0)) > 0) {
      HandleCompletionsLocked(c, n);
      collected += n;
      left = static_cast<unsigned>(n) >= left ? 0 : left - static_cast<unsigned>(n);
    }
    if (r < 0 && !IsTransientWaitError(r)) {
      // Not what a wait on a live ring returns: the ring or the replay is broken.
      const char* call = e->replays_ring_calls() ? "io_uring_enter" : "io_getevents";
      if (op) {
        Fail(*op, index,
             fmt::format("{} on the replayed context failed: {}", call, strerror(-r)));
      }
      break;
    }
    // A call that returned is the recorded call done, even when another thread collected what
    // it waited for; only a cut one is made again.
    if (left == 0 || !cut || c->closed() || engine_.abort_.load(std::memory_order_relaxed)) break;
    if (NowNs() >= deadline) {
      if (op) RecordMismatch(*op, index, op->result, -ETIME, Mismatch::kWaitTimedOut);
      break;
    }
    // Made even when nothing can come any more (it returns at once): every ArmWait is paired
    // with a FinishWait.
    e->ArmWait(w, left, resubmit);
  }
  return collected;
}

// The live io_uring context a recorded close closes, else model::kNone. The model ties a close
// to its ring when the thread that set the ring up made its first request; a ring set up by one
// thread and used by others (MariaDB's, set up by its main thread) is named by the descriptor
// (AsyncContextTable::RingOf), when no live file holds that number in the process.
uint32_t ReplayEngine::Worker::RingClosedBy(const Op& op) const {
  uint32_t context = op.async_ctx;
  if (context == model::kNone) {
    if (op.sc.fd < 0 || engine_.LiveFd(th_.process, op.sc.fd) >= 0) return model::kNone;
    context = engine_.async_contexts_.RingOf(th_.process, op);
    if (context == model::kNone ||
        model_.async_contexts()[context].engine == IOT_AIO_ENGINE_LIBAIO) {
      return model::kNone;
    }
  }
  SharedAsyncContext* c = Context(context);
  if (!c) return model::kNone;
  MutexLock lock(&c->mu);
  return c->engine() != nullptr ? context : model::kNone;
}

// The close of an io_uring instance: its context is torn down here, so the ring is closed and
// unmapped where the original closed it (the live table never held the ring's descriptor: the
// engine owns it). Its requests complete first, whichever worker submitted them.
void ReplayEngine::Worker::CloseRing(uint32_t context, const Op& op, uint32_t index) {
  uint64_t t0 = NowNs();
  NoteIssued(t0);
  TearDownContext(context, op, index);
  FinishEngineCall(op, index, t0);
}

// io_destroy(ctx): the libaio context with the recorded address in this process is torn down
// here (its teardown is the replay's io_destroy), not when the replay ends.
void ReplayEngine::Worker::DestroyAioContext(const Op& op, uint32_t index) {
  uint64_t t0 = NowNs();
  const auto& contexts = model_.async_contexts();
  for (uint32_t c : engine_.async_contexts_.AioContextsOf(th_.process)) {
    if (contexts[c].ctx == op.sc.aux) TearDownContext(c, op, index);
  }
  FinishEngineCall(op, index, t0);
}

// A context's requests complete (this worker's batch submitted first), then its engine goes;
// later uses of the context are skipped, never sent to a ring that is gone.
void ReplayEngine::Worker::TearDownContext(uint32_t context, const Op& op, uint32_t index) {
  SharedAsyncContext* c = Context(context);
  if (!c) return;
  if (StagedFor(context)) FlushStaged();
  // Other threads' uses recorded before the teardown come first (the original's threads were
  // joined or done by then; a replay without that order would tear the context down under
  // them): a wait that cannot end gives up after max(1 s, 8 x the recorded call).
  const uint64_t need = c->UsesBefore(op.ts);
  const uint64_t recorded = op.end != UINT64_MAX && op.end > op.ts ? op.end - op.ts : 0;
  const uint64_t deadline =
      SaturatingAdd(NowNs(), std::max<uint64_t>(1'000'000'000, SaturatingMul(recorded, 8)));
  while (c->uses_done() < need && !engine_.abort_.load(std::memory_order_relaxed)) {
    const uint64_t now = NowNs();
    if (now >= deadline) {
      RecordMismatch(op, index, op.result, -ETIME, Mismatch::kWaitTimedOut);
      break;
    }
    WaitUntil(now + 50'000, 0);
  }
  // The original's requests had all completed, and been collected, before its close: the
  // original made no system call here. Those already complete are collected from the ring, those
  // still in flight polled for; a kernel wait is the last resort.
  PollPending(c, SaturatingAdd(NowNs(), std::max<uint64_t>(1'000'000'000,
                                                           SaturatingMul(recorded, 8))));
  MutexLock lock(&c->mu);
  // Every one still in flight is waited for. A kernel wait can return before all it asked for
  // (another thread collected some, or task work ended it), so waits are made until none is
  // left or one collects nothing (it then ran to its watchdog, which counts the miss).
  while (AsyncEngine* e = c->engine()) {
    if (c->pending_count() == 0 || engine_.abort_.load(std::memory_order_relaxed)) break;
    AsyncWait w;  // never waits for more than the ring has in flight
    w.flags = IORING_ENTER_GETEVENTS;
    e->ArmWait(&w, static_cast<unsigned>(std::min<size_t>(c->pending_count(), UINT32_MAX)),
               /*submit=*/false);
    if (w.want == 0 || WaitOutsideLock(c, &w, recorded, &op, index) <= 0) break;
  }
  // Requests that never completed are dropped with the engine.
  c->DropAllPending();
  c->Close();
}

void ReplayEngine::Worker::PollPending(SharedAsyncContext* c, uint64_t deadline) {
  while (!engine_.abort_.load(std::memory_order_relaxed)) {
    MutexLock lock(&c->mu);
    AsyncEngine* e = c->engine();
    if (!e || c->pending_count() == 0) return;
    const int n = e->Reap(comps_, 64, 0);
    if (n > 0) {
      HandleCompletionsLocked(c, n);
      continue;
    }
    lock.Unlock();
    if (NowNs() >= deadline) return;
    WaitUntil(NowNs() + 50'000, 0);
  }
}

SharedAsyncContext* ReplayEngine::Worker::Context(uint32_t context) const {
  return context == model::kNone ? nullptr : engine_.async_contexts_.Get(context).get();
}

AsyncEngine* ReplayEngine::Worker::EngineLocked(uint32_t context, SharedAsyncContext* c,
                                                const Op& op, uint32_t index) {
  if (c->engine() || c->failed() || c->closed()) return c->engine();
  const auto& ctx = model_.async_contexts()[context];
  // The recorded setup size (io_setup nr_events, io_uring_setup entries), so the replayed
  // setup call is the recorded one; never less than the requests seen in flight.
  const unsigned depth = std::max({ctx.max_inflight, ctx.setup_size, 1u});
  auto e = backend_->NewAsyncEngine(ctx.engine, depth, engine_.options_.async);
  if (e.ok()) {
    c->SetEngine(std::move(e).value());
  } else {
    // The recorded ring or context worked in the original: a replay without it is not the
    // workload.
    c->MarkFailed();
    Fail(op, index, fmt::format("cannot set up the asynchronous context ({} requests deep): {}",
                                depth, e.status().ToString()));
  }
  return c->engine();
}

// The end of a call the async engines carry out (setup, submit, wait, a ring's close):
// counted, timed from `t0`, and the thread's pacing moved past it.
void ReplayEngine::Worker::FinishEngineCall(const Op& op, uint32_t index, uint64_t t0) {
  OpStats& s = StatsFor(op);
  s.count++;
  s.latency.Add(NowNs() - t0);
  Complete(op, index, NowNs());
}

// Completions collected by this worker, for requests any worker of the process submitted.
void ReplayEngine::Worker::HandleCompletionsLocked(SharedAsyncContext* c, int n) {
  const uint64_t now = NowNs();
  c->AddCollected(static_cast<uint64_t>(n));
  for (int i = 0; i < n; i++) {
    PendingRequest p;
    if (c->TakePending(comps_[i].token, &p)) AccountRequest(p, comps_[i].res, now);
  }
}

// A request's end (completion or failure to submit): result check and latency, against the
// recorded op of the thread that submitted it.
void ReplayEngine::Worker::AccountRequest(const PendingRequest& p, int64_t res, uint64_t now) {
  const model::Thread& th = model_.threads()[p.thread];
  const Op& op = th.ops[p.index];
  OpStats& s = StatsFor(op);
  s.count++;
  s.latency.Add(now > p.submitted ? now - p.submitted : 0);
  if (res < 0) s.errors++;
  else if (p.moves_data) s.bytes += static_cast<uint64_t>(res);
  if (!op.interrupted) {
    Mismatch mk;
    if (CompareResult(op.result, res, true, &mk)) {
      RecordMismatch(op, p.index, op.result, res, mk, th.tid);
    }
  }
  done_ops.store(done_ops.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// The staged batch could not be submitted: each request ends with `res`.
void ReplayEngine::Worker::FailStagedLocked(SharedAsyncContext* c, int64_t res) {
  const uint64_t now = NowNs();
  for (const AsyncRequest& req : staged_) {
    PendingRequest p;
    if (c->TakePending(req.token, &p)) AccountRequest(p, res, now);
  }
}

size_t ReplayEngine::Worker::QueueStagedLocked(uint32_t context, SharedAsyncContext* c,
                                               AsyncEngine* e) {
  if (staged_ctx_ != context || staged_.empty()) return 0;
  const size_t n = staged_.size();
  for (const AsyncRequest& req : staged_) {
    // A full queue: what is queued goes in, and a completion makes room.
    bool queued;
    while (!(queued = e->Queue(req))) {
      if (e->Flush() < 0) break;
      const int got = e->Reap(comps_, 64, 1);
      if (got <= 0) break;
      HandleCompletionsLocked(c, got);
    }
    PendingRequest p;
    if (!queued && c->TakePending(req.token, &p)) AccountRequest(p, -EAGAIN, NowNs());
  }
  return n;  // the caller empties staged_ once the call is made
}

// Submits the staged batch on its own (io_uring_enter / io_submit), under its context's lock.
void ReplayEngine::Worker::FlushStaged() {
  if (staged_.empty()) return;
  const uint32_t context = staged_ctx_;
  SharedAsyncContext* c = Context(context);
  const size_t n = staged_.size();
  int r = 0;
  {
    MutexLock lock(&c->mu);
    AsyncEngine* e = c->engine();
    if (!e) {
      FailStagedLocked(c, -EBADF);
    } else {
      QueueStagedLocked(context, c, e);
      r = e->Flush();
      if (r < 0) FailStagedLocked(c, r);  // not submitted: the batch ends with the error
    }
  }
  staged_.clear();
  c->Resolved(n);
  if (r < 0 && !IsTransientWaitError(r) && current_ < th_.ops.size()) {
    Fail(th_.ops[current_], current_,
         fmt::format("submitting {} requests on the replayed context failed: {}", n, strerror(-r)));
  }
}

// Polls what has completed on the contexts this worker submitted to (never a system call),
// except a context with a request that a recorded waiting call reaps
// (PendingRequest::reaped_by_call): that call reaps it in the replay. A context another worker
// is using is left to it.
void ReplayEngine::Worker::ReapAvailable() {
  for (uint32_t context : used_) {
    SharedAsyncContext* c = Context(context);
    if (c->pending_count() == 0) continue;
    if (!c->mu.TryLock()) continue;
    MutexLock lock(&c->mu, kAdoptLock);
    AsyncEngine* e = c->engine();
    // Completions a worker waits for in the kernel are left to it, as its recorded call
    // collected them.
    if (!e || c->AwaitsRecordedWait() || c->kernel_waiters() > 0) continue;
    int n;
    while ((n = e->Reap(comps_, 64, 0)) > 0) HandleCompletionsLocked(c, n);
  }
}

// Requests are submitted by whichever worker's recorded call carried them, possibly later in
// the replay than in the original: a waiting call first waits (in user space) until the
// requests the original had completed by the call's end are submitted, so that its wait in the
// kernel is for requests in flight. A wait that cannot end (their submitter stopped, failed or
// was held back) gives up after max(1 s, 8 x the recorded wait), counted as wait_timed_out.
void ReplayEngine::Worker::AwaitSubmissions(SharedAsyncContext* c, const Op& op, uint32_t index,
                                            uint32_t context) {
  const uint64_t need = c->CompletedBy(op.end);
  const uint64_t own = StagedFor(context);
  if (c->resolved() + own >= need) return;
  const uint64_t recorded = op.end != UINT64_MAX && op.end > op.ts ? op.end - op.ts : 0;
  const uint64_t limit = std::max<uint64_t>(1'000'000'000, SaturatingMul(recorded, 8));
  const uint64_t deadline = SaturatingAdd(NowNs(), limit);
  while (c->resolved() + own < need) {
    if (engine_.abort_.load(std::memory_order_relaxed)) return;
    const uint64_t now = NowNs();
    if (now >= deadline) {
      RecordMismatch(op, index, op.result, -ETIME, Mismatch::kWaitTimedOut);
      return;
    }
    WaitUntil(now + 50'000, 0);
  }
}

// A recorded waiting call on an engine that does not replay ring calls one for one
// (io_getevents, or io_uring_enter with --async sync/null): one call that waits for the
// requests the original had completed by `op.end` (io_getevents: at least its min_nr), never
// more than are in flight. Requests still staged are submitted by the same call.
void ReplayEngine::Worker::WaitCompletionsUntil(const Op& op, uint32_t index, uint32_t context,
                                                int max_events) {
  SharedAsyncContext* c = Context(context);
  if (!c) return;
  AwaitSubmissions(c, op, index, context);
  MutexLock lock(&c->mu);
  AsyncEngine* e = c->engine();
  if (!e) {
    const size_t staged = StagedFor(context);
    if (staged) FailStagedLocked(c, -EBADF);
    if (staged) staged_.clear();
    c->Resolved(staged);
    return;
  }
  const size_t staged = QueueStagedLocked(context, c, e);
  const uint64_t completed = c->CompletedBy(op.end);
  uint64_t due = completed > c->collected() ? completed - c->collected() : 0;
  if (GetOpInfo(op.sc.op).async == AsyncCall::kReap) {
    due = std::max<uint64_t>(due, op.sc.aux);  // min_nr
  }
  AsyncWait w;
  w.call = true;
  w.flags = IORING_ENTER_GETEVENTS;
  w.max = max_events;
  e->ArmWait(&w, static_cast<unsigned>(std::min<uint64_t>(due, static_cast<uint64_t>(max_events))),
             /*submit=*/true);
  if (staged) staged_.clear();
  c->Resolved(staged);
  WaitOutsideLock(c, &w, RecordedDuration(op), &op, index);
}

// At the end of the worker's ops: its requests complete before it ends. Polled first (no
// system call: another worker's recorded wait may still collect them); after a second, waited
// for in the kernel; what cannot complete is dropped.
void ReplayEngine::Worker::DrainOwn() {
  FlushStaged();
  for (uint32_t context : used_) {
    SharedAsyncContext* c = Context(context);
    const uint64_t patience = SaturatingAdd(NowNs(), 1'000'000'000);
    while (!engine_.abort_.load(std::memory_order_relaxed)) {
      MutexLock lock(&c->mu);
      AsyncEngine* e = c->engine();
      if (!e || c->PendingOf(thread) == 0) break;
      const bool late = NowNs() >= patience;
      if (late) {
        // Waited for in the kernel (without the lock); what cannot complete is dropped.
        AsyncWait w;
        w.flags = IORING_ENTER_GETEVENTS;
        e->ArmWait(&w, static_cast<unsigned>(std::min<size_t>(c->PendingOf(thread), UINT32_MAX)),
                   /*submit=*/false);
        if (WaitOutsideLock(c, &w, 0, nullptr, 0) > 0) continue;
        // Never completed in the replay: each counted against its op, not dropped unseen.
        for (const PendingRequest& p : c->TakePendingOf(thread)) {
          const Op& op = th_.ops[p.index];
          RecordMismatch(op, p.index, op.result, -ETIME, Mismatch::kWaitTimedOut);
        }
        break;
      }
      const int n = !c->AwaitsRecordedWait() ? e->Reap(comps_, 64, 0) : 0;
      if (n > 0) {
        HandleCompletionsLocked(c, n);
        continue;
      }
      lock.Unlock();
      WaitUntil(NowNs() + 50'000, 0);
    }
  }
}

}  // namespace iotwin::replay
