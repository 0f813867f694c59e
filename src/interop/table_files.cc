#include "interop/table_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

namespace iotwin::interop {

std::string_view Extension(TableFormat format) {
  return format == TableFormat::kCsv ? "csv" : "jsonl";
}

Status PrepareTableDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) == 0) return Status::Ok();
  if (errno != EEXIST) return Status::FromErrno(errno, "cannot create directory " + dir);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno(errno, "cannot use " + dir);
  if (!S_ISDIR(st.st_mode)) return Status::Invalid("{} exists and is not a directory", dir);
  return Status::Ok();
}

TableFile::~TableFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

Status TableFile::Open(const std::string& dir, std::string_view stem, std::string_view ext) {
  final_ = fmt::format("{}/{}.{}", dir, stem, ext);
  struct stat st;
  if (::stat(final_.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Invalid("{} is a directory, not a table", final_);
    if (!S_ISREG(st.st_mode)) {
      fd_ = ::open(final_.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd_ < 0) return Status::FromErrno(errno, "cannot open " + final_);
      return Status::Ok();
    }
  }
  for (int attempt = 0; attempt < 100; attempt++) {
    temp_ = fmt::format("{}/.{}.{}.partial-{}-{}", dir, stem, ext, ::getpid(), attempt);
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd_ >= 0) return Status::Ok();
    if (errno != EEXIST) break;
  }
  const int err = errno;
  const std::string tried = temp_;
  temp_.clear();
  return Status::FromErrno(err, "cannot create " + tried);
}

Status TableFile::OpenDescriptor(int fd, std::string name) {
  final_ = std::move(name);
  temp_.clear();
  fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (fd_ < 0) return Status::FromErrno(errno, "cannot use " + final_);
  return Status::Ok();
}

Status TableFile::Write(const char* data, size_t n) {
  if (fd_ < 0) return Status::Internal("{} written before it was opened", final_);
  while (n > 0) {
    const ssize_t w = ::write(fd_, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "cannot write " + (temp_.empty() ? final_ : temp_));
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status TableFile::Commit() {
  if (fd_ < 0) return Status::Ok();
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) return Status::FromErrno(errno, "cannot write " + (temp_.empty() ? final_ : temp_));
  if (temp_.empty()) return Status::Ok();
  if (::rename(temp_.c_str(), final_.c_str()) != 0) {
    return Status::FromErrno(errno, "cannot rename " + temp_ + " to " + final_);
  }
  temp_.clear();
  return Status::Ok();
}

Result<std::vector<std::string>> CommitTables(const std::string& dir, TableFormat format,
                                              const std::vector<TableFile*>& written,
                                              const std::vector<std::string_view>& known_stems,
                                              std::string_view trace_info) {
  for (TableFile* f : written) IOTWIN_RETURN_IF_ERROR(f->Commit());
  std::vector<std::string> removed;
  for (std::string_view stem : known_stems) {
    const std::string name = fmt::format("{}/{}.{}", dir, stem, Extension(format));
    const bool ours = std::any_of(written.begin(), written.end(),
                                  [&](const TableFile* f) { return f->name() == name; });
    struct stat st;
    if (ours || ::lstat(name.c_str(), &st) != 0) continue;
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) continue;
    if (::unlink(name.c_str()) != 0) {
      return Status::FromErrno(errno, "cannot remove " + name + ", a table this trace does not have");
    }
    removed.push_back(name);
  }
  TableFile info;
  IOTWIN_RETURN_IF_ERROR(info.Open(dir, "trace_info", "json"));
  IOTWIN_RETURN_IF_ERROR(info.Write(trace_info.data(), trace_info.size()));
  IOTWIN_RETURN_IF_ERROR(info.Commit());
  return removed;
}

}  // namespace iotwin::interop
