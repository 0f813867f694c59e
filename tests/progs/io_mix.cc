// io_mix LOG DIR: one thread making (nearly) every system call the syscall layer captures, on
// files under DIR, and logging each with the arguments and result the trace must show
// (prog_log.h). Used by tests/runtime/record_syscalls_test.cc.
#include <malloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "prog_log.h"

using iotwin::progs::Entry;
using iotwin::progs::Sys;

namespace {

constexpr int kAtFdCwd = -100;

uint64_t InoOf(long stat_rc, const struct stat& st) { return stat_rc == 0 ? st.st_ino : 0; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: io_mix LOG DIR\n");
    return 2;
  }
  mallopt(M_ARENA_MAX, 1);
  iotwin::progs::Log log(argv[1]);
  const std::string dir = argv[2];
  const std::string a = dir + "/a.dat", b = dir + "/b.dat", c = dir + "/c.dat";
  const std::string sub = dir + "/sub", sub2 = dir + "/sub2";
  alignas(4096) static char buf[65536];
  memset(buf, 'x', sizeof buf);
  int pipefd[2];
  if (pipe(pipefd) != 0) iotwin::progs::Die("pipe");
  struct stat st;
  struct statx stx;
  long r;

  iotwin::progs::BeginMark();

  // open family: identity of the returned fd, checked against fstat
  int fd = static_cast<int>(
      Sys(SYS_openat, kAtFdCwd, a.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0644));
  long src = Sys(SYS_fstat, fd, &st);
  uint64_t ino_a = InoOf(src, st);
  log.Add(Entry("openat")
              .Int("fd", kAtFdCwd)
              .Str("path", a)
              .U64("flags", O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC)
              .U64("mode", 0644)
              .Int("ret", fd)
              .U64("ino", ino_a));
  log.Add(Entry("fstat").Int("fd", fd).Int("ret", src).U64("ino", ino_a));
  uint64_t pos = 0;

  // transfers; read/write offsets are the file position the call used
  r = Sys(SYS_write, fd, buf, 8192);
  log.Add(Entry("write")
              .Int("fd", fd)
              .U64("length", 8192)
              .U64("offset", pos)
              .Int("ret", r)
              .U64("ino", ino_a));
  pos += r > 0 ? r : 0;
  r = Sys(SYS_pwrite64, fd, buf, 4096, 8192);
  log.Add(Entry("pwrite64")
              .Int("fd", fd)
              .U64("length", 4096)
              .U64("offset", 8192)
              .Int("ret", r)
              .U64("ino", ino_a));
  r = Sys(SYS_lseek, fd, 0, SEEK_SET);
  log.Add(Entry("lseek").Int("fd", fd).U64("offset", 0).U64("aux", SEEK_SET).Int("ret", r));
  pos = 0;
  r = Sys(SYS_read, fd, buf, 4096);
  log.Add(Entry("read")
              .Int("fd", fd)
              .U64("length", 4096)
              .U64("offset", pos)
              .Int("ret", r)
              .U64("ino", ino_a));
  pos += r > 0 ? r : 0;
  r = Sys(SYS_pread64, fd, buf, 4096, 4096);
  log.Add(Entry("pread64")
              .Int("fd", fd)
              .U64("length", 4096)
              .U64("offset", 4096)
              .Int("ret", r)
              .U64("ino", ino_a));
  {
    struct iovec iov[3] = {{buf, 512}, {buf + 512, 1024}, {buf + 2048, 2048}};
    r = Sys(SYS_readv, fd, iov, 3);
    log.Add(Entry("readv")
                .Int("fd", fd)
                .U64("aux", 3)
                .U64("length", 3584)
                .U64("offset", pos)
                .Int("ret", r)
                .Str("iov", "512,1024,2048"));
    pos += r > 0 ? r : 0;
    r = Sys(SYS_writev, fd, iov, 2);
    log.Add(Entry("writev")
                .Int("fd", fd)
                .U64("aux", 2)
                .U64("length", 1536)
                .U64("offset", pos)
                .Int("ret", r)
                .Str("iov", "512,1024"));
    pos += r > 0 ? r : 0;
    r = Sys(SYS_preadv, fd, iov, 3, 1000, 0);
    log.Add(Entry("preadv")
                .Int("fd", fd)
                .U64("aux", 3)
                .U64("length", 3584)
                .U64("offset", 1000)
                .Int("ret", r)
                .Str("iov", "512,1024,2048"));
    r = Sys(SYS_pwritev, fd, iov, 1, 20000, 0);
    log.Add(Entry("pwritev")
                .Int("fd", fd)
                .U64("aux", 1)
                .U64("length", 512)
                .U64("offset", 20000)
                .Int("ret", r)
                .Str("iov", "512"));
    r = Sys(SYS_preadv2, fd, iov, 2, 0, 0, RWF_HIPRI);
    log.Add(Entry("preadv2")
                .Int("fd", fd)
                .U64("aux", 2)
                .U64("length", 1536)
                .U64("offset", 0)
                .U64("flags", RWF_HIPRI)
                .Int("ret", r)
                .Str("iov", "512,1024"));
    r = Sys(SYS_pwritev2, fd, iov, 2, 30000, 0, RWF_DSYNC);
    log.Add(Entry("pwritev2")
                .Int("fd", fd)
                .U64("aux", 2)
                .U64("length", 1536)
                .U64("offset", 30000)
                .U64("flags", RWF_DSYNC)
                .Int("ret", r)
                .Str("iov", "512,1024"));
  }

