// io_ticker DATAFILE SECONDS [EXIT]: one 4 KiB pread every 20 ms for SECONDS, then exits with
// status EXIT (default 0). For --duration and signal tests.
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: io_ticker DATAFILE SECONDS [EXIT]\n");
    return 2;
  }
  int fd = open(argv[1], O_RDONLY);
  if (fd < 0) {
    perror(argv[1]);
    return 2;
  }
  double seconds = atof(argv[2]);
  struct timespec start, now, tick = {0, 20 * 1000 * 1000};
  clock_gettime(CLOCK_MONOTONIC, &start);
  static char buf[4096];
  do {
    if (pread(fd, buf, sizeof buf, 0) < 0) return 1;
    nanosleep(&tick, nullptr);
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
  return argc > 3 ? atoi(argv[3]) : 0;
}
