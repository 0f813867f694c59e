// The sync back end: each recorded call is issued as the same system call (raw syscall(2), so
// that glibc does not turn open into openat or stat into newfstatat), with the recorded flags,
// offsets, lengths and iovec layout, on live descriptors and sandbox paths.
#include <linux/openat2.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "model/op_fields.h"
#include "replay/backend.h"

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
  if (sigsetjmp(jb, 1) != 0) {
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

class SyncBackend final : public Backend {
 public:
  const char* name() const override { return "sync"; }

  int64_t Execute(const LiveArgs& a) override {
    const model::Op& op = *a.op;
    if (op.kind == model::OpKind::kPageFault) {
      return Touch(a.addr, (op.pf.flags & IOT_PFF_WRITE) != 0);
    }
    const iot_syscall& sc = op.sc;
    switch (sc.op) {
#ifdef SYS_open
      case IOT_OP_OPEN: return Ret(syscall(SYS_open, a.path, sc.flags, sc.mode));
#else
      case IOT_OP_OPEN: return Ret(syscall(SYS_openat, AT_FDCWD, a.path, sc.flags, sc.mode));
#endif
      case IOT_OP_OPENAT: return Ret(syscall(SYS_openat, a.dirfd, a.path, sc.flags, sc.mode));
      case IOT_OP_OPENAT2: {
        open_how how{};
        how.flags = sc.flags;
        how.mode = sc.flags & (O_CREAT | __O_TMPFILE) ? sc.mode : 0;
        // Target paths are absolute sandbox paths: "beneath the dirfd" constraints would reject
        // them, so those two are dropped (the sandbox mapping already confines the path).
        how.resolve = model::Openat2Resolve(sc) & ~static_cast<uint64_t>(RESOLVE_BENEATH | RESOLVE_IN_ROOT);
        return Ret(syscall(SYS_openat2, a.dirfd, a.path, &how, sizeof how));
      }
#ifdef SYS_creat
      case IOT_OP_CREAT: return Ret(syscall(SYS_creat, a.path, sc.mode));
#else
      case IOT_OP_CREAT:
        return Ret(syscall(SYS_openat, AT_FDCWD, a.path, O_CREAT | O_WRONLY | O_TRUNC, sc.mode));
#endif
      case IOT_OP_CLOSE: return Ret(syscall(SYS_close, a.fd));
      case IOT_OP_CLOSE_RANGE: {
        int64_t r = 0;
        for (int i = 0; i < a.nfds; i++) {
          int64_t x = Ret(syscall(SYS_close_range, a.fds[i], a.fds[i], sc.flags));
          if (x < 0) r = x;
        }
        return r;
      }
      case IOT_OP_DUP: return Ret(syscall(SYS_dup, a.fd));
#ifdef SYS_dup2
      case IOT_OP_DUP2: return Ret(syscall(SYS_dup2, a.fd, a.fd2));
#else
      case IOT_OP_DUP2: return Ret(syscall(SYS_dup3, a.fd, a.fd2, 0));
#endif
      case IOT_OP_DUP3: return Ret(syscall(SYS_dup3, a.fd, a.fd2, sc.flags));
      case IOT_OP_FCNTL: {
        uint64_t arg = model::FcntlArg(sc);
        return Ret(syscall(SYS_fcntl, a.fd, model::FcntlCmd(sc), arg));
      }
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
      case IOT_OP_TRUNCATE: return Ret(syscall(SYS_truncate, a.path, model::TruncateLength(sc)));
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
        loff_t off;
        const void* p = Off(sc.offset, &off);
        return Ret(syscall(SYS_sendfile, a.fd2, a.fd, p, sc.length));
      }
      case IOT_OP_MMAP: {
        uint32_t flags = sc.flags & ~static_cast<uint32_t>(MAP_FIXED | MAP_FIXED_NOREPLACE);
        void* p = mmap(nullptr, sc.length, static_cast<int>(sc.mode), static_cast<int>(flags),
                       a.fd, static_cast<off_t>(sc.offset));
        if (p == MAP_FAILED) return -static_cast<int64_t>(errno);
        return static_cast<int64_t>(reinterpret_cast<uintptr_t>(p));
      }
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
      case IOT_OP_FSTAT: {
        struct stat st;
        return Ret(syscall(SYS_fstat, a.fd, &st));
      }
      case IOT_OP_NEWFSTATAT: {
        struct stat st;
        return Ret(syscall(SYS_newfstatat, a.dirfd, a.path, &st, sc.flags));
      }
      case IOT_OP_STATX: {
        struct statx stx;
        return Ret(syscall(SYS_statx, a.dirfd, a.path, sc.flags, sc.mode, &stx));
      }
      case IOT_OP_GETDENTS64: return Ret(syscall(SYS_getdents64, a.fd, a.buf, a.len));
#ifdef SYS_mkdir
      case IOT_OP_MKDIR: return Ret(syscall(SYS_mkdir, a.path, sc.mode));
      case IOT_OP_UNLINK: return Ret(syscall(SYS_unlink, a.path));
      case IOT_OP_RMDIR: return Ret(syscall(SYS_rmdir, a.path));
      case IOT_OP_RENAME: return Ret(syscall(SYS_rename, a.path, a.path2));
      case IOT_OP_LINK: return Ret(syscall(SYS_link, a.path, a.path2));
      case IOT_OP_SYMLINK: return Ret(syscall(SYS_symlink, a.path, a.path2));
#endif
      case IOT_OP_MKDIRAT: return Ret(syscall(SYS_mkdirat, a.dirfd, a.path, sc.mode));
      case IOT_OP_UNLINKAT: return Ret(syscall(SYS_unlinkat, a.dirfd, a.path, sc.flags));
      case IOT_OP_RENAMEAT:
        return Ret(syscall(SYS_renameat, a.dirfd, a.path, a.dirfd2, a.path2));
      case IOT_OP_RENAMEAT2:
        return Ret(syscall(SYS_renameat2, a.dirfd, a.path, a.dirfd2, a.path2, sc.flags));
      case IOT_OP_LINKAT:
        return Ret(syscall(SYS_linkat, a.dirfd, a.path, a.dirfd2, a.path2, sc.flags));
      case IOT_OP_SYMLINKAT: return Ret(syscall(SYS_symlinkat, a.path, a.dirfd2, a.path2));
      case IOT_OP_CHDIR: return Ret(syscall(SYS_chdir, a.path));
      case IOT_OP_FCHDIR: return Ret(syscall(SYS_fchdir, a.fd));
      default:
        return -ENOSYS;
    }
  }

  int CloneFd(int fd) override { return fcntl(fd, F_DUPFD_CLOEXEC, 0); }
  void CloseFd(int fd) override {
    if (fd >= 0) close(fd);
  }
  uint8_t* MapFile(const std::string& path, uint64_t length, uint32_t prot, uint32_t flags,
                   uint64_t offset) override {
    int fd = open(path.c_str(), (prot & PROT_WRITE) && (flags & MAP_SHARED) ? O_RDWR : O_RDONLY);
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

std::unique_ptr<Backend> MakeSyncBackend() {
  InstallTouchGuards();
  return std::make_unique<SyncBackend>();
}

namespace {

class NullBackend final : public Backend {
 public:
  const char* name() const override { return "null"; }
  int64_t Execute(const LiveArgs& a) override { return a.recorded; }
  int CloneFd(int fd) override { return fd; }
  void CloseFd(int) override {}
  uint8_t* MapFile(const std::string&, uint64_t, uint32_t, uint32_t, uint64_t) override {
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
