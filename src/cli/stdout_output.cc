#include "cli/stdout_output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "base/fd.h"

namespace iotwin::cli {

Result<std::optional<StdoutOutput>> StdoutOutput::For(std::string* path, const std::string& option,
                                                      bool binary) {
  if (*path != "-") return std::optional<StdoutOutput>();
  if (binary && isatty(STDOUT_FILENO)) {
    return Status::Invalid("{} -: standard output is a terminal; pipe or redirect it", option);
  }
  const char* tmpdir = getenv("TMPDIR");
  std::string templ = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/iotwin-stdout-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    return Status::FromErrno(errno, option + " -: cannot make a temporary directory " + templ);
  }
  StdoutOutput out(templ, templ + "/output");
  *path = out.file_;
  return std::optional<StdoutOutput>(std::move(out));
}

StdoutOutput::StdoutOutput(StdoutOutput&& o) noexcept
    : dir_(std::move(o.dir_)), file_(std::move(o.file_)) {
  o.dir_.clear();
  o.file_.clear();
}

StdoutOutput::~StdoutOutput() {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);  // the output and any OUTPUT.partial left by a failure
}

Status StdoutOutput::CopyToStdout() const {
  UniqueFd in(open(file_.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) return Status::FromErrno(errno, "cannot open " + file_);
  fflush(stdout);
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(in.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "cannot read " + file_);
    if (n == 0) return Status::Ok();
    for (ssize_t done = 0; done < n;) {
      ssize_t w = write(STDOUT_FILENO, buf + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return Status::FromErrno(errno, "cannot write to standard output");
      done += w;
    }
  }
}

}  // namespace iotwin::cli
