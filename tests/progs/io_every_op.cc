// io_every_op LOG DIR: makes every system call iotwin records (one IOT_OP_* each, at least once)
// on files under DIR, and logs each with the record fields the capture must write for it
// (prog_log.h, docs/trace-format.md "Per-op use of the argument fields"). A call the kernel
// refuses to set up (io_uring disabled, say) is logged as {"kind": "unavailable", "name": op}.
// The io_uring rings are mapped and unmapped outside the brackets: ring memory is not file I/O.
#include <linux/aio_abi.h>
#include <linux/fs.h>
#include <linux/io_uring.h>
#include <linux/openat2.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "prog_log.h"

using iotwin::progs::BeginMark;
using iotwin::progs::EndMark;
using iotwin::progs::Entry;
using iotwin::progs::Sys;

namespace {

iotwin::progs::Log* g_log;
alignas(4096) char g_buf[4][16384];
constexpr uint64_t kNull = UINT64_MAX;  // a NULL offset pointer, as recorded

void Add(const Entry& e) { g_log->Add(e); }
void Unavailable(const char* name, long err) {
  Add(Entry::Kind("unavailable").Str("name", name).Int("ret", err));
}
uint64_t U(const void* p) { return reinterpret_cast<uintptr_t>(p); }

void Opens(const std::string& dir, int dirfd) {
  std::string data = dir + "/data", made = dir + "/made";
  long fd = Sys(SYS_open, data.c_str(), O_RDONLY, 0);
  Add(Entry("open").Str("path", data).Int("flags", O_RDONLY).Int("fd", -100).Int("ret", fd));
  long c = Sys(SYS_creat, made.c_str(), 0644);
  Add(Entry("creat").Str("path", made).Int("mode", 0644).Int("ret", c));
  long at = Sys(SYS_openat, dirfd, "data", O_RDWR, 0);
  Add(Entry("openat").Int("fd", dirfd).Str("path", "data").Int("flags", O_RDWR).Int("ret", at));
  open_how how{};
  how.flags = O_RDONLY;
  how.resolve = RESOLVE_NO_SYMLINKS;
  long at2 = Sys(SYS_openat2, dirfd, "data", &how, sizeof how);
  Add(Entry("openat2")
          .Int("fd", dirfd)
          .Str("path", "data")
          .U64("aux", RESOLVE_NO_SYMLINKS)
          .Int("ret", at2));
  for (long f : {fd, c, at, at2}) {
    long r = Sys(SYS_close, f);
    Add(Entry("close").Int("fd", f).Int("ret", r));
  }
}

void Descriptors(int fd) {
  long d = Sys(SYS_dup, fd);
  Add(Entry("dup").Int("fd", fd).Int("ret", d));
  long d2 = Sys(SYS_dup2, fd, 50);
  Add(Entry("dup2").Int("fd", fd).Int("fd2", 50).Int("ret", d2));
  long d3 = Sys(SYS_dup3, fd, 51, O_CLOEXEC);
  Add(Entry("dup3").Int("fd", fd).Int("fd2", 51).Int("flags", O_CLOEXEC).Int("ret", d3));
  long fl = Sys(SYS_fcntl, fd, F_GETFL, 0);
  Add(Entry("fcntl").Int("fd", fd).Int("mode", F_GETFL).Int("ret", fl));
  // LOCK_NB: replay turns a blocking request into polling, so only this one is issued verbatim.
  long lk = Sys(SYS_flock, fd, LOCK_EX | LOCK_NB);
  Add(Entry("flock").Int("fd", fd).Int("flags", LOCK_EX | LOCK_NB).Int("ret", lk));
  lk = Sys(SYS_flock, fd, LOCK_UN);
  Add(Entry("flock").Int("fd", fd).Int("flags", LOCK_UN).Int("ret", lk));
  long r = Sys(SYS_close, d);
  Add(Entry("close").Int("fd", d).Int("ret", r));
  r = Sys(SYS_close, 50);
  Add(Entry("close").Int("fd", 50).Int("ret", r));
  // Exactly one open descriptor in the range.
  r = Sys(SYS_close_range, 51, 51, 0);
  Add(Entry("close_range").Int("fd", 51).Int("fd2", 51).Int("ret", r));
}

void ReadsWrites(int fd) {
  long r = Sys(SYS_read, fd, g_buf[0], 4096);
  Add(Entry("read").Int("fd", fd).U64("length", 4096).Int("ret", r));
  r = Sys(SYS_write, fd, g_buf[0], 4096);
  Add(Entry("write").Int("fd", fd).U64("length", 4096).Int("ret", r));
  r = Sys(SYS_pread64, fd, g_buf[0], 4096, 8192);
  Add(Entry("pread64").Int("fd", fd).U64("offset", 8192).U64("length", 4096).Int("ret", r));
  r = Sys(SYS_pwrite64, fd, g_buf[0], 4096, 12288);
  Add(Entry("pwrite64").Int("fd", fd).U64("offset", 12288).U64("length", 4096).Int("ret", r));
  iovec iov[2] = {{g_buf[1], 1024}, {g_buf[2], 3072}};
  struct V {
    const char* name;
    long nr;
    bool positioned, v2;
  };
  const V vs[] = {{"readv", SYS_readv, false, false},   {"writev", SYS_writev, false, false},
                  {"preadv", SYS_preadv, true, false},  {"pwritev", SYS_pwritev, true, false},
                  {"preadv2", SYS_preadv2, true, true}, {"pwritev2", SYS_pwritev2, true, true}};
  for (const V& v : vs) {
    Entry e(v.name);
    e.Int("fd", fd).U64("aux", 2).U64("length", 4096).Str("iov", "1024,3072");
    if (v.positioned) {
      r = v.v2 ? Sys(v.nr, fd, iov, 2, 16384, 0, 0) : Sys(v.nr, fd, iov, 2, 16384, 0);
      e.U64("offset", 16384);
    } else {
      r = Sys(v.nr, fd, iov, 2);
    }
    if (v.v2) e.Int("flags", 0);
    Add(e.Int("ret", r));
  }
  r = Sys(SYS_lseek, fd, 4096, SEEK_SET);
  Add(Entry("lseek").Int("fd", fd).U64("offset", 4096).U64("aux", SEEK_SET).Int("ret", r));
}

void SyncsAndSpace(int fd, const std::string& dir) {
  long r = Sys(SYS_fsync, fd);
  Add(Entry("fsync").Int("fd", fd).Int("ret", r));
  r = Sys(SYS_fdatasync, fd);
  Add(Entry("fdatasync").Int("fd", fd).Int("ret", r));
  r = Sys(SYS_sync_file_range, fd, 0, 8192, SYNC_FILE_RANGE_WRITE);
  Add(Entry("sync_file_range")
          .Int("fd", fd)
          .U64("offset", 0)
          .U64("length", 8192)
          .Int("flags", SYNC_FILE_RANGE_WRITE)
          .Int("ret", r));
  r = Sys(SYS_syncfs, fd);
  Add(Entry("syncfs").Int("fd", fd).Int("ret", r));
  r = Sys(SYS_sync);
  Add(Entry("sync").Int("ret", r));
  r = Sys(SYS_fallocate, fd, FALLOC_FL_KEEP_SIZE, 65536, 8192);
  Add(Entry("fallocate")
          .Int("fd", fd)
          .Int("mode", FALLOC_FL_KEEP_SIZE)
          .U64("offset", 65536)
          .U64("length", 8192)
          .U64("aux", 0)
          .Int("ret", r));
  r = Sys(SYS_ftruncate, fd, 65536);
  Add(Entry("ftruncate").Int("fd", fd).U64("length", 65536).U64("offset", 0).Int("ret", r));
  std::string path = dir + "/data";
  r = Sys(SYS_truncate, path.c_str(), 65536);
  Add(Entry("truncate").Str("path", path).Int("fd", -100).U64("length", 65536).Int("ret", r));
  r = Sys(SYS_fadvise64, fd, 0, 16384, POSIX_FADV_SEQUENTIAL);
  Add(Entry("fadvise64")
          .Int("fd", fd)
          .U64("offset", 0)
          .U64("length", 16384)
          .U64("aux", POSIX_FADV_SEQUENTIAL)
          .Int("ret", r));
  r = Sys(SYS_readahead, fd, 0, 16384);
  Add(Entry("readahead").Int("fd", fd).U64("offset", 0).U64("length", 16384).Int("ret", r));
}

void Copies(int in, int out) {
  loff_t off_in = 4096;
  long r = Sys(SYS_copy_file_range, in, &off_in, out, nullptr, 4096, 0);
  Add(Entry("copy_file_range")
          .Int("fd", in)
          .Int("fd2", out)
          .U64("offset", 4096)
          .U64("aux", kNull)
          .U64("length", 4096)
          .Int("flags", 0)
          .Int("ret", r));
  loff_t off = 8192;
  r = Sys(SYS_sendfile, out, in, &off, 4096);  // (out_fd, in_fd, *offset, count)
  Add(Entry("sendfile")
          .Int("fd", out)
          .Int("fd2", in)
          .U64("offset", 8192)
          .U64("length", 4096)
          .Int("ret", r));
  // A pipe is not a file: filling and closing it stays outside the brackets (prog_log.h).
  EndMark();
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) iotwin::progs::Die("pipe2");
  if (write(p[1], g_buf[0], 512) != 512) iotwin::progs::Die("pipe write");
  BeginMark();
  loff_t off_out = 32768;
  r = Sys(SYS_splice, p[0], nullptr, out, &off_out, 512, 0);
  Add(Entry("splice")
          .Int("fd", p[0])
          .Int("fd2", out)
          .U64("offset", kNull)
          .U64("aux", 32768)
          .U64("length", 512)
          .Int("ret", r));
  EndMark();
  close(p[0]);
  close(p[1]);
  BeginMark();
}

