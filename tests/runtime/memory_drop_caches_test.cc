// A workload that writes /proc/sys/vm/drop_caches removes, in its own context, the cached pages
// of every file of the machine, the block device's own page cache included: the cache state at
// start names no block device (its inode is sized as the whole device).
#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "memory_trace.h"

namespace iotwin::test {
namespace {

TEST(MemoryDropCaches, CacheStateAtStartNamesNoBlockDevice) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  const std::string file = dir / "kv.bin", trace = dir / "drop.iotwin";
  RunResult r = RecordReadThenDropCaches(file, trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const MemTrace t = LoadMemTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;

  // The removals of the file it read are the workload's.
  struct stat st;
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  uint64_t own_pages = 0;
  for (const iot_page_cache& c : t.caches) {
    if (c.kind == IOT_PC_DELETE && c.ino == st.st_ino) own_pages += c.nr_pages;
  }
  EXPECT_GT(own_pages, 0u);
  // A block device's inode counts the whole device (a 256 GiB disk: 67,108,864 pages); no file
  // of this machine's cache comes near 16 GiB.
  for (size_t i = 0; i < t.states.size(); i++) {
    const iot_cache_state& s = t.states[i];
    EXPECT_LT(s.total_pages, 1u << 22) << "cache state of ino " << s.ino << " dev " << s.dev
                                       << " path '" << t.state_paths[i] << "'";
  }
}

}  // namespace
}  // namespace iotwin::test
