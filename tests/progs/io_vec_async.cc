// io_vec_async LOG DIR: vectored asynchronous requests, O_DIRECT where the file system takes it:
// io_uring READV/WRITEV (one request of 3 iovecs, one of 80: more than a record's 64 captured
// lengths) and libaio PWRITEV/PREADV of 3 iovecs. Logs every request ({"kind": "submit"}: engine,
// opcode, user_data, offset, bytes, iovcnt, lens "a,b,c") and completion ({"kind": "complete"}).
#include <libaio.h>
#include <liburing.h>
#include <sys/uio.h>

#include <cstring>
#include <string>
#include <vector>

#include "prog_log.h"

using iotwin::progs::Entry;
using iotwin::progs::Sys;

namespace {

constexpr size_t kBlock = 4096;
alignas(4096) char g_mem[2][128 * kBlock];

// iovecs of the given lengths laid out in `mem`, each on a block boundary.
std::vector<iovec> Lay(char* mem, const std::vector<size_t>& lens) {
  std::vector<iovec> v;
  size_t at = 0;
  for (size_t l : lens) {
    v.push_back(iovec{mem + at, l});
    at += (l + kBlock - 1) / kBlock * kBlock;
  }
  return v;
}

void LogSubmit(iotwin::progs::Log& log, const char* engine, int opcode, uint64_t user_data,
               uint64_t off, const std::vector<iovec>& iov) {
  uint64_t bytes = 0;
  std::string lens;
  for (const iovec& v : iov) {
    bytes += v.iov_len;
    lens += (lens.empty() ? "" : ",") + std::to_string(v.iov_len);
  }
  log.Add(Entry::Kind("submit")
              .Str("engine", engine)
              .Int("opcode", opcode)
              .U64("user_data", user_data)
              .U64("offset", off)
              .U64("bytes", bytes)
              .U64("iovcnt", iov.size())
              .Str("lens", lens));
}

// Two io_uring batches: writes, then reads of the same ranges.
int Uring(iotwin::progs::Log& log, int fd) {
  struct io_uring ring;
  int rc = io_uring_queue_init(8, &ring, 0);
  if (rc < 0) {
    fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-rc));
    return 4;
  }
  const std::vector<std::vector<size_t>> shapes = {{kBlock, 2 * kBlock, kBlock},
                                                   std::vector<size_t>(80, kBlock)};
  for (int phase = 0; phase < 2; phase++) {
    std::vector<std::vector<iovec>> iovs;
    uint64_t off = 0;
    for (size_t i = 0; i < shapes.size(); i++) {
      iovs.push_back(Lay(g_mem[i], shapes[i]));
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      const auto n = static_cast<unsigned>(iovs[i].size());
      if (phase == 0) io_uring_prep_writev(sqe, fd, iovs[i].data(), n, off);
      else io_uring_prep_readv(sqe, fd, iovs[i].data(), n, off);
      const uint64_t user_data = 100 * (phase + 1) + i;
      io_uring_sqe_set_data64(sqe, user_data);
      LogSubmit(log, "io_uring", sqe->opcode, user_data, off, iovs[i]);
      for (const iovec& v : iovs[i]) off += v.iov_len;
    }
    rc = io_uring_submit_and_wait(&ring, static_cast<unsigned>(shapes.size()));
    if (rc < 0) return 1;
    for (size_t i = 0; i < shapes.size(); i++) {
      io_uring_cqe* cqe;
      if (io_uring_wait_cqe(&ring, &cqe) < 0) return 1;
      log.Add(Entry::Kind("complete").U64("user_data", cqe->user_data).Int("res", cqe->res));
      io_uring_cqe_seen(&ring, cqe);
    }
  }
  io_uring_queue_exit(&ring);
  return 0;
}

// libaio: one PWRITEV, then one PREADV, past what io_uring wrote.
int Libaio(iotwin::progs::Log& log, int fd) {
  unsigned long ctx = 0;
  if (Sys(SYS_io_setup, 8, &ctx) < 0) iotwin::progs::Die("io_setup");
  const uint64_t off = 1 << 20;
  for (int phase = 0; phase < 2; phase++) {
    std::vector<iovec> iov = Lay(g_mem[phase], {kBlock, kBlock, 2 * kBlock});
    struct iocb cb;
    if (phase == 0) io_prep_pwritev(&cb, fd, iov.data(), static_cast<int>(iov.size()), off);
    else io_prep_preadv(&cb, fd, iov.data(), static_cast<int>(iov.size()), off);
    const uint64_t user_data = 500 + phase;
    cb.data = reinterpret_cast<void*>(static_cast<uintptr_t>(user_data));
    struct iocb* ptr = &cb;
    LogSubmit(log, "libaio", cb.aio_lio_opcode, user_data, off, iov);
    if (Sys(SYS_io_submit, ctx, 1, &ptr) != 1) iotwin::progs::Die("io_submit");
    struct io_event ev;
    if (Sys(SYS_io_getevents, ctx, 1, 1, &ev, nullptr) != 1) iotwin::progs::Die("io_getevents");
    log.Add(Entry::Kind("complete")
                .U64("user_data", reinterpret_cast<uintptr_t>(ev.data))
                .Int("res", static_cast<int64_t>(ev.res)));
  }
  Sys(SYS_io_destroy, ctx);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: io_vec_async LOG DIR\n");
    return 2;
  }
  iotwin::progs::Log log(argv[1]);
  std::string path = std::string(argv[2]) + "/vec.dat";
  int fd = open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_DIRECT, 0644);
  if (fd < 0) fd = open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  if (fd < 0) iotwin::progs::Die("open");
  iotwin::progs::BeginMark();
  int rc = Uring(log, fd);
  if (rc != 0) return rc;
  rc = Libaio(log, fd);
  close(fd);
  log.Flush();
  return rc;
}
