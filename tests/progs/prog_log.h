// What the capture test programs share: a log of the system calls they made, written as JSON
// lines at the end, and bracket calls that mark where the logged sequence begins and ends.
//
// Each logged call uses the field names of an IOT_REC_SYSCALL record ("op" is OpName: "pread64",
// "openat", ...) so the runtime tests compare the program's own account with the trace field by
// field; fields a call does not define are left out. Calls are made through syscall(2) wherever
// libc would otherwise substitute a different system call (open -> openat, stat -> newfstatat).
//
// Brackets: close(kBeginMark) and close(kEndMark) fail with EBADF and do nothing, but the
// capture records them; the tests compare only the calls of a thread between its two brackets.
#pragma once

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace iotwin::progs {

constexpr int kBeginMark = -1001;
constexpr int kEndMark = -1002;

// syscall(2) returning what the kernel returned (negative errno on failure), as recorded.
template <typename... Args>
long Sys(long nr, Args... args) {
  long r = syscall(nr, args...);
  return r == -1 ? -errno : r;
}

inline void BeginMark() { syscall(SYS_close, kBeginMark); }
inline void EndMark() { syscall(SYS_close, kEndMark); }

inline std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

// One logged call: numeric and string fields in insertion order.
class Entry {
 public:
  Entry() = default;
  explicit Entry(const std::string& op) { Str("op", op); }
  Entry& Int(const char* key, int64_t v) {
    fields_ += ", \"" + std::string(key) + "\": " + std::to_string(v);
    return *this;
  }
  Entry& U64(const char* key, uint64_t v) {
    fields_ += ", \"" + std::string(key) + "\": " + std::to_string(v);
    return *this;
  }
  Entry& Str(const char* key, const std::string& v) {
    fields_ +=
        std::string(fields_.empty() ? "" : ", ") + "\"" + key + "\": \"" + JsonEscape(v) + "\"";
    return *this;
  }
  const std::string& text() const { return fields_; }
  // An entry that is not a system call (async request, marker): {"kind": ...}.
  static Entry Kind(const std::string& kind) {
    Entry e;
    e.Str("kind", kind);
    return e;
  }

 private:
  std::string fields_;
};

// The log, kept in memory (so that writing it does not interleave with the calls being logged)
// and written to the file named on the command line by Flush().
class Log {
 public:
  explicit Log(std::string path) : path_(std::move(path)) {}
  void Add(const Entry& e) {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back("{\"pid\": " + std::to_string(getpid()) +
                     ", \"tid\": " + std::to_string(gettid()) + ", " + e.text() + "}\n");
  }
  // Appends all lines with one write (processes sharing a log file use O_APPEND).
  // A forked child starts with its parent's lines: it drops them (no system call involved).
  void Clear() { lines_.clear(); }
  void Reserve(size_t n) { lines_.reserve(n); }
  void Flush() {
    std::string all;
    for (const auto& l : lines_) all += l;
    int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (fd < 0) {
      perror(path_.c_str());
      exit(3);
    }
    if (write(fd, all.data(), all.size()) != static_cast<ssize_t>(all.size())) exit(3);
    close(fd);
    lines_.clear();
  }

 private:
  std::string path_;
  std::mutex mu_;
  std::vector<std::string> lines_;
};

inline void Die(const char* what) {
  perror(what);
  exit(2);
}

}  // namespace iotwin::progs
