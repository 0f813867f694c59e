// The sync back end: each recorded call is issued as the same system call (raw syscall(2), so
// that glibc does not turn open into openat or stat into newfstatat), with the recorded flags,
// offsets, lengths and iovec layout, on live descriptors and sandbox paths.
#include <fcntl.h>
#include <linux/openat2.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "format/op_info.h"
#include "model/op_fields.h"
#include "replay/backend.h"
#include "replay/modes.h"
#include "replay/sandbox.h"

namespace iotwin::replay {

namespace {

// volatile: the handler reads it behind the compiler's back (the stores must not be elided).
thread_local sigjmp_buf* volatile t_touch_jmp = nullptr;
struct sigaction g_old_bus, g_old_segv;

void TouchHandler(int sig, siginfo_t* info, void* uctx) {
  if (t_touch_jmp != nullptr) siglongjmp(*t_touch_jmp, 1);
  // Not a guarded touch: behave as if we were never installed.
  struct sigaction& old = sig == SIGBUS ? g_old_bus : g_old_segv;
  if (old.sa_flags & SA_SIGINFO) {
    old.sa_sigaction(sig, info, uctx);
    return;
  }
  if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
    old.sa_handler(sig);
    return;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

inline int64_t Ret(long r) { return r < 0 ? -static_cast<int64_t>(errno) : static_cast<int64_t>(r); }

int64_t Touch(uint8_t* addr, bool write) {
  sigjmp_buf jb;
  // The mask is not saved: the handler runs with SA_NODEFER and an empty sa_mask, so it blocks
  // nothing that a jump out of it would have to restore, and saving it costs an rt_sigprocmask
  // call per touch (0.25 us, 0.77 us with a tracer attached).
  if (sigsetjmp(jb, 0) != 0) {
    t_touch_jmp = nullptr;
    return -EFAULT;
  }
  t_touch_jmp = &jb;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  volatile uint8_t* p = addr;
  uint8_t v = *p;
  if (write) *p = v;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_touch_jmp = nullptr;
  return 0;
}

const void* Off(uint64_t off, loff_t* store) {
  if (off == model::kNoOffset) return nullptr;
  *store = static_cast<loff_t>(off);
  return store;
}

// open(2) accepts and ignores unknown flag bits; openat2(2) refuses them, and refuses any flag
// beside O_DIRECTORY, O_NOFOLLOW and O_CLOEXEC with O_PATH. The replay opens through openat2
// (see sandbox.h), so the recorded flags are cut to what open(2) would have honoured.
uint64_t HonouredOpenFlags(uint64_t flags) {
  constexpr uint64_t kValid = O_ACCMODE | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND |
                              O_NONBLOCK | O_DSYNC | O_SYNC | FASYNC | O_DIRECT | O_LARGEFILE |
                              O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC | O_PATH |
                              __O_TMPFILE;
  flags &= kValid;
  if (flags & O_PATH) flags &= O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  return flags;
}

// bind(2) gives a socket file the socket inode's mode, 0777, less the umask.
constexpr mode_t kSocketFileMode = 0777;

// A confined worker's bind: the same call on a socket of its own, closed at once (the socket file
// is what the trace's later calls use). A path longer than sun_path holds makes the file with
// mknodat instead.
int64_t BindSocketFile(const char* path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const size_t len = strlen(path);
  if (len >= sizeof addr.sun_path) {
    const int64_t r = Ret(syscall(SYS_mknodat, AT_FDCWD, path, S_IFSOCK | kSocketFileMode, 0));
    return r == -EEXIST ? -EADDRINUSE : r;
  }
  memcpy(addr.sun_path, path, len);
  const int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -errno;
  const int64_t r = Ret(bind(s, reinterpret_cast<const sockaddr*>(&addr),
                             static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len + 1)));
  close(s);
  return r;
}

// linkat(AT_FDCWD, "/proc/self/fd/FD", dirfd, name, AT_SYMLINK_FOLLOW), as the workload named
// its descriptor, FD being the replay's own; where /proc is not there (a confined root), the
// same link through AT_EMPTY_PATH.
int64_t LinkThroughProc(int fd, int dirfd, const char* name) {
  char self[64];
  snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
  const int64_t r = Ret(syscall(SYS_linkat, AT_FDCWD, self, dirfd, name, AT_SYMLINK_FOLLOW));
  if (r != -ENOENT || access("/proc/self/fd", F_OK) == 0) return r;
  return Ret(syscall(SYS_linkat, fd, "", dirfd, name, AT_EMPTY_PATH));
}

// Calls that name a path, issued as recorded (same system call, same flags) by a worker confined
// to its base (LiveArgs::in_root: its own root directory, see sandbox.h), on the recorded path.
// `mode`: the mode a creating call passes (modes.h), not the recorded one.
int64_t ConfinedPathCall(const LiveArgs& a, uint32_t mode) {
  const iot_syscall& sc = a.op->sc;
  switch (sc.op) {
#ifdef SYS_open
    case IOT_OP_OPEN: return Ret(syscall(SYS_open, a.path, sc.flags, mode));
    case IOT_OP_CREAT: return Ret(syscall(SYS_creat, a.path, mode));
#else
    case IOT_OP_OPEN: return Ret(syscall(SYS_openat, AT_FDCWD, a.path, sc.flags, mode));
    case IOT_OP_CREAT:
      return Ret(syscall(SYS_openat, AT_FDCWD, a.path, O_CREAT | O_WRONLY | O_TRUNC, mode));
#endif
    case IOT_OP_OPENAT: return Ret(syscall(SYS_openat, a.dirfd, a.path, sc.flags, mode));
    case IOT_OP_OPENAT2: {
      open_how how{};
      how.flags = sc.flags;
      how.mode = sc.flags & (O_CREAT | __O_TMPFILE) ? mode : 0;
      // Paths are absolute in the worker's root: "beneath the dirfd" would reject them.
      how.resolve = model::Openat2Resolve(sc) & ~static_cast<uint64_t>(RESOLVE_BENEATH | RESOLVE_IN_ROOT);
      return Ret(syscall(SYS_openat2, a.dirfd, a.path, &how, sizeof how));
    }
    case IOT_OP_TRUNCATE: return Ret(syscall(SYS_truncate, a.path, model::TruncateLength(sc)));
#ifdef SYS_stat
    case IOT_OP_STAT: {
      struct stat st;
      return Ret(syscall(SYS_stat, a.path, &st));
    }
    case IOT_OP_LSTAT: {
      struct stat st;
      return Ret(syscall(SYS_lstat, a.path, &st));
    }
#endif
    case IOT_OP_NEWFSTATAT: {
      struct stat st;
      return Ret(syscall(SYS_newfstatat, a.dirfd, a.path, &st, sc.flags));
    }
    case IOT_OP_STATX: {
      struct statx stx;
      return Ret(syscall(SYS_statx, a.dirfd, a.path, sc.flags, sc.mode, &stx));
    }
#ifdef SYS_mkdir
    case IOT_OP_MKDIR: return Ret(syscall(SYS_mkdir, a.path, mode));
    case IOT_OP_UNLINK: return Ret(syscall(SYS_unlink, a.path));
    case IOT_OP_RMDIR: return Ret(syscall(SYS_rmdir, a.path));
    case IOT_OP_RENAME: return Ret(syscall(SYS_rename, a.path, a.path2));
    case IOT_OP_LINK: return Ret(syscall(SYS_link, a.path, a.path2));
#endif
    case IOT_OP_MKDIRAT: return Ret(syscall(SYS_mkdirat, a.dirfd, a.path, mode));
    case IOT_OP_UNLINKAT: return Ret(syscall(SYS_unlinkat, a.dirfd, a.path, sc.flags));
    case IOT_OP_RENAMEAT: return Ret(syscall(SYS_renameat, a.dirfd, a.path, a.dirfd2, a.path2));
    case IOT_OP_RENAMEAT2:
      return Ret(syscall(SYS_renameat2, a.dirfd, a.path, a.dirfd2, a.path2, sc.flags));
    case IOT_OP_LINKAT:
      if (a.path != nullptr && a.path[0] == '\0' && !(sc.flags & AT_EMPTY_PATH)) {
        // Recorded as linkat(AT_FDCWD, "/proc/self/fd/N", ...): the replay's descriptor for N.
        return LinkThroughProc(a.dirfd, a.dirfd2, a.path2);
      }
      return Ret(syscall(SYS_linkat, a.dirfd, a.path, a.dirfd2, a.path2, sc.flags));
    case IOT_OP_SYMLINK:
    case IOT_OP_SYMLINKAT:
      // The same call, from inside the link's directory: where the kernel puts the link (its
      // directory may be reached through a symlink) decides the text (Sandbox::SymlinkInRoot).
      return a.sandbox ? a.sandbox->SymlinkInRoot(a.path, a.path2, sc.op == IOT_OP_SYMLINKAT)
                       : -EPERM;
    case IOT_OP_CHDIR: return Ret(syscall(SYS_chdir, a.path));
    case IOT_OP_BIND: return BindSocketFile(a.path);
    default: return -ENOSYS;
  }
}

// Calls that name a path, from a worker that could not be confined: resolved beneath the base
// with openat2 (one more call than recorded, sometimes another system call; see sandbox.h).
int64_t OpenCall(const LiveArgs& a, uint32_t mode) {
  if (a.in_root) return ConfinedPathCall(a, mode);
  if (!a.sandbox) return -EPERM;
  const iot_syscall& sc = a.op->sc;
  uint64_t flags = sc.flags, resolve = 0;
  if (sc.op == IOT_OP_CREAT) flags = O_CREAT | O_WRONLY | O_TRUNC;
  if (sc.op == IOT_OP_OPENAT2) resolve = model::Openat2Resolve(sc);
  return a.sandbox->OpenFile(a.path, HonouredOpenFlags(flags), mode, resolve);
}

int64_t StatCall(const LiveArgs& a) {
  const iot_syscall& sc = a.op->sc;
  if (a.in_root) return ConfinedPathCall(a, 0);
  if (a.path != nullptr && a.path[0] == '\0') {
    // AT_EMPTY_PATH: the object is a live descriptor, no name is resolved.
    if (sc.op == IOT_OP_STATX) {
      struct statx stx;
      return Ret(syscall(SYS_statx, a.dirfd, "", sc.flags, sc.mode, &stx));
    }
    struct stat st;
    return Ret(syscall(SYS_newfstatat, a.dirfd, "", &st, sc.flags));
  }
  if (!a.sandbox) return -EPERM;
  struct stat st;
  switch (sc.op) {
    case IOT_OP_STAT: return a.sandbox->Stat(a.path, true, &st);
    case IOT_OP_LSTAT: return a.sandbox->Stat(a.path, false, &st);
    case IOT_OP_NEWFSTATAT:
      return a.sandbox->Stat(a.path, (sc.flags & AT_SYMLINK_NOFOLLOW) == 0, &st);
    default: {
      struct statx stx;
      return a.sandbox->Statx(a.path, static_cast<int>(sc.flags), sc.mode, &stx);
    }
  }
}

int64_t NameCall(const LiveArgs& a, uint32_t mode) {
  if (a.in_root) return ConfinedPathCall(a, mode);
  if (!a.sandbox) return -EPERM;
  const Sandbox& sb = *a.sandbox;
  const iot_syscall& sc = a.op->sc;
  switch (sc.op) {
    case IOT_OP_MKDIR:
    case IOT_OP_MKDIRAT: return sb.Mkdir(a.path, mode);
    case IOT_OP_UNLINK: return sb.Unlink(a.path, 0);
    case IOT_OP_UNLINKAT: return sb.Unlink(a.path, static_cast<int>(sc.flags) & AT_REMOVEDIR);
    case IOT_OP_RMDIR: return sb.Unlink(a.path, AT_REMOVEDIR);
    case IOT_OP_RENAME:
    case IOT_OP_RENAMEAT: return sb.Rename(a.path, a.path2, 0);
    case IOT_OP_RENAMEAT2: return sb.Rename(a.path, a.path2, sc.flags);
    case IOT_OP_LINK: return sb.Link(a.path, a.path2, false);
    case IOT_OP_LINKAT:
      if (a.path != nullptr && a.path[0] == '\0') {
        return sb.LinkDescriptor(a.dirfd, a.path2, !(sc.flags & AT_EMPTY_PATH));
      }
      return sb.Link(a.path, a.path2, (sc.flags & AT_SYMLINK_FOLLOW) != 0);
    case IOT_OP_SYMLINK:
    case IOT_OP_SYMLINKAT: return sb.Symlink(a.path, a.path2);
    case IOT_OP_CHDIR: return sb.Chdir(a.path);
    case IOT_OP_BIND: return sb.MakeSocketFile(a.path, kSocketFileMode);
    default: return -ENOSYS;
  }
}

// rename, exchange and link give a file another name, perhaps less deep below the base than the
// old one: the symlinks there are kept from climbing out of it (Sandbox::ClampMovedLinks).
int64_t NewNameCall(const LiveArgs& a) {
  if (a.sandbox != nullptr && !a.sandbox->MayGiveNewNames()) return -ELOOP;
  const int64_t r = NameCall(a, 0);
  if (r == 0 && a.sandbox != nullptr) {
    a.sandbox->ClampMovedLinks(a.path2, a.in_root);
    const iot_syscall& sc = a.op->sc;
    if (model::RenameExchanges(sc)) {
      a.sandbox->ClampMovedLinks(a.path, a.in_root);
    }
  }
  return r;
}

// ---- locks (docs/replay.md, "Locks") ----
// The replay is one process, so POSIX record locks, which belong to a process, would all belong
// to it and never conflict: they are replayed as locks of the open file description, which each
// recorded open has its own of, as each recorded process has its own POSIX locks.
int OfdLockCommand(int cmd) {
  switch (cmd) {
    case F_GETLK: return F_OFD_GETLK;
    case F_SETLK: return F_OFD_SETLK;
    case F_SETLKW: return F_OFD_SETLKW;
    default: return cmd;
  }
}

struct flock RecordedFlock(const iot_syscall& sc) {
  struct flock fl{};
  fl.l_type = static_cast<short>(model::LockType(sc));
  fl.l_whence = static_cast<short>(model::LockWhence(sc));
  fl.l_start = static_cast<off_t>(model::LockStart(sc));
  fl.l_len = static_cast<off_t>(model::LockLength(sc));
  fl.l_pid = 0;  // OFD commands require 0
  return fl;
}

uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// A lock the original waited for is taken without waiting, retried until it is free: the holder
// releases it when its recorded unlock is replayed (lock ops are ordered by the model), but an
// unlock that never comes (an implicit release the replay does not make the same way) must not
// hang the replay. The wait is bounded by 10 s or 4 times the original's wait, whichever is
// longer; then the call fails with EDEADLK, which the report shows as a mismatch.
constexpr uint64_t kLockWaitFloorNs = 10'000'000'000ull;

template <typename TryOnce>
int64_t WaitForLock(const iot_syscall& sc, TryOnce try_once) {
  uint64_t bound = kLockWaitFloorNs;
  uint64_t scaled;
  if (!__builtin_mul_overflow(sc.dur, uint64_t{4}, &scaled)) bound = std::max(bound, scaled);
  const uint64_t start = MonotonicNs();
  uint64_t deadline;
  if (__builtin_add_overflow(start, bound, &deadline)) deadline = UINT64_MAX;
  long pause_ns = 50'000;
  for (;;) {
    int64_t r = try_once();
    if (r != -EAGAIN && r != -EACCES && r != -EWOULDBLOCK) return r;
    if (MonotonicNs() >= deadline) return -EDEADLK;
    timespec ts{0, pause_ns};
    nanosleep(&ts, nullptr);
    pause_ns = std::min(pause_ns * 2, 5'000'000L);
  }
}

// Live descriptors through which POSIX locks (replayed as OFD locks) were taken: closing any of
// them releases them, as closing a descriptor releases its process's POSIX locks on the file.
class PosixLockOwners {
 public:
  void Add(int fd) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    if (fds_.insert(fd).second) count_.fetch_add(1, std::memory_order_relaxed);
  }
  // Before `fd` is closed or replaced: releases what was taken through it.
  void Release(int fd) EXCLUDES(mu_) {
    // count_ mirrors fds_.size() (changed under mu_): read without the lock as the fast path of
    // every close, it can only be stale for a descriptor another worker is adding meanwhile,
    // whose close cannot be this one.
    if (fd < 0 || count_.load(std::memory_order_relaxed) == 0) return;
    {
      MutexLock lock(&mu_);
      if (fds_.erase(fd) == 0) return;
      count_.fetch_sub(1, std::memory_order_relaxed);
    }
    // On a thread of its own: the release is the replayer's bookkeeping (the original's close
    // did it), and --record keeps only the workers' calls. Closes of descriptors that took
    // locks are few (a database's files, once each).
    std::thread([fd] {
      struct flock all{};
      all.l_type = F_UNLCK;
      all.l_whence = SEEK_SET;
      fcntl(fd, F_OFD_SETLK, &all);
    }).join();
  }