void Mappings(int fd) {
  const uint64_t len = 16384;
  long a = Sys(SYS_mmap, 0, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  Add(Entry("mmap")
          .Int("fd", fd)
          .U64("aux", 0)
          .U64("length", len)
          .Int("mode", PROT_READ | PROT_WRITE)
          .Int("flags", MAP_SHARED)
          .U64("offset", 0)
          .Int("ret", a));
  if (a < 0) return;
  auto* p = reinterpret_cast<char*>(a);
  p[0] = 'm';
  long r = Sys(SYS_msync, a, len, MS_SYNC);
  Add(Entry("msync").U64("offset", a).U64("length", len).Int("flags", MS_SYNC).Int("ret", r));
  r = Sys(SYS_madvise, a, len, MADV_SEQUENTIAL);
  Add(Entry("madvise")
          .U64("offset", a)
          .U64("length", len)
          .U64("aux", MADV_SEQUENTIAL)
          .Int("mode", 0)
          .Int("ret", r));
  long b = Sys(SYS_mremap, a, len, 2 * len, MREMAP_MAYMOVE);
  Add(Entry("mremap")
          .U64("offset", a)
          .U64("length", len)
          .U64("aux", 2 * len)
          .Int("flags", MREMAP_MAYMOVE)
          .Int("ret", b));
  if (b < 0) b = a;
  r = Sys(SYS_munmap, b, 2 * len);
  Add(Entry("munmap").U64("offset", b).U64("length", 2 * len).U64("aux", 0).Int("ret", r));
}

void Metadata(const std::string& dir, int dirfd, int fd) {
  std::string data = dir + "/data";
  struct stat st;
  long r = Sys(SYS_stat, data.c_str(), &st);
  Add(Entry("stat").Str("path", data).Int("fd", -100).Int("ret", r));
  r = Sys(SYS_lstat, data.c_str(), &st);
  Add(Entry("lstat").Str("path", data).Int("fd", -100).Int("ret", r));
  r = Sys(SYS_fstat, fd, &st);
  Add(Entry("fstat").Int("fd", fd).Int("ret", r));
  r = Sys(SYS_newfstatat, dirfd, "data", &st, 0);
  Add(Entry("newfstatat").Int("fd", dirfd).Str("path", "data").Int("flags", 0).Int("ret", r));
  struct statx stx;
  r = Sys(SYS_statx, dirfd, "data", 0, STATX_BASIC_STATS, &stx);
  Add(Entry("statx")
          .Int("fd", dirfd)
          .Str("path", "data")
          .Int("flags", 0)
          .Int("mode", STATX_BASIC_STATS)
          .Int("ret", r));
  r = Sys(SYS_getdents64, dirfd, g_buf[3], 4096);
  Add(Entry("getdents64").Int("fd", dirfd).U64("length", 4096));
}

void Names(const std::string& dir, int dirfd) {
  auto at = [&](const char* n) { return dir + "/" + n; };
  long r = Sys(SYS_mkdir, at("d1").c_str(), 0755);
  Add(Entry("mkdir").Str("path", at("d1")).Int("mode", 0755).Int("ret", r));
  r = Sys(SYS_mkdirat, dirfd, "d2", 0755);
  Add(Entry("mkdirat").Int("fd", dirfd).Str("path", "d2").Int("mode", 0755).Int("ret", r));
  r = Sys(SYS_rename, at("made").c_str(), at("m1").c_str());
  Add(Entry("rename").Str("path", at("made")).Str("path2", at("m1")).Int("ret", r));
  r = Sys(SYS_renameat, dirfd, "m1", dirfd, "m2");
  Add(Entry("renameat")
          .Int("fd", dirfd)
          .Int("fd2", dirfd)
          .Str("path", "m1")
          .Str("path2", "m2")
          .Int("ret", r));
  r = Sys(SYS_renameat2, dirfd, "m2", dirfd, "m3", RENAME_NOREPLACE);
  Add(Entry("renameat2")
          .Int("fd", dirfd)
          .Int("fd2", dirfd)
          .Str("path", "m2")
          .Str("path2", "m3")
          .Int("flags", RENAME_NOREPLACE)
          .Int("ret", r));
  r = Sys(SYS_link, at("m3").c_str(), at("l1").c_str());
  Add(Entry("link").Str("path", at("m3")).Str("path2", at("l1")).Int("ret", r));
  r = Sys(SYS_linkat, dirfd, "m3", dirfd, "l2", 0);
  Add(Entry("linkat")
          .Int("fd", dirfd)
          .Int("fd2", dirfd)
          .Str("path", "m3")
          .Str("path2", "l2")
          .Int("flags", 0)
          .Int("ret", r));
  r = Sys(SYS_symlink, "m3", at("s1").c_str());
  Add(Entry("symlink").Str("path", "m3").Int("fd2", -100).Str("path2", at("s1")).Int("ret", r));
  r = Sys(SYS_symlinkat, "m3", dirfd, "s2");
  Add(Entry("symlinkat").Str("path", "m3").Int("fd2", dirfd).Str("path2", "s2").Int("ret", r));
  r = Sys(SYS_unlink, at("l1").c_str());
  Add(Entry("unlink").Str("path", at("l1")).Int("ret", r));
  r = Sys(SYS_unlinkat, dirfd, "l2", 0);
  Add(Entry("unlinkat").Int("fd", dirfd).Str("path", "l2").Int("flags", 0).Int("ret", r));
  r = Sys(SYS_rmdir, at("d1").c_str());
  Add(Entry("rmdir").Str("path", at("d1")).Int("ret", r));
  r = Sys(SYS_chdir, dir.c_str());
  Add(Entry("chdir").Str("path", dir).Int("ret", r));
  r = Sys(SYS_fchdir, dirfd);
  Add(Entry("fchdir").Int("fd", dirfd).Int("ret", r));
}

void Libaio(int fd) {
  aio_context_t ctx = 0;
  long r = Sys(SYS_io_setup, 8, &ctx);
  if (r < 0) return Unavailable("io_setup", r);
  Add(Entry("io_setup").U64("length", 8).U64("aux", ctx).Int("ret", r));
  iocb cb{};
  cb.aio_lio_opcode = IOCB_CMD_PREAD;
  cb.aio_fildes = static_cast<uint32_t>(fd);
  cb.aio_buf = U(g_buf[1]);
  cb.aio_nbytes = 4096;
  cb.aio_offset = 0;
  iocb* list[1] = {&cb};
  io_event ev[1];
  r = Sys(SYS_io_submit, ctx, 1, list);
  Add(Entry("io_submit").U64("aux", 1).Int("ret", r));
  r = Sys(SYS_io_getevents, ctx, 1, 1, ev, nullptr);
  Add(Entry("io_getevents").U64("aux", 1).U64("length", 1).Int("ret", r));
  cb.aio_lio_opcode = IOCB_CMD_PWRITE;
  cb.aio_offset = 4096;
  r = Sys(SYS_io_submit, ctx, 1, list);
  Add(Entry("io_submit").U64("aux", 1).Int("ret", r));
  r = Sys(SYS_io_pgetevents, ctx, 1, 1, ev, nullptr, nullptr);
  Add(Entry("io_pgetevents").U64("aux", 1).U64("length", 1).Int("ret", r));
  r = Sys(SYS_io_destroy, ctx);
  Add(Entry("io_destroy").U64("aux", ctx).Int("ret", r));
}

void Uring(int fd) {
  io_uring_params p{};
  long rfd = Sys(SYS_io_uring_setup, 4, &p);
  if (rfd < 0) return Unavailable("io_uring_setup", rfd);
  Add(Entry("io_uring_setup").U64("length", 4).Int("ret", rfd));
  EndMark();
  size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
  if (p.features & IORING_FEAT_SINGLE_MMAP) sq_len = cq_len = std::max(sq_len, cq_len);
  auto* sq = static_cast<char*>(mmap(nullptr, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED,
                                     static_cast<int>(rfd), IORING_OFF_SQ_RING));
  auto* sqes = static_cast<io_uring_sqe*>(mmap(nullptr, p.sq_entries * sizeof(io_uring_sqe),
                                               PROT_READ | PROT_WRITE, MAP_SHARED,
                                               static_cast<int>(rfd), IORING_OFF_SQES));
  BeginMark();
  if (sq == MAP_FAILED || sqes == MAP_FAILED) return Unavailable("io_uring_enter", -ENOMEM);
  auto* tail = reinterpret_cast<unsigned*>(sq + p.sq_off.tail);
  unsigned mask = *reinterpret_cast<unsigned*>(sq + p.sq_off.ring_mask);
  unsigned t = *tail, idx = t & mask;
  io_uring_sqe* sqe = &sqes[idx];
  memset(sqe, 0, sizeof *sqe);
  sqe->opcode = IORING_OP_READ;
  sqe->fd = fd;
  sqe->addr = U(g_buf[2]);
  sqe->len = 4096;
  sqe->off = 0;
  sqe->user_data = 7;
  reinterpret_cast<unsigned*>(sq + p.sq_off.array)[idx] = idx;
  __atomic_store_n(tail, t + 1, __ATOMIC_RELEASE);
  long r = Sys(SYS_io_uring_enter, rfd, 1, 1, IORING_ENTER_GETEVENTS, nullptr, 0);
  Add(Entry("io_uring_enter")
          .Int("fd", rfd)
          .U64("aux", 1)
          .Int("mode", 1)
          .Int("flags", IORING_ENTER_GETEVENTS)
          .Int("ret", r));
  constexpr unsigned kProbeOps = 64;
  alignas(8) static char probe[sizeof(io_uring_probe) + kProbeOps * sizeof(io_uring_probe_op)];
  memset(probe, 0, sizeof probe);
  r = Sys(SYS_io_uring_register, rfd, IORING_REGISTER_PROBE, probe, kProbeOps);
  Add(Entry("io_uring_register")
          .Int("fd", rfd)
          .Int("mode", IORING_REGISTER_PROBE)
          .U64("length", kProbeOps)
          .Int("ret", r));
  EndMark();
  munmap(sqes, p.sq_entries * sizeof(io_uring_sqe));
  munmap(sq, sq_len);
  close(static_cast<int>(rfd));
  BeginMark();
}

}  // namespace

