// pread_loop FILE CALLS [THREADS [random|fixed]]: cached 4 KiB pread(2) loop for overhead
// measurements. Each thread reads CALLS blocks of FILE (which must be >= 1 MiB and should be in
// the page cache) at pseudo-random 4 KiB offsets (`random`, the default) or always at offset 0
// (`fixed`: one page, so no per-read page-cache work beyond the first) and the program prints the
// elapsed seconds and calls per second as JSON on stdout.
#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

double Now() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: pread_loop FILE CALLS [THREADS [random|fixed]]\n");
    return 2;
  }
  const std::string mode = argc > 4 ? argv[4] : "random";
  if (mode != "random" && mode != "fixed") {
    fprintf(stderr, "pread_loop: offsets must be `random` or `fixed`, not `%s`\n", mode.c_str());
    return 2;
  }
  const bool fixed = mode == "fixed";
  const char* path = argv[1];
  long calls = atol(argv[2]);
  int threads = argc > 3 ? atoi(argv[3]) : 1;
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    perror(path);
    return 1;
  }
  off_t size = lseek(fd, 0, SEEK_END);
  long blocks = size / 4096;
  if (blocks < 1) {
    fprintf(stderr, "%s: too small\n", path);
    return 1;
  }
  double start = Now();
  std::vector<std::thread> workers;
  std::vector<long> failures(threads, 0);
  for (int t = 0; t < threads; t++) {
    workers.emplace_back([&, t] {
      alignas(4096) static thread_local char buf[4096];
      uint64_t x = 0x9e3779b97f4a7c15ull * (t + 1);
      for (long i = 0; i < calls; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        off_t off = fixed ? 0 : static_cast<off_t>(x % blocks) * 4096;
        if (pread(fd, buf, sizeof buf, off) != sizeof buf) failures[t]++;
      }
    });
  }
  for (auto& w : workers) w.join();
  double elapsed = Now() - start;
  long failed = 0;
  for (long f : failures) failed += f;
  // CPU time too: on a shared machine it is a steadier measure of what tracing adds to each call
  // (the BPF programs run in the caller's context) than elapsed time.
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
               ru.ru_stime.tv_usec / 1e6;
  printf(
      "{\"elapsed_s\": %.6f, \"cpu_s\": %.6f, \"calls\": %ld, \"threads\": %d, "
      "\"calls_per_s\": %.0f, \"failed\": %ld, \"offsets\": \"%s\"}\n",
      elapsed, cpu, calls * threads, threads, calls * threads / elapsed, failed, mode.c_str());
  close(fd);
  return failed ? 1 : 0;
}
