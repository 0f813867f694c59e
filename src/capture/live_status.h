// The live status line of `iotwin record`, drawn on a terminal.
//
// On a terminal whose size is known the line keeps the bottom row for itself: a scroll region
// over the rows above lets the traced command's own output scroll there, so neither overwrites
// the other (apt draws its progress bar the same way). Elsewhere (--status on a pipe or file)
// each draw rewrites one line after a carriage return. Clear() gives the row back and restores
// the scroll region; the destructor calls it, so no exit path leaves the terminal changed.
#pragma once

#include <string>
#include <string_view>

namespace iotwin::capture {

class LiveStatus {
 public:
  explicit LiveStatus(int fd) : fd_(fd) {}
  ~LiveStatus() { Clear(); }
  LiveStatus(const LiveStatus&) = delete;
  LiveStatus& operator=(const LiveStatus&) = delete;

  // Shows `text` (one line, cut to the terminal's width) in place of the previous one.
  void Draw(std::string_view text);
  // Removes the line; the cursor stays where the command's output left it. Idempotent.
  void Clear();

  // The bytes Draw and Clear write for a terminal of `rows` x `cols` (rows 0: size unknown),
  // given whether the bottom row is already reserved; for tests.
  static std::string DrawSequence(std::string_view text, int rows, int cols, int reserved_rows);
  static std::string ClearSequence(int reserved_rows);

 private:
  int fd_;
  int reserved_rows_ = 0;  // the terminal's height when the bottom row was reserved; 0: none
  bool drawn_ = false;
};

}  // namespace iotwin::capture