 private:
  Mutex mu_;
  std::unordered_set<int> fds_ GUARDED_BY(mu_);
  std::atomic<size_t> count_{0};
};

int64_t FcntlLockCall(const LiveArgs& a, PosixLockOwners* owners) {
  const iot_syscall& sc = a.op->sc;
  const int recorded_cmd = model::FcntlCmd(sc);
  const bool posix = recorded_cmd == F_GETLK || recorded_cmd == F_SETLK || recorded_cmd == F_SETLKW;
  const int cmd = OfdLockCommand(recorded_cmd);
  struct flock fl = RecordedFlock(sc);
  if (!model::FcntlIsLockQuery(recorded_cmd) && fl.l_type != F_UNLCK && a.recorded < 0) {
    // Refused in the trace: only asked here, so the replay never holds a lock the original did
    // not. A conflict reproduces the recorded error; none is reported as success (a mismatch).
    struct flock q = fl;
    if (fcntl(a.fd, F_OFD_GETLK, &q) < 0) return -static_cast<int64_t>(errno);
    return q.l_type == F_UNLCK ? 0 : a.recorded;
  }
  int64_t r;
  if (model::FcntlLockWaits(recorded_cmd)) {
    r = WaitForLock(sc, [&] {
      struct flock f = fl;
      return Ret(fcntl(a.fd, F_OFD_SETLK, &f));
    });
  } else {
    r = Ret(fcntl(a.fd, cmd, &fl));
  }
  if (r == 0 && posix && !model::FcntlIsLockQuery(recorded_cmd) && fl.l_type != F_UNLCK) {
    owners->Add(a.fd);
  }
  return r;
}

int64_t FlockCall(const LiveArgs& a) {
  const int operation = model::FlockOperation(a.op->sc);
  const bool unlock = (operation & ~LOCK_NB) == LOCK_UN;
  if (!unlock && a.recorded < 0) {
    // Refused in the trace: asked through a description of its own, released at its close.
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", a.fd);
    int probe = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (probe < 0) return -ENOLCK;
    int64_t r = Ret(flock(probe, operation | LOCK_NB));
    close(probe);
    return r == 0 ? 0 : a.recorded;
  }
  if (!unlock && !(operation & LOCK_NB)) {
    return WaitForLock(a.op->sc, [&] { return Ret(flock(a.fd, operation | LOCK_NB)); });
  }
  return Ret(flock(a.fd, operation));
}

// A recorded mmap. MAP_FIXED goes only where the engine vouched for the address (inside a mapping
// of its own, a.addr). Elsewhere the original's target was memory the replay does not recreate,
// typically the anonymous PROT_NONE reservation the dynamic loader makes before it maps a library
// whose segments are aligned beyond the page size: the replay reserves a region of its own the
// same way and maps into it, so the call is still MAP_FIXED, as recorded. MAP_FIXED_NOREPLACE
// cannot go into a reservation; without a vouched address the kernel picks the place.
int64_t MapAsRecorded(const LiveArgs& a) {
  const iot_syscall& sc = a.op->sc;
  uint32_t flags = sc.flags;
  void* at = a.addr;
  void* reserved = nullptr;
  if (at == nullptr && (flags & MAP_FIXED) && !(flags & MAP_FIXED_NOREPLACE) && sc.length > 0) {
    reserved = mmap(nullptr, sc.length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                    0);
    if (reserved == MAP_FAILED) reserved = nullptr;
    at = reserved;
  }
  if (at == nullptr) flags &= ~static_cast<uint32_t>(MAP_FIXED | MAP_FIXED_NOREPLACE);
  void* p = mmap(at, sc.length, static_cast<int>(sc.mode), static_cast<int>(flags), a.fd,
                 static_cast<off_t>(sc.offset));
  if (p == MAP_FAILED) {
    const int err = errno;
    if (reserved) munmap(reserved, sc.length);
    return -static_cast<int64_t>(err);
  }
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(p));
}

