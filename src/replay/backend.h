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
// null engine. An engine is not thread-safe; its users hold its context's lock.
//
//   sync   real system calls, the same call as recorded (open stays open, pwritev2 stays
//          pwritev2 with its RWF flags, ...).
//   null   nothing is executed: results are the recorded ones, so the scheduler, pacing and
//          dependency machinery can be measured and tested alone.
#pragma once

#include <fcntl.h>
#include <sys/uio.h>

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
  int64_t recorded = 0;
};
struct AsyncCompletion {
  uint64_t token = 0;
  int64_t res = 0;
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
  // Submits everything queued and waits until `min_wait` completions are available, then collects
  // them: a recorded io_uring_enter(to_submit, min_complete, GETEVENTS) is one system call, and
  // so must its replay be. Engines without a combined call submit, then reap.
  virtual int SubmitAndReap(AsyncCompletion* out, int max, int min_wait) {
    if (queued() > 0) {
      int r = Flush();
      if (r < 0) return r;
    }
    return Reap(out, max, min_wait);
  }
  // A recorded waiting call (io_getevents(ctx, min_nr, nr)): always one system call, which
  // waits until `min_wait` completions are available (never more than the requests in flight,
  // so it cannot wait for ever), then collects them. Engines without such a call reap.
  virtual int Wait(AsyncCompletion* out, int max, int min_wait) {
    return SubmitAndReap(out, max, min_wait);
  }
  virtual unsigned queued() const = 0;
  // Whether recorded io_uring_enter and io_uring_register calls are replayed one for one on
  // this engine (Enter, Register) instead of by what the requests need (SubmitAndReap).
  virtual bool replays_ring_calls() const { return false; }
  // A recorded io_uring_enter(fd, to_submit, min_complete, flags) as one call: submits what is
  // queued (the requests the recorded call carried), with the recorded IORING_ENTER_GETEVENTS
  // flag and min_complete (never more than the requests submitted and not yet collected, so it
  // cannot wait for ever), then collects what the completion ring holds without a system call.
  // Returns the completions collected or -errno.
  virtual int Enter(unsigned min_complete, unsigned flags, AsyncCompletion* out, int max) {
    return SubmitAndReap(out, max, (flags & 1u) ? static_cast<int>(min_complete) : 0);
  }
  // A recorded io_uring_register(fd, opcode, arg, nr_args): the result, or -EOPNOTSUPP for an
  // opcode whose argument the trace does not hold (only a probe can be reissued).
  virtual int Register(unsigned /*opcode*/, unsigned /*nr_args*/) { return -EOPNOTSUPP; }
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

// Page touches can hit SIGBUS (the file is shorter than the mapping) or SIGSEGV (mapping gone):
// the sync back end recovers from both in the touching thread and reports -EFAULT. Installs the
// handlers once (idempotent).
void InstallTouchGuards();

}  // namespace iotwin::replay
