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

Status TableFile::Open(const std::string& dir, std::string_view stem, std::string_view ext) {
  name_ = fmt::format("{}/{}.{}", dir, stem, ext);
  IOTWIN_ASSIGN_OR_RETURN(out_, OutputFile::Create(name_));
  return Status::Ok();
}

Status TableFile::OpenDescriptor(int fd, std::string name) {
  name_ = name;
  IOTWIN_ASSIGN_OR_RETURN(out_, OutputFile::ForDescriptor(fd, std::move(name)));
  return Status::Ok();
}

Status TableFile::Commit() {
  if (!out_.is_open()) return Status::Ok();
  return out_.Commit();
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
