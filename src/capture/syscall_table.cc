#include "capture/syscall_table.h"

#include <sys/syscall.h>

#include "iotwin_abi.h"

namespace iotwin::capture {
namespace {

// Each entry is guarded: the set of syscalls differs by architecture (arm64 has no open, stat,
// rename, ...; its libc uses the *at forms).
constexpr SyscallOp kCaptured[] = {
#ifdef SYS_open
    {SYS_open, IOT_OP_OPEN},
#endif
#ifdef SYS_openat
    {SYS_openat, IOT_OP_OPENAT},
#endif
#ifdef SYS_openat2
    {SYS_openat2, IOT_OP_OPENAT2},
#endif
#ifdef SYS_creat
    {SYS_creat, IOT_OP_CREAT},
#endif
#ifdef SYS_close
    {SYS_close, IOT_OP_CLOSE},
#endif
#ifdef SYS_close_range
    {SYS_close_range, IOT_OP_CLOSE_RANGE},
#endif
#ifdef SYS_dup
    {SYS_dup, IOT_OP_DUP},
#endif
#ifdef SYS_dup2
    {SYS_dup2, IOT_OP_DUP2},
#endif
#ifdef SYS_dup3
    {SYS_dup3, IOT_OP_DUP3},
#endif
#ifdef SYS_fcntl
    {SYS_fcntl, IOT_OP_FCNTL},
#endif
#ifdef SYS_flock
    {SYS_flock, IOT_OP_FLOCK},
#endif
#ifdef SYS_read
    {SYS_read, IOT_OP_READ},
#endif
#ifdef SYS_write
    {SYS_write, IOT_OP_WRITE},
#endif
#ifdef SYS_pread64
    {SYS_pread64, IOT_OP_PREAD64},
#endif
#ifdef SYS_pwrite64
    {SYS_pwrite64, IOT_OP_PWRITE64},
#endif
#ifdef SYS_readv
    {SYS_readv, IOT_OP_READV},
#endif
#ifdef SYS_writev
    {SYS_writev, IOT_OP_WRITEV},
#endif
#ifdef SYS_preadv
    {SYS_preadv, IOT_OP_PREADV},
#endif
#ifdef SYS_pwritev
    {SYS_pwritev, IOT_OP_PWRITEV},
#endif
#ifdef SYS_preadv2
    {SYS_preadv2, IOT_OP_PREADV2},
#endif
#ifdef SYS_pwritev2
    {SYS_pwritev2, IOT_OP_PWRITEV2},
#endif
#ifdef SYS_lseek
    {SYS_lseek, IOT_OP_LSEEK},
#endif
#ifdef SYS_fsync
    {SYS_fsync, IOT_OP_FSYNC},
#endif
#ifdef SYS_fdatasync
    {SYS_fdatasync, IOT_OP_FDATASYNC},
#endif
#ifdef SYS_sync
    {SYS_sync, IOT_OP_SYNC},
#endif
#ifdef SYS_sync_file_range
    {SYS_sync_file_range, IOT_OP_SYNC_FILE_RANGE},
#endif
#ifdef SYS_syncfs
    {SYS_syncfs, IOT_OP_SYNCFS},
#endif
#ifdef SYS_fallocate
    {SYS_fallocate, IOT_OP_FALLOCATE},
#endif
#ifdef SYS_ftruncate
    {SYS_ftruncate, IOT_OP_FTRUNCATE},
#endif
#ifdef SYS_truncate
    {SYS_truncate, IOT_OP_TRUNCATE},
#endif
#ifdef SYS_fadvise64
    {SYS_fadvise64, IOT_OP_FADVISE64},
#endif
#ifdef SYS_readahead
    {SYS_readahead, IOT_OP_READAHEAD},
#endif
#ifdef SYS_copy_file_range
    {SYS_copy_file_range, IOT_OP_COPY_FILE_RANGE},
#endif
#ifdef SYS_sendfile
    {SYS_sendfile, IOT_OP_SENDFILE},
#endif
#ifdef SYS_splice
    {SYS_splice, IOT_OP_SPLICE},
#endif
#ifdef SYS_mmap
    {SYS_mmap, IOT_OP_MMAP},
#endif
#ifdef SYS_munmap
    {SYS_munmap, IOT_OP_MUNMAP},
#endif
#ifdef SYS_mremap
    {SYS_mremap, IOT_OP_MREMAP},
#endif
#ifdef SYS_msync
    {SYS_msync, IOT_OP_MSYNC},
#endif
#ifdef SYS_madvise
    {SYS_madvise, IOT_OP_MADVISE},
#endif
#ifdef SYS_stat
    {SYS_stat, IOT_OP_STAT},
#endif
#ifdef SYS_lstat
    {SYS_lstat, IOT_OP_LSTAT},
#endif
#ifdef SYS_fstat
    {SYS_fstat, IOT_OP_FSTAT},
#endif
#ifdef SYS_newfstatat
    {SYS_newfstatat, IOT_OP_NEWFSTATAT},
#endif
#ifdef SYS_statx
    {SYS_statx, IOT_OP_STATX},
#endif
#ifdef SYS_getdents64
    {SYS_getdents64, IOT_OP_GETDENTS64},
#endif
#ifdef SYS_mkdir
    {SYS_mkdir, IOT_OP_MKDIR},
#endif
#ifdef SYS_mkdirat
    {SYS_mkdirat, IOT_OP_MKDIRAT},
#endif
#ifdef SYS_unlink
    {SYS_unlink, IOT_OP_UNLINK},
#endif
#ifdef SYS_unlinkat
    {SYS_unlinkat, IOT_OP_UNLINKAT},
#endif
#ifdef SYS_rmdir
    {SYS_rmdir, IOT_OP_RMDIR},
#endif
#ifdef SYS_rename
    {SYS_rename, IOT_OP_RENAME},
#endif
#ifdef SYS_renameat
    {SYS_renameat, IOT_OP_RENAMEAT},
#endif
#ifdef SYS_renameat2
    {SYS_renameat2, IOT_OP_RENAMEAT2},
#endif
#ifdef SYS_link
    {SYS_link, IOT_OP_LINK},
#endif
#ifdef SYS_linkat
    {SYS_linkat, IOT_OP_LINKAT},
#endif
#ifdef SYS_symlink
    {SYS_symlink, IOT_OP_SYMLINK},
#endif
#ifdef SYS_symlinkat
    {SYS_symlinkat, IOT_OP_SYMLINKAT},
#endif
#ifdef SYS_chdir
    {SYS_chdir, IOT_OP_CHDIR},
#endif
#ifdef SYS_fchdir
    {SYS_fchdir, IOT_OP_FCHDIR},
#endif
#ifdef SYS_io_setup
    {SYS_io_setup, IOT_OP_IO_SETUP},
#endif
#ifdef SYS_io_submit
    {SYS_io_submit, IOT_OP_IO_SUBMIT},
#endif
#ifdef SYS_io_getevents
    {SYS_io_getevents, IOT_OP_IO_GETEVENTS},
#endif
#ifdef SYS_io_pgetevents
    {SYS_io_pgetevents, IOT_OP_IO_PGETEVENTS},
#endif
#ifdef SYS_io_destroy
    {SYS_io_destroy, IOT_OP_IO_DESTROY},
#endif
#ifdef SYS_io_uring_setup
    {SYS_io_uring_setup, IOT_OP_IO_URING_SETUP},
#endif
#ifdef SYS_io_uring_enter
    {SYS_io_uring_enter, IOT_OP_IO_URING_ENTER},
#endif
#ifdef SYS_io_uring_register
    {SYS_io_uring_register, IOT_OP_IO_URING_REGISTER},
#endif
#ifdef SYS_bind
    {SYS_bind, IOT_OP_BIND},
#endif
#ifdef SYS_recvmsg
    {SYS_recvmsg, IOT_OP_RECVMSG},
#endif
};

}  // namespace

std::span<const SyscallOp> CapturedSyscalls() { return kCaptured; }

std::vector<uint8_t> SyscallNrToOp(size_t size) {
  static_assert(IOT_OP_MAX < 256, "the BPF table stores ops in one byte");
  std::vector<uint8_t> table(size, 0);
  for (const SyscallOp& s : kCaptured) {
    if (s.nr >= 0 && static_cast<size_t>(s.nr) < size) table[s.nr] = static_cast<uint8_t>(s.op);
  }
  return table;
}

}  // namespace iotwin::capture
