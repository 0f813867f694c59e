// io_uring_late_submitter DIR [SECONDS]: a reaper thread that waits briefly for requests another
// thread submitted long after the program began, as MariaDB's io_uring reaper waits for the
// reads its page cleaner submits. The submitter first writes and fdatasyncs a file for SECONDS
// (default 2), then submits read A, tells the reaper, waits 20 ms and submits read B; the
// reaper, idle until told (a sleep, which a replay does not make), waits once for both
// completions (io_uring_wait_cqe_nr: io_uring_enter with min_complete 2, GETEVENTS), a wait of
// about 20 ms. In a replay without pacing the reaper's only call comes at once, seconds before
// the submitter reaches its requests. Prints the completions reaped.
#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: io_uring_late_submitter DIR [SECONDS]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const double seconds = argc > 2 ? atof(argv[2]) : 2.0;
  constexpr size_t kBlock = 4096;
  int fd = open((dir + "/late.dat").c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, 64 * kBlock) != 0) {
    perror("late.dat");
    return 1;
  }
  io_uring ring;
  int rc = io_uring_queue_init(8, &ring, 0);
  if (rc < 0) {
    fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-rc));
    return 4;
  }
  static char wbuf[kBlock], rbuf[2][kBlock];
  memset(wbuf, 'w', sizeof wbuf);
  std::atomic<bool> submitted_a{false};
  int reaped = 0, failed = 0;
  std::thread reaper([&] {
    while (!submitted_a.load()) usleep(1000);
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe_nr(&ring, &cqe, 2) < 0) {
      failed++;
      return;
    }
    io_uring_cqe* cqes[2];
    reaped = static_cast<int>(io_uring_peek_batch_cqe(&ring, cqes, 2));
    io_uring_cq_advance(&ring, static_cast<unsigned>(reaped));
  });
  std::thread submitter([&] {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    int writes = 0;
    while (std::chrono::steady_clock::now() < end) {
      if (pwrite(fd, wbuf, kBlock, static_cast<off_t>((writes++ % 64) * kBlock)) !=
              static_cast<ssize_t>(kBlock) ||
          fdatasync(fd) != 0) {
        failed++;
        break;
      }
    }
    for (int i = 0; i < 2; i++) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      io_uring_prep_read(sqe, fd, rbuf[i], kBlock, static_cast<uint64_t>(i) * kBlock);
      if (io_uring_submit(&ring) != 1) failed++;
      if (i == 0) {
        submitted_a.store(true);
        usleep(20000);
      }
    }
  });
  submitter.join();
  reaper.join();
  io_uring_queue_exit(&ring);
  close(fd);
  printf("reaped %d of 2, %d failed\n", reaped, failed);
  return failed || reaped != 2 ? 1 : 0;
}
