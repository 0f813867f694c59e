// replay --cache as-captured on a real recording: the capture names a file's cache state by the
// spelling the program opened it with (./NAME, NAME relative to a directory descriptor, a name
// the file was renamed to); the preparation must warm the file the model resolves, checked with
// mincore on the prepared file.
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <vector>

#include "memory_trace.h"
#include "replay_util.h"

namespace iotwin::test {
namespace {

constexpr long kPages = 256;  // 1 MiB of 4 KiB pages

// Pages of `path` in the page cache, or -1 when it cannot be measured.
long ResidentPagesOf(const std::string& path) {
  const long page = sysconf(_SC_PAGESIZE);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  long resident = -1;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    const size_t len = static_cast<size_t>(st.st_size);
    void* map = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
    if (map != MAP_FAILED) {
      std::vector<unsigned char> vec((len + page - 1) / page);
      if (mincore(map, len, vec.data()) == 0) {
        resident = 0;
        for (unsigned char v : vec) resident += v & 1;
      }
      munmap(map, len);
    }
  }
  close(fd);
  return resident;
}

// Written through the page cache: every page resident when the program opens it.
bool WriteCachedFile(const std::string& path) {
  int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  std::vector<char> buf(kPages * 4096, 'c');
  bool ok = write(fd, buf.data(), buf.size()) == static_cast<ssize_t>(buf.size());
  return close(fd) == 0 && ok;
}

void RecordAndPrepare(const std::string& spelling) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir tmp;
  struct statfs fs;
  if (statfs(tmp.path().c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC) {
    GTEST_SKIP() << tmp.path() << " is on tmpfs: a drop cannot be told from a warm file";
  }
  ASSERT_EQ(sysconf(_SC_PAGESIZE), 4096);
  const std::string data = tmp / "data";
  ASSERT_EQ(mkdir(data.c_str(), 0755), 0);
  ASSERT_TRUE(WriteCachedFile(data + "/cached.dat"));
  ASSERT_EQ(ResidentPagesOf(data + "/cached.dat"), kPages);
  const std::string trace = tmp / "t.iotwin";
  RunResult rec = RecordCommand(trace, {"--no-block", "--no-sched", "--no-nvme"},
                                {TestProg("cached_open"), spelling, data, "cached.dat"});
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  const std::string root = tmp / "root";
  auto r = RunReplayCmd({trace, "--root", root, "--prepare-only", "--cache", "as-captured",
                         "--json"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  ASSERT_TRUE(r.summary.is_object()) << r.run.out;
  // The file the trace starts with, under its name at the start (before any rename).
  EXPECT_EQ(ResidentPagesOf(root + data + "/cached.dat"), kPages) << r.summary["prepare"].dump();
  EXPECT_GE(J(r.summary, "/prepare/cache_pages_target"), static_cast<uint64_t>(kPages));
}

TEST(ReplayCacheIdentity, RelativePathOpenReplaysWarm) { RecordAndPrepare("relative"); }

TEST(ReplayCacheIdentity, DirfdRelativeOpenReplaysWarm) { RecordAndPrepare("dirfd"); }

TEST(ReplayCacheIdentity, RenamedThenOpenedFileReplaysWarm) { RecordAndPrepare("renamed"); }

}  // namespace
}  // namespace iotwin::test
