// io_threads LOG DIR THREADS: THREADS threads at once, each with its own file under DIR and a
// sequence of calls that differs per thread (sizes and offsets depend on the thread number),
// plus preads on one descriptor shared by all. Each thread logs its own calls (prog_log.h).
#include <malloc.h>
#include <pthread.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "prog_log.h"

using iotwin::progs::Entry;
using iotwin::progs::Sys;

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: io_threads LOG DIR THREADS\n");
    return 2;
  }
  mallopt(M_ARENA_MAX, 1);  // no per-thread arena mmaps inside the logged sequences
  iotwin::progs::Log log(argv[1]);
  log.Reserve(4096);
  std::string dir = argv[2];
  int nthreads = atoi(argv[3]);
  std::string shared = dir + "/shared.dat";
  int sfd = open(shared.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  static char zeros[1 << 16];
  if (sfd < 0 || write(sfd, zeros, sizeof zeros) != sizeof zeros) iotwin::progs::Die("shared");
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, nullptr, nthreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < nthreads; t++) {
    threads.emplace_back([&, t] {
      std::string path = dir + "/t" + std::to_string(t) + ".dat";
      std::vector<Entry> mine;
      mine.reserve(64);
      static thread_local char buf[16384];
      pthread_barrier_wait(&barrier);
      iotwin::progs::BeginMark();
      long fd = Sys(SYS_openat, -100, path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
      mine.push_back(Entry("openat")
                         .Int("fd", -100)
                         .Str("path", path)
                         .U64("flags", O_CREAT | O_RDWR | O_TRUNC)
                         .U64("mode", 0600)
                         .Int("ret", fd));
      for (int i = 0; i < 10; i++) {
        uint64_t len = 512 * (1 + (i + t) % 8), off = 4096 * (i * (t + 1));
        long r = Sys(SYS_pwrite64, fd, buf, len, off);
        mine.push_back(
            Entry("pwrite64").Int("fd", fd).U64("length", len).U64("offset", off).Int("ret", r));
        r = Sys(SYS_pread64, sfd, buf, 1024, 1024 * ((t + i) % 64));
        mine.push_back(Entry("pread64")
                           .Int("fd", sfd)
                           .U64("length", 1024)
                           .U64("offset", 1024 * ((t + i) % 64))
                           .Int("ret", r));
      }
      long r = Sys(SYS_fsync, fd);
      mine.push_back(Entry("fsync").Int("fd", fd).Int("ret", r));
      r = Sys(SYS_close, fd);
      mine.push_back(Entry("close").Int("fd", fd).Int("ret", r));
      iotwin::progs::EndMark();
      for (auto& e : mine) log.Add(e);
    });
  }
  for (auto& th : threads) th.join();
  log.Flush();
  return 0;
}
