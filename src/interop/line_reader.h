// LineReader: streams the lines of a file (or of bytes in memory) in constant memory, keeping the
// line number and the byte offset of each line for error messages.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/fd.h"
#include "base/status.h"

namespace iotwin::interop {

class LineReader {
 public:
  // Lines longer than this are cut (the rest up to the newline is skipped) and flagged.
  static constexpr size_t kMaxLine = 1 << 20;

  // `path` "-" reads standard input. `prefix` holds bytes already read from the start of the
  // input (format detection reads ahead), which are returned first.
  static Result<LineReader> Open(const std::string& path, std::string prefix = {});
  // Lines of `data` (not copied: `data` must outlive the reader).
  static LineReader FromMemory(std::string_view data, std::string name = "<memory>");

  LineReader(LineReader&&) = default;
  LineReader& operator=(LineReader&&) = default;

  // Next line without its "\n" (and without a "\r" before it). Returns false at the end.
  Result<bool> Next(std::string_view* line);

  uint64_t line_number() const { return line_number_; }  // of the last line returned, 1-based
  uint64_t line_offset() const { return line_offset_; }  // byte offset of its first byte
  bool line_cut() const { return line_cut_; }            // the last line exceeded kMaxLine
  const std::string& name() const { return name_; }

  // Reads up to `max` bytes from the start of `path` ("-": stdin) for format detection; the
  // bytes must then be passed as `prefix` to Open (stdin cannot be reread).
  static Result<std::string> Peek(const std::string& path, size_t max);

 private:
  LineReader() = default;
  Status Fill();  // appends input to buf_; sets eof_

  std::string name_;
  UniqueFd fd_;
  bool from_memory_ = false;
  std::string_view memory_;
  std::string buf_;
  size_t start_ = 0;  // first unconsumed byte in buf_
  bool eof_ = false;
  uint64_t consumed_ = 0;  // input bytes before buf_[0]
  uint64_t line_number_ = 0;
  uint64_t line_offset_ = 0;
  bool line_cut_ = false;
  std::string cut_line_;
};

}  // namespace iotwin::interop
