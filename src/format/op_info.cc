#include "format/op_info.h"

#include <linux/aio_abi.h>
#include <linux/io_uring.h>

#include <array>

namespace iotwin {
namespace {

using F = FieldUse;
using R = FdRole;
using P = PathRole;
using B = PathBase;
using D = OpDirection;
using Res = OpResult;
using Fam = OpFamily;
using Rep = OpReplay;

constexpr OpInfo Row(std::string_view name, Fam family, D dir, Res result, R fd, R fd2, F offset,
                     F length, F aux, Rep replay = Rep::kReissued) {
  return OpInfo{name,     family,  dir,    result, fd,  fd2,   P::kNone, B::kCwd,
                P::kNone, B::kCwd, offset, length, aux, false, replay};
}
// A call on one descriptor.
constexpr OpInfo FdRow(std::string_view name, Fam family, D dir, Res result, R role,
                       F offset = F::kUnused, F length = F::kUnused, F aux = F::kUnused) {
  return Row(name, family, dir, result, role, R::kNone, offset, length, aux);
}
// A vectored read or write.
constexpr OpInfo VecRow(std::string_view name, Fam family, D dir, R role, F offset) {
  OpInfo r =
      Row(name, family, dir, Res::kByteCount, role, R::kNone, offset, F::kIovecTotal, F::kIovcnt);
  r.vectored = true;
  return r;
}
// A call naming one path, against the cwd (base kCwd) or the dirfd in `fd` (base kFd).
constexpr OpInfo PathRow(std::string_view name, Fam family, Res result, B base,
                         F length = F::kUnused, F aux = F::kUnused) {
  OpInfo r = Row(name, family, D::kNone, result, base == B::kFd ? R::kDirFd : R::kNone, R::kNone,
                 F::kUnused, length, aux);
  r.path = P::kResolved;
  r.path_base = base;
  return r;
}
// A call naming two paths: rename(at/2), link(at), symlink(at) (first path verbatim).
constexpr OpInfo TwoPathRow(std::string_view name, P first, B base, B base2) {
  OpInfo r =
      Row(name, Fam::kDirectory, D::kNone, Res::kStatus, base == B::kFd ? R::kDirFd : R::kNone,
          base2 == B::kFd2 ? R::kDirFd : R::kNone, F::kUnused, F::kUnused, F::kUnused);
  r.path = first;
  r.path_base = first == P::kVerbatim ? B::kCwd : base;
  r.path2 = P::kResolved;
  r.path2_base = base2;
  return r;
}
// An io_setup/io_uring family call: driven by the async back end, not re-issued.
constexpr OpInfo AsyncRow(std::string_view name, Fam family, Res result, R fd, F length, F aux) {
  return Row(name, family, D::kNone, result, fd, R::kNone, F::kUnused, length, aux,
             Rep::kAsyncEngine);
}

// The columns that say what a call does to buffers, mappings, descriptors and async contexts.
constexpr void AddEffects(std::array<OpInfo, IOT_OP_MAX + 1>& t) {
  for (OpInfo& i : t) {
    if (i.family == Fam::kRead) i.buffer = OpBuffer::kFilled;
    if (i.family == Fam::kWrite) i.buffer = OpBuffer::kDrained;
  }
  t[IOT_OP_GETDENTS64].buffer = OpBuffer::kFilled;
  t[IOT_OP_MMAP].mapping = OpMapping::kMaps;
  t[IOT_OP_MUNMAP].mapping = OpMapping::kUnmaps;
  t[IOT_OP_MREMAP].mapping = OpMapping::kRemaps;
  t[IOT_OP_MSYNC].mapping = OpMapping::kSyncs;
  t[IOT_OP_MADVISE].mapping = OpMapping::kAdvises;
  t[IOT_OP_CLOSE].fd_effect = FdEffect::kCloses;
  t[IOT_OP_CLOSE_RANGE].fd_effect = FdEffect::kClosesRange;
  for (uint16_t op : {IOT_OP_DUP, IOT_OP_DUP2, IOT_OP_DUP3, IOT_OP_FCNTL}) {
    t[op].fd_effect = FdEffect::kDuplicates;
  }
  t[IOT_OP_IO_SETUP].async = AsyncCall::kSetup;
  t[IOT_OP_IO_URING_SETUP].async = AsyncCall::kSetup;
  t[IOT_OP_IO_SUBMIT].async = AsyncCall::kSubmit;
  t[IOT_OP_IO_GETEVENTS].async = AsyncCall::kReap;
  t[IOT_OP_IO_PGETEVENTS].async = AsyncCall::kReap;
  t[IOT_OP_IO_URING_ENTER].async = AsyncCall::kEnter;
  t[IOT_OP_IO_URING_REGISTER].async = AsyncCall::kRegister;
  t[IOT_OP_IO_DESTROY].async = AsyncCall::kDestroy;
  t[IOT_OP_RECVMSG].fd_effect = FdEffect::kReceives;
  t[IOT_OP_MKDIR].names = NameEffect::kMakesDir;
  t[IOT_OP_MKDIRAT].names = NameEffect::kMakesDir;
  t[IOT_OP_UNLINK].names = NameEffect::kRemoves;
  t[IOT_OP_UNLINKAT].names = NameEffect::kRemoves;
  t[IOT_OP_RMDIR].names = NameEffect::kRemovesDir;
  for (uint16_t op : {IOT_OP_RENAME, IOT_OP_RENAMEAT, IOT_OP_RENAMEAT2}) {
    t[op].names = NameEffect::kRenames;
  }
  t[IOT_OP_LINK].names = NameEffect::kLinks;
  t[IOT_OP_LINKAT].names = NameEffect::kLinks;
  t[IOT_OP_SYMLINK].names = NameEffect::kSymlinks;
  t[IOT_OP_SYMLINKAT].names = NameEffect::kSymlinks;
  t[IOT_OP_BIND].names = NameEffect::kBindsSocket;
  t[IOT_OP_CHDIR].names = NameEffect::kSetsCwd;
  t[IOT_OP_FCHDIR].names = NameEffect::kSetsCwd;
  t[IOT_OP_SENDFILE].writes_any_fd = true;
  t[IOT_OP_SPLICE].writes_any_fd = true;
}

// The columns that say what sync and space calls do.
constexpr void AddSyncAndSpace(std::array<OpInfo, IOT_OP_MAX + 1>& t) {
  t[IOT_OP_FSYNC].sync = SyncScope::kFile;
  t[IOT_OP_FDATASYNC].sync = SyncScope::kFileData;
  t[IOT_OP_SYNC_FILE_RANGE].sync = SyncScope::kFileRange;
  t[IOT_OP_SYNCFS].sync = SyncScope::kFileSystem;
  t[IOT_OP_SYNC].sync = SyncScope::kAll;
  t[IOT_OP_FALLOCATE].space = SpaceEffect::kFallocates;
  t[IOT_OP_FTRUNCATE].space = SpaceEffect::kSetsLength;
  t[IOT_OP_TRUNCATE].space = SpaceEffect::kSetsLength;
}

constexpr std::array<OpInfo, IOT_OP_MAX + 1> MakeTable() {
  std::array<OpInfo, IOT_OP_MAX + 1> t{};
  t[IOT_OP_UNKNOWN] = Row("unknown", Fam::kUnknown, D::kNone, Res::kStatus, R::kNone, R::kNone,
                          F::kUnused, F::kUnused, F::kUnused, Rep::kNotReplayed);
  // Opens.
  t[IOT_OP_OPEN] = PathRow("open", Fam::kOpen, Res::kNewFd, B::kCwd);
  t[IOT_OP_OPENAT] = PathRow("openat", Fam::kOpen, Res::kNewFd, B::kFd);
  t[IOT_OP_OPENAT2] =
      PathRow("openat2", Fam::kOpen, Res::kNewFd, B::kFd, F::kUnused, F::kResolveFlags);
  t[IOT_OP_CREAT] = PathRow("creat", Fam::kOpen, Res::kNewFd, B::kCwd);
  // Descriptor table.
  t[IOT_OP_CLOSE] = FdRow("close", Fam::kDescriptor, D::kNone, Res::kStatus, R::kUsed);
  t[IOT_OP_CLOSE_RANGE] = Row("close_range", Fam::kDescriptor, D::kNone, Res::kStatus, R::kRange,
                              R::kRange, F::kUnused, F::kUnused, F::kUnused);
  t[IOT_OP_DUP] = FdRow("dup", Fam::kDescriptor, D::kNone, Res::kNewFd, R::kUsed);
  t[IOT_OP_DUP2] = Row("dup2", Fam::kDescriptor, D::kNone, Res::kNewFd, R::kUsed, R::kCreated,
                       F::kUnused, F::kUnused, F::kUnused);
  t[IOT_OP_DUP3] = Row("dup3", Fam::kDescriptor, D::kNone, Res::kNewFd, R::kUsed, R::kCreated,
                       F::kUnused, F::kUnused, F::kUnused);
  // fcntl: F_DUPFD* return a descriptor, record locks keep l_start, l_len, l_whence in
  // offset, length, aux (model/op_fields.h reads them by command).
  t[IOT_OP_FCNTL] = FdRow("fcntl", Fam::kDescriptor, D::kNone, Res::kValue, R::kUsed, F::kFcntlArg,
                          F::kFcntlArg, F::kFcntlArg);
  t[IOT_OP_FLOCK] = FdRow("flock", Fam::kDescriptor, D::kNone, Res::kStatus, R::kUsed);
  // Reads and writes.
  t[IOT_OP_READ] = FdRow("read", Fam::kRead, D::kRead, Res::kByteCount, R::kReadFrom,
                         F::kPositionBefore, F::kByteCount);
  t[IOT_OP_WRITE] = FdRow("write", Fam::kWrite, D::kWrite, Res::kByteCount, R::kWriteTo,
                          F::kPositionBefore, F::kByteCount);
  t[IOT_OP_PREAD64] = FdRow("pread64", Fam::kRead, D::kRead, Res::kByteCount, R::kReadFrom,
                            F::kFileOffset, F::kByteCount);
  t[IOT_OP_PWRITE64] = FdRow("pwrite64", Fam::kWrite, D::kWrite, Res::kByteCount, R::kWriteTo,
                             F::kFileOffset, F::kByteCount);
  t[IOT_OP_READV] = VecRow("readv", Fam::kRead, D::kRead, R::kReadFrom, F::kPositionBefore);
  t[IOT_OP_WRITEV] = VecRow("writev", Fam::kWrite, D::kWrite, R::kWriteTo, F::kPositionBefore);
  t[IOT_OP_PREADV] = VecRow("preadv", Fam::kRead, D::kRead, R::kReadFrom, F::kFileOffset);
  t[IOT_OP_PWRITEV] = VecRow("pwritev", Fam::kWrite, D::kWrite, R::kWriteTo, F::kFileOffset);
  t[IOT_OP_PREADV2] = VecRow("preadv2", Fam::kRead, D::kRead, R::kReadFrom, F::kOffsetOrCurrent);
  t[IOT_OP_PWRITEV2] = VecRow("pwritev2", Fam::kWrite, D::kWrite, R::kWriteTo, F::kOffsetOrCurrent);
  t[IOT_OP_LSEEK] = FdRow("lseek", Fam::kSeek, D::kNone, Res::kPosition, R::kUsed, F::kFileOffset,
                          F::kUnused, F::kWhence);
  // Syncs.
  t[IOT_OP_FSYNC] = FdRow("fsync", Fam::kSync, D::kNone, Res::kStatus, R::kUsed);
  t[IOT_OP_FDATASYNC] = FdRow("fdatasync", Fam::kSync, D::kNone, Res::kStatus, R::kUsed);
  t[IOT_OP_SYNC_FILE_RANGE] = FdRow("sync_file_range", Fam::kSync, D::kNone, Res::kStatus, R::kUsed,
                                    F::kFileOffset, F::kByteCount);
  t[IOT_OP_SYNCFS] = FdRow("syncfs", Fam::kSync, D::kNone, Res::kStatus, R::kUsed);
  t[IOT_OP_SYNC] = Row("sync", Fam::kSync, D::kNone, Res::kStatus, R::kNone, R::kNone, F::kUnused,
                       F::kUnused, F::kUnused);
  // Space and size.
  t[IOT_OP_FALLOCATE] = FdRow("fallocate", Fam::kSpace, D::kNone, Res::kStatus, R::kUsed,
                              F::kFileOffset, F::kByteCount);
  t[IOT_OP_FTRUNCATE] =
      FdRow("ftruncate", Fam::kSpace, D::kNone, Res::kStatus, R::kUsed, F::kUnused, F::kNewLength);
  t[IOT_OP_TRUNCATE] = PathRow("truncate", Fam::kSpace, Res::kStatus, B::kCwd, F::kNewLength);
  // Advice.
  t[IOT_OP_FADVISE64] = FdRow("fadvise64", Fam::kAdvice, D::kNone, Res::kStatus, R::kUsed,
                              F::kFileOffset, F::kByteCount, F::kAdvice);
  t[IOT_OP_READAHEAD] = FdRow("readahead", Fam::kAdvice, D::kNone, Res::kStatus, R::kUsed,
                              F::kFileOffset, F::kByteCount);
  // Copies: copy_file_range and splice are (fd_in, fd_out); sendfile is (out_fd, in_fd) as the
  // system call orders them, its offset is in_fd's.
  t[IOT_OP_COPY_FILE_RANGE] =
      Row("copy_file_range", Fam::kCopy, D::kCopy, Res::kByteCount, R::kReadFrom, R::kWriteTo,
          F::kInOffset, F::kByteCount, F::kOutOffset);
  t[IOT_OP_SENDFILE] = Row("sendfile", Fam::kCopy, D::kCopy, Res::kByteCount, R::kWriteTo,
                           R::kReadFrom, F::kInOffset, F::kByteCount, F::kUnused);
  t[IOT_OP_SPLICE] = Row("splice", Fam::kCopy, D::kCopy, Res::kByteCount, R::kReadFrom, R::kWriteTo,
                         F::kInOffset, F::kByteCount, F::kOutOffset, Rep::kNotReplayed);
  // Mappings (mmap's fd is used unless MAP_ANONYMOUS).
  t[IOT_OP_MMAP] = FdRow("mmap", Fam::kMemory, D::kNone, Res::kAddress, R::kUsed, F::kFileOffset,
                         F::kMapLength, F::kAddressHint);
  t[IOT_OP_MUNMAP] = Row("munmap", Fam::kMemory, D::kNone, Res::kStatus, R::kNone, R::kNone,
                         F::kAddress, F::kMapLength, F::kUnused);
  t[IOT_OP_MREMAP] = Row("mremap", Fam::kMemory, D::kNone, Res::kAddress, R::kNone, R::kNone,
                         F::kOldAddress, F::kOldLength, F::kNewLength);
  t[IOT_OP_MSYNC] = Row("msync", Fam::kMemory, D::kNone, Res::kStatus, R::kNone, R::kNone,
                        F::kAddress, F::kMapLength, F::kUnused);
  t[IOT_OP_MADVISE] = Row("madvise", Fam::kMemory, D::kNone, Res::kStatus, R::kNone, R::kNone,
                          F::kAddress, F::kMapLength, F::kAdvice);
  // Metadata.
  t[IOT_OP_STAT] = PathRow("stat", Fam::kStat, Res::kStatus, B::kCwd);
  t[IOT_OP_LSTAT] = PathRow("lstat", Fam::kStat, Res::kStatus, B::kCwd);
  t[IOT_OP_FSTAT] = FdRow("fstat", Fam::kStat, D::kNone, Res::kStatus, R::kUsed);
  t[IOT_OP_NEWFSTATAT] = PathRow("newfstatat", Fam::kStat, Res::kStatus, B::kFd);
  t[IOT_OP_STATX] = PathRow("statx", Fam::kStat, Res::kStatus, B::kFd);
  // getdents64 returns bytes of entries, which depend on the directory's contents.
  t[IOT_OP_GETDENTS64] = FdRow("getdents64", Fam::kDirectory, D::kNone, Res::kValue, R::kUsed,
                               F::kUnused, F::kByteCount);
  t[IOT_OP_MKDIR] = PathRow("mkdir", Fam::kDirectory, Res::kStatus, B::kCwd);
  t[IOT_OP_MKDIRAT] = PathRow("mkdirat", Fam::kDirectory, Res::kStatus, B::kFd);
  t[IOT_OP_UNLINK] = PathRow("unlink", Fam::kDirectory, Res::kStatus, B::kCwd);
  t[IOT_OP_UNLINKAT] = PathRow("unlinkat", Fam::kDirectory, Res::kStatus, B::kFd);
  t[IOT_OP_RMDIR] = PathRow("rmdir", Fam::kDirectory, Res::kStatus, B::kCwd);
  t[IOT_OP_RENAME] = TwoPathRow("rename", P::kResolved, B::kCwd, B::kCwd);
  t[IOT_OP_RENAMEAT] = TwoPathRow("renameat", P::kResolved, B::kFd, B::kFd2);
  t[IOT_OP_RENAMEAT2] = TwoPathRow("renameat2", P::kResolved, B::kFd, B::kFd2);
  t[IOT_OP_LINK] = TwoPathRow("link", P::kResolved, B::kCwd, B::kCwd);
  t[IOT_OP_LINKAT] = TwoPathRow("linkat", P::kResolved, B::kFd, B::kFd2);
  t[IOT_OP_SYMLINK] = TwoPathRow("symlink", P::kVerbatim, B::kCwd, B::kCwd);
  t[IOT_OP_SYMLINKAT] = TwoPathRow("symlinkat", P::kVerbatim, B::kCwd, B::kFd2);
  t[IOT_OP_CHDIR] = PathRow("chdir", Fam::kCwd, Res::kStatus, B::kCwd);
  t[IOT_OP_FCHDIR] = FdRow("fchdir", Fam::kCwd, D::kNone, Res::kStatus, R::kUsed);
  // Asynchronous I/O set-up and reaping; the requests are ASYNC_IO records.
  t[IOT_OP_IO_SETUP] =
      AsyncRow("io_setup", Fam::kAio, Res::kStatus, R::kNone, F::kCommand, F::kCommand);
  t[IOT_OP_IO_SUBMIT] =
      AsyncRow("io_submit", Fam::kAio, Res::kCount, R::kNone, F::kUnused, F::kCommand);
  t[IOT_OP_IO_GETEVENTS] =
      AsyncRow("io_getevents", Fam::kAio, Res::kCount, R::kNone, F::kCommand, F::kCommand);
  t[IOT_OP_IO_DESTROY] =
      AsyncRow("io_destroy", Fam::kAio, Res::kStatus, R::kNone, F::kUnused, F::kCommand);
  t[IOT_OP_IO_PGETEVENTS] =
      AsyncRow("io_pgetevents", Fam::kAio, Res::kCount, R::kNone, F::kCommand, F::kCommand);
  t[IOT_OP_IO_URING_SETUP] =
      AsyncRow("io_uring_setup", Fam::kUring, Res::kNewFd, R::kNone, F::kCommand, F::kUnused);
  t[IOT_OP_IO_URING_ENTER] =
      AsyncRow("io_uring_enter", Fam::kUring, Res::kCount, R::kRing, F::kUnused, F::kCommand);
  t[IOT_OP_IO_URING_REGISTER] =
      AsyncRow("io_uring_register", Fam::kUring, Res::kValue, R::kRing, F::kCommand, F::kUnused);
  // Sockets, as far as they touch files: an AF_UNIX bind to a path creates a socket file there
  // (aux: the socket's descriptor, which the trace does not follow); a recvmsg that received
  // descriptors (SCM_RIGHTS; an FDLIST record follows) makes them, on the sender's files.
  t[IOT_OP_BIND] =
      PathRow("bind", Fam::kDirectory, Res::kStatus, B::kCwd, F::kUnused, F::kCommand);
  t[IOT_OP_RECVMSG] = Row("recvmsg", Fam::kDescriptor, D::kNone, Res::kValue, R::kSocket,
                          R::kNone, F::kUnused, F::kUnused, F::kCommand, Rep::kNotReplayed);
  AddEffects(t);
  AddSyncAndSpace(t);
  return t;
}

constexpr std::array<OpInfo, IOT_OP_MAX + 1> kOps = MakeTable();

constexpr bool EveryRowNamed() {
  for (const OpInfo& i : kOps) {
    if (i.name.empty()) return false;
  }
  return true;
}
static_assert(EveryRowNamed(), "an IOT_OP_* code has no row in the op table");
static_assert(kOps[IOT_OP_FLOCK].name == "flock");
static_assert(kOps[IOT_OP_RECVMSG].name == "recvmsg");
static_assert(kOps[IOT_OP_SENDFILE].fd == FdRole::kWriteTo);
static_assert(kOps[IOT_OP_PREADV2].buffer == OpBuffer::kFilled);
static_assert(kOps[IOT_OP_PWRITEV2].buffer == OpBuffer::kDrained);

// ---- async opcodes ----

constexpr size_t kUringNamed = IORING_OP_LAST;
constexpr std::array<std::string_view, kUringNamed> MakeUringNames() {
  std::array<std::string_view, kUringNamed> n{};
  n[IORING_OP_NOP] = "NOP";
  n[IORING_OP_READV] = "READV";
  n[IORING_OP_WRITEV] = "WRITEV";
  n[IORING_OP_FSYNC] = "FSYNC";
  n[IORING_OP_READ_FIXED] = "READ_FIXED";
  n[IORING_OP_WRITE_FIXED] = "WRITE_FIXED";
  n[IORING_OP_POLL_ADD] = "POLL_ADD";
  n[IORING_OP_POLL_REMOVE] = "POLL_REMOVE";
  n[IORING_OP_SYNC_FILE_RANGE] = "SYNC_FILE_RANGE";
  n[IORING_OP_SENDMSG] = "SENDMSG";
  n[IORING_OP_RECVMSG] = "RECVMSG";
  n[IORING_OP_TIMEOUT] = "TIMEOUT";
  n[IORING_OP_TIMEOUT_REMOVE] = "TIMEOUT_REMOVE";
  n[IORING_OP_ACCEPT] = "ACCEPT";
  n[IORING_OP_ASYNC_CANCEL] = "ASYNC_CANCEL";
  n[IORING_OP_LINK_TIMEOUT] = "LINK_TIMEOUT";
  n[IORING_OP_CONNECT] = "CONNECT";
  n[IORING_OP_FALLOCATE] = "FALLOCATE";
  n[IORING_OP_OPENAT] = "OPENAT";
  n[IORING_OP_CLOSE] = "CLOSE";
  n[IORING_OP_FILES_UPDATE] = "FILES_UPDATE";
  n[IORING_OP_STATX] = "STATX";
  n[IORING_OP_READ] = "READ";
  n[IORING_OP_WRITE] = "WRITE";
  n[IORING_OP_FADVISE] = "FADVISE";
  n[IORING_OP_MADVISE] = "MADVISE";
  n[IORING_OP_SEND] = "SEND";
  n[IORING_OP_RECV] = "RECV";
  n[IORING_OP_OPENAT2] = "OPENAT2";
  n[IORING_OP_EPOLL_CTL] = "EPOLL_CTL";
  n[IORING_OP_SPLICE] = "SPLICE";
  n[IORING_OP_PROVIDE_BUFFERS] = "PROVIDE_BUFFERS";
  n[IORING_OP_REMOVE_BUFFERS] = "REMOVE_BUFFERS";
  n[IORING_OP_TEE] = "TEE";
  n[IORING_OP_SHUTDOWN] = "SHUTDOWN";
  n[IORING_OP_RENAMEAT] = "RENAMEAT";
  n[IORING_OP_UNLINKAT] = "UNLINKAT";
  n[IORING_OP_MKDIRAT] = "MKDIRAT";
  n[IORING_OP_SYMLINKAT] = "SYMLINKAT";
  n[IORING_OP_LINKAT] = "LINKAT";
  return n;
}
constexpr std::array<std::string_view, kUringNamed> kUringNames = MakeUringNames();

AsyncOpInfo UringOp(uint8_t opcode) {
  AsyncOpInfo i{AsyncKind::kOther, {}, false, false, false, false};
  if (opcode < kUringNamed) i.name = kUringNames[opcode];
  switch (opcode) {
    case IORING_OP_NOP:
      i.nop = true;
      break;
    case IORING_OP_READV:
      i.kind = AsyncKind::kRead;
      i.vectored = true;
      break;
    case IORING_OP_WRITEV:
      i.kind = AsyncKind::kWrite;
      i.vectored = true;
      break;
    case IORING_OP_READ_FIXED:
      i.kind = AsyncKind::kRead;
      i.fixed = true;
      break;
    case IORING_OP_WRITE_FIXED:
      i.kind = AsyncKind::kWrite;
      i.fixed = true;
      break;
    case IORING_OP_READ:
      i.kind = AsyncKind::kRead;
      break;
    case IORING_OP_WRITE:
      i.kind = AsyncKind::kWrite;
      break;
    case IORING_OP_FSYNC:
      i.kind = AsyncKind::kFsync;
      break;
    default:
      break;
  }
  return i;
}

AsyncOpInfo LibaioOp(uint8_t opcode) {
  AsyncOpInfo i{AsyncKind::kOther, {}, false, false, false, false};
  switch (opcode) {
    case IOCB_CMD_PREAD:
      i = {AsyncKind::kRead, "PREAD", false, false, false, false};
      break;
    case IOCB_CMD_PWRITE:
      i = {AsyncKind::kWrite, "PWRITE", false, false, false, false};
      break;
    case IOCB_CMD_FSYNC:
      i = {AsyncKind::kFsync, "FSYNC", false, false, false, false};
      break;
    case IOCB_CMD_FDSYNC:
      i = {AsyncKind::kFsync, "FDSYNC", false, false, true, false};
      break;
    case IOCB_CMD_POLL:
      i.name = "POLL";
      break;
    case IOCB_CMD_NOOP:
      i.name = "NOOP";
      i.nop = true;
      break;
    case IOCB_CMD_PREADV:
      i = {AsyncKind::kRead, "PREADV", true, false, false, false};
      break;
    case IOCB_CMD_PWRITEV:
      i = {AsyncKind::kWrite, "PWRITEV", true, false, false, false};
      break;
    default:
      break;
  }
  return i;
}

}  // namespace

const OpInfo& GetOpInfo(uint16_t op) { return op <= IOT_OP_MAX ? kOps[op] : kOps[IOT_OP_UNKNOWN]; }

std::string_view AsyncEngineName(uint8_t engine) {
  if (engine == IOT_AIO_ENGINE_URING) return "io_uring";
  if (engine == IOT_AIO_ENGINE_LIBAIO) return "libaio";
  return "unknown";
}

AsyncOpInfo AsyncOp(uint8_t engine, uint8_t opcode) {
  if (engine == IOT_AIO_ENGINE_URING) return UringOp(opcode);
  if (engine == IOT_AIO_ENGINE_LIBAIO) return LibaioOp(opcode);
  return AsyncOpInfo{AsyncKind::kOther, {}, false, false, false, false};
}

bool AsyncLengthKnown(const iot_async_io& a) {
  if (a.aflags & IOT_AIOF_BYTES) return true;
  if (a.aflags & IOT_AIOF_IOV_FAULT) return false;
  // Engines other than libaio replay as io_uring, and so are their opcodes read.
  const uint8_t engine =
      a.engine == IOT_AIO_ENGINE_LIBAIO ? IOT_AIO_ENGINE_LIBAIO : IOT_AIO_ENGINE_URING;
  return !AsyncOp(engine, a.opcode).vectored;
}

}  // namespace iotwin
