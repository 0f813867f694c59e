// io_uring_linked DIR: io_uring requests linked with IOSQE_IO_LINK and IOSQE_IO_HARDLINK, each
// chain submitted with one io_uring_enter and reaped whole:
//   1. write -> fsync -> read of what was written (every link completes);
//   2. write on a read-only descriptor (EBADF) -> write: the kernel cancels the second
//      (ECANCELED), so a later read of its range returns 0 bytes;
//   3. the same with a hard link: the second write runs despite the first failing.
// Prints each completion as "user_data res" on stdout.
#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

struct Req {
  int opcode;  // IORING_OP_WRITE, IORING_OP_READ or IORING_OP_FSYNC
  int fd;
  unsigned len;
  unsigned long long offset;
  unsigned char flags;  // IOSQE_*
};

char buf[4][4096];

int Submit(io_uring* ring, const Req* reqs, int n, int first_id) {
  for (int i = 0; i < n; i++) {
    io_uring_sqe* sqe = io_uring_get_sqe(ring);
    const Req& r = reqs[i];
    if (r.opcode == IORING_OP_WRITE) io_uring_prep_write(sqe, r.fd, buf[i], r.len, r.offset);
    if (r.opcode == IORING_OP_READ) io_uring_prep_read(sqe, r.fd, buf[i], r.len, r.offset);
    if (r.opcode == IORING_OP_FSYNC) io_uring_prep_fsync(sqe, r.fd, 0);
    io_uring_sqe_set_flags(sqe, r.flags);
    io_uring_sqe_set_data64(sqe, static_cast<__u64>(first_id + i));
  }
  int rc = io_uring_submit_and_wait(ring, static_cast<unsigned>(n));
  if (rc < 0) return rc;
  for (int i = 0; i < n; i++) {
    io_uring_cqe* cqe;
    rc = io_uring_wait_cqe(ring, &cqe);
    if (rc < 0) return rc;
    printf("%llu %d\n", static_cast<unsigned long long>(cqe->user_data), cqe->res);
    io_uring_cqe_seen(ring, cqe);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: io_uring_linked DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int fd = open((dir + "/linked.dat").c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  const int made = open((dir + "/readonly.dat").c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0 || made < 0) return 1;
  close(made);
  const int ro = open((dir + "/readonly.dat").c_str(), O_RDONLY);
  if (ro < 0) return 1;
  memset(buf, 'x', sizeof(buf));
  io_uring ring;
  int rc = io_uring_queue_init(8, &ring, 0);
  if (rc < 0) {
    fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-rc));
    return 4;
  }
  const Req chain1[] = {{IORING_OP_WRITE, fd, 4096, 0, IOSQE_IO_LINK},
                        {IORING_OP_FSYNC, fd, 0, 0, IOSQE_IO_LINK},
                        {IORING_OP_READ, fd, 4096, 0, 0}};
  const Req chain2[] = {{IORING_OP_WRITE, ro, 4096, 0, IOSQE_IO_LINK},
                        {IORING_OP_WRITE, fd, 4096, 8192, 0}};
  const Req after2[] = {{IORING_OP_READ, fd, 4096, 8192, 0}};
  const Req chain3[] = {{IORING_OP_WRITE, ro, 4096, 0, IOSQE_IO_HARDLINK},
                        {IORING_OP_WRITE, fd, 4096, 16384, 0}};
  if (Submit(&ring, chain1, 3, 100) < 0 || Submit(&ring, chain2, 2, 200) < 0 ||
      Submit(&ring, after2, 1, 300) < 0 || Submit(&ring, chain3, 2, 400) < 0) {
    return 1;
  }
  io_uring_queue_exit(&ring);
  close(ro);
  close(fd);
  return 0;
}
