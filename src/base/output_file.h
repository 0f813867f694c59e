// OutputFile: the one way iotwin writes a file the user named (traces, exports, pages, logs,
// the replay manifest), so that nobody else's name can redirect what a root process writes.
//
// The rule (docs/security.md, "Output files"):
// - A regular file, a missing name, and anything at the name that neither this user nor root owns
//   (a symlink, a FIFO another user planted) is never written through: the output goes to a
//   private temporary beside the name (`.NAME.partial-PID-N`, created with O_CREAT | O_EXCL |
//   O_NOFOLLOW), which Commit() fsyncs and renames over the name. A planted symlink is thereby
//   replaced, its target untouched; a reader never sees half a file at the name; an output
//   destroyed uncommitted removes its temporary.
// - A symlink this user or root owns is followed, and the rule applies again where it leads
//   (`-o /dev/stdout`).
// - A FIFO or a device this user or root owns is written in place, since renaming over it would
//   cut off whoever reads it.
// - /proc/self/fd/N names this process's descriptor N, which nobody else can name: it is opened
//   again, truncated and written in place (`record -o -` writes standard output so).
#pragma once

#include <string>
#include <string_view>

#include "base/fd.h"
#include "base/status.h"

namespace iotwin {

class OutputFile {
 public:
  // Opens the output for `path` as the rule above says; `mode` is the new file's mode.
  static Result<OutputFile> Create(const std::string& path, unsigned mode = 0644);
  // A copy of descriptor `fd` (standard output), written in place; `name` names it in messages.
  static Result<OutputFile> ForDescriptor(int fd, std::string name);

  OutputFile() = default;
  OutputFile(OutputFile&& o) noexcept;
  OutputFile& operator=(OutputFile&& o) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();  // uncommitted: closes and removes the temporary

  bool is_open() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  Status Write(const void* data, size_t size);
  Status Write(std::string_view text) { return Write(text.data(), text.size()); }
  // Flushes to disk (renamed outputs), closes, and renames the temporary over the name.
  Status Commit();
  // Renames the temporary over the name now and goes on writing the same file there: for a
  // file that says itself whether it is whole (a trace without footer reads as truncated), so
  // that it is at its name while it is written and if the writer is killed.
  Status Publish();
  // Closes and removes the temporary, or the published file if the name still holds it (no-op
  // for outputs written in place, and when committed).
  void Discard();

  // The name the output is for, and the file written meanwhile (the same when in place).
  const std::string& name() const { return name_; }
  const std::string& written_path() const { return temp_.empty() ? name_ : temp_; }
  bool in_place() const { return temp_.empty(); }

 private:
  std::string name_;  // the final name (after following trusted symlinks)
  std::string temp_;  // empty: written in place
  bool published_ = false;  // the file is at name_ (Publish)
  UniqueFd fd_;
};

}  // namespace iotwin
