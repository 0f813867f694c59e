#include "interop/symbols.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <unordered_map>
#include <string>

#include "interop/text_util.h"

namespace iotwin::interop {
namespace {

#define SYM(x) {#x, static_cast<uint64_t>(x)}

const std::unordered_map<std::string_view, uint64_t>& Symbols() {
  static const std::unordered_map<std::string_view, uint64_t> kTable = {
      // open(2) flags.
      SYM(O_RDONLY), SYM(O_WRONLY), SYM(O_RDWR), SYM(O_CREAT), SYM(O_EXCL), SYM(O_NOCTTY),
      SYM(O_TRUNC), SYM(O_APPEND), SYM(O_NONBLOCK), SYM(O_NDELAY), SYM(O_DSYNC), SYM(O_SYNC),
      SYM(O_RSYNC), SYM(O_DIRECTORY), SYM(O_NOFOLLOW), SYM(O_CLOEXEC), SYM(O_DIRECT),
      SYM(O_NOATIME), SYM(O_PATH), SYM(O_TMPFILE), SYM(O_ASYNC), SYM(FASYNC),
      // O_LARGEFILE is 0 in the x86-64 glibc headers but strace prints the kernel's bit.
      {"O_LARGEFILE", 0100000},
      // *at() flags.
      {"AT_FDCWD", static_cast<uint64_t>(static_cast<int64_t>(AT_FDCWD))}, SYM(AT_SYMLINK_NOFOLLOW),
      SYM(AT_REMOVEDIR), SYM(AT_SYMLINK_FOLLOW), SYM(AT_NO_AUTOMOUNT), SYM(AT_EMPTY_PATH),
      SYM(AT_EACCESS), {"AT_STATX_SYNC_AS_STAT", 0}, {"AT_STATX_FORCE_SYNC", 0x2000},
      {"AT_STATX_DONT_SYNC", 0x4000}, {"AT_RECURSIVE", 0x8000},
      // lseek whence.
      SYM(SEEK_SET), SYM(SEEK_CUR), SYM(SEEK_END), SYM(SEEK_DATA), SYM(SEEK_HOLE),
      // mmap.
      SYM(PROT_NONE), SYM(PROT_READ), SYM(PROT_WRITE), SYM(PROT_EXEC), SYM(PROT_GROWSDOWN),
      SYM(PROT_GROWSUP), SYM(MAP_SHARED), SYM(MAP_PRIVATE), SYM(MAP_SHARED_VALIDATE),
      SYM(MAP_FIXED), SYM(MAP_ANONYMOUS), {"MAP_ANON", MAP_ANONYMOUS}, SYM(MAP_32BIT),
      SYM(MAP_GROWSDOWN), SYM(MAP_DENYWRITE), SYM(MAP_EXECUTABLE), SYM(MAP_LOCKED),
      SYM(MAP_NORESERVE), SYM(MAP_POPULATE), SYM(MAP_NONBLOCK), SYM(MAP_STACK),
      SYM(MAP_HUGETLB), SYM(MAP_SYNC), SYM(MAP_FIXED_NOREPLACE), SYM(MREMAP_MAYMOVE),
      SYM(MREMAP_FIXED), {"MREMAP_DONTUNMAP", 4}, SYM(MS_ASYNC), SYM(MS_SYNC),
      SYM(MS_INVALIDATE),
      // madvise.
      SYM(MADV_NORMAL), SYM(MADV_RANDOM), SYM(MADV_SEQUENTIAL), SYM(MADV_WILLNEED),
      SYM(MADV_DONTNEED), SYM(MADV_FREE), SYM(MADV_REMOVE), SYM(MADV_DONTFORK),
      SYM(MADV_DOFORK), SYM(MADV_MERGEABLE), SYM(MADV_UNMERGEABLE), SYM(MADV_HUGEPAGE),
      SYM(MADV_NOHUGEPAGE), SYM(MADV_DONTDUMP), SYM(MADV_DODUMP), SYM(MADV_WIPEONFORK),
      SYM(MADV_KEEPONFORK), SYM(MADV_COLD), SYM(MADV_PAGEOUT), SYM(MADV_HWPOISON),
      {"MADV_POPULATE_READ", 22}, {"MADV_POPULATE_WRITE", 23},
      // fadvise.
      SYM(POSIX_FADV_NORMAL), SYM(POSIX_FADV_RANDOM), SYM(POSIX_FADV_SEQUENTIAL),
      SYM(POSIX_FADV_WILLNEED), SYM(POSIX_FADV_DONTNEED), SYM(POSIX_FADV_NOREUSE),
      // fallocate.
      SYM(FALLOC_FL_KEEP_SIZE), SYM(FALLOC_FL_PUNCH_HOLE), SYM(FALLOC_FL_COLLAPSE_RANGE),
      SYM(FALLOC_FL_ZERO_RANGE), SYM(FALLOC_FL_INSERT_RANGE), SYM(FALLOC_FL_UNSHARE_RANGE),
      // preadv2/pwritev2 (linux/fs.h values; that header clashes with glibc's).
      {"RWF_HIPRI", 1}, {"RWF_DSYNC", 2}, {"RWF_SYNC", 4}, {"RWF_NOWAIT", 8}, {"RWF_APPEND", 16},
      // sync_file_range.
      SYM(SYNC_FILE_RANGE_WAIT_BEFORE), SYM(SYNC_FILE_RANGE_WRITE),
      SYM(SYNC_FILE_RANGE_WAIT_AFTER),
      // fcntl commands.
      SYM(F_DUPFD), SYM(F_DUPFD_CLOEXEC), SYM(F_GETFD), SYM(F_SETFD), SYM(F_GETFL),
      SYM(F_SETFL), SYM(F_GETLK), SYM(F_SETLK), SYM(F_SETLKW), SYM(F_OFD_GETLK),
      SYM(F_OFD_SETLK), SYM(F_OFD_SETLKW), SYM(F_SETOWN), SYM(F_GETOWN), SYM(F_SETSIG),
      SYM(F_GETSIG), SYM(F_SETLEASE), SYM(F_GETLEASE), SYM(F_NOTIFY), SYM(F_SETPIPE_SZ),
      SYM(F_GETPIPE_SZ), SYM(F_ADD_SEALS), SYM(F_GET_SEALS), SYM(FD_CLOEXEC),
      // clone flags.
      SYM(CLONE_VM), SYM(CLONE_FS), SYM(CLONE_FILES), SYM(CLONE_SIGHAND), SYM(CLONE_PIDFD),
      SYM(CLONE_PTRACE), SYM(CLONE_VFORK), SYM(CLONE_PARENT), SYM(CLONE_THREAD),
      SYM(CLONE_NEWNS), SYM(CLONE_SYSVSEM), SYM(CLONE_SETTLS), SYM(CLONE_PARENT_SETTID),
      SYM(CLONE_CHILD_CLEARTID), SYM(CLONE_DETACHED), SYM(CLONE_UNTRACED),
      SYM(CLONE_CHILD_SETTID), SYM(CLONE_NEWCGROUP), SYM(CLONE_NEWUTS), SYM(CLONE_NEWIPC),
      SYM(CLONE_NEWUSER), SYM(CLONE_NEWPID), SYM(CLONE_NEWNET), SYM(CLONE_IO),
      // rename / openat2.
      {"RENAME_NOREPLACE", 1}, {"RENAME_EXCHANGE", 2}, {"RENAME_WHITEOUT", 4},
      {"RESOLVE_NO_XDEV", 1}, {"RESOLVE_NO_MAGICLINKS", 2}, {"RESOLVE_NO_SYMLINKS", 4},
      {"RESOLVE_BENEATH", 8}, {"RESOLVE_IN_ROOT", 16}, {"RESOLVE_CACHED", 32},
      // close_range.
      {"CLOSE_RANGE_UNSHARE", 2}, {"CLOSE_RANGE_CLOEXEC", 4},
      // signals (clone's exit signal is part of its flags word).
      SYM(SIGHUP), SYM(SIGINT), SYM(SIGQUIT), SYM(SIGILL), SYM(SIGTRAP), SYM(SIGABRT),
      SYM(SIGBUS), SYM(SIGFPE), SYM(SIGKILL), SYM(SIGUSR1), SYM(SIGSEGV), SYM(SIGUSR2),
      SYM(SIGPIPE), SYM(SIGALRM), SYM(SIGTERM), SYM(SIGSTKFLT), SYM(SIGCHLD), SYM(SIGCONT),
      SYM(SIGSTOP), SYM(SIGTSTP), SYM(SIGTTIN), SYM(SIGTTOU), SYM(SIGURG), SYM(SIGXCPU),
      SYM(SIGXFSZ), SYM(SIGVTALRM), SYM(SIGPROF), SYM(SIGWINCH), SYM(SIGIO), SYM(SIGPWR),
      SYM(SIGSYS),
      // misc.
      {"NULL", 0},
  };
  return kTable;
}

const std::unordered_map<std::string_view, int>& Errnos() {
  static const std::unordered_map<std::string_view, int> kTable = {
      SYM(EPERM), SYM(ENOENT), SYM(ESRCH), SYM(EINTR), SYM(EIO), SYM(ENXIO), SYM(E2BIG),
      SYM(ENOEXEC), SYM(EBADF), SYM(ECHILD), SYM(EAGAIN), SYM(ENOMEM), SYM(EACCES),
      SYM(EFAULT), SYM(ENOTBLK), SYM(EBUSY), SYM(EEXIST), SYM(EXDEV), SYM(ENODEV),
      SYM(ENOTDIR), SYM(EISDIR), SYM(EINVAL), SYM(ENFILE), SYM(EMFILE), SYM(ENOTTY),
      SYM(ETXTBSY), SYM(EFBIG), SYM(ENOSPC), SYM(ESPIPE), SYM(EROFS), SYM(EMLINK), SYM(EPIPE),
      SYM(EDOM), SYM(ERANGE), SYM(EDEADLK), SYM(ENAMETOOLONG), SYM(ENOLCK), SYM(ENOSYS),
      SYM(ENOTEMPTY), SYM(ELOOP), SYM(ENOMSG), SYM(EIDRM), SYM(ENOSTR), SYM(ENODATA),
      SYM(ETIME), SYM(ENOSR), SYM(EREMOTE), SYM(ENOLINK), SYM(EPROTO), SYM(EBADMSG),
      SYM(EOVERFLOW), SYM(EILSEQ), SYM(EUSERS), SYM(ENOTSOCK), SYM(EDESTADDRREQ),
      SYM(EMSGSIZE), SYM(EPROTOTYPE), SYM(ENOPROTOOPT), SYM(EPROTONOSUPPORT), SYM(EOPNOTSUPP),
      SYM(EAFNOSUPPORT), SYM(EADDRINUSE), SYM(EADDRNOTAVAIL), SYM(ENETDOWN), SYM(ENETUNREACH),
      SYM(ECONNABORTED), SYM(ECONNRESET), SYM(ENOBUFS), SYM(EISCONN), SYM(ENOTCONN),
      SYM(ETIMEDOUT), SYM(ECONNREFUSED), SYM(EHOSTUNREACH), SYM(EALREADY), SYM(EINPROGRESS),
      SYM(ESTALE), SYM(EDQUOT), SYM(ECANCELED), SYM(EOWNERDEAD), SYM(ENOTRECOVERABLE),
      SYM(ENOMEDIUM), SYM(EMEDIUMTYPE), SYM(ENOKEY), SYM(EKEYEXPIRED), SYM(EKEYREVOKED),
      SYM(EKEYREJECTED), SYM(ERFKILL), SYM(EHWPOISON), SYM(ENOTSUP), SYM(EWOULDBLOCK),
      SYM(EDEADLOCK), SYM(ECHRNG), SYM(EL2NSYNC), SYM(EL3HLT), SYM(EL3RST), SYM(ELNRNG),
      SYM(EUNATCH), SYM(ENOCSI), SYM(EL2HLT), SYM(EBADE), SYM(EBADR), SYM(EXFULL), SYM(ENOANO),
      SYM(EBADRQC), SYM(EBADSLT), SYM(EBFONT), SYM(ENONET), SYM(ENOPKG), SYM(EADV), SYM(ESRMNT),
      SYM(ECOMM), SYM(EDOTDOT), SYM(ENOTUNIQ), SYM(EBADFD), SYM(EREMCHG), SYM(ELIBACC),
      SYM(ELIBBAD), SYM(ELIBSCN), SYM(ELIBMAX), SYM(ELIBEXEC), SYM(ERESTART), SYM(ESTRPIPE),
      SYM(EUCLEAN), SYM(ENOTNAM), SYM(ENAVAIL), SYM(EISNAM), SYM(EREMOTEIO), SYM(ESHUTDOWN),
      SYM(ETOOMANYREFS), SYM(ESOCKTNOSUPPORT), SYM(EPFNOSUPPORT),
      // Kernel-internal codes that strace prints for interrupted calls.
      {"ERESTARTSYS", 512}, {"ERESTARTNOINTR", 513}, {"ERESTARTNOHAND", 514},
      {"ENOIOCTLCMD", 515}, {"ERESTART_RESTARTBLOCK", 516}, {"EPROBE_DEFER", 517},
      {"EOPENSTALE", 518}, {"ENOPARAM", 519}, {"EBADHANDLE", 521}, {"ENOTSUPP", 524},
  };
  return kTable;
}

#undef SYM

}  // namespace

std::optional<uint64_t> SymbolValue(std::string_view name) {
  const auto& t = Symbols();
  auto it = t.find(name);
  if (it == t.end()) return std::nullopt;
  return it->second;
}

std::optional<uint64_t> FlagsValue(std::string_view expr, int* unknown) {
  expr = Trim(expr);
  if (expr.empty()) return std::nullopt;
  uint64_t v = 0;
  bool any = false;
  size_t pos = 0;
  while (pos <= expr.size()) {
    size_t bar = expr.find('|', pos);
    std::string_view part = Trim(expr.substr(pos, bar == std::string_view::npos ? bar : bar - pos));
    // strace prints composite values such as "8192*1024" for rlimits; not flags: skip.
    if (auto n = ParseCUnsigned(part)) {
      v |= *n;
      any = true;
    } else if (auto s = SymbolValue(part)) {
      v |= *s;
      any = true;
    } else if (!part.empty() && unknown) {
      (*unknown)++;
    }
    if (bar == std::string_view::npos) break;
    pos = bar + 1;
  }
  if (!any) return std::nullopt;
  return v;
}

std::optional<int> ErrnoValue(std::string_view name) {
  const auto& t = Errnos();
  auto it = t.find(name);
  if (it == t.end()) return std::nullopt;
  return it->second;
}

std::optional<int> SignalValue(std::string_view name) {
  if (!StartsWith(name, "SIG")) return std::nullopt;
  auto v = SymbolValue(name);
  if (v) return static_cast<int>(*v);
  // SIGRTMIN+n / SIGRT_n
  if (StartsWith(name, "SIGRT_")) {
    if (auto n = ParseDec(name.substr(6))) return SIGRTMIN + static_cast<int>(*n);
  }
  return std::nullopt;
}

}  // namespace iotwin::interop