// Sockets where they touch files: a bind to a path (a socket file), and a descriptor of `fd`
// passed to this process itself over a socket pair (SCM_RIGHTS), received and closed.
void Sockets(const std::string& dir, int fd) {
  const std::string path = dir + "/every.sock";
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.c_str(), std::min(path.size() + 1, sizeof addr.sun_path));
  long r = Sys(SYS_bind, s, &addr, sizeof addr);
  Add(Entry("bind").Int("fd", -100).Str("path", path).Int("aux", s).Int("ret", r));
  r = Sys(SYS_unlink, path.c_str());
  Add(Entry("unlink").Str("path", path).Int("ret", r));
  // The sockets stay open until the exit: a close of a descriptor the trace never saw opened is
  // not replayable, and this program checks that every call it makes is.
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) iotwin::progs::Die("socketpair");
  char byte = 'x';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  if (sendmsg(sv[0], &msg, 0) != 1) iotwin::progs::Die("sendmsg");
  msg.msg_controllen = sizeof control;
  r = Sys(SYS_recvmsg, sv[1], &msg, MSG_CMSG_CLOEXEC);
  Add(Entry("recvmsg").Int("fd", sv[1]).Int("aux", MSG_CMSG_CLOEXEC).Int("ret", r));
  int got = -1;
  c = CMSG_FIRSTHDR(&msg);
  if (r == 1 && c != nullptr && c->cmsg_type == SCM_RIGHTS) memcpy(&got, CMSG_DATA(c), sizeof got);
  if (got >= 0) {
    r = Sys(SYS_pread64, got, g_buf[1], 4096, 0);
    Add(Entry("pread64").Int("fd", got).Int("length", 4096).Int("offset", 0).Int("ret", r));
    r = Sys(SYS_close, got);
    Add(Entry("close").Int("fd", got).Int("ret", r));
  }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: io_every_op LOG DIR\n");
    return 2;
  }
  iotwin::progs::Log log(argv[1]);
  g_log = &log;
  log.Reserve(256);
  const std::string dir = argv[2];
  memset(g_buf, 'e', sizeof g_buf);
  {  // the files the calls work on, before the brackets
    int f = open((dir + "/data").c_str(), O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0644);
    if (f < 0) iotwin::progs::Die("data");
    for (int i = 0; i < 4; i++) {
      if (write(f, g_buf[0], 16384) != 16384) iotwin::progs::Die("write data");
    }
    close(f);
  }
  BeginMark();
  long dirfd = Sys(SYS_open, dir.c_str(), O_RDONLY | O_DIRECTORY, 0);
  Add(Entry("open").Str("path", dir).Int("flags", O_RDONLY | O_DIRECTORY).Int("ret", dirfd));
  const std::string data = dir + "/data", out = dir + "/out";
  long fd = Sys(SYS_open, data.c_str(), O_RDWR, 0);
  Add(Entry("open").Str("path", data).Int("flags", O_RDWR).Int("ret", fd));
  long ofd = Sys(SYS_open, out.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  Add(Entry("open")
          .Str("path", out)
          .Int("flags", O_RDWR | O_CREAT | O_TRUNC)
          .Int("mode", 0644)
          .Int("ret", ofd));
  if (dirfd < 0 || fd < 0 || ofd < 0) iotwin::progs::Die("open");
  const int d = static_cast<int>(dirfd), f = static_cast<int>(fd), o = static_cast<int>(ofd);
  Opens(dir, d);
  Descriptors(f);
  ReadsWrites(f);
  SyncsAndSpace(f, dir);
  Copies(f, o);
  Mappings(f);
  Metadata(dir, d, f);
  Names(dir, d);
  Libaio(f);
  Uring(f);
  Sockets(dir, f);
  for (int x : {o, f, d}) {
    long r = Sys(SYS_close, x);
    Add(Entry("close").Int("fd", x).Int("ret", r));
  }
  EndMark();
  log.Flush();
  return 0;
}
