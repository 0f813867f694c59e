#include "io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace iotwin::workload {

namespace {

long SyscallResult(long r) { return r < 0 ? -errno : r; }

}  // namespace

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no syscall
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

IntentMarker& Markers() {
  static IntentMarker marker;
  return marker;
}

Status InitMarkers(ThreadLog& main_log) {
  const uint64_t t0 = main_log.enabled() ? MonotonicNs() : 0;
  IntentMarker& m = Markers();
  const uint64_t t1 = main_log.enabled() ? MonotonicNs() : 0;
  if (!m.requested()) return Status::Ok();
  const char* path = std::getenv("IOTWIN_MARKER");
  OpRecord r;
  r.desc = &kOpMarkerOpen;
  r.ts_ns = t0;
  r.dur_ns = t1 - t0;
  r.ret = m.enabled() ? m.fd() : -m.open_errno();
  r.str = main_log.Intern(path);
  main_log.Add(r);
  if (!m.enabled()) {
    return Status::FromErrno(m.open_errno(),
                             fmt::format("IOTWIN_MARKER: cannot open marker channel {}", path));
  }
  return Status::Ok();
}

AlignedBuffer::AlignedBuffer(size_t size) : size_(size) {
  const size_t rounded = (size + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
  data_.reset(
      static_cast<uint8_t*>(std::aligned_alloc(kDirectAlign, rounded ? rounded : kDirectAlign)));
  if (!data_) throw std::bad_alloc();
}

void AlignedBuffer::Free::operator()(uint8_t* p) const { std::free(p); }

Status SyscallError(long ret, std::string_view what, std::string_view path) {
  const int err = ret < 0 ? static_cast<int>(-ret) : EIO;
  return Status::FromErrno(err,
                           path.empty() ? std::string(what) : fmt::format("{} {}", what, path));
}

void ThreadIo::CountData(const OpDesc& d, long ret) {
  if (d.data == OpDesc::Data::kNone) return;
  counters_.ops++;
  if (ret <= 0) return;
  if (d.data == OpDesc::Data::kRead) {
    counters_.read_bytes += static_cast<uint64_t>(ret);
  } else {
    counters_.write_bytes += static_cast<uint64_t>(ret);
  }
}

size_t ThreadIo::Record(const OpDesc& d, uint64_t t0, uint64_t t1, long ret, OpRecord r) {
  CountData(d, ret);
  if (!log_.enabled()) return ThreadLog::kNone;
  r.desc = &d;
  r.ts_ns = t0;
  r.dur_ns = t1 - t0;
  r.ret = ret;
  return log_.Add(r);
}

long ThreadIo::OpenAt(const std::string& path, int flags, mode_t mode) {
  const uint64_t t0 = Now();
  const long r = SyscallResult(::syscall(SYS_openat, AT_FDCWD, path.c_str(), flags, mode));
  OpRecord rec;
  rec.fd = AT_FDCWD;
  rec.args[0] = static_cast<uint32_t>(flags);
  rec.args[1] = mode;
  rec.str = log_.Intern(path);
  Record(kOpOpenat, t0, Now(), r, rec);
  return r;
}

long ThreadIo::Close(int fd) {
  const uint64_t t0 = Now();
  const long r = SyscallResult(::syscall(SYS_close, fd));
  OpRecord rec;
  rec.fd = fd;
  Record(kOpClose, t0, Now(), r, rec);
  return r;
}

long ThreadIo::Read(int fd, void* buf, size_t len, uint64_t pos) {
  const uint64_t t0 = Now();
  const long r = SyscallResult(::syscall(SYS_read, fd, buf, len));
  OpRecord rec;
  rec.fd = fd;
  rec.offset = pos;
  rec.len = len;
  Record(kOpRead, t0, Now(), r, rec);
  return r;
}

long ThreadIo::Write(int fd, const void* buf, size_t len, uint64_t pos) {
  const uint64_t t0 = Now();
  const long r = SyscallResult(::syscall(SYS_write, fd, buf, len));
  OpRecord rec;
  rec.fd = fd;
  rec.offset = pos;
  rec.len = len;
  Record(kOpWrite, t0, Now(), r, rec);
  return r;
}

long ThreadIo::Pread(int fd, void* buf, size_t len, uint64_t offset) {
  const uint64_t t0 = Now();
  const long r = SyscallResult(::syscall(SYS_pread64, fd, buf, len, offset));
  OpRecord rec;
  rec.fd = fd;
  rec.offset = offset;
  rec.len = len;
  Record(kOpPread, t0, Now(), r, rec);
  return r;
}

long ThreadIo::Pwrite(int fd, const void* buf, size_t len, uint64_t offset) {
  const uint64_t t0 = Now();
  const long r = SyscallResult(::syscall(SYS_pwrite64, fd, buf, len, offset));
  OpRecord rec;
  rec.fd = fd;
  rec.offset = offset;
  rec.len = len;
  Record(kOpPwrite, t0, Now(), r, rec);
  return r;
}

long ThreadIo::Lseek(int fd, uint64_t offset, int whence) {
  const uint64_t t0 = Now();
  const long r = SyscallResult(::syscall(SYS_lseek, fd, offset, whence));
  OpRecord rec;
  rec.fd = fd;
  rec.offset = offset;
  rec.args[0] = static_cast<uint64_t>(whence);
  Record(kOpLseek, t0, Now(), r, rec);
  return r;
}

long ThreadIo::Fsync(int fd) {
  const uint64_t t0 = Now();
  const long r = SyscallResult(::syscall(SYS_fsync, fd));
  OpRecord rec;
  rec.fd = fd;
  Record(kOpFsync, t0, Now(), r, rec);
  return r;
}

long ThreadIo::Fadvise(int fd, uint64_t offset, uint64_t len, int advice) {
  const uint64_t t0 = Now();
  const long r = SyscallResult(::syscall(SYS_fadvise64, fd, offset, len, advice));
  OpRecord rec;
  rec.fd = fd;
  rec.offset = offset;
  rec.len = len;
  rec.args[0] = static_cast<uint64_t>(advice);
  Record(kOpFadvise, t0, Now(), r, rec);
  return r;
}

long ThreadIo::Ftruncate(int fd, uint64_t len) {
  const uint64_t t0 = Now();
  const long r = SyscallResult(::syscall(SYS_ftruncate, fd, len));
  OpRecord rec;
  rec.fd = fd;
  rec.len = len;
  Record(kOpFtruncate, t0, Now(), r, rec);
  return r;
}

long ThreadIo::MkdirAt(const std::string& path, mode_t mode) {
  const uint64_t t0 = Now();
  const long r = SyscallResult(::syscall(SYS_mkdirat, AT_FDCWD, path.c_str(), mode));
  OpRecord rec;
  rec.fd = AT_FDCWD;
  rec.args[0] = mode;
  rec.str = log_.Intern(path);
  Record(kOpMkdirat, t0, Now(), r, rec);
  return r;
}

long ThreadIo::Stat(const std::string& path, struct stat* st) {
  const uint64_t t0 = Now();
  const long r = SyscallResult(::syscall(SYS_newfstatat, AT_FDCWD, path.c_str(), st, 0));
  OpRecord rec;
  rec.fd = AT_FDCWD;
  rec.args[0] = 0;
  rec.args[1] = r == 0 ? static_cast<uint64_t>(st->st_size) : 0;
  rec.str = log_.Intern(path);
  Record(kOpNewfstatat, t0, Now(), r, rec);
  return r;
}

long ThreadIo::Mmap(size_t len, int prot, int flags, int fd, uint64_t offset) {
  const uint64_t t0 = Now();
  long r = ::syscall(SYS_mmap, nullptr, len, prot, flags, fd, offset);
  if (reinterpret_cast<void*>(r) == MAP_FAILED) r = -errno;
  OpRecord rec;
  rec.fd = fd;
  rec.offset = offset;
  rec.len = len;
  rec.addr = 0;  // the hint: always NULL
  rec.args[0] = static_cast<uint64_t>(prot);
  rec.args[1] = static_cast<uint64_t>(flags);
  Record(kOpMmap, t0, Now(), r, rec);
  return r;
}

long ThreadIo::Munmap(void* addr, size_t len) {
  const uint64_t t0 = Now();
  const long r = SyscallResult(::syscall(SYS_munmap, addr, len));
  OpRecord rec;
  rec.addr = reinterpret_cast<uintptr_t>(addr);
  rec.len = len;
  Record(kOpMunmap, t0, Now(), r, rec);
  return r;
}

uint8_t ThreadIo::Touch(const volatile uint8_t* addr, int32_t file_str, uint64_t file_offset,
                        uint64_t page_bytes) {
  const uint64_t t0 = Now();
  const uint8_t v = *addr;
  OpRecord rec;
  rec.addr = reinterpret_cast<uintptr_t>(addr);
  rec.offset = file_offset;
  rec.len = page_bytes;
  rec.args[0] = file_offset / kPageSize;
  rec.str = file_str;
  Record(kOpTouch, t0, Now(), static_cast<long>(page_bytes), rec);
  return v;
}

void ThreadIo::Mark(char kind, std::string_view label, bool has_value, uint64_t value) {
  IntentMarker& m = Markers();
  if (!m.enabled()) return;
  char line[IntentMarker::kMaxLine];
  const size_t n = IntentMarker::Format(kind, label, has_value, value, line);
  const uint64_t t0 = Now();
  const long r = m.WriteLine(line, n);
  const uint64_t t1 = Now();
  if (!log_.enabled() || n == 0) return;
  OpRecord rec;
  rec.fd = m.fd();
  // Logged without the trailing newline; the write(2) carried it (ret counts it).
  rec.str = log_.Intern(std::string_view(line, n - 1));
  Record(kOpMarker, t0, t1, r, rec);
}

void ThreadIo::Begin(std::string_view label) { Mark('B', label, false, 0); }
void ThreadIo::End(std::string_view label) { Mark('E', label, false, 0); }
void ThreadIo::Instant(std::string_view label, uint64_t value) { Mark('I', label, true, value); }

namespace {

// The per-request log entries of one batch: added right after the submitting syscall (same
// timestamp), completed in place when reaped.
class BatchLog {
 public:
  BatchLog(ThreadIo& io, const OpDesc& read_desc, const OpDesc& write_desc)
      : io_(io), read_desc_(read_desc), write_desc_(write_desc) {}

  void Submitted(std::span<AsyncRequest> reqs, uint64_t first_user_data, uint64_t t0) {
    index_.assign(reqs.size(), ThreadLog::kNone);
    t0_ = t0;
    if (!io_.log().enabled()) return;
    for (size_t i = 0; i < reqs.size(); i++) {
      OpRecord rec;
      rec.desc = reqs[i].write ? &write_desc_ : &read_desc_;
      rec.ts_ns = t0;
      rec.fd = reqs[i].fd;
      rec.offset = reqs[i].offset;
      rec.len = reqs[i].len;
      rec.addr = first_user_data + i;
      index_[i] = io_.log().Add(rec);
    }
  }

  void Completed(size_t i, const AsyncRequest& req, uint64_t t1) {
    io_.CountData(req.write ? write_desc_ : read_desc_, static_cast<long>(req.res));
    if (OpRecord* rec = io_.log().At(index_[i])) {
      rec->ret = req.res;
      rec->dur_ns = t1 - t0_;
    }
  }

 private:
  ThreadIo& io_;
  const OpDesc& read_desc_;
  const OpDesc& write_desc_;
  std::vector<size_t> index_;
  uint64_t t0_ = 0;
};

class AioQueue final : public AsyncQueue {
 public:
  AioQueue(ThreadIo& io, unsigned depth, io_context_t ctx)
      : io_(io), depth_(depth), ctx_(ctx), iocbs_(depth), iocb_ptrs_(depth), events_(depth) {}

  ~AioQueue() override {
    const uint64_t t0 = io_.Now();
    const long r = io_destroy(ctx_);
    OpRecord rec;
    rec.addr = reinterpret_cast<uintptr_t>(ctx_);
    io_.Record(kOpIoDestroy, t0, io_.Now(), r, rec);
  }

  unsigned depth() const override { return depth_; }

  Status Run(std::span<AsyncRequest> reqs) override {
    if (reqs.empty()) return Status::Ok();
    if (reqs.size() > depth_)
      return Status::Internal("aio batch of {} > depth {}", reqs.size(), depth_);
    const uint64_t first = next_user_data_;
    for (size_t i = 0; i < reqs.size(); i++) {
      AsyncRequest& q = reqs[i];
      if (q.write) {
        io_prep_pwrite(&iocbs_[i], q.fd, q.buf, q.len, static_cast<long long>(q.offset));
      } else {
        io_prep_pread(&iocbs_[i], q.fd, q.buf, q.len, static_cast<long long>(q.offset));
      }
      iocbs_[i].data = reinterpret_cast<void*>(static_cast<uintptr_t>(first + i));
      iocb_ptrs_[i] = &iocbs_[i];
    }
    next_user_data_ += reqs.size();

    BatchLog batch(io_, kOpAioPread, kOpAioPwrite);
    size_t submitted = 0;
    while (submitted < reqs.size()) {
      const long n = static_cast<long>(reqs.size() - submitted);
      const uint64_t t0 = io_.Now();
      const long r = io_submit(ctx_, n, iocb_ptrs_.data() + submitted);
      OpRecord rec;
      rec.addr = reinterpret_cast<uintptr_t>(ctx_);
      rec.args[0] = static_cast<uint64_t>(n);
      io_.Record(kOpIoSubmit, t0, io_.Now(), r, rec);
      if (r <= 0) return SyscallError(r == 0 ? -EAGAIN : r, "io_submit", "");
      if (submitted == 0) {
        batch.Submitted(reqs, first, t0);
      }
      submitted += static_cast<size_t>(r);
    }

    size_t done = 0;
    while (done < reqs.size()) {
      const long want = static_cast<long>(reqs.size() - done);
      const uint64_t t0 = io_.Now();
      const long r = io_getevents(ctx_, want, want, events_.data(), nullptr);
      const uint64_t t1 = io_.Now();
      OpRecord rec;
      rec.addr = reinterpret_cast<uintptr_t>(ctx_);
      rec.args[0] = static_cast<uint64_t>(want);
      rec.args[1] = static_cast<uint64_t>(want);
      io_.Record(kOpIoGetevents, t0, t1, r, rec);
      if (r == -EINTR) continue;
      if (r < 0) return SyscallError(r, "io_getevents", "");
      for (long e = 0; e < r; e++) {
        const size_t i = reinterpret_cast<uintptr_t>(events_[e].data) - first;
        if (i >= reqs.size()) return Status::Internal("aio completion for unknown request");
        reqs[i].res = static_cast<int64_t>(events_[e].res);
        batch.Completed(i, reqs[i], t1);
      }
      done += static_cast<size_t>(r);
    }
    return Status::Ok();
  }

 private:
  ThreadIo& io_;
  unsigned depth_;
  io_context_t ctx_;
  std::vector<struct iocb> iocbs_;
  std::vector<struct iocb*> iocb_ptrs_;
  std::vector<struct io_event> events_;
  uint64_t next_user_data_ = 1;
};

class UringQueue final : public AsyncQueue {
 public:
  UringQueue(ThreadIo& io, unsigned depth) : io_(io), depth_(depth) {}
  ~UringQueue() override {
    if (!initialized_) return;
    const uint64_t t0 = io_.Now();
    const int fd = ring_.ring_fd;
    io_uring_queue_exit(&ring_);
    OpRecord rec;
    rec.fd = fd;
    io_.Record(kOpUringExit, t0, io_.Now(), 0, rec);
  }

  Status Init() {
    const uint64_t t0 = io_.Now();
    const int r = io_uring_queue_init(depth_, &ring_, 0);
    OpRecord rec;
    rec.args[0] = depth_;
    rec.args[1] = 0;
    io_.Record(kOpIoUringSetup, t0, io_.Now(), r < 0 ? r : ring_.ring_fd, rec);
    if (r < 0) return SyscallError(r, "io_uring_queue_init", "");
    initialized_ = true;
    return Status::Ok();
  }

  unsigned depth() const override { return depth_; }

  Status Run(std::span<AsyncRequest> reqs) override {
    if (reqs.empty()) return Status::Ok();
    if (reqs.size() > depth_)
      return Status::Internal("uring batch of {} > depth {}", reqs.size(), depth_);
    const uint64_t first = next_user_data_;
    for (size_t i = 0; i < reqs.size(); i++) {
      AsyncRequest& q = reqs[i];
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) return Status::Internal("io_uring submission queue full");
      if (q.write) {
        io_uring_prep_write(sqe, q.fd, q.buf, static_cast<unsigned>(q.len), q.offset);
      } else {
        io_uring_prep_read(sqe, q.fd, q.buf, static_cast<unsigned>(q.len), q.offset);
      }
      io_uring_sqe_set_data64(sqe, first + i);
    }
    next_user_data_ += reqs.size();

    BatchLog batch(io_, kOpUringRead, kOpUringWrite);
    const unsigned n = static_cast<unsigned>(reqs.size());
    // Without SQPOLL, liburing makes exactly one io_uring_enter(fd, n, n, GETEVENTS) here.
    const uint64_t t0 = io_.Now();
    const int r = io_uring_submit_and_wait(&ring_, n);
    OpRecord rec;
    rec.fd = ring_.ring_fd;
    rec.args[0] = n;
    rec.args[1] = n;
    rec.args[2] = IORING_ENTER_GETEVENTS;
    io_.Record(kOpIoUringEnter, t0, io_.Now(), r, rec);
    if (r < 0 && r != -EINTR) return SyscallError(r, "io_uring_enter", "");
    if (r >= 0 && static_cast<unsigned>(r) != n) {
      return Status::Io("io_uring_enter submitted {} of {} requests", r, n);
    }
    batch.Submitted(reqs, first, t0);

    size_t done = 0;
    while (done < reqs.size()) {
      io_uring_cqe* cqe = nullptr;
      if (io_uring_peek_cqe(&ring_, &cqe) != 0 || cqe == nullptr) {
        // Only after an interrupted wait: ask the kernel for the rest, logged like the first.
        const unsigned want = static_cast<unsigned>(reqs.size() - done);
        const uint64_t w0 = io_.Now();
        const int w = io_uring_enter(static_cast<unsigned>(ring_.ring_fd), 0, want,
                                     IORING_ENTER_GETEVENTS, nullptr);
        OpRecord wrec;
        wrec.fd = ring_.ring_fd;
        wrec.args[0] = 0;
        wrec.args[1] = want;
        wrec.args[2] = IORING_ENTER_GETEVENTS;
        io_.Record(kOpIoUringEnter, w0, io_.Now(), w, wrec);
        if (w < 0 && w != -EINTR) return SyscallError(w, "io_uring_enter", "");
        continue;
      }
      const uint64_t t1 = io_.Now();
      const size_t i = io_uring_cqe_get_data64(cqe) - first;
      if (i >= reqs.size()) return Status::Internal("io_uring completion for unknown request");
      reqs[i].res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      batch.Completed(i, reqs[i], t1);
      done++;
    }
    return Status::Ok();
  }

 private:
  ThreadIo& io_;
  unsigned depth_;
  io_uring ring_{};
  bool initialized_ = false;
  uint64_t next_user_data_ = 1;
};

}  // namespace

Result<std::unique_ptr<AsyncQueue>> CreateAioQueue(ThreadIo& io, unsigned depth) {
  io_context_t ctx = nullptr;
  const uint64_t t0 = io.Now();
  const long r = io_setup(static_cast<int>(depth), &ctx);
  OpRecord rec;
  rec.args[0] = depth;
  rec.addr = reinterpret_cast<uintptr_t>(ctx);
  io.Record(kOpIoSetup, t0, io.Now(), r, rec);
  if (r < 0) return SyscallError(r, fmt::format("io_setup({})", depth), "");
  return std::unique_ptr<AsyncQueue>(new AioQueue(io, depth, ctx));
}

Result<std::unique_ptr<AsyncQueue>> CreateUringQueue(ThreadIo& io, unsigned depth) {
  auto q = std::make_unique<UringQueue>(io, depth);
  IOTWIN_RETURN_IF_ERROR(q->Init());
  return std::unique_ptr<AsyncQueue>(std::move(q));
}

}  // namespace iotwin::workload
