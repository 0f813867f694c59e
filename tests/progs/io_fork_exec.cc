// io_fork_exec LOG DIR [exec'd]: the parent opens a file and forks; the child preads the
// inherited descriptor, then execs this program again (mode "exec'd"), which writes a file of
// its own and exits with status 5; the parent waits and reads once more. Every process logs
// its calls (prog_log.h), and the exec'd image logs "exec_path" and its exit status.
#include <malloc.h>
#include <sys/wait.h>

#include <cstring>
#include <string>

#include "prog_log.h"

using iotwin::progs::Entry;
using iotwin::progs::Sys;

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: io_fork_exec LOG DIR [exec'd]\n");
    return 2;
  }
  mallopt(M_ARENA_MAX, 1);
  iotwin::progs::Log log(argv[1]);
  std::string dir = argv[2];
  static char buf[8192];
  if (argc > 3) {
    // the exec'd image
    iotwin::progs::BeginMark();
    std::string path = dir + "/from_exec.dat";
    long fd = Sys(SYS_openat, -100, path.c_str(), O_CREAT | O_WRONLY, 0644);
    log.Add(Entry("openat")
                .Int("fd", -100)
                .Str("path", path)
                .U64("flags", O_CREAT | O_WRONLY)
                .U64("mode", 0644)
                .Int("ret", fd));
    long r = Sys(SYS_pwrite64, fd, buf, 3000, 0);
    log.Add(Entry("pwrite64").Int("fd", fd).U64("length", 3000).U64("offset", 0).Int("ret", r));
    r = Sys(SYS_close, fd);
    log.Add(Entry("close").Int("fd", fd).Int("ret", r));
    iotwin::progs::EndMark();
    log.Add(Entry::Kind("exec").Str("exec_path", argv[0]).Int("exit", 5));
    log.Flush();
    return 5;
  }
  std::string path = dir + "/parent.dat";
  iotwin::progs::BeginMark();
  long fd = Sys(SYS_openat, -100, path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  log.Add(Entry("openat")
              .Int("fd", -100)
              .Str("path", path)
              .U64("flags", O_CREAT | O_RDWR | O_TRUNC)
              .U64("mode", 0644)
              .Int("ret", fd));
  long r = Sys(SYS_pwrite64, fd, buf, 8192, 0);
  log.Add(Entry("pwrite64").Int("fd", fd).U64("length", 8192).U64("offset", 0).Int("ret", r));
  pid_t child = fork();
  if (child == 0) {
    log.Clear();
    iotwin::progs::BeginMark();
    r = Sys(SYS_pread64, fd, buf, 100, 200);
    log.Add(Entry("pread64").Int("fd", fd).U64("length", 100).U64("offset", 200).Int("ret", r));
    iotwin::progs::EndMark();
    log.Add(Entry::Kind("fork").Int("parent", getppid()));
    log.Flush();
    execl(argv[0], argv[0], argv[1], argv[2], "exec'd", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  r = Sys(SYS_pread64, fd, buf, 4096, 4096);
  log.Add(Entry("pread64").Int("fd", fd).U64("length", 4096).U64("offset", 4096).Int("ret", r));
  iotwin::progs::EndMark();
  log.Add(Entry::Kind("waited").Int("child", child).Int("status", status));
  log.Flush();
  return 0;
}
