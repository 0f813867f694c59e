// Facts about each recorded operation, in one table indexed by IOT_OP_*: which record fields hold
// descriptors and paths and what role they play, the direction of data, what a successful result
// means, how the scalar fields are used, and whether replay re-issues the call. Plus the one
// classification of io_uring (IORING_OP_*) and libaio (IOCB_CMD_*) request opcodes.
//
// The layout columns follow docs/trace-format.md ("Per-op use of the argument fields"), which
// follows what the capture (bpf/syscall.bpf.c) writes. Code that reads an op's fields asks this
// table (through model/op_fields.h for the accessors); a `switch` on IOT_OP_* elsewhere is for
// behaviour, not for these facts. Op codes come from untrusted traces: every lookup accepts any
// value and answers "unknown" for codes past IOT_OP_MAX.
#pragma once

#include <cstdint>
#include <string_view>

#include "iotwin_abi.h"

namespace iotwin {

enum class OpFamily : uint8_t {
  kUnknown,
  kOpen,        // open, openat, openat2, creat
  kDescriptor,  // close, close_range, dup*, fcntl, flock
  kRead,        // read, pread64, readv, preadv, preadv2
  kWrite,       // write, pwrite64, writev, pwritev, pwritev2
  kSeek,        // lseek
  kSync,        // fsync, fdatasync, sync_file_range, syncfs, sync
  kSpace,       // fallocate, ftruncate, truncate
  kAdvice,      // fadvise64, readahead
  kCopy,        // copy_file_range, sendfile, splice
  kMemory,      // mmap, munmap, mremap, msync, madvise
  kStat,        // stat, lstat, fstat, newfstatat, statx
  kDirectory,   // getdents64, mkdir(at), unlink(at), rmdir, rename*, link*, symlink*
  kCwd,         // chdir, fchdir
  kAio,         // io_setup, io_submit, io_getevents, io_pgetevents, io_destroy
  kUring,       // io_uring_setup, io_uring_enter, io_uring_register
};

// Data moved by the call, as seen from the files it names.
enum class OpDirection : uint8_t {
  kNone,
  kRead,   // reads a file into memory
  kWrite,  // writes memory into a file
  kCopy,   // reads one descriptor and writes another (copy_file_range, sendfile, splice)
};

// What a successful (non-negative) `ret` means.
enum class OpResult : uint8_t {
  kStatus,     // 0 on success; nothing else to reproduce
  kByteCount,  // bytes moved: replay must move as many
  kPosition,   // the new file position (lseek)
  kNewFd,      // a new descriptor (opens, dup*, io_uring_setup; fcntl F_DUPFD* by command)
  kAddress,    // a mapping address (mmap, mremap)
  kCount,      // a count of something other than bytes (io_submit requests, events, entries)
  // A value replay need not reproduce: it depends on the command (fcntl F_GETFL,
  // io_uring_register) or on state (getdents64's bytes of entries).
  kValue,
};

// Role of a descriptor field (`fd` or `fd2`) of the record.
enum class FdRole : uint8_t {
  kNone,
  kReadFrom,  // data are read from it
  kWriteTo,   // data are written to it
  kUsed,      // operated on without moving data (fsync, lseek, close, dup's oldfd, mmap's file)
  kDirFd,     // directory a path argument is resolved against (AT_FDCWD = -100)
  kCreated,   // the descriptor the call makes (dup2/dup3 newfd); not needed beforehand
  kRange,     // a bound of a descriptor range (close_range: fd = first, fd2 = last)
  kRing,      // an io_uring instance
  kSocket,    // a socket the trace does not follow (recvmsg's)
};

// Role of a path field (`path_id`, `path2_id`).
enum class PathRole : uint8_t {
  kNone,
  kResolved,  // resolved against a dirfd or the cwd
  kVerbatim,  // stored as passed and never resolved (a symlink's target)
};

// Where a path's directory comes from.
enum class PathBase : uint8_t {
  kCwd,  // the call takes no dirfd
  kFd,   // the record's `fd`
  kFd2,  // the record's `fd2`
};

// Meaning of a scalar field (`offset`, `length`, `aux`).
enum class FieldUse : uint8_t {
  kUnused,
  kFileOffset,       // the call's offset argument
  kPositionBefore,   // the file position the call used, where known (informational)
  kOffsetOrCurrent,  // preadv2/pwritev2: offset, or -1 for the current position
  kInOffset,         // *off_in (copy_file_range, splice, sendfile); UINT64_MAX when NULL
  kOutOffset,        // *off_out; UINT64_MAX when NULL
  kByteCount,        // a byte count argument
  kIovecTotal,       // sum of the iovec lengths (the IOVEC record has each)
  kIovcnt,
  kWhence,        // lseek's whence
  kAdvice,        // fadvise64, madvise
  kNewLength,     // truncate, ftruncate: the new file length; mremap: the new mapping length
  kAddress,       // munmap, msync, madvise: the address argument
  kAddressHint,   // mmap's address argument
  kOldAddress,    // mremap
  kOldLength,     // mremap
  kMapLength,     // mmap, munmap, msync, madvise: length of the range
  kResolveFlags,  // openat2's how.resolve
  kFcntlArg,      // fcntl: the integer argument, or l_* of a record lock (by command)
  kCommand,       // other per-op values: entries, min_nr, ring contexts (docs/trace-format.md)
};

// Whether replay issues the recorded call.
enum class OpReplay : uint8_t {
  kReissued,     // issued as the same system call with the recorded arguments
  kAsyncEngine,  // not re-issued: the async back end sets up its own ring/context and replays
                 // the ASYNC_IO requests
  kNotReplayed,  // never issued (the model marks it unsupported)
};

// The caller's memory buffer, which replay supplies (sized by `length` or the IOVEC record).
enum class OpBuffer : uint8_t {
  kNone,
  kFilled,   // the call fills it (reads, getdents64)
  kDrained,  // the call takes its bytes (writes)
};

// What the call does to the mappings of its process. All but kMaps name an address inside a
// mapping (MemAddr/MemLength of model/op_fields.h read the range).
enum class OpMapping : uint8_t {
  kNone,
  kMaps,     // mmap: makes one (with MAP_FIXED, possibly inside another)
  kUnmaps,   // munmap: removes a range
  kRemaps,   // mremap: moves one; the new mapping takes the old one's place
  kSyncs,    // msync: writes a range back to its file
  kAdvises,  // madvise
};

// What the call does to the descriptor table besides a new descriptor in its result.
enum class FdEffect : uint8_t {
  kNone,
  kCloses,       // close: `fd`
  kClosesRange,  // close_range: every descriptor of [fd, fd2] (or marks it close-on-exec)
  kDuplicates,   // dup, dup2, dup3; fcntl F_DUPFD* by command: `fd` to the result
  kReceives,     // recvmsg: the descriptors of the FDLIST record that follows (SCM_RIGHTS)
};

// What the call does to the names of the file system (its paths, per PathRole).
enum class NameEffect : uint8_t {
  kNone,
  kMakesDir,     // mkdir, mkdirat
  kRemoves,      // unlink, unlinkat (a directory with AT_REMOVEDIR, the *at form's flag)
  kRemovesDir,   // rmdir
  kRenames,      // rename, renameat, renameat2: path to path2
  kLinks,        // link, linkat: path2 becomes a name of path's file
  kSymlinks,     // symlink, symlinkat: path2 becomes a link holding path's text
  kBindsSocket,  // bind (AF_UNIX): a socket file at path
  kSetsCwd,      // chdir (path), fchdir (fd)
};

// The part a call plays for an async engine's context (context set-up, submission, reaping).
enum class AsyncCall : uint8_t {
  kNone,
  kSetup,     // io_setup, io_uring_setup: makes a context
  kSubmit,    // io_submit: submits the ASYNC_IO requests recorded before it
  kReap,      // io_getevents, io_pgetevents: waits for completions
  kEnter,     // io_uring_enter: submits, and with IORING_ENTER_GETEVENTS waits
  kRegister,  // io_uring_register
  kDestroy,   // io_destroy (a ring ends with its descriptor's close)
};

// What a sync call makes durable.
enum class SyncScope : uint8_t {
  kNone,
  kFile,        // fsync: one file's data and metadata
  kFileData,    // fdatasync: one file's data (and the metadata needed to read it back)
  kFileRange,   // sync_file_range: a range of one file's data (`offset`, `length`)
  kFileSystem,  // syncfs: the file system holding `fd`
  kAll,         // sync: every file system
};

// What a space call does to a file's extent.
enum class SpaceEffect : uint8_t {
  kNone,
  kFallocates,  // fallocate: `mode` (FALLOC_FL_*) says allocate, punch a hole, zero, collapse...
  kSetsLength,  // truncate, ftruncate: the length in `length`
};

struct OpInfo {
  std::string_view name;  // as OpName: "pread64", "openat", ...; "unknown" out of range
  OpFamily family;
  OpDirection direction;
  OpResult result;
  FdRole fd;   // role of `fd`
  FdRole fd2;  // role of `fd2`
  PathRole path;
  PathBase path_base;
  PathRole path2;
  PathBase path2_base;
  FieldUse offset;
  FieldUse length;
  FieldUse aux;
  bool vectored;  // an IOVEC record follows with the iovec layout
  OpReplay replay;
  OpBuffer buffer = OpBuffer::kNone;
  OpMapping mapping = OpMapping::kNone;
  FdEffect fd_effect = FdEffect::kNone;
  AsyncCall async = AsyncCall::kNone;
  NameEffect names = NameEffect::kNone;
  // The written descriptor (kWriteTo) may be any descriptor, a socket or a pipe, not only a file
  // the trace follows: replay writes to a sink in its place (sendfile, splice).
  bool writes_any_fd = false;
  SyncScope sync = SyncScope::kNone;
  SpaceEffect space = SpaceEffect::kNone;
};

// The row of `op`; the "unknown" row for IOT_OP_UNKNOWN and codes past IOT_OP_MAX.
const OpInfo& GetOpInfo(uint16_t op);

// Whether `op` submits asynchronous requests (io_submit, io_uring_enter).
inline bool OpSubmitsAsync(uint16_t op) {
  const AsyncCall a = GetOpInfo(op).async;
  return a == AsyncCall::kSubmit || a == AsyncCall::kEnter;
}

// ---- async request opcodes (ASYNC_IO records) -----------------------------------------------

enum class AsyncKind : uint8_t {
  kOther,  // neither moves file data nor syncs (nop, poll, cancel, network, ...)
  kRead,
  kWrite,
  kFsync,  // IORING_OP_FSYNC (datasync by IORING_FSYNC_DATASYNC in its flags), IOCB_CMD_FSYNC,
           // IOCB_CMD_FDSYNC (datasync)
};

struct AsyncOpInfo {
  AsyncKind kind;
  // Kernel constant without its prefix ("READV" for IORING_OP_READV, "PREAD" for
  // IOCB_CMD_PREAD); empty for opcodes this build has no name for.
  std::string_view name;
  bool vectored;  // the request carries an iovec array (READV, WRITEV, PREADV, PWRITEV)
  bool fixed;     // io_uring registered buffer (READ_FIXED, WRITE_FIXED)
  bool datasync;  // IOCB_CMD_FDSYNC (io_uring says it per request, in the fsync flags)
  bool nop;       // IORING_OP_NOP, IOCB_CMD_NOOP
};

// The name of async engine `engine` (IOT_AIO_ENGINE_*) as reports print it: "io_uring",
// "libaio", or "unknown" for any other value (a damaged trace).
std::string_view AsyncEngineName(uint8_t engine);

// Classification of request `opcode` of `engine` (IOT_AIO_ENGINE_*). Unknown engines and opcodes
// give kind kOther and an empty name.
AsyncOpInfo AsyncOp(uint8_t engine, uint8_t opcode);

// The bytes a submitted request asks for (iot_async_io::length), where the record knows them:
// every request that carries IOT_AIOF_BYTES, and the non-vectored ones of records without it
// (whose vectored requests carry their iovec count there). False: unknown, the caller uses the
// completion's result instead.
bool AsyncLengthKnown(const iot_async_io& a);

}  // namespace iotwin
