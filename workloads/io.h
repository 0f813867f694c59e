// The workload's only path to the kernel: every file operation is exactly one system call issued
// with syscall(2) (so libc cannot substitute another one), timed, counted and appended to the
// calling thread's op log. Also: aligned buffers, libaio and io_uring batch queues, markers.
#pragma once

#include <libaio.h>
#include <liburing.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "marker.h"
#include "oplog.h"

namespace iotwin::workload {

inline constexpr size_t kPageSize = 4096;
// O_DIRECT needs buffers, offsets and lengths aligned to the device's logical block size; 4 KiB
// covers every common device.
inline constexpr size_t kDirectAlign = 4096;

uint64_t MonotonicNs();

// The process-wide marker channel ($IOTWIN_MARKER), opened once by InitMarkers().
IntentMarker& Markers();
// Opens the channel and records the open in `main_log`. Returns an error if IOTWIN_MARKER is set
// but cannot be opened (a tracer that asked for markers must not silently get none).
Status InitMarkers(ThreadLog& main_log);

// Data counters for the summary line.
struct IoCounters {
  uint64_t ops = 0;  // read/write-like operations: syscalls, async requests, page touches
  uint64_t read_bytes = 0;
  uint64_t write_bytes = 0;
  void Add(const IoCounters& o) {
    ops += o.ops;
    read_bytes += o.read_bytes;
    write_bytes += o.write_bytes;
  }
};

// Heap buffer aligned for O_DIRECT.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size);
  uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

// One thread's I/O. Each call returns the syscall's result or -errno, exactly as the log records.
class ThreadIo {
 public:
  explicit ThreadIo(ThreadLog& log) : log_(log) {}

  long OpenAt(const std::string& path, int flags, mode_t mode = 0);
  long Close(int fd);
  // read(2)/write(2) use the file position; `pos` is where the caller knows it to be (logged as
  // "offset" so the log is position-explicit).
  long Read(int fd, void* buf, size_t len, uint64_t pos);
  long Write(int fd, const void* buf, size_t len, uint64_t pos);
  long Pread(int fd, void* buf, size_t len, uint64_t offset);
  long Pwrite(int fd, const void* buf, size_t len, uint64_t offset);
  long Lseek(int fd, uint64_t offset, int whence);
  long Fsync(int fd);
  long Fadvise(int fd, uint64_t offset, uint64_t len, int advice);
  long Ftruncate(int fd, uint64_t len);
  long MkdirAt(const std::string& path, mode_t mode);
  // newfstatat(AT_FDCWD, path, st, 0); the log keeps st_size.
  long Stat(const std::string& path, struct stat* st);
  // mmap(2): returns the address, or -errno as a negative value cast to long.
  long Mmap(size_t len, int prot, int flags, int fd, uint64_t offset);
  long Munmap(void* addr, size_t len);
  // Reads one byte at `addr` inside a file mapping; `file_str` names the file (Intern()),
  // `file_offset` is the byte's file offset, `page_bytes` the bytes of that page inside the file.
  uint8_t Touch(const volatile uint8_t* addr, int32_t file_str, uint64_t file_offset,
                uint64_t page_bytes);

  // Intent markers; each is one write(2) on the marker fd when markers are enabled.
  void Begin(std::string_view label);
  void End(std::string_view label);
  void Instant(std::string_view label, uint64_t value);

  ThreadLog& log() { return log_; }
  IoCounters& counters() { return counters_; }
  const IoCounters& counters() const { return counters_; }
  int32_t Intern(std::string_view s) { return log_.Intern(s); }
  // Appends a record: timestamps/ret/counters filled here. Returns the log index.
  size_t Record(const OpDesc& d, uint64_t t0, uint64_t t1, long ret, OpRecord r);
  bool timing() const { return log_.enabled(); }
  uint64_t Now() const { return log_.enabled() ? MonotonicNs() : 0; }
  void CountData(const OpDesc& d, long ret);

 private:
  void Mark(char kind, std::string_view label, bool has_value, uint64_t value);

  ThreadLog& log_;
  IoCounters counters_;
};

// One asynchronous read or write.
struct AsyncRequest {
  bool write = false;
  int fd = -1;
  void* buf = nullptr;
  size_t len = 0;
  uint64_t offset = 0;
  int64_t res = 0;  // completion result (bytes or -errno)
};

// A batch queue: Run() submits up to depth() requests and waits until all have completed.
// Batches (rather than continuous refill) keep the syscall sequence deterministic.
class AsyncQueue {
 public:
  virtual ~AsyncQueue() = default;
  virtual unsigned depth() const = 0;
  virtual Status Run(std::span<AsyncRequest> reqs) = 0;
};

// libaio: io_setup(depth) once; per batch one io_submit(n iocbs) then io_getevents(min_nr = nr =
// outstanding, no timeout) until all are reaped; io_destroy at the end.
Result<std::unique_ptr<AsyncQueue>> CreateAioQueue(ThreadIo& io, unsigned depth);
// io_uring (liburing): io_uring_queue_init(depth) (io_uring_setup + ring mmaps); per batch one
// io_uring_enter(to_submit = n, min_complete = n, GETEVENTS) through io_uring_submit_and_wait; an
// extra io_uring_enter(0, remaining, GETEVENTS) only if completions are missing (signals).
Result<std::unique_ptr<AsyncQueue>> CreateUringQueue(ThreadIo& io, unsigned depth);

// Status for a failed syscall result (ret = -errno) with context.
Status SyscallError(long ret, std::string_view what, std::string_view path);

}  // namespace iotwin::workload
