#include "interop/line_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace iotwin::interop {

namespace {
constexpr size_t kReadSize = 1 << 16;
}

Result<LineReader> LineReader::Open(const std::string& path, std::string prefix) {
  LineReader r;
  r.name_ = path == "-" ? "<stdin>" : path;
  if (path == "-") {
    r.fd_.Reset(::dup(STDIN_FILENO));
  } else {
    r.fd_.Reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  }
  if (!r.fd_.valid()) return Status::FromErrno(errno, "cannot open " + r.name_);
  if (!prefix.empty()) {
    // The prefix came from Peek: skip those bytes of a regular file, or take them as already read
    // from a pipe (Peek consumed them).
    if (path != "-") {
      if (::lseek(r.fd_.get(), static_cast<off_t>(prefix.size()), SEEK_SET) < 0) {
        return Status::FromErrno(errno, "cannot seek in " + r.name_);
      }
    }
    r.buf_ = std::move(prefix);
  }
  return r;
}

LineReader LineReader::FromMemory(std::string_view data, std::string name) {
  LineReader r;
  r.name_ = std::move(name);
  r.from_memory_ = true;
  r.memory_ = data;
  return r;
}

Result<std::string> LineReader::Peek(const std::string& path, size_t max) {
  UniqueFd fd;
  if (path == "-") {
    fd.Reset(::dup(STDIN_FILENO));
  } else {
    fd.Reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  }
  if (!fd.valid()) return Status::FromErrno(errno, "cannot open " + path);
  std::string out(max, '\0');
  size_t got = 0;
  while (got < max) {
    ssize_t n = ::read(fd.get(), out.data() + got, max - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "cannot read " + path);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

Status LineReader::Fill() {
  if (eof_) return Status::Ok();
  // Drop consumed bytes before growing.
  if (start_ > 0) {
    consumed_ += start_;
    buf_.erase(0, start_);
    start_ = 0;
  }
  if (from_memory_) {
    buf_.append(memory_.substr(0, kReadSize));
    memory_.remove_prefix(std::min(memory_.size(), kReadSize));
    if (memory_.empty()) eof_ = true;
    return Status::Ok();
  }
  size_t old = buf_.size();
  buf_.resize(old + kReadSize);
  for (;;) {
    ssize_t n = ::read(fd_.get(), buf_.data() + old, kReadSize);
    if (n < 0) {
      if (errno == EINTR) continue;
      buf_.resize(old);
      return Status::FromErrno(errno, fmt::format("{}: read at byte {}", name_, consumed_ + old));
    }
    buf_.resize(old + static_cast<size_t>(n));
    if (n == 0) eof_ = true;
    return Status::Ok();
  }
}

Result<bool> LineReader::Next(std::string_view* line) {
  line_cut_ = false;
  size_t scanned = start_;
  for (;;) {
    size_t nl = buf_.find('\n', scanned);
    if (nl != std::string::npos && nl - start_ <= kMaxLine) {
      line_number_++;
      line_offset_ = consumed_ + start_;
      std::string_view l(buf_.data() + start_, nl - start_);
      if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
      *line = l;
      start_ = nl + 1;
      return true;
    }
    if (buf_.size() - start_ > kMaxLine) {
      // An overlong line: return its first kMaxLine bytes and drop the rest up to the newline,
      // so memory stays bounded whatever the input.
      line_number_++;
      line_offset_ = consumed_ + start_;
      cut_line_.assign(buf_, start_, kMaxLine);
      start_ += kMaxLine;
      for (;;) {
        size_t nl2 = buf_.find('\n', start_);
        if (nl2 != std::string::npos) {
          start_ = nl2 + 1;
          break;
        }
        start_ = buf_.size();
        if (eof_) break;
        IOTWIN_RETURN_IF_ERROR(Fill());
      }
      line_cut_ = true;
      *line = cut_line_;
      return true;
    }
    if (eof_) {
      if (start_ >= buf_.size()) return false;
      // Last line without a newline.
      line_number_++;
      line_offset_ = consumed_ + start_;
      std::string_view l(buf_.data() + start_, buf_.size() - start_);
      if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
      *line = l;
      start_ = buf_.size();
      return true;
    }
    size_t pending = buf_.size() - start_;
    IOTWIN_RETURN_IF_ERROR(Fill());
    scanned = start_ + pending;
  }
}

}  // namespace iotwin::interop
