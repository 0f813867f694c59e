// io_uring_rw LOG DIR: reads and writes through io_uring (liburing), each request with its own
// user_data, offset and length; logs every submitted request and every completion as
// {"kind": "submit" | "complete", ...} (prog_log.h) for comparison with ASYNC_IO records.
#include <liburing.h>

#include <cstring>
#include <string>

#include "prog_log.h"

using iotwin::progs::Entry;

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: io_uring_rw LOG DIR\n");
    return 2;
  }
  iotwin::progs::Log log(argv[1]);
  std::string path = std::string(argv[2]) + "/uring.dat";
  int fd = open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  if (fd < 0) iotwin::progs::Die("open");
  static char buf[8][8192];
  struct io_uring ring;
  int rc = io_uring_queue_init(16, &ring, 0);
  if (rc < 0) {
    fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-rc));
    return 4;
  }
  log.Add(Entry::Kind("ring").Int("ring_fd", ring.ring_fd).Int("fd", fd));
  // Writes first (one batch), then reads of what was written (another batch).
  for (int phase = 0; phase < 2; phase++) {
    for (int i = 0; i < 4; i++) {
      struct io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      uint64_t len = 1024 * (i + 1), off = 8192 * i + 512 * phase;
      uint64_t user_data = 1000 * (phase + 1) + i;
      if (phase == 0) {
        io_uring_prep_write(sqe, fd, buf[i], len, off);
      } else {
        io_uring_prep_read(sqe, fd, buf[4 + i], len, off);
      }
      io_uring_sqe_set_data64(sqe, user_data);
      log.Add(Entry::Kind("submit")
                  .Int("opcode", sqe->opcode)
                  .Int("fd", fd)
                  .U64("offset", off)
                  .U64("length", len)
                  .U64("user_data", user_data));
    }
    rc = io_uring_submit_and_wait(&ring, 4);
    if (rc < 0) {
      fprintf(stderr, "io_uring_submit: %s\n", strerror(-rc));
      return 1;
    }
    for (int i = 0; i < 4; i++) {
      struct io_uring_cqe* cqe;
      rc = io_uring_wait_cqe(&ring, &cqe);
      if (rc < 0) return 1;
      log.Add(Entry::Kind("complete").U64("user_data", cqe->user_data).Int("res", cqe->res));
      io_uring_cqe_seen(&ring, cqe);
    }
  }
  io_uring_queue_exit(&ring);
  close(fd);
  log.Flush();
  return 0;
}
