// Back ends: what actually performs a replayed operation.
//
// The engine (engine.h) resolves every recorded argument into a LiveArgs (live descriptors,
// target paths, buffers, live addresses) and hands it to Backend::Execute, which returns what
// the call returned (>= 0, or -errno). Descriptor-table bookkeeping that the kernel did
// implicitly in the original (copies at fork, close-on-exec, unmapping at exec) goes through
// CloneFd/CloseFd/MapFile/Unmap so that a null back end can stand in for everything.
// Asynchronous requests go to an AsyncEngine (one per recorded io_uring instance / libaio
// context, shared by the workers of its process: async_contexts.h): io_uring through liburing,
// libaio through libaio, a synchronous fallback that executes requests at submission, and a
// null engine. An engine is not thread-safe; its users hold its context's lock, except for the
// one call that waits in the kernel (ArmWait / BlockWait / FinishWait).
//
//   sync   real system calls, the same call as recorded (open stays open, pwritev2 stays
//          pwritev2 with its RWF flags, ...).
//   null   nothing is executed: results are the recorded ones, so the scheduler, pacing and
//          dependency machinery can be measured and tested alone.
#pragma once

#include <fcntl.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/trace_model.h"
#include "replay/options.h"

namespace iotwin::replay {

class Sandbox;

struct LiveArgs {
  const model::Op* op = nullptr;
  const Sandbox* sandbox = nullptr;  // resolves every path (sandbox.h); none: path calls fail
  // The calling worker is confined to its base (its own root directory): `path`/`path2` are the
  // recorded absolute paths, issued as recorded. Otherwise they are mapped targets, resolved
  // through `sandbox`.
  bool in_root = false;
  int fd = -1;              // live descriptor of DataFd
  int fd2 = -1;             // live second descriptor (copy_file_range out, sendfile out, dup2 new)
  int dirfd = AT_FDCWD;     // live dirfd of the first path (AT_FDCWD when the path is absolute)
  int dirfd2 = AT_FDCWD;
  const char* path = nullptr;   // mapped target path ("" for AT_EMPTY_PATH calls)
  const char* path2 = nullptr;  // second target path; symlink: the rewritten link target is `path`
                                //   (confined: the absolute target in the worker's root)
  uint8_t* buf = nullptr;       // read destination / write source, at least `len` bytes
  uint64_t len = 0;
  const iovec* iov = nullptr;
  int iovcnt = 0;
  uint8_t* addr = nullptr;      // memory ops: live address (munmap/msync/madvise/mremap/faults)
  uint64_t mem_len = 0;
  const int* fds = nullptr;     // close_range: the live descriptors to close, one call each
  int nfds = 0;
  int64_t recorded = 0;         // recorded result (used by the null back end)
};

// One asynchronous request (io_uring SQE / libaio iocb).
struct AsyncRequest {
  uint64_t token = 0;
  uint8_t engine = 0;  // IOT_AIO_ENGINE_*
  uint8_t opcode = 0;  // as recorded: IORING_OP_* or IOCB_CMD_*
  int fd = -1;
  uint64_t offset = 0;
  uint8_t* buf = nullptr;
  uint64_t len = 0;
  // Vectored requests: the recorded iovec lengths (TraceModel::extra(); none: one iovec).
  const uint64_t* iov_lens = nullptr;
  uint32_t iov_count = 0;
  uint32_t rw_flags = 0;
  // io_uring: the recorded IOSQE_IO_LINK, IOSQE_IO_HARDLINK, IOSQE_IO_DRAIN and IOSQE_ASYNC
  // (a chain's order and its cancellations are part of the workload).
  uint8_t sqe_flags = 0;
  int64_t recorded = 0;
};
struct AsyncCompletion {
  uint64_t token = 0;
  int64_t res = 0;
  uint32_t slot = 0;  // engine-private (libaio: the request's slot, released when taken)
};

// One wait in the kernel made without the context's lock (AsyncEngine::ArmWait): what to
// submit, how many completions to wait for, and what the call returned and took.
struct AsyncWait {
  static constexpr int kMaxTaken = 64;
  bool call = false;        // make the system call even with nothing to wait for (a recorded call)
  bool submit = false;      // engines without a wait of their own: FinishWait submits first
  unsigned to_submit = 0;   // io_uring: entries published for the call to submit
  unsigned want = 0;        // completions to wait for (never more than can still come)
  unsigned flags = 0;       // io_uring_enter flags as recorded
  int max = kMaxTaken;      // libaio: events the call may take (the recorded nr)
  int result = 0;           // the call's result: a count or -errno (-ETIME: the slice ended)
  int taken = 0;            // libaio: completions the call took, in `completions`
  AsyncCompletion completions[kMaxTaken];
};

class AsyncEngine {
 public:
  virtual ~AsyncEngine() = default;
  virtual const char* name() const = 0;
  // Queues a request for the next Flush; false when the submission queue is full.
  virtual bool Queue(const AsyncRequest& req) = 0;
  // Submits everything queued in one call (io_uring_enter / io_submit); returns the number
  // submitted or -errno.
  virtual int Flush() = 0;
  // Collects completions into `out` (at most `max`), waiting until at least `min_wait` are
  // available. Returns the number collected or -errno.
  virtual int Reap(AsyncCompletion* out, int max, int min_wait) = 0;
  // Submits everything queued, then collects as Reap does.
  virtual int SubmitAndReap(AsyncCompletion* out, int max, int min_wait) {
    if (queued() > 0) {
      int r = Flush();
      if (r < 0) return r;
    }
    return Reap(out, max, min_wait);
  }
  virtual unsigned queued() const = 0;
  // Whether recorded io_uring_enter and io_uring_register calls are replayed one for one on
  // this engine (ArmWait with the recorded flags, Register) instead of by what the requests
  // need.
  virtual bool replays_ring_calls() const { return false; }
  // A recorded io_uring_register(fd, opcode, arg, nr_args): the result, or -EOPNOTSUPP for an
  // opcode whose argument the trace does not hold (only a probe can be reissued).
  virtual int Register(unsigned /*opcode*/, unsigned /*nr_args*/) { return -EOPNOTSUPP; }

