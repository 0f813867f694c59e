// The files of a CSV/JSONL table export (docs/tables.md, "Exporting into a directory"): each
// table is an OutputFile (base/output_file.h: a private temporary in the output directory,
// renamed over its old version when the whole export has succeeded), so a reader never sees half
// a table and a failed export leaves the previous tables as they were; tables of this format that
// the export did not write (another trace's) are removed, so none looks current. A table name
// that already exists as a FIFO or a device (or a trusted symlink to one: `DIR/syscalls.csv ->
// /dev/null`) is written in place, since renaming over it would cut off whoever reads it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/output_file.h"
#include "base/status.h"
#include "interop/exporters.h"

namespace iotwin::interop {

// "csv" or "jsonl".
std::string_view Extension(TableFormat format);

// Creates `dir` (mode 0755) unless it exists; fails when it exists and is not a directory.
Status PrepareTableDir(const std::string& dir);

// One table's file, from Open to Commit; destroyed uncommitted, it removes its temporary file.
class TableFile {
 public:
  TableFile() = default;
  TableFile(const TableFile&) = delete;
  TableFile& operator=(const TableFile&) = delete;

  // `dir`/`stem`.`ext`, as an OutputFile.
  Status Open(const std::string& dir, std::string_view stem, std::string_view ext);
  // A copy of descriptor `fd` (standard output), written in place; `name` names it in messages.
  Status OpenDescriptor(int fd, std::string name);
  bool is_open() const { return out_.is_open(); }
  Status Write(const char* data, size_t n) { return out_.Write(data, n); }
  // Closes the file and renames it to its name.
  Status Commit();
  const std::string& name() const { return name_; }

 private:
  std::string name_;  // as given (the output may follow a trusted symlink)
  OutputFile out_;
};

// Commits `written` (open or never opened: skipped), then removes every `dir`/STEM.EXT of
// `known_stems` that was not written and is a regular file or a symlink, then writes
// `dir`/trace_info.json (also by rename). Returns the names of the removed files.
Result<std::vector<std::string>> CommitTables(const std::string& dir, TableFormat format,
                                              const std::vector<TableFile*>& written,
                                              const std::vector<std::string_view>& known_stems,
                                              std::string_view trace_info);

}  // namespace iotwin::interop
