// io_locks LOG DIR: file locks and descriptor flags, as a database takes them. The parent holds
// POSIX record locks, open-file-description locks and flock locks and asks about them; a child
// process, with its own descriptor of the file, is refused the parent's lock (F_SETLK: EAGAIN),
// then waits for it (F_SETLKW) until the parent unlocks. Descriptor flags: F_GETFD, F_SETFD
// (FD_CLOEXEC), F_GETFL. Every call is logged with the record fields it must have
// (docs/trace-format.md: l_type in flags, l_whence in aux, l_start in offset, l_len in length).
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>

#include <cstring>
#include <string>

#include "prog_log.h"

using iotwin::progs::Entry;
using iotwin::progs::Log;
using iotwin::progs::Sys;

namespace {

long Lock(Log& log, long fd, int cmd, short type, short whence, long start, long len) {
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = type;
  fl.l_whence = whence;
  fl.l_start = start;
  fl.l_len = len;
  long r = Sys(SYS_fcntl, fd, cmd, &fl);
  log.Add(Entry("fcntl")
              .Int("fd", fd)
              .U64("mode", static_cast<uint64_t>(cmd))
              .U64("flags", static_cast<uint64_t>(type))
              .U64("aux", static_cast<uint64_t>(whence))
              .Int("offset", start)
              .Int("length", len)
              .Int("ret", r));
  return r;
}

long Flock(Log& log, long fd, int operation) {
  long r = Sys(SYS_flock, fd, operation);
  log.Add(Entry("flock").Int("fd", fd).U64("flags", static_cast<uint64_t>(operation)).Int("ret", r));
  return r;
}

// F_GETFD / F_GETFL take no argument: the record's aux holds whatever the register held.
long FcntlNoArg(Log& log, long fd, int cmd) {
  long r = Sys(SYS_fcntl, fd, cmd, 0);
  log.Add(Entry("fcntl").Int("fd", fd).U64("mode", static_cast<uint64_t>(cmd)).Int("ret", r));
  return r;
}

void SleepMs(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1'000'000};
  nanosleep(&ts, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: io_locks LOG DIR\n");
    return 2;
  }
  Log log(argv[1]);
  std::string path = std::string(argv[2]) + "/locks.db";
  static char buf[4096];
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

  // Descriptor flags.
  FcntlNoArg(log, fd, F_GETFD);
  r = Sys(SYS_fcntl, fd, F_SETFD, FD_CLOEXEC);
  log.Add(Entry("fcntl").Int("fd", fd).U64("mode", F_SETFD).U64("aux", FD_CLOEXEC).Int("ret", r));
  FcntlNoArg(log, fd, F_GETFD);
  FcntlNoArg(log, fd, F_GETFL);

  // Open file description locks and flock, taken and released by this process alone.
  Lock(log, fd, F_OFD_SETLK, F_RDLCK, SEEK_END, -100, 50);
  Lock(log, fd, F_OFD_GETLK, F_WRLCK, SEEK_SET, 0, 0);
  Lock(log, fd, F_OFD_SETLKW, F_UNLCK, SEEK_SET, 0, 0);
  Flock(log, fd, LOCK_EX | LOCK_NB);
  Flock(log, fd, LOCK_UN);
  Flock(log, fd, LOCK_SH);
  Flock(log, fd, LOCK_UN);

  // POSIX record locks, one of them contended by a child process.
  Lock(log, fd, F_SETLK, F_WRLCK, SEEK_SET, 0, 100);
  Lock(log, fd, F_GETLK, F_RDLCK, SEEK_SET, 200, 10);
  pid_t child = fork();
  if (child < 0) return 3;
  if (child == 0) {
    log.Clear();
    iotwin::progs::BeginMark();
    long cfd = Sys(SYS_openat, -100, path.c_str(), O_RDWR, 0);
    log.Add(Entry("openat").Int("fd", -100).Str("path", path).U64("flags", O_RDWR).Int("ret", cfd));
    Lock(log, cfd, F_SETLK, F_RDLCK, SEEK_SET, 50, 10);  // EAGAIN: the parent's
    Lock(log, cfd, F_SETLKW, F_WRLCK, SEEK_SET, 0, 0);   // waits for the parent's unlock
    r = Sys(SYS_pread64, cfd, buf, 100, 0);
    log.Add(Entry("pread64").Int("fd", cfd).U64("length", 100).U64("offset", 0).Int("ret", r));
    Lock(log, cfd, F_SETLK, F_UNLCK, SEEK_SET, 0, 0);
    r = Sys(SYS_close, cfd);
    log.Add(Entry("close").Int("fd", cfd).Int("ret", r));
    iotwin::progs::EndMark();
    log.Flush();
    _exit(0);
  }
  SleepMs(300);  // the child is refused, then waits
  Lock(log, fd, F_SETLKW, F_UNLCK, SEEK_SET, 0, 100);
  int status = 0;
  waitpid(child, &status, 0);
  Lock(log, fd, F_SETLKW, F_WRLCK, SEEK_SET, 0, 0);  // free again
  Lock(log, fd, F_SETLK, F_UNLCK, SEEK_SET, 0, 0);
  r = Sys(SYS_close, fd);
  log.Add(Entry("close").Int("fd", fd).Int("ret", r));
  iotwin::progs::EndMark();
  log.Flush();
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 4;
}
