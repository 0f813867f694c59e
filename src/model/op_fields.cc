#include "model/op_fields.h"

#include <fcntl.h>

namespace iotwin::model {

namespace {
bool OpIsAtCall(uint16_t op) {
  switch (op) {
    case IOT_OP_OPENAT: case IOT_OP_OPENAT2: case IOT_OP_NEWFSTATAT: case IOT_OP_STATX:
    case IOT_OP_MKDIRAT: case IOT_OP_UNLINKAT: case IOT_OP_RENAMEAT: case IOT_OP_RENAMEAT2:
    case IOT_OP_LINKAT: case IOT_OP_SYMLINKAT:
      return true;
    default:
      return false;
  }
}
}  // namespace

int PathDirFd(const iot_syscall& sc) {
  if (!OpIsAtCall(sc.op) || sc.op == IOT_OP_SYMLINKAT) return kAtFdcwd;
  if (sc.op == IOT_OP_RENAMEAT || sc.op == IOT_OP_RENAMEAT2 || sc.op == IOT_OP_LINKAT) return sc.fd;
  // Single-dirfd calls: the ABI says fd; accept fd2 when fd is unset.
  if (sc.fd == -1 && sc.fd2 != -1) return sc.fd2;
  return sc.fd;
}

int Path2DirFd(const iot_syscall& sc) {
  switch (sc.op) {
    case IOT_OP_RENAMEAT: case IOT_OP_RENAMEAT2: case IOT_OP_LINKAT:
      return sc.fd2;
    case IOT_OP_SYMLINKAT:
      return sc.fd2 != -1 ? sc.fd2 : sc.fd;
    default:
      return kAtFdcwd;
  }
}

bool OpTakesPath(uint16_t op) {
  switch (op) {
    case IOT_OP_OPEN: case IOT_OP_OPENAT: case IOT_OP_OPENAT2: case IOT_OP_CREAT:
    case IOT_OP_TRUNCATE: case IOT_OP_STAT: case IOT_OP_LSTAT: case IOT_OP_NEWFSTATAT:
    case IOT_OP_STATX: case IOT_OP_MKDIR: case IOT_OP_MKDIRAT: case IOT_OP_UNLINK:
    case IOT_OP_UNLINKAT: case IOT_OP_RMDIR: case IOT_OP_RENAME: case IOT_OP_RENAMEAT:
    case IOT_OP_RENAMEAT2: case IOT_OP_LINK: case IOT_OP_LINKAT: case IOT_OP_CHDIR:
      return true;
    default:
      return false;  // symlink's first string is its target, kept verbatim
  }
}

bool OpTakesPath2(uint16_t op) {
  switch (op) {
    case IOT_OP_RENAME: case IOT_OP_RENAMEAT: case IOT_OP_RENAMEAT2: case IOT_OP_LINK:
    case IOT_OP_LINKAT: case IOT_OP_SYMLINK: case IOT_OP_SYMLINKAT:
      return true;
    default:
      return false;
  }
}

bool OpHasDataFd(const iot_syscall& sc) {
  switch (sc.op) {
    case IOT_OP_CLOSE: case IOT_OP_DUP: case IOT_OP_DUP2: case IOT_OP_DUP3: case IOT_OP_FCNTL:
    case IOT_OP_READ: case IOT_OP_WRITE: case IOT_OP_PREAD64: case IOT_OP_PWRITE64:
    case IOT_OP_READV: case IOT_OP_WRITEV: case IOT_OP_PREADV: case IOT_OP_PWRITEV:
    case IOT_OP_PREADV2: case IOT_OP_PWRITEV2: case IOT_OP_LSEEK: case IOT_OP_FSYNC:
    case IOT_OP_FDATASYNC: case IOT_OP_SYNC_FILE_RANGE: case IOT_OP_SYNCFS:
    case IOT_OP_FALLOCATE: case IOT_OP_FTRUNCATE: case IOT_OP_FADVISE64: case IOT_OP_READAHEAD:
    case IOT_OP_COPY_FILE_RANGE: case IOT_OP_FSTAT: case IOT_OP_GETDENTS64: case IOT_OP_FCHDIR:
    case IOT_OP_SENDFILE: case IOT_OP_FLOCK:
      return true;
    case IOT_OP_MMAP:
      return !(sc.flags & 0x20 /* MAP_ANONYMOUS */);
    default:
      return false;
  }
}

int DataFd(const iot_syscall& sc) {
  if (!OpHasDataFd(sc)) return -1;
  switch (sc.op) {
    case IOT_OP_CLOSE: case IOT_OP_DUP: case IOT_OP_DUP2: case IOT_OP_DUP3: case IOT_OP_FCNTL:
    case IOT_OP_READ: case IOT_OP_WRITE: case IOT_OP_PREAD64: case IOT_OP_PWRITE64:
    case IOT_OP_READV: case IOT_OP_WRITEV: case IOT_OP_PREADV: case IOT_OP_PWRITEV:
    case IOT_OP_PREADV2: case IOT_OP_PWRITEV2: case IOT_OP_LSEEK: case IOT_OP_FSYNC:
    case IOT_OP_FDATASYNC: case IOT_OP_SYNC_FILE_RANGE: case IOT_OP_SYNCFS:
    case IOT_OP_FALLOCATE: case IOT_OP_FTRUNCATE: case IOT_OP_FADVISE64: case IOT_OP_READAHEAD:
    case IOT_OP_COPY_FILE_RANGE: case IOT_OP_FSTAT: case IOT_OP_GETDENTS64: case IOT_OP_FCHDIR:
    case IOT_OP_FLOCK:
      return sc.fd;
    case IOT_OP_MMAP:
      return (sc.flags & 0x20 /* MAP_ANONYMOUS */) ? -1 : sc.fd;
    default:
      return -1;
  }
}

bool FcntlIsLock(int cmd) {
  switch (cmd) {
    case F_GETLK: case F_SETLK: case F_SETLKW: case F_OFD_GETLK: case F_OFD_SETLK:
    case F_OFD_SETLKW:
      return true;
    default:
      return false;
  }
}

bool FcntlIsLockQuery(int cmd) { return cmd == F_GETLK || cmd == F_OFD_GETLK; }

bool FcntlLockWaits(int cmd) { return cmd == F_SETLKW || cmd == F_OFD_SETLKW; }

int SecondFd(const iot_syscall& sc) {
  switch (sc.op) {
    case IOT_OP_COPY_FILE_RANGE: return sc.fd2;
    case IOT_OP_SENDFILE: return sc.fd2;  // out_fd
    default: return -1;
  }
}

uint32_t FallocateMode(const iot_syscall& sc) {
  return sc.mode != 0 ? sc.mode : static_cast<uint32_t>(sc.aux);
}

uint64_t TruncateLength(const iot_syscall& sc) {
  return sc.length != 0 ? sc.length : sc.offset;
}

namespace {
// mremap: the format doc stores (offset = old address, length = old length, aux = new length),
// the capture (aux = old address, offset = old length, length = new length). User-space
// addresses of mappings sit far above any plausible mapping length.
bool MremapCaptureLayout(const iot_syscall& sc) {
  return sc.aux >= (1ull << 32) && sc.offset < (1ull << 32);
}
}  // namespace

uint64_t MemAddr(const iot_syscall& sc) {
  if (sc.op == IOT_OP_MMAP) return static_cast<uint64_t>(sc.ret);
  if (sc.op == IOT_OP_MREMAP) return MremapCaptureLayout(sc) ? sc.aux : sc.offset;
  return sc.offset != 0 ? sc.offset : sc.aux;
}

uint64_t MemLength(const iot_syscall& sc) {
  if (sc.op == IOT_OP_MREMAP) return MremapCaptureLayout(sc) ? sc.offset : sc.length;
  return sc.length;
}

int MadviseAdvice(const iot_syscall& sc) {
  return static_cast<int>(sc.offset != 0 ? sc.aux : sc.mode);
}

uint64_t MremapNewLength(const iot_syscall& sc) {
  return MremapCaptureLayout(sc) ? sc.length : sc.aux;
}

bool OpReturnsFd(const iot_syscall& sc) {
  switch (sc.op) {
    case IOT_OP_OPEN: case IOT_OP_OPENAT: case IOT_OP_OPENAT2: case IOT_OP_CREAT:
    case IOT_OP_DUP: case IOT_OP_DUP2: case IOT_OP_DUP3:
      return true;
    case IOT_OP_FCNTL:
      return FcntlCmd(sc) == F_DUPFD || FcntlCmd(sc) == F_DUPFD_CLOEXEC;
    default:
      return false;
  }
}

bool OpResultIsCount(uint16_t op) {
  switch (op) {
    case IOT_OP_READ: case IOT_OP_WRITE: case IOT_OP_PREAD64: case IOT_OP_PWRITE64:
    case IOT_OP_READV: case IOT_OP_WRITEV: case IOT_OP_PREADV: case IOT_OP_PWRITEV:
    case IOT_OP_PREADV2: case IOT_OP_PWRITEV2: case IOT_OP_LSEEK: case IOT_OP_COPY_FILE_RANGE:
    case IOT_OP_SENDFILE:
      return true;
    default:
      return false;
  }
}

bool OpResultCloexec(const iot_syscall& sc) {
  switch (sc.op) {
    case IOT_OP_OPEN: case IOT_OP_OPENAT: case IOT_OP_OPENAT2: case IOT_OP_CREAT:
      return (sc.flags & O_CLOEXEC) != 0;
    case IOT_OP_DUP3:
      return (sc.flags & O_CLOEXEC) != 0;
    case IOT_OP_FCNTL:
      return FcntlCmd(sc) == F_DUPFD_CLOEXEC;
    default:
      return false;  // dup, dup2 clear the flag
  }
}

}  // namespace iotwin::model
