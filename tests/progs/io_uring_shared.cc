// io_uring_shared DIR [uring|libaio|both]: one asynchronous context per process shared by its
// threads, as database servers use them (InnoDB's native AIO): several threads submit to one
// io_uring ring under a mutex, another thread reaps every completion (io_uring_wait_cqe, so
// io_uring_enter with GETEVENTS when none is ready), so completions are reaped by a thread
// that did not submit them; likewise one libaio context with io_submit from two threads and
// io_getevents from a third. The main thread sets the contexts up and tears them down after
// the threads are joined. Prints the requests submitted and completed per engine.
#include <libaio.h>
#include <liburing.h>
#include <pthread.h>
#include <sys/syscall.h>
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
#include <vector>

namespace {

constexpr int kSubmitters = 3;
constexpr int kPerSubmitter = 16;
constexpr size_t kBlock = 4096;
constexpr off_t kFileSize = 1 << 20;

long Sys(long nr, long a, long b, long c, long d, long e) {
  long r = syscall(nr, a, b, c, d, e);
  return r == -1 ? -errno : r;
}

int OpenData(const std::string& path) {
  int fd = open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_DIRECT, 0644);
  if (fd < 0) fd = open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, kFileSize) != 0) {
    perror(path.c_str());
    exit(1);
  }
  return fd;
}

uint8_t* Buffers(size_t count) {
  void* p = nullptr;
  if (posix_memalign(&p, kBlock, count * kBlock) != 0) exit(1);
  memset(p, 'r', count * kBlock);
  return static_cast<uint8_t*>(p);
}

// Submitters write their blocks, then read them back, one request per io_uring_submit under
// the ring's mutex (liburing rings are not thread-safe); the reaper collects every completion.
int SharedRing(const std::string& dir) {
  int fd = OpenData(dir + "/ring.dat");
  io_uring ring;
  int rc = io_uring_queue_init(32, &ring, 0);
  if (rc < 0) {
    fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-rc));
    return 4;
  }
  uint8_t* bufs = Buffers(kSubmitters * kPerSubmitter);
  std::mutex sq_mu;
  std::atomic<int> failed{0};
  constexpr int total = kSubmitters * kPerSubmitter;
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
    }
  });
  std::vector<std::thread> submitters;
  for (int s = 0; s < kSubmitters; s++) {
    submitters.emplace_back([&, s] {
      for (int i = 0; i < kPerSubmitter; i++) {
        const int slot = s * kPerSubmitter + i;
        const int block = s * kPerSubmitter + (i % (kPerSubmitter / 2));
        {
          std::lock_guard<std::mutex> lock(sq_mu);
          io_uring_sqe* sqe = io_uring_get_sqe(&ring);
          if (!sqe) {
            failed++;
            continue;
          }
          uint8_t* buf = bufs + static_cast<size_t>(slot) * kBlock;
          if (i < kPerSubmitter / 2) {
            io_uring_prep_write(sqe, fd, buf, kBlock, static_cast<uint64_t>(block) * kBlock);
          } else {
            io_uring_prep_read(sqe, fd, buf, kBlock, static_cast<uint64_t>(block) * kBlock);
          }
          io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(slot));
          if (io_uring_submit(&ring) != 1) failed++;
        }
        usleep(200);
      }
    });
  }
  for (auto& t : submitters) t.join();
  reaper.join();
  io_uring_queue_exit(&ring);
  close(fd);
  free(bufs);
  printf("uring: %d requests, %d failed\n", total, failed.load());
  return failed.load() ? 1 : 0;
}

// Two threads io_submit to one context, a third io_getevents for all of them.
int SharedContext(const std::string& dir) {
  int fd = OpenData(dir + "/aio.dat");
  unsigned long ctx = 0;
  long r = Sys(SYS_io_setup, 32, reinterpret_cast<long>(&ctx), 0, 0, 0);
  if (r < 0) {
    fprintf(stderr, "io_setup: %s\n", strerror(static_cast<int>(-r)));
    return 4;
  }
  constexpr int kAioSubmitters = 2, kPer = 12, total = kAioSubmitters * kPer;
  uint8_t* bufs = Buffers(total);
  std::vector<iocb> cbs(total);
  std::atomic<int> failed{0};
  std::thread reaper([&] {
    io_event ev[8];
    for (int got = 0; got < total;) {
      long n = Sys(SYS_io_getevents, static_cast<long>(ctx), 1, 8, reinterpret_cast<long>(ev), 0);
      if (n < 0) {
        if (n == -EINTR) continue;
        failed++;
        return;
      }
      for (long k = 0; k < n; k++) {
        if (ev[k].res != kBlock) failed++;
      }
      got += static_cast<int>(n);
    }
  });
  std::vector<std::thread> submitters;
  for (int s = 0; s < kAioSubmitters; s++) {
    submitters.emplace_back([&, s] {
      for (int i = 0; i < kPer; i++) {
        const int slot = s * kPer + i;
        const int block = s * kPer + (i % (kPer / 2));
        iocb* cb = &cbs[static_cast<size_t>(slot)];
        uint8_t* buf = bufs + static_cast<size_t>(slot) * kBlock;
        if (i < kPer / 2) io_prep_pwrite(cb, fd, buf, kBlock, static_cast<long long>(block) * kBlock);
        else io_prep_pread(cb, fd, buf, kBlock, static_cast<long long>(block) * kBlock);
        iocb* one[1] = {cb};
        if (Sys(SYS_io_submit, static_cast<long>(ctx), 1, reinterpret_cast<long>(one), 0, 0) != 1) {
          failed++;
        }
        usleep(300);
      }
    });
  }
  for (auto& t : submitters) t.join();
  reaper.join();
  Sys(SYS_io_destroy, static_cast<long>(ctx), 0, 0, 0, 0);
  close(fd);
  free(bufs);
  printf("libaio: %d requests, %d failed\n", total, failed.load());
  return failed.load() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: io_uring_shared DIR [uring|libaio|both]\n");
    return 2;
  }
  const std::string mode = argc == 3 ? argv[2] : "both";
  int rc = 0;
  if (mode == "uring" || mode == "both") rc |= SharedRing(argv[1]);
  if (mode == "libaio" || mode == "both") rc |= SharedContext(argv[1]);
  return rc;
}