class SyncBackend final : public Backend {
 public:
  explicit SyncBackend(bool keep_modes) : keep_modes_(keep_modes) {}
  const char* name() const override { return "sync"; }

  int64_t Execute(const LiveArgs& a) override {
    const model::Op& op = *a.op;
    if (op.kind == model::OpKind::kPageFault) {
      return Touch(a.addr, (op.pf.flags & IOT_PFF_WRITE) != 0);
    }
    const iot_syscall& sc = op.sc;
    // Async set-up and reaping belong to the async engines; splice is not replayed.
    if (GetOpInfo(sc.op).replay != OpReplay::kReissued) return -ENOSYS;
    switch (sc.op) {
      case IOT_OP_OPEN:
      case IOT_OP_OPENAT:
      case IOT_OP_OPENAT2:
      case IOT_OP_CREAT:
        return OpenCall(a, AppliedMode(sc.mode, keep_modes_));
      case IOT_OP_CLOSE:
        posix_locks_.Release(a.fd);
        return Ret(syscall(SYS_close, a.fd));
      case IOT_OP_CLOSE_RANGE: {
        int64_t r = 0;
        for (int i = 0; i < a.nfds; i++) {
          if (!(sc.flags & CLOSE_RANGE_CLOEXEC)) posix_locks_.Release(a.fds[i]);
          int64_t x = Ret(syscall(SYS_close_range, a.fds[i], a.fds[i], sc.flags));
          if (x < 0) r = x;
        }
        return r;
      }
      case IOT_OP_DUP: return Ret(syscall(SYS_dup, a.fd));
      case IOT_OP_DUP2:
        if (a.fd2 != a.fd) posix_locks_.Release(a.fd2);  // the kernel closes what was there
#ifdef SYS_dup2
        return Ret(syscall(SYS_dup2, a.fd, a.fd2));
#else
        return Ret(syscall(SYS_dup3, a.fd, a.fd2, 0));
#endif
      case IOT_OP_DUP3:
        posix_locks_.Release(a.fd2);
        return Ret(syscall(SYS_dup3, a.fd, a.fd2, sc.flags));
      case IOT_OP_FCNTL: {
        if (model::FcntlIsLock(model::FcntlCmd(sc))) return FcntlLockCall(a, &posix_locks_);
        uint64_t arg = model::FcntlArg(sc);
        return Ret(syscall(SYS_fcntl, a.fd, model::FcntlCmd(sc), arg));
      }
      case IOT_OP_FLOCK: return FlockCall(a);
      case IOT_OP_READ: return Ret(syscall(SYS_read, a.fd, a.buf, a.len));
      case IOT_OP_WRITE: return Ret(syscall(SYS_write, a.fd, a.buf, a.len));
      case IOT_OP_PREAD64: return Ret(syscall(SYS_pread64, a.fd, a.buf, a.len, sc.offset));
      case IOT_OP_PWRITE64: return Ret(syscall(SYS_pwrite64, a.fd, a.buf, a.len, sc.offset));
      case IOT_OP_READV: return Ret(syscall(SYS_readv, a.fd, a.iov, a.iovcnt));
      case IOT_OP_WRITEV: return Ret(syscall(SYS_writev, a.fd, a.iov, a.iovcnt));
      case IOT_OP_PREADV:
        return Ret(syscall(SYS_preadv, a.fd, a.iov, a.iovcnt, sc.offset, 0));
      case IOT_OP_PWRITEV:
        return Ret(syscall(SYS_pwritev, a.fd, a.iov, a.iovcnt, sc.offset, 0));
      case IOT_OP_PREADV2:
        return Ret(syscall(SYS_preadv2, a.fd, a.iov, a.iovcnt, static_cast<long>(sc.offset), 0,
                           sc.flags));
      case IOT_OP_PWRITEV2:
        return Ret(syscall(SYS_pwritev2, a.fd, a.iov, a.iovcnt, static_cast<long>(sc.offset), 0,
                           sc.flags));
      case IOT_OP_LSEEK:
        return Ret(syscall(SYS_lseek, a.fd, static_cast<long>(sc.offset), model::Whence(sc)));
      case IOT_OP_FSYNC: return Ret(syscall(SYS_fsync, a.fd));
      case IOT_OP_FDATASYNC: return Ret(syscall(SYS_fdatasync, a.fd));
      case IOT_OP_SYNC_FILE_RANGE:
        return Ret(syscall(SYS_sync_file_range, a.fd, sc.offset, sc.length, sc.flags));
      case IOT_OP_SYNCFS: return Ret(syscall(SYS_syncfs, a.fd));
      case IOT_OP_SYNC: return Ret(syscall(SYS_sync));
      case IOT_OP_FALLOCATE:
        return Ret(syscall(SYS_fallocate, a.fd, model::FallocateMode(sc), sc.offset, sc.length));
      case IOT_OP_FTRUNCATE: return Ret(syscall(SYS_ftruncate, a.fd, model::TruncateLength(sc)));
      case IOT_OP_TRUNCATE:
        if (a.in_root) return ConfinedPathCall(a, 0);
        if (!a.sandbox) return -EPERM;
        return a.sandbox->Truncate(a.path, static_cast<int64_t>(model::TruncateLength(sc)));
      case IOT_OP_FADVISE64:
        return Ret(syscall(SYS_fadvise64, a.fd, sc.offset, sc.length, model::Advice(sc)));
      case IOT_OP_READAHEAD: return Ret(syscall(SYS_readahead, a.fd, sc.offset, sc.length));
      case IOT_OP_COPY_FILE_RANGE: {
        loff_t in_off, out_off;
        const void* pin = Off(sc.offset, &in_off);
        const void* pout = Off(model::CopyOutOffset(sc), &out_off);
        return Ret(syscall(SYS_copy_file_range, a.fd, pin, a.fd2, pout, sc.length, sc.flags));
      }
      case IOT_OP_SENDFILE: {
        // sendfile(out_fd, in_fd, ...): fd is the source it reads (DataFd), fd2 the destination.
        loff_t off;
        const void* p = Off(sc.offset, &off);
        return Ret(syscall(SYS_sendfile, a.fd2, a.fd, p, sc.length));
      }
      case IOT_OP_MMAP: return MapAsRecorded(a);
      case IOT_OP_MUNMAP: return Ret(syscall(SYS_munmap, a.addr, a.mem_len));
      case IOT_OP_MSYNC: return Ret(syscall(SYS_msync, a.addr, a.mem_len, sc.flags));
      case IOT_OP_MADVISE:
        return Ret(syscall(SYS_madvise, a.addr, a.mem_len, model::MadviseAdvice(sc)));
      case IOT_OP_MREMAP: {
        int flags = static_cast<int>(sc.flags) & MREMAP_MAYMOVE;
        void* p = mremap(a.addr, a.mem_len, model::MremapNewLength(sc), flags);
        if (p == MAP_FAILED) return -static_cast<int64_t>(errno);
        return static_cast<int64_t>(reinterpret_cast<uintptr_t>(p));
      }
      case IOT_OP_FSTAT: {
        struct stat st;
        return Ret(syscall(SYS_fstat, a.fd, &st));
      }
      case IOT_OP_STAT:
      case IOT_OP_LSTAT:
      case IOT_OP_NEWFSTATAT:
      case IOT_OP_STATX:
        return StatCall(a);
      case IOT_OP_GETDENTS64: return Ret(syscall(SYS_getdents64, a.fd, a.buf, a.len));
      case IOT_OP_MKDIR:
      case IOT_OP_MKDIRAT:
      case IOT_OP_UNLINK:
      case IOT_OP_UNLINKAT:
      case IOT_OP_RMDIR:
      case IOT_OP_SYMLINK:
      case IOT_OP_SYMLINKAT:
      case IOT_OP_CHDIR:
      case IOT_OP_BIND:
        return NameCall(a, AppliedMode(sc.mode, keep_modes_));
      case IOT_OP_RENAME:
      case IOT_OP_RENAMEAT:
      case IOT_OP_RENAMEAT2:
      case IOT_OP_LINK:
      case IOT_OP_LINKAT:
        return NewNameCall(a);
      case IOT_OP_FCHDIR: return Ret(syscall(SYS_fchdir, a.fd));
      default:
        return -ENOSYS;
    }
  }

