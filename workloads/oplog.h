// The operation log: what the workload did, op by op, kept in memory while it runs and written as
// JSON Lines only at the very end (after the final marker), so the log adds no I/O to the run.
// Runtime tests compare a captured trace against it; docs/workloads.md lists every op and field.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace iotwin::workload {

// The JSON shape of one kind of log entry: which record fields are emitted and under what names.
struct OpDesc {
  const char* name;  // "op" value: a syscall name, or a pseudo-op (touch, uring_read, marker...)
  bool fd;           // emit "fd"
  bool offset;       // emit "offset"
  bool len;          // emit "len"
  const char* addr_name;  // name for OpRecord::addr, or nullptr
  const char* arg_names[3];
  const char* str_name;  // name for the string (path, file, text), or nullptr
  const char* constant;  // literal JSON members appended verbatim (",\"write\":false"), or nullptr
  // Counted in the summary: data moved by a read- or write-like operation.
  enum class Data : uint8_t { kNone, kRead, kWrite } data;
};

// clang-format off
// Syscalls (each is exactly one system call of that name, issued with syscall(2)).
inline constexpr OpDesc kOpOpenat{"openat", true, false, false, nullptr, {"flags", "mode"}, "path", nullptr, OpDesc::Data::kNone};
inline constexpr OpDesc kOpClose{"close", true, false, false, nullptr, {}, nullptr, nullptr, OpDesc::Data::kNone};
inline constexpr OpDesc kOpRead{"read", true, true, true, nullptr, {}, nullptr, nullptr, OpDesc::Data::kRead};
inline constexpr OpDesc kOpWrite{"write", true, true, true, nullptr, {}, nullptr, nullptr, OpDesc::Data::kWrite};
inline constexpr OpDesc kOpPread{"pread64", true, true, true, nullptr, {}, nullptr, nullptr, OpDesc::Data::kRead};
inline constexpr OpDesc kOpPwrite{"pwrite64", true, true, true, nullptr, {}, nullptr, nullptr, OpDesc::Data::kWrite};
inline constexpr OpDesc kOpLseek{"lseek", true, true, false, nullptr, {"whence"}, nullptr, nullptr, OpDesc::Data::kNone};
inline constexpr OpDesc kOpFsync{"fsync", true, false, false, nullptr, {}, nullptr, nullptr, OpDesc::Data::kNone};
inline constexpr OpDesc kOpFadvise{"fadvise64", true, true, true, nullptr, {"advice"}, nullptr, nullptr, OpDesc::Data::kNone};
inline constexpr OpDesc kOpFtruncate{"ftruncate", true, false, true, nullptr, {}, nullptr, nullptr, OpDesc::Data::kNone};
inline constexpr OpDesc kOpMkdirat{"mkdirat", true, false, false, nullptr, {"mode"}, "path", nullptr, OpDesc::Data::kNone};
inline constexpr OpDesc kOpNewfstatat{"newfstatat", true, false, false, nullptr, {"flags", "size"}, "path", nullptr, OpDesc::Data::kNone};
inline constexpr OpDesc kOpMmap{"mmap", true, true, true, "addr", {"prot", "flags"}, nullptr, nullptr, OpDesc::Data::kNone};
inline constexpr OpDesc kOpMunmap{"munmap", false, false, true, "addr", {}, nullptr, nullptr, OpDesc::Data::kNone};
inline constexpr OpDesc kOpIoSetup{"io_setup", false, false, false, "ctx", {"nr_events"}, nullptr, nullptr, OpDesc::Data::kNone};
inline constexpr OpDesc kOpIoSubmit{"io_submit", false, false, false, "ctx", {"nr"}, nullptr, nullptr, OpDesc::Data::kNone};
inline constexpr OpDesc kOpIoGetevents{"io_getevents", false, false, false, "ctx", {"min_nr", "nr"}, nullptr, nullptr, OpDesc::Data::kNone};
inline constexpr OpDesc kOpIoDestroy{"io_destroy", false, false, false, "ctx", {}, nullptr, nullptr, OpDesc::Data::kNone};
inline constexpr OpDesc kOpIoUringSetup{"io_uring_setup", false, false, false, nullptr, {"entries", "flags"}, nullptr, nullptr, OpDesc::Data::kNone};
// liburing's io_uring_queue_exit(): munmap of the rings, then close(fd) of the ring.
inline constexpr OpDesc kOpUringExit{"uring_exit", true, false, false, nullptr, {}, nullptr, nullptr, OpDesc::Data::kNone};
inline constexpr OpDesc kOpIoUringEnter{"io_uring_enter", true, false, false, nullptr, {"to_submit", "min_complete", "flags"}, nullptr, nullptr, OpDesc::Data::kNone};
// Asynchronous requests, one entry each: ts_ns = the submitting syscall's issue time, dur_ns =
// until the completion was reaped, ret = the completion's result.
inline constexpr OpDesc kOpAioPread{"aio_pread", true, true, true, "user_data", {}, nullptr, nullptr, OpDesc::Data::kRead};
inline constexpr OpDesc kOpAioPwrite{"aio_pwrite", true, true, true, "user_data", {}, nullptr, nullptr, OpDesc::Data::kWrite};
inline constexpr OpDesc kOpUringRead{"uring_read", true, true, true, "user_data", {}, nullptr, nullptr, OpDesc::Data::kRead};
inline constexpr OpDesc kOpUringWrite{"uring_write", true, true, true, "user_data", {}, nullptr, nullptr, OpDesc::Data::kWrite};
// A load of one byte from a file mapping (no syscall; may or may not fault). offset = byte offset
// in the file, len = bytes of that page inside the file, pgoff = page index.
inline constexpr OpDesc kOpTouch{"touch", false, true, true, "addr", {"pgoff"}, "file", ",\"write\":false", OpDesc::Data::kRead};
// Intent markers (docs: "Intent markers"): marker_open is the one openat of $IOTWIN_MARKER, each
// marker is one write(2) of `text` on `fd`.
inline constexpr OpDesc kOpMarkerOpen{"marker_open", false, false, false, nullptr, {}, "path", nullptr, OpDesc::Data::kNone};
inline constexpr OpDesc kOpMarker{"marker", true, false, false, nullptr, {}, "text", nullptr, OpDesc::Data::kNone};
// clang-format on

