#include "model/op_fields.h"

#include <fcntl.h>
#include <linux/fs.h>  // RENAME_EXCHANGE
#include <sys/mman.h>

#include "format/op_info.h"

namespace iotwin::model {

namespace {

int BaseFd(const iot_syscall& sc, PathBase base) {
  switch (base) {
    case PathBase::kFd: return sc.fd;
    case PathBase::kFd2: return sc.fd2;
    case PathBase::kCwd: break;
  }
  return kAtFdcwd;
}

// The scalar field (offset, length, aux) the table gives `use` in this op's row; 0 if none.
uint64_t FieldFor(const iot_syscall& sc, FieldUse use) {
  const OpInfo& i = GetOpInfo(sc.op);
  if (i.offset == use) return sc.offset;
  if (i.length == use) return sc.length;
  if (i.aux == use) return sc.aux;
  return 0;
}

bool IsDataRole(FdRole r) {
  return r == FdRole::kReadFrom || r == FdRole::kWriteTo || r == FdRole::kUsed;
}

// Ops whose descriptors replay needs: those it issues (splice's pipes are never looked up).
bool Replayed(const OpInfo& i) { return i.replay == OpReplay::kReissued; }

}  // namespace

int PathDirFd(const iot_syscall& sc) {
  const OpInfo& i = GetOpInfo(sc.op);
  return i.path == PathRole::kResolved ? BaseFd(sc, i.path_base) : kAtFdcwd;
}

int Path2DirFd(const iot_syscall& sc) {
  const OpInfo& i = GetOpInfo(sc.op);
  return i.path2 == PathRole::kResolved ? BaseFd(sc, i.path2_base) : kAtFdcwd;
}

bool OpTakesPath(uint16_t op) { return GetOpInfo(op).path == PathRole::kResolved; }

bool OpTakesPath2(uint16_t op) { return GetOpInfo(op).path2 == PathRole::kResolved; }

bool OpHasDataFd(const iot_syscall& sc) {
  const OpInfo& i = GetOpInfo(sc.op);
  if (!Replayed(i) || !(IsDataRole(i.fd) || IsDataRole(i.fd2))) return false;
  // An anonymous mapping names no file (its fd is -1 or ignored).
  return !(sc.op == IOT_OP_MMAP && (sc.flags & MAP_ANONYMOUS));
}

int DataFd(const iot_syscall& sc) {
  if (!OpHasDataFd(sc)) return -1;
  const OpInfo& i = GetOpInfo(sc.op);
  // The source of a copy; otherwise the one descriptor the op acts on.
  if (i.fd2 == FdRole::kReadFrom) return sc.fd2;
  return IsDataRole(i.fd) ? sc.fd : sc.fd2;
}

int SecondFd(const iot_syscall& sc) {
  const OpInfo& i = GetOpInfo(sc.op);
  if (!Replayed(i) || i.direction != OpDirection::kCopy) return -1;
  return i.fd == FdRole::kWriteTo ? sc.fd : sc.fd2;
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

uint64_t TruncateLength(const iot_syscall& sc) { return FieldFor(sc, FieldUse::kNewLength); }

uint64_t MemAddr(const iot_syscall& sc) {
  if (sc.op == IOT_OP_MMAP) return static_cast<uint64_t>(sc.ret);
  return sc.op == IOT_OP_MREMAP ? FieldFor(sc, FieldUse::kOldAddress)
                                : FieldFor(sc, FieldUse::kAddress);
}

uint64_t MemLength(const iot_syscall& sc) {
  return sc.op == IOT_OP_MREMAP ? FieldFor(sc, FieldUse::kOldLength)
                                : FieldFor(sc, FieldUse::kMapLength);
}

int MadviseAdvice(const iot_syscall& sc) {
  return static_cast<int>(FieldFor(sc, FieldUse::kAdvice));
}

uint64_t MremapNewLength(const iot_syscall& sc) { return FieldFor(sc, FieldUse::kNewLength); }

bool OpReturnsFd(const iot_syscall& sc) {
  if (sc.op == IOT_OP_FCNTL) return FcntlCmd(sc) == F_DUPFD || FcntlCmd(sc) == F_DUPFD_CLOEXEC;
  const OpInfo& i = GetOpInfo(sc.op);
  // io_uring_setup's ring descriptor belongs to the async back end.
  return i.result == OpResult::kNewFd && Replayed(i);
}

bool DuplicatesFd(const iot_syscall& sc) {
  if (GetOpInfo(sc.op).fd_effect != FdEffect::kDuplicates) return false;
  return sc.op != IOT_OP_FCNTL || FcntlCmd(sc) == F_DUPFD || FcntlCmd(sc) == F_DUPFD_CLOEXEC;
}

bool SetsStatusFlags(const iot_syscall& sc) {
  return sc.op == IOT_OP_FCNTL && FcntlCmd(sc) == F_SETFL;
}

bool MakesOrRemovesDir(const iot_syscall& sc) {
  const OpInfo& i = GetOpInfo(sc.op);
  if (i.names == NameEffect::kMakesDir || i.names == NameEffect::kRemovesDir) return true;
  // unlinkat's flag; unlink takes none.
  return i.names == NameEffect::kRemoves && i.path_base == PathBase::kFd &&
         (sc.flags & AT_REMOVEDIR) != 0;
}

bool RenameExchanges(const iot_syscall& sc) {
  return sc.op == IOT_OP_RENAMEAT2 && (sc.flags & RENAME_EXCHANGE) != 0;
}

bool OpResultIsCount(uint16_t op) {
  const OpInfo& i = GetOpInfo(op);
  return Replayed(i) && (i.result == OpResult::kByteCount || i.result == OpResult::kPosition);
}

bool OpResultCloexec(const iot_syscall& sc) {
  if (GetOpInfo(sc.op).family == OpFamily::kOpen || sc.op == IOT_OP_DUP3) {
    return (sc.flags & O_CLOEXEC) != 0;
  }
  if (sc.op == IOT_OP_FCNTL) return FcntlCmd(sc) == F_DUPFD_CLOEXEC;
  return false;  // dup, dup2 clear the flag
}

uint32_t EffectiveOpenFlags(const iot_syscall& sc) {
  if (sc.op == IOT_OP_CREAT) return O_CREAT | O_WRONLY | O_TRUNC | (sc.flags & O_CLOEXEC);
  return sc.flags;
}

}  // namespace iotwin::model
