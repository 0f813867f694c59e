// A workload that writes /proc/sys/vm/drop_caches removes, in its own context, the cached pages
// of every file of the machine: the trace keeps the removals of the files the workload touched
// only, and its cache state at start names no block device's own page cache.
#include <fcntl.h>
#include <unistd.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "memory_trace.h"

namespace iotwin::test {
namespace {

TEST(MemoryDropCaches, RemovalsOfFilesTheWorkloadNeverTouchedStayOut) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  const std::string file = dir / "kv.bin", trace = dir / "drop.iotwin";
  {
    int fd = open(file.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    std::vector<char> buf(1 << 20, 'k');
    ASSERT_EQ(write(fd, buf.data(), buf.size()), static_cast<ssize_t>(buf.size()));
    ASSERT_EQ(fsync(fd), 0);
    close(fd);
  }
  RunResult r = RecordCommand(
      trace, {}, {"/bin/sh", "-c", "cat " + file + " >/dev/null; echo 1 >/proc/sys/vm/drop_caches"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const MemTrace t = LoadMemTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;

  // The files the workload opened, mapped or faulted on.
  std::set<std::pair<uint32_t, uint64_t>> named;
  for (const iot_syscall& s : t.syscalls) {
    if (s.ino) named.insert({s.dev, s.ino});
  }
  for (const iot_page_fault& f : t.faults) named.insert({f.dev, f.ino});
  std::set<std::pair<uint32_t, uint64_t>> touched = named;
  for (const iot_page_cache& c : t.caches) {
    if (c.kind != IOT_PC_DELETE && c.tgid != 0) touched.insert({c.dev, c.ino});
  }
  uint64_t foreign_files = 0, foreign_pages = 0, own_pages = 0;
  std::set<std::pair<uint32_t, uint64_t>> foreign;
  struct stat st;
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  for (const iot_page_cache& c : t.caches) {
    if (c.kind != IOT_PC_DELETE) continue;
    if (c.ino == st.st_ino) own_pages += c.nr_pages;
    if (touched.count({c.dev, c.ino})) continue;
    foreign_pages += c.nr_pages;
    if (foreign.insert({c.dev, c.ino}).second) foreign_files++;
  }
  // The file it read is dropped too: that removal is the workload's.
  EXPECT_GT(own_pages, 0u);
  EXPECT_EQ(foreign_files, 0u) << foreign_pages << " pages of " << foreign_files
                               << " files the workload never touched";
  // Cache state at start: of files the workload named, not of the block device itself.
  uint64_t state_pages = 0;
  for (size_t i = 0; i < t.states.size(); i++) {
    const iot_cache_state& s = t.states[i];
    state_pages += s.total_pages;
    EXPECT_TRUE(named.count({s.dev, s.ino}))
        << "cache state of a file the workload never named: ino " << s.ino << " dev " << s.dev
        << " total pages " << s.total_pages << " path '" << t.state_paths[i] << "'";
  }
  EXPECT_LT(state_pages, 1u << 22) << "cache state counts more than 16 GiB of files";
}

}  // namespace
}  // namespace iotwin::test
