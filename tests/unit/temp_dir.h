// TempDir: a fresh directory under $TMPDIR (or /tmp) for a test's files, removed with everything
// in it when it goes out of scope. A failed ASSERT_* returns from the test body early, so files
// removed at the end of the body stay behind; a TempDir's destructor runs on that return too.
// For the unit, cli and runtime tests (header only: the unit binary does not link runtime_util.cc).
// IOTWIN_KEEP_TEST_FILES=1 keeps every directory (its path goes to stderr), to look at after a
// failure.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace iotwin::test {

class TempDir {
 public:
  // Under `parent`, by default $TMPDIR or /tmp (a test that needs a disk file system, for
  // O_DIRECT or a real fsync, names /var/tmp).
  explicit TempDir(std::string_view prefix = "iotwin-test", std::string_view parent = {}) {
    const char* env = std::getenv("TMPDIR");
    std::string base(parent.empty() ? (env && *env ? env : "/tmp") : parent);
    std::string tmpl = base + "/" + std::string(prefix) + "-XXXXXX";
    if (::mkdtemp(tmpl.data())) path_ = tmpl;
  }
  ~TempDir() { Remove(); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Empty when the directory could not be made (a test asserts on ok()).
  const std::string& path() const { return path_; }
  bool ok() const { return !path_.empty(); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  void Remove() {
    if (path_.empty()) return;
    const char* keep = std::getenv("IOTWIN_KEEP_TEST_FILES");
    if (keep && std::string_view(keep) == "1") {
      std::fprintf(stderr, "kept %s (IOTWIN_KEEP_TEST_FILES=1)\n", path_.c_str());
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    if (!ec) return;
    // A test may leave a directory without write or search permission (mode tests, a sandbox
    // after a replay): open them all up, then remove again.
    namespace fs = std::filesystem;
    ::chmod(path_.c_str(), 0700);
    for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::end(it);
         it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0700);
    }
    fs::remove_all(path_, ec);
  }

  std::string path_;
};

}  // namespace iotwin::test
