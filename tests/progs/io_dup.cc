// io_dup LOG DIR: descriptor duplication (dup, dup2, dup3, fcntl F_DUPFD / F_DUPFD_CLOEXEC /
// F_SETFL) and writes through the copies, which share one file position. The fcntl queries
// F_GETFL and F_GETFD are recorded too (their aux is whatever the register held: not logged).
#include <cstring>
#include <string>

#include "prog_log.h"

using iotwin::progs::Entry;
using iotwin::progs::Sys;

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: io_dup LOG DIR\n");
    return 2;
  }
  iotwin::progs::Log log(argv[1]);
  std::string path = std::string(argv[2]) + "/dup.dat";
  static char buf[4096];
  uint64_t pos = 0;
  iotwin::progs::BeginMark();
  long fd = Sys(SYS_openat, -100, path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  log.Add(Entry("openat")
              .Int("fd", -100)
              .Str("path", path)
              .U64("flags", O_CREAT | O_RDWR | O_TRUNC)
              .U64("mode", 0644)
              .Int("ret", fd));
  long d1 = Sys(SYS_dup, fd);
  log.Add(Entry("dup").Int("fd", fd).Int("ret", d1));
  long r = Sys(SYS_write, d1, buf, 100);
  log.Add(Entry("write").Int("fd", d1).U64("length", 100).U64("offset", pos).Int("ret", r));
  pos += 100;
  long d2 = Sys(SYS_dup2, fd, 50);
  log.Add(Entry("dup2").Int("fd", fd).Int("fd2", 50).Int("ret", d2));
  long d3 = Sys(SYS_dup3, fd, 60, O_CLOEXEC);
  log.Add(Entry("dup3").Int("fd", fd).Int("fd2", 60).U64("flags", O_CLOEXEC).Int("ret", d3));
  long d4 = Sys(SYS_fcntl, fd, F_DUPFD, 70);
  log.Add(Entry("fcntl").Int("fd", fd).U64("mode", F_DUPFD).U64("aux", 70).Int("ret", d4));
  long d5 = Sys(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 80);
  log.Add(Entry("fcntl").Int("fd", fd).U64("mode", F_DUPFD_CLOEXEC).U64("aux", 80).Int("ret", d5));
  r = Sys(SYS_fcntl, fd, F_GETFL);
  log.Add(Entry("fcntl").Int("fd", fd).U64("mode", F_GETFL).Int("ret", r));
  r = Sys(SYS_fcntl, fd, F_GETFD);
  log.Add(Entry("fcntl").Int("fd", fd).U64("mode", F_GETFD).Int("ret", r));
  r = Sys(SYS_fcntl, d2, F_SETFL, O_APPEND);
  log.Add(Entry("fcntl").Int("fd", d2).U64("mode", F_SETFL).U64("aux", O_APPEND).Int("ret", r));
  for (long d : {d2, d3, d4, d5}) {
    r = Sys(SYS_write, d, buf, 10);
    log.Add(Entry("write").Int("fd", d).U64("length", 10).U64("offset", pos).Int("ret", r));
    pos += 10;
  }
  r = Sys(SYS_dup2, fd, fd);  // same fd: returns it, changes nothing
  log.Add(Entry("dup2").Int("fd", fd).Int("fd2", fd).Int("ret", r));
  r = Sys(SYS_dup, 999);  // EBADF
  log.Add(Entry("dup").Int("fd", 999).Int("ret", r));
  for (long d : {d1, d2, d3, d4, d5, fd}) {
    r = Sys(SYS_close, d);
    log.Add(Entry("close").Int("fd", d).Int("ret", r));
  }
  iotwin::progs::EndMark();
  log.Flush();
  return 0;
}