  // durability and space
  r = Sys(SYS_fsync, fd);
  log.Add(Entry("fsync").Int("fd", fd).Int("ret", r).U64("ino", ino_a));
  r = Sys(SYS_fdatasync, fd);
  log.Add(Entry("fdatasync").Int("fd", fd).Int("ret", r));
  r = Sys(SYS_sync_file_range, fd, 0, 4096, SYNC_FILE_RANGE_WRITE);
  log.Add(Entry("sync_file_range")
              .Int("fd", fd)
              .U64("offset", 0)
              .U64("length", 4096)
              .U64("flags", SYNC_FILE_RANGE_WRITE)
              .Int("ret", r));
  r = Sys(SYS_fallocate, fd, 0, 0, 65536);
  log.Add(Entry("fallocate")
              .Int("fd", fd)
              .U64("mode", 0)
              .U64("offset", 0)
              .U64("length", 65536)
              .Int("ret", r));
  r = Sys(SYS_ftruncate, fd, 50000);
  log.Add(Entry("ftruncate").Int("fd", fd).U64("length", 50000).Int("ret", r).U64("fsize", 50000));
  r = Sys(SYS_fadvise64, fd, 0, 4096, POSIX_FADV_WILLNEED);
  log.Add(Entry("fadvise64")
              .Int("fd", fd)
              .U64("offset", 0)
              .U64("length", 4096)
              .U64("aux", POSIX_FADV_WILLNEED)
              .Int("ret", r));
  r = Sys(SYS_readahead, fd, 0, 8192);
  log.Add(Entry("readahead").Int("fd", fd).U64("offset", 0).U64("length", 8192).Int("ret", r));
  r = Sys(SYS_syncfs, fd);
  log.Add(Entry("syncfs").Int("fd", fd).Int("ret", r));
  r = Sys(SYS_sync);
  log.Add(Entry("sync").Int("ret", r));

  // metadata: identity from the stat buffers the calls fill
  r = Sys(SYS_newfstatat, kAtFdCwd, a.c_str(), &st, 0);
  log.Add(Entry("newfstatat")
              .Int("fd", kAtFdCwd)
              .Str("path", a)
              .U64("flags", 0)
              .Int("ret", r)
              .U64("ino", ino_a)
              .U64("fsize", 50000));
  r = Sys(SYS_statx, kAtFdCwd, a.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx);
  log.Add(Entry("statx")
              .Int("fd", kAtFdCwd)
              .Str("path", a)
              .U64("flags", AT_SYMLINK_NOFOLLOW)
              .U64("mode", STATX_BASIC_STATS)
              .Int("ret", r)
              .U64("ino", ino_a));
#ifdef SYS_stat
  r = Sys(SYS_stat, a.c_str(), &st);
  log.Add(Entry("stat").Int("fd", kAtFdCwd).Str("path", a).Int("ret", r).U64("ino", ino_a));
  r = Sys(SYS_lstat, (dir + "/missing").c_str(), &st);
  log.Add(
      Entry("lstat").Int("fd", kAtFdCwd).Str("path", dir + "/missing").Int("ret", r).U64("ino", 0));
#endif

