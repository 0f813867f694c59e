// io_sockets LOG DIR MODE: sockets as far as they touch files.
//   bind: AF_UNIX sockets bound to paths make socket files, which the program then stats and
//         unlinks (relative and absolute paths; a second bind to a taken name fails with
//         EADDRINUSE; an abstract name and an unnamed socket make no file and no record).
//   pass: a parent opens a file and passes the descriptor over a Unix socket (SCM_RIGHTS) to a
//         child, which reads, stats, maps and closes the descriptor it received.
// Every recorded call is logged with the record fields it must have (docs/trace-format.md).
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <cstring>
#include <string>

#include "prog_log.h"

using iotwin::progs::Entry;
using iotwin::progs::Log;
using iotwin::progs::Sys;

namespace {

// bind(fd, path): the sockaddr_un holds `name` (not NUL-terminated when `exact`), length
// offsetof(sun_path) + name length (+ 1 for the NUL otherwise).
long Bind(int fd, const std::string& name, bool exact) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path, name.data(), std::min(name.size(), sizeof a.sun_path));
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() +
                                         (exact ? 0 : 1));
  return Sys(SYS_bind, fd, &a, len);
}

void LogBind(Log& log, int sock, const std::string& path, long r) {
  log.Add(Entry("bind").Int("fd", -100).Str("path", path).U64("aux", sock).Int("ret", r));
}

long Stat(Log& log, const std::string& path) {
  struct stat st;
  long r = Sys(SYS_newfstatat, -100, path.c_str(), &st, 0);
  log.Add(Entry("newfstatat").Int("fd", -100).Str("path", path).Int("ret", r));
  return r;
}

long Unlink(Log& log, const std::string& path) {
  long r = Sys(SYS_unlinkat, -100, path.c_str(), 0);
  log.Add(Entry("unlinkat").Int("fd", -100).Str("path", path).Int("ret", r));
  return r;
}

int BindMode(Log& log, const std::string& dir) {
  if (chdir(dir.c_str()) != 0) return 3;
  int s1 = socket(AF_UNIX, SOCK_STREAM, 0), s2 = socket(AF_UNIX, SOCK_DGRAM, 0);
  int s3 = socket(AF_UNIX, SOCK_STREAM, 0), s4 = socket(AF_UNIX, SOCK_STREAM, 0);
  if (s1 < 0 || s2 < 0 || s3 < 0 || s4 < 0) return 3;
  const std::string abs_path = dir + "/sub/server.sock";
  if (mkdir((dir + "/sub").c_str(), 0755) != 0) return 3;
  iotwin::progs::BeginMark();
  long r = Bind(s1, "rel.sock", false);
  LogBind(log, s1, "rel.sock", r);
  if (r != 0) return 4;
  Stat(log, "rel.sock");
  r = Bind(s2, "rel.sock", false);  // taken
  LogBind(log, s2, "rel.sock", r);
  r = Bind(s3, abs_path, true);  // no NUL in the address: its length ends the name
  LogBind(log, s3, abs_path, r);
  Bind(s4, std::string("\0abstract-iotwin", 16), true);  // abstract: no file, not recorded
  Stat(log, abs_path);
  Unlink(log, "rel.sock");
  Stat(log, "rel.sock");  // ENOENT
  Unlink(log, abs_path);
  iotwin::progs::EndMark();
  return 0;
}

// Sends `fd` over `sock` as SCM_RIGHTS with one byte of payload.
bool SendFd(int sock, int fd) {
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
  return sendmsg(sock, &msg, 0) == 1;
}

// Receives one descriptor (recvmsg); returns it, or -1.
int ReceiveFd(Log& log, int sock) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  long r = Sys(SYS_recvmsg, sock, &msg, 0);
  log.Add(Entry("recvmsg").Int("fd", sock).Int("ret", r));
  if (r != 1) return -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int fd;
      memcpy(&fd, CMSG_DATA(c), sizeof fd);
      return fd;
    }
  }
  return -1;
}

int PassChild(Log& log, int sock) {
  log.Clear();
  iotwin::progs::BeginMark();
  int fd = ReceiveFd(log, sock);
  if (fd < 0) _exit(5);
  static char buf[8192];
  long r = Sys(SYS_pread64, fd, buf, 4096, 4096);
  log.Add(Entry("pread64").Int("fd", fd).U64("length", 4096).U64("offset", 4096).Int("ret", r));
  struct stat st;
  r = Sys(SYS_fstat, fd, &st);
  log.Add(Entry("fstat").Int("fd", fd).Int("ret", r));
  void* p = mmap(nullptr, 8192, PROT_READ, MAP_SHARED, fd, 0);
  log.Add(Entry("mmap").Int("fd", fd).U64("length", 8192).U64("offset", 0));
  if (p == MAP_FAILED) _exit(6);
  volatile char c = static_cast<char*>(p)[100];
  (void)c;
  r = Sys(SYS_munmap, p, 8192);
  log.Add(Entry("munmap").U64("length", 8192).Int("ret", r));
  r = Sys(SYS_close, fd);
  log.Add(Entry("close").Int("fd", fd).Int("ret", r));
  iotwin::progs::EndMark();
  log.Flush();
  _exit(0);
}

int PassMode(Log& log, const std::string& dir) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 3;
  pid_t child = fork();
  if (child < 0) return 3;
  if (child == 0) {
    close(sv[0]);
    PassChild(log, sv[1]);
  }
  close(sv[1]);
  const std::string path = dir + "/passed.dat";
  static char buf[8192];
  memset(buf, 'p', sizeof buf);
  iotwin::progs::BeginMark();
  long fd = Sys(SYS_openat, -100, path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  log.Add(Entry("openat")
              .Int("fd", -100)
              .Str("path", path)
              .U64("flags", O_CREAT | O_RDWR | O_TRUNC)
              .U64("mode", 0644)
              .Int("ret", fd));
  if (fd < 0) return 3;
  long r = Sys(SYS_pwrite64, fd, buf, sizeof buf, 0);
  log.Add(Entry("pwrite64").Int("fd", fd).U64("length", sizeof buf).U64("offset", 0).Int("ret", r));
  if (!SendFd(sv[0], static_cast<int>(fd))) return 3;
  int status = 0;
  waitpid(child, &status, 0);
  r = Sys(SYS_close, fd);
  log.Add(Entry("close").Int("fd", fd).Int("ret", r));
  iotwin::progs::EndMark();
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 4;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: io_sockets LOG DIR bind|pass\n");
    return 2;
  }
  Log log(argv[1]);
  const std::string mode = argv[3];
  int rc = mode == "bind" ? BindMode(log, argv[2]) : mode == "pass" ? PassMode(log, argv[2]) : 2;
  log.Flush();
  return rc;
}
