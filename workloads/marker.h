// Intent markers: a language-neutral way for a traced program to tell iotwin what it is doing.
//
// Protocol (the capture side relies on it exactly; docs/workloads.md "Intent markers"):
//   * If the environment variable IOTWIN_MARKER names a path, the program opens it ONCE with
//     open(path, O_WRONLY | O_CLOEXEC) -- no O_CREAT: the tracer creates it (a FIFO, a regular file
//     or /dev/null all work) -- and keeps the descriptor for its whole life.
//   * Each marker is ONE write(2) call of one line:
//       "B <label>\n"          begin of a phase
//       "E <label>\n"          end of a phase (pairs with the innermost open B of that label)
//       "I <label>\n"          instant
//       "I <label> <value>\n"  instant with an unsigned decimal value
//     Labels are 1..200 bytes of printable ASCII without spaces (e.g. "kv.put", "model.shard").
//   * If IOTWIN_MARKER is unset or empty, nothing is opened and nothing is written.
// The capture side matches write(2) calls on that file and turns each into an INTENT record.
//
// Header-only and dependency-free so any C++ program (test programs included) can emit markers.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace iotwin {

class IntentMarker {
 public:
  static constexpr size_t kMaxLabel = 200;

  // Opens $IOTWIN_MARKER if set; an unopenable path disables markers (open_errno() says why).
  IntentMarker() {
    const char* path = std::getenv("IOTWIN_MARKER");
    if (path == nullptr || *path == '\0') return;
    requested_ = true;
    fd_ = ::open(path, O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) open_errno_ = errno;
  }
  ~IntentMarker() {
    if (fd_ >= 0) ::close(fd_);
  }
  IntentMarker(const IntentMarker&) = delete;
  IntentMarker& operator=(const IntentMarker&) = delete;

  bool enabled() const { return fd_ >= 0; }
  // IOTWIN_MARKER was set (whether or not the open succeeded).
  bool requested() const { return requested_; }
  int open_errno() const { return open_errno_; }
  int fd() const { return fd_; }

  // Longest line: kind, space, label, space, 20 digits, newline.
  static constexpr size_t kMaxLine = kMaxLabel + 24;

  // Each returns what write(2) returned (bytes or -errno), or 0 when markers are disabled or the
  // label is invalid.
  long Begin(std::string_view label) { return Emit('B', label, false, 0); }
  long End(std::string_view label) { return Emit('E', label, false, 0); }
  long Instant(std::string_view label) { return Emit('I', label, false, 0); }
  long Instant(std::string_view label, uint64_t value) { return Emit('I', label, true, value); }

  static bool ValidLabel(std::string_view label) {
    if (label.empty() || label.size() > kMaxLabel) return false;
    for (char c : label) {
      if (c <= ' ' || c > '~') return false;
    }
    return true;
  }

  // Formats one marker line into `buf` and returns its length (0 if the label is invalid).
  // Allocation-free, so emitting a marker makes no system call but the write.
  static size_t Format(char kind, std::string_view label, bool has_value, uint64_t value,
                       char (&buf)[kMaxLine]) {
    if (!ValidLabel(label)) return 0;
    size_t n = 0;
    buf[n++] = kind;
    buf[n++] = ' ';
    std::memcpy(buf + n, label.data(), label.size());
    n += label.size();
    if (has_value) {
      char digits[20];
      size_t d = 0;
      do {
        digits[d++] = static_cast<char>('0' + value % 10);
        value /= 10;
      } while (value != 0);
      buf[n++] = ' ';
      while (d > 0) buf[n++] = digits[--d];
    }
    buf[n++] = '\n';
    return n;
  }

  // Writes a formatted line with one write(2); returns bytes written or -errno (0: disabled).
  long WriteLine(const char* line, size_t n) {
    if (fd_ < 0 || n == 0) return 0;
    const ssize_t w = ::write(fd_, line, n);
    return w < 0 ? -errno : w;
  }

 private:
  long Emit(char kind, std::string_view label, bool has_value, uint64_t value) {
    if (fd_ < 0) return 0;
    // The whole line goes out in one write(2), so markers of different threads never interleave.
    char buf[kMaxLine];
    return WriteLine(buf, Format(kind, label, has_value, value, buf));
  }

  int fd_ = -1;
  int open_errno_ = 0;
  bool requested_ = false;
};

}  // namespace iotwin