  // mappings
  long addr = Sys(SYS_mmap, 0, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 4096);
  log.Add(Entry("mmap")
              .U64("aux", 0)
              .U64("length", 8192)
              .U64("mode", PROT_READ | PROT_WRITE)
              .U64("flags", MAP_SHARED)
              .Int("fd", fd)
              .U64("offset", 4096)
              .Int("ret", addr)
              .U64("ino", ino_a));
  r = Sys(SYS_msync, addr, 8192, MS_SYNC);
  log.Add(
      Entry("msync").U64("offset", addr).U64("length", 8192).U64("flags", MS_SYNC).Int("ret", r));
  r = Sys(SYS_madvise, addr, 8192, MADV_RANDOM);
  log.Add(Entry("madvise")
              .U64("offset", addr)
              .U64("length", 8192)
              .U64("aux", MADV_RANDOM)
              .Int("ret", r));
  long addr2 = Sys(SYS_mremap, addr, 8192, 16384, MREMAP_MAYMOVE, 0);
  log.Add(Entry("mremap")
              .U64("offset", addr)
              .U64("length", 8192)
              .U64("aux", 16384)
              .U64("flags", MREMAP_MAYMOVE)
              .Int("ret", addr2));
  r = Sys(SYS_munmap, addr2, 16384);
  log.Add(Entry("munmap").U64("offset", addr2).U64("length", 16384).Int("ret", r));

  // copies between descriptors
  int fdb = static_cast<int>(Sys(SYS_openat, kAtFdCwd, b.c_str(), O_CREAT | O_RDWR, 0600));
  log.Add(Entry("openat")
              .Int("fd", kAtFdCwd)
              .Str("path", b)
              .U64("flags", O_CREAT | O_RDWR)
              .U64("mode", 0600)
              .Int("ret", fdb));
  {
    loff_t off_in = 100, off_out = 200;
    r = Sys(SYS_copy_file_range, fd, &off_in, fdb, &off_out, 4096, 0);
    log.Add(Entry("copy_file_range")
                .Int("fd", fd)
                .Int("fd2", fdb)
                .U64("offset", 100)
                .U64("aux", 200)
                .U64("length", 4096)
                .U64("flags", 0)
                .Int("ret", r)
                .U64("ino", ino_a));
    off_t off = 300;
    r = Sys(SYS_sendfile, fdb, fd, &off, 1000);
    log.Add(Entry("sendfile")
                .Int("fd", fdb)
                .Int("fd2", fd)
                .U64("offset", 300)
                .U64("length", 1000)
                .Int("ret", r));
    loff_t soff = 0;
    r = Sys(SYS_splice, fd, &soff, pipefd[1], nullptr, 512, 0);
    log.Add(Entry("splice")
                .Int("fd", fd)
                .Int("fd2", pipefd[1])
                .U64("offset", 0)
                .U64("aux", UINT64_MAX)
                .U64("length", 512)
                .U64("flags", 0)
                .Int("ret", r));
  }

