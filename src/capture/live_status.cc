#include "capture/live_status.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

namespace iotwin::capture {
namespace {

// ECMA-48 / VT100 controls.
constexpr std::string_view kSaveCursor = "\0337";     // DECSC
constexpr std::string_view kRestoreCursor = "\0338";  // DECRC
constexpr std::string_view kClearLine = "\033[2K";    // EL 2
constexpr std::string_view kCursorUp = "\033[1A";     // CUU 1

// Sets the scroll region to rows 1..last (DECSTBM; 0: the whole screen). DECSTBM moves the
// cursor home, so it is saved and restored around it.
std::string ScrollRegion(int last) {
  std::string s(kSaveCursor);
  s += last > 0 ? fmt::format("\033[1;{}r", last) : std::string("\033[r");
  s += kRestoreCursor;
  return s;
}

void WriteAll(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a status line is not worth an error
    s.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

std::string LiveStatus::DrawSequence(std::string_view text, int rows, int cols,
                                     int reserved_rows) {
  // Below three rows there is no room to give one away; a carriage return line then.
  if (rows < 3 || cols < 2) {
    std::string s = reserved_rows ? ClearSequence(reserved_rows) : std::string();
    return s + fmt::format("\r\033[K{}", text);
  }
  text = text.substr(0, static_cast<size_t>(cols - 1));
  std::string s;
  if (reserved_rows == 0) {
    // A new line first, so that a cursor on the bottom row moves up into the region.
    s += "\n";
    s += ScrollRegion(rows - 1);
    s += kCursorUp;
  } else if (reserved_rows != rows) {
    // The terminal was resized: the old bottom row may now be inside the region.
    s += kSaveCursor;
    s += fmt::format("\033[{};1H", reserved_rows);
    s += kClearLine;
    s += kRestoreCursor;
    s += ScrollRegion(rows - 1);
  }
  s += kSaveCursor;
  s += fmt::format("\033[{};1H", rows);
  s += kClearLine;
  s += text;
  s += kRestoreCursor;
  return s;
}

std::string LiveStatus::ClearSequence(int reserved_rows) {
  if (reserved_rows == 0) return "\r\033[K";
  std::string s = ScrollRegion(0);
  s += kSaveCursor;
  s += fmt::format("\033[{};1H", reserved_rows);
  s += kClearLine;
  s += kRestoreCursor;
  return s;
}

void LiveStatus::Draw(std::string_view text) {
  winsize ws{};
  int rows = 0, cols = 0;
  if (isatty(fd_) && ioctl(fd_, TIOCGWINSZ, &ws) == 0) {
    rows = ws.ws_row;
    cols = ws.ws_col;
  }
  WriteAll(fd_, DrawSequence(text, rows, cols, reserved_rows_));
  reserved_rows_ = rows >= 3 && cols >= 2 ? rows : 0;
  drawn_ = true;
}

void LiveStatus::Clear() {
  if (!drawn_) return;
  WriteAll(fd_, ClearSequence(reserved_rows_));
  reserved_rows_ = 0;
  drawn_ = false;
}

}  // namespace iotwin::capture