  int CloneFd(int fd) override { return fcntl(fd, F_DUPFD_CLOEXEC, 0); }
  void CloseFd(int fd) override {
    if (fd < 0) return;
    posix_locks_.Release(fd);  // exit, exec, a replaced descriptor: POSIX locks go with it
    close(fd);
  }
  uint8_t* MapFile(const Sandbox* sandbox, const std::string& path, uint64_t length,
                   uint32_t prot, uint32_t flags, uint64_t offset) override {
    if (!sandbox) return nullptr;
    int mode = (prot & PROT_WRITE) && (flags & MAP_SHARED) ? O_RDWR : O_RDONLY;
    int fd = sandbox->OpenFile(path, static_cast<uint64_t>(mode) | O_CLOEXEC, 0);
    if (fd < 0) return nullptr;
    void* p = mmap(nullptr, length, static_cast<int>(prot),
                   static_cast<int>(flags & ~static_cast<uint32_t>(MAP_FIXED | MAP_FIXED_NOREPLACE)),
                   fd, static_cast<off_t>(offset));
    close(fd);
    return p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  }
  void Unmap(uint8_t* addr, uint64_t length) override {
    if (addr) munmap(addr, length);
  }
  Result<std::unique_ptr<AsyncEngine>> NewAsyncEngine(uint8_t engine, unsigned depth,
                                                      AsyncKind kind) override;