struct OpRecord {
  const OpDesc* desc = nullptr;
  uint64_t ts_ns = 0;   // CLOCK_MONOTONIC when issued
  uint64_t dur_ns = 0;  // until it returned (async: until its completion was reaped)
  int64_t ret = 0;      // result, negative errno on failure
  uint64_t offset = 0;
  uint64_t len = 0;
  uint64_t addr = 0;
  uint64_t args[3] = {0, 0, 0};
  int32_t fd = -1;
  int32_t str = -1;  // index into the owning ThreadLog's strings
};

// One thread's log. Used by exactly one OS thread; storage is reserved up front so appending
// normally does not allocate during the run.
class ThreadLog {
 public:
  static constexpr size_t kNone = std::numeric_limits<size_t>::max();

  ThreadLog(bool enabled, int thread, size_t reserve);
  bool enabled() const { return enabled_; }
  int thread() const { return thread_; }
  // Records the calling OS thread's id (call once from the thread that will use this log).
  void BindCurrentThread();

  // Returns the entry's index (for filling in an async completion later), or kNone if disabled.
  size_t Add(const OpRecord& r) {
    if (!enabled_) return kNone;
    records_.push_back(r);
    return records_.size() - 1;
  }
  OpRecord* At(size_t i) { return i == kNone ? nullptr : &records_[i]; }
  int32_t Intern(std::string_view s);

  const std::vector<OpRecord>& records() const { return records_; }
  const std::string& str(int32_t i) const { return strings_[static_cast<size_t>(i)]; }
  pid_t tid() const { return tid_; }

 private:
  bool enabled_;
  int thread_;
  pid_t tid_ = 0;
  std::vector<OpRecord> records_;
  std::vector<std::string> strings_;
};

// All threads' logs. Thread 0 is the main thread; workers are 1..N.
class OpLog {
 public:
  explicit OpLog(bool enabled) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }
  // Creates the next thread's log (call from the main thread before starting that thread).
  ThreadLog* NewThread(size_t reserve);
  size_t size() const;
  // Writes every entry as one JSON object per line, merged across threads in ts_ns order (ties:
  // thread, then per-thread order). Call only after the workload has finished.
  Status WriteJsonl(const std::string& path) const;

 private:
  bool enabled_;
  std::vector<std::unique_ptr<ThreadLog>> threads_;
};

// Writes a text file (a log of this run) in 1 MiB pieces: `next` appends the next part to the
// buffer and returns false when there is no more. `what` names the file in errors.
Status WriteTextFile(const std::string& path, std::string_view what,
                     const std::function<bool(std::string&)>& next);

}  // namespace iotwin::workload
