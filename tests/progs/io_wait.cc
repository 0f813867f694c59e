// io_wait LOG PIDFILE GOFILE DATAFILE: opens DATAFILE, publishes its pid in PIDFILE, then waits
// (without file-I/O system calls) until GOFILE exists; then preads the descriptor it opened
// before waiting, logs those calls (prog_log.h) and exits 0. For --pid attach and kill tests.
#include <time.h>

#include <string>

#include "prog_log.h"

using iotwin::progs::Entry;
using iotwin::progs::Sys;

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: io_wait LOG PIDFILE GOFILE DATAFILE\n");
    return 2;
  }
  iotwin::progs::Log log(argv[1]);
  int fd = open(argv[4], O_RDONLY);
  if (fd < 0) iotwin::progs::Die(argv[4]);
  std::string tmp = std::string(argv[2]) + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (!f) iotwin::progs::Die("pidfile");
  fprintf(f, "%d\n", getpid());
  fclose(f);
  rename(tmp.c_str(), argv[2]);
  // access(2) is faccessat, which the capture does not record: the wait leaves no trace.
  struct timespec tick = {0, 10 * 1000 * 1000};
  while (access(argv[3], F_OK) != 0) nanosleep(&tick, nullptr);
  static char buf[4096];
  iotwin::progs::BeginMark();
  for (int i = 0; i < 3; i++) {
    long r = Sys(SYS_pread64, fd, buf, 4096, 4096 * i);
    log.Add(
        Entry("pread64").Int("fd", fd).U64("length", 4096).U64("offset", 4096 * i).Int("ret", r));
  }
  iotwin::progs::EndMark();
  log.Flush();
  return 0;
}