 private:
  const bool keep_modes_;  // --keep-modes (modes.h)
  PosixLockOwners posix_locks_;
};

}  // namespace

// Defined in async_engines.cc.
Result<std::unique_ptr<AsyncEngine>> MakeUringEngine(unsigned depth);
Result<std::unique_ptr<AsyncEngine>> MakeLibaioEngine(unsigned depth);
std::unique_ptr<AsyncEngine> MakeSyncAsyncEngine();
std::unique_ptr<AsyncEngine> MakeNullAsyncEngine();

Result<std::unique_ptr<AsyncEngine>> SyncBackend::NewAsyncEngine(uint8_t engine, unsigned depth,
                                                                 AsyncKind kind) {
  switch (kind) {
    case AsyncKind::kNull: return MakeNullAsyncEngine();
    case AsyncKind::kSync: return MakeSyncAsyncEngine();
    case AsyncKind::kNative:
      if (engine == IOT_AIO_ENGINE_LIBAIO) return MakeLibaioEngine(depth);
      return MakeUringEngine(depth);
  }
  return MakeSyncAsyncEngine();
}

void InstallTouchGuards() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa{};
    sa.sa_sigaction = TouchHandler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_old_bus);
    sigaction(SIGSEGV, &sa, &g_old_segv);
  });
}

std::unique_ptr<Backend> MakeSyncBackend(bool keep_modes) {
  InstallTouchGuards();
  return std::make_unique<SyncBackend>(keep_modes);
}

namespace {

class NullBackend final : public Backend {
 public:
  const char* name() const override { return "null"; }
  int64_t Execute(const LiveArgs& a) override { return a.recorded; }
  int CloneFd(int fd) override { return fd; }
  void CloseFd(int) override {}
  uint8_t* MapFile(const Sandbox*, const std::string&, uint64_t, uint32_t, uint32_t,
                   uint64_t) override {
    return reinterpret_cast<uint8_t*>(uintptr_t{1} << 40);  // never touched
  }
  void Unmap(uint8_t*, uint64_t) override {}
  Result<std::unique_ptr<AsyncEngine>> NewAsyncEngine(uint8_t, unsigned, AsyncKind) override {
    return MakeNullAsyncEngine();
  }
};

}  // namespace

std::unique_ptr<Backend> MakeNullBackend() { return std::make_unique<NullBackend>(); }

}  // namespace iotwin::replay