  // ---- waiting without the context's lock ----
  // A wait in the kernel must not hold the lock the submitters need (the original's reaping
  // thread did not hold its ring's submission lock while it waited), so it is three steps:
  //   ArmWait    (lock held) publishes what is queued when `submit` (io_uring: made visible to
  //              the kernel, submitted by the call; libaio: io_submit now) and bounds the wait
  //              to the completions that can still come;
  //   BlockWait  (lock NOT held) the one system call: io_uring_enter(ring fd, to_submit, want,
  //              flags) or io_getevents(ctx, want, max); it touches no user-space state the
  //              locked steps touch, and returns -ETIME after `timeout_ns`;
  //   FinishWait (lock held) accounts what the call submitted and collects what completed.
  // The engine must stay alive across BlockWait (the context lends it: async_contexts.h).
  // Engines without a wait of their own to make without the lock (sync and null, which carry
  // requests out at Flush and never block) submit and reap in FinishWait.
  virtual void ArmWait(AsyncWait* w, unsigned min_complete, bool submit) {
    w->submit = submit;
    w->want = min_complete;
  }
  virtual int BlockWait(AsyncWait* w, uint64_t /*timeout_ns*/) { return w->result = 0; }
  virtual int FinishWait(AsyncWait* w, AsyncCompletion* out, int max) {
    const int want = static_cast<int>(std::min<unsigned>(w->want, static_cast<unsigned>(max)));
    const int n = w->submit ? SubmitAndReap(out, max, want) : Reap(out, max, want);
    w->submit = false;
    w->want = 0;
    return n;
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Performs one recorded system call (kSyscall) or page touch (kPageFault).
  virtual int64_t Execute(const LiveArgs& a) = 0;
  // Bookkeeping the kernel did implicitly in the original.
  virtual int CloneFd(int fd) = 0;    // a copy for a forked child's table
  virtual void CloseFd(int fd) = 0;
  // Maps the file at mapped target `path`, opened through `sandbox`; nullptr on failure.
  virtual uint8_t* MapFile(const Sandbox* sandbox, const std::string& path, uint64_t length,
                           uint32_t prot, uint32_t flags, uint64_t offset) = 0;
  virtual void Unmap(uint8_t* addr, uint64_t length) = 0;
  // An async engine for recorded engine kind `engine` (IOT_AIO_ENGINE_*) with room for `depth`
  // requests in flight.
  virtual Result<std::unique_ptr<AsyncEngine>> NewAsyncEngine(uint8_t engine, unsigned depth,
                                                              AsyncKind kind) = 0;
};

// `keep_modes`: group and other write of recorded modes are applied (modes.h).
std::unique_ptr<Backend> MakeSyncBackend(bool keep_modes = false);
std::unique_ptr<Backend> MakeNullBackend();

// A worker waiting in the kernel on an async context (AsyncEngine::BlockWait) is woken by a
// signal whose handler does nothing: its wait returns EINTR, and the worker sees a stop.
// InstallWaitWakeup installs the handler (idempotent; before any WakeWaiter); WakeWaiter
// signals replay thread `tid`.
void InstallWaitWakeup();
void WakeWaiter(pid_t tid);

// Page touches can hit SIGBUS (the file is shorter than the mapping) or SIGSEGV (mapping gone):
// the sync back end recovers from both in the touching thread and reports -EFAULT. Installs the
// handlers once (idempotent).
void InstallTouchGuards();

}  // namespace iotwin::replay