  // names
  r = Sys(SYS_mkdirat, kAtFdCwd, sub.c_str(), 0755);
  log.Add(Entry("mkdirat").Int("fd", kAtFdCwd).Str("path", sub).U64("mode", 0755).Int("ret", r));
  int dfd = static_cast<int>(Sys(SYS_openat, kAtFdCwd, dir.c_str(), O_RDONLY | O_DIRECTORY, 0));
  log.Add(Entry("openat")
              .Int("fd", kAtFdCwd)
              .Str("path", dir)
              .U64("flags", O_RDONLY | O_DIRECTORY)
              .U64("mode", 0)
              .Int("ret", dfd));
  r = Sys(SYS_getdents64, dfd, buf, sizeof buf);
  log.Add(Entry("getdents64").Int("fd", dfd).U64("length", sizeof buf).Int("ret", r));
  r = Sys(SYS_renameat, dfd, "b.dat", dfd, "c.dat");
  log.Add(Entry("renameat")
              .Int("fd", dfd)
              .Str("path", "b.dat")
              .Int("fd2", dfd)
              .Str("path2", "c.dat")
              .Int("ret", r));
  r = Sys(SYS_renameat2, dfd, "c.dat", dfd, "b.dat", RENAME_NOREPLACE);
  log.Add(Entry("renameat2")
              .Int("fd", dfd)
              .Str("path", "c.dat")
              .Int("fd2", dfd)
              .Str("path2", "b.dat")
              .U64("flags", RENAME_NOREPLACE)
              .Int("ret", r));
  r = Sys(SYS_linkat, kAtFdCwd, b.c_str(), dfd, "hard", 0);
  log.Add(Entry("linkat")
              .Int("fd", kAtFdCwd)
              .Str("path", b)
              .Int("fd2", dfd)
              .Str("path2", "hard")
              .U64("flags", 0)
              .Int("ret", r));
  r = Sys(SYS_symlinkat, "a.dat", dfd, "soft");
  log.Add(Entry("symlinkat")
              .Int("fd", -1)
              .Str("path", "a.dat")
              .Int("fd2", dfd)
              .Str("path2", "soft")
              .Int("ret", r));
  r = Sys(SYS_unlinkat, dfd, "soft", 0);
  log.Add(Entry("unlinkat").Int("fd", dfd).Str("path", "soft").U64("flags", 0).Int("ret", r));
  r = Sys(SYS_unlinkat, dfd, "sub", AT_REMOVEDIR);
  log.Add(
      Entry("unlinkat").Int("fd", dfd).Str("path", "sub").U64("flags", AT_REMOVEDIR).Int("ret", r));
#ifdef SYS_mkdir
  r = Sys(SYS_mkdir, sub2.c_str(), 0700);
  log.Add(Entry("mkdir").Int("fd", kAtFdCwd).Str("path", sub2).U64("mode", 0700).Int("ret", r));
  r = Sys(SYS_rmdir, sub2.c_str());
  log.Add(Entry("rmdir").Int("fd", kAtFdCwd).Str("path", sub2).Int("ret", r));
  r = Sys(SYS_rename, b.c_str(), c.c_str());
  log.Add(Entry("rename")
              .Int("fd", kAtFdCwd)
              .Str("path", b)
              .Int("fd2", kAtFdCwd)
              .Str("path2", c)
              .Int("ret", r));
  r = Sys(SYS_link, c.c_str(), b.c_str());
  log.Add(Entry("link")
              .Int("fd", kAtFdCwd)
              .Str("path", c)
              .Int("fd2", kAtFdCwd)
              .Str("path2", b)
              .Int("ret", r));
  r = Sys(SYS_symlink, "/nonexistent/target", (dir + "/dangling").c_str());
  log.Add(Entry("symlink")
              .Int("fd", -1)
              .Str("path", "/nonexistent/target")
              .Int("fd2", kAtFdCwd)
              .Str("path2", dir + "/dangling")
              .Int("ret", r));
  r = Sys(SYS_unlink, c.c_str());
  log.Add(Entry("unlink").Int("fd", kAtFdCwd).Str("path", c).Int("ret", r));
  r = Sys(SYS_truncate, b.c_str(), 100);
  log.Add(Entry("truncate").Int("fd", kAtFdCwd).Str("path", b).U64("length", 100).Int("ret", r));
  int fdc = static_cast<int>(Sys(SYS_creat, c.c_str(), 0600));
  log.Add(Entry("creat")
              .Int("fd", kAtFdCwd)
              .Str("path", c)
              .U64("flags", O_WRONLY | O_CREAT | O_TRUNC)
              .U64("mode", 0600)
              .Int("ret", fdc));
  r = Sys(SYS_close, fdc);
  log.Add(Entry("close").Int("fd", fdc).Int("ret", r));
  int fdo = static_cast<int>(Sys(SYS_open, (dir + "/missing").c_str(), O_RDONLY, 0));
  log.Add(Entry("open")
              .Int("fd", kAtFdCwd)
              .Str("path", dir + "/missing")
              .U64("flags", O_RDONLY)
              .U64("mode", 0)
              .Int("ret", fdo)
              .U64("ino", 0));
#endif
  r = Sys(SYS_chdir, dir.c_str());
  log.Add(Entry("chdir").Int("fd", kAtFdCwd).Str("path", dir).Int("ret", r));
  r = Sys(SYS_fchdir, dfd);
  log.Add(Entry("fchdir").Int("fd", dfd).Int("ret", r));

  // closing
  r = Sys(SYS_close, fdb);
  log.Add(Entry("close").Int("fd", fdb).Int("ret", r));
  r = Sys(SYS_close_range, dfd, dfd, 0);
  log.Add(Entry("close_range").Int("fd", dfd).Int("fd2", dfd).U64("flags", 0).Int("ret", r));
  r = Sys(SYS_close, fd);
  log.Add(Entry("close").Int("fd", fd).Int("ret", r).U64("ino", ino_a));
  r = Sys(SYS_close, fd);
  log.Add(Entry("close").Int("fd", fd).Int("ret", r).U64("ino", 0));

  iotwin::progs::EndMark();
  log.Flush();
  return 0;
}
