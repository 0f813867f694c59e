// An output file given as "-": the command writes its whole output to a file in a private
// temporary directory, which is then copied to standard output. A command that fails writes
// nothing there, and commands that write through OUTPUT.partial and a rename need no other path.
#pragma once

#include <optional>
#include <string>

#include "base/status.h"

namespace iotwin::cli {

class StdoutOutput {
 public:
  // When *path is "-": refuses a terminal for `binary` output, makes the temporary directory
  // and points *path into it; nullopt when *path names a file. Errors say "OPTION -: why".
  static Result<std::optional<StdoutOutput>> For(std::string* path, const std::string& option,
                                                 bool binary);
  StdoutOutput(StdoutOutput&& o) noexcept;
  StdoutOutput& operator=(StdoutOutput&&) = delete;
  ~StdoutOutput();  // removes the temporary file and directory

  // Copies the finished file to standard output.
  Status CopyToStdout() const;

 private:
  StdoutOutput(std::string dir, std::string file) : dir_(std::move(dir)), file_(std::move(file)) {}
  std::string dir_, file_;
};

}  // namespace iotwin::cli
