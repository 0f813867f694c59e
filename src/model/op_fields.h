// How the fields of an iot_syscall record are read for each operation. The record is generic
// (fd, fd2, offset, length, aux, flags, mode); the op table (format/op_info.h) says which field
// carries which argument, and these accessors read it, so the model, replay, export and analysis
// all agree. Each op has one layout, the one docs/trace-format.md ("Per-op use of the argument
// fields") describes and the capture (bpf/syscall.bpf.c) and the strace importer write.
#pragma once

#include <cstdint>

#include "iotwin_abi.h"

namespace iotwin::model {

inline constexpr int kAtFdcwd = -100;
// A pointer argument that was NULL (copy_file_range/sendfile offsets, preadv2 offset -1).
inline constexpr uint64_t kNoOffset = UINT64_MAX;

// Directory descriptor used to resolve the first path of an *at() call (AT_FDCWD when the call
// takes no dirfd).
int PathDirFd(const iot_syscall& sc);
// Directory descriptor of the second path (renameat*, linkat: newdirfd; symlink(at): the link
// path's dirfd, fd2).
int Path2DirFd(const iot_syscall& sc);

// True when the op's first path is resolved relative to a dirfd/cwd (false for symlink targets,
// which are stored verbatim).
bool OpTakesPath(uint16_t op);
bool OpTakesPath2(uint16_t op);

// True when the op operates on a descriptor (reads, writes, fsync, file mmap, ...).
bool OpHasDataFd(const iot_syscall& sc);
// That descriptor (as recorded, possibly invalid such as -1). copy_file_range and sendfile: the
// source (copy_file_range's fd_in in `fd`, sendfile's in_fd in `fd2`). -1 when OpHasDataFd is
// false.
int DataFd(const iot_syscall& sc);
// The second descriptor that must be known to replay the op (dup2/dup3 newfd is created, not
// used, so it is not listed): the destination of a copy, copy_file_range's fd_out (`fd2`),
// sendfile's out_fd (`fd`). -1 if none.
int SecondFd(const iot_syscall& sc);

// fallocate mode (`mode`).
inline uint32_t FallocateMode(const iot_syscall& sc) { return sc.mode; }
// truncate/ftruncate new length (`length`).
uint64_t TruncateLength(const iot_syscall& sc);
// fcntl command and argument (the argument of commands that take an integer; record-lock
// commands keep their struct flock in the fields below instead).
inline int FcntlCmd(const iot_syscall& sc) { return static_cast<int>(sc.mode); }
inline uint64_t FcntlArg(const iot_syscall& sc) { return sc.aux; }
// True for the record-lock commands, POSIX (F_GETLK, F_SETLK, F_SETLKW) and open file
// description (F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW).
bool FcntlIsLock(int cmd);
// True for the lock commands that only ask (F_GETLK, F_OFD_GETLK).
bool FcntlIsLockQuery(int cmd);
// True for the commands that wait for a conflicting lock (F_SETLKW, F_OFD_SETLKW).
bool FcntlLockWaits(int cmd);
// The struct flock of a record-lock command as the program passed it: l_type in `flags`
// (F_RDLCK, F_WRLCK, F_UNLCK; -1 when the capture could not read it), l_whence in `aux` (as
// lseek's whence), l_start in `offset`, l_len in `length` (both signed).
inline int LockType(const iot_syscall& sc) { return static_cast<int32_t>(sc.flags); }
inline int LockWhence(const iot_syscall& sc) { return static_cast<int>(sc.aux); }
inline int64_t LockStart(const iot_syscall& sc) { return static_cast<int64_t>(sc.offset); }
inline int64_t LockLength(const iot_syscall& sc) { return static_cast<int64_t>(sc.length); }
// flock(2) operation: LOCK_SH, LOCK_EX or LOCK_UN, with LOCK_NB (`flags`).
inline int FlockOperation(const iot_syscall& sc) { return static_cast<int>(sc.flags); }
// lseek whence.
inline int Whence(const iot_syscall& sc) { return static_cast<int>(sc.aux); }
// fadvise advice (aux).
inline int Advice(const iot_syscall& sc) { return static_cast<int>(sc.aux); }
// Address argument of munmap/msync/madvise (`offset`); mremap: old address (`offset`); mmap: the
// returned address.
uint64_t MemAddr(const iot_syscall& sc);
// Length argument of munmap/msync/madvise; mremap: old length (`length`).
uint64_t MemLength(const iot_syscall& sc);
// madvise advice (`aux`).
int MadviseAdvice(const iot_syscall& sc);
// mremap new length (`aux`).
uint64_t MremapNewLength(const iot_syscall& sc);
// close_range bounds: first = fd, last = fd2 (~0U reads as -1).
inline uint32_t CloseRangeFirst(const iot_syscall& sc) { return static_cast<uint32_t>(sc.fd); }
inline uint32_t CloseRangeLast(const iot_syscall& sc) { return static_cast<uint32_t>(sc.fd2); }
// copy_file_range output offset (aux; kNoOffset when NULL).
inline uint64_t CopyOutOffset(const iot_syscall& sc) { return sc.aux; }
// openat2 resolve flags (aux).
inline uint64_t Openat2Resolve(const iot_syscall& sc) { return sc.aux; }

// True when the op returns a new descriptor in `ret` (opens, dup*, fcntl F_DUPFD*).
bool OpReturnsFd(const iot_syscall& sc);
// Whether the call copies descriptor `fd` into its result (dup, dup2, dup3; fcntl F_DUPFD*).
bool DuplicatesFd(const iot_syscall& sc);
// Whether the call sets the status flags of `fd`'s open file description (fcntl F_SETFL).
bool SetsStatusFlags(const iot_syscall& sc);
// Whether the call makes or removes a directory (mkdir, rmdir, unlinkat with AT_REMOVEDIR).
bool MakesOrRemovesDir(const iot_syscall& sc);
// Whether a rename swaps its two names (renameat2 with RENAME_EXCHANGE).
bool RenameExchanges(const iot_syscall& sc);
// True for ops whose successful result is a byte count or position that replay must reproduce
// exactly (reads, writes, lseek, copies); other successful results are compared as "success".
bool OpResultIsCount(uint16_t op);
// Effective close-on-exec of the descriptor an op returns.
bool OpResultCloexec(const iot_syscall& sc);
// The open flags an open call used: its recorded flags, or for creat() (which has none)
// O_CREAT | O_WRONLY | O_TRUNC, as the kernel opens it.
uint32_t EffectiveOpenFlags(const iot_syscall& sc);

}  // namespace iotwin::model
