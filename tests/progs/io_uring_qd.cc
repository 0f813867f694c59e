// io_uring_qd DIR [requests]: InnoDB's pattern on one io_uring ring shared by two threads. A
// submitting thread keeps 16 O_DIRECT 64 KiB random reads in flight, one io_uring_submit per
// request under the ring's submission mutex; a reaping thread collects every completion with
// io_uring_wait_cqe WITHOUT that mutex (liburing allows one submitter and one reaper at once)
// and gives the slot back. Prints the requests done and the failures.
#include <fcntl.h>
#include <liburing.h>
#include <semaphore.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

namespace {

constexpr unsigned kDepth = 16;
constexpr size_t kBlock = 64 << 10;
constexpr off_t kFileSize = 32 << 20;

int OpenData(const std::string& path) {
  int fd = open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  if (fd < 0) {
    perror(path.c_str());
    exit(1);
  }
  // Written through the page cache, then read with O_DIRECT: real device reads.
  static char chunk[1 << 20];
  memset(chunk, 'q', sizeof chunk);
  for (off_t off = 0; off < kFileSize; off += sizeof chunk) {
    if (pwrite(fd, chunk, sizeof chunk, off) != static_cast<ssize_t>(sizeof chunk)) exit(1);
  }
  fsync(fd);
  close(fd);
  fd = open(path.c_str(), O_RDONLY | O_DIRECT);
  if (fd < 0) fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) exit(1);
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: io_uring_qd DIR [requests]\n");
    return 2;
  }
  const int total = argc > 2 ? atoi(argv[2]) : 2000;
  const int fd = OpenData(std::string(argv[1]) + "/qd.dat");
  io_uring ring;
  if (int rc = io_uring_queue_init(kDepth, &ring, 0); rc < 0) {
    fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-rc));
    return 4;
  }
  void* mem = nullptr;
  if (posix_memalign(&mem, kBlock, kDepth * kBlock) != 0) return 1;
  auto* bufs = static_cast<uint8_t*>(mem);
  sem_t room;
  sem_init(&room, 0, kDepth);
  std::mutex sq_mu;
  std::atomic<int> failed{0};
  std::thread reaper([&] {
    for (int got = 0; got < total; got++) {
      io_uring_cqe* cqe = nullptr;
      int r = io_uring_wait_cqe(&ring, &cqe);
      if (r < 0) {
        failed++;
        return;
      }
      if (cqe->res != static_cast<int>(kBlock)) failed++;
      io_uring_cqe_seen(&ring, cqe);
      sem_post(&room);
    }
  });
  std::thread submitter([&] {
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < total; i++) {
      while (sem_wait(&room) != 0) {
      }
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      const uint64_t block = x % (kFileSize / kBlock);
      std::lock_guard<std::mutex> lock(sq_mu);
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      if (!sqe) {
        failed++;
        continue;
      }
      io_uring_prep_read(sqe, fd, bufs + (i % kDepth) * kBlock, kBlock, block * kBlock);
      if (io_uring_submit(&ring) != 1) failed++;
    }
  });
  submitter.join();
  reaper.join();
  io_uring_queue_exit(&ring);
  close(fd);
  free(mem);
  printf("requests %d failed %d\n", total, failed.load());
  return failed.load() ? 1 : 0;
}
