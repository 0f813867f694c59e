// A workload that writes /proc/sys/vm/drop_caches removes, in its own context, the cached pages
// of every file of the machine. The trace keeps the removals of the files the workload opened,
// mapped or read (the syscall object marks each file a traced thread opens before the open
// returns), leaves the others out and counts their pages; the report shows that count and
// names only the workload's files.
#include <fcntl.h>
#include <unistd.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "memory_trace.h"

namespace iotwin::test {
namespace {

using nlohmann::json;

TEST(MemoryUntouchedRemovals, DropCachesOfTheWorkloadLeavesOtherFilesOut) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  const std::string file = dir / "kv.bin", trace = dir / "drop.iotwin";
  RunResult r = RecordReadThenDropCaches(file, trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const MemTrace t = LoadMemTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;

  // The files the workload opened, mapped or faulted on, and those its own insertions touched.
  std::set<std::pair<uint32_t, uint64_t>> touched;
  for (const iot_syscall& s : t.syscalls)
    if (s.ino) touched.insert({s.dev, s.ino});
  for (const iot_page_fault& f : t.faults) touched.insert({f.dev, f.ino});
  for (const iot_page_cache& c : t.caches)
    if (c.kind != IOT_PC_DELETE && c.tgid != 0) touched.insert({c.dev, c.ino});
  // iotwin's launcher is traced from its fork to the command's exec: the files it maps then (the
  // iotwin binary and its shared libraries) are touched by a traced process too.
  RunResult libs = test::Run({"/usr/bin/ldd", IotwinBin()}, 30);
  std::string paths = IotwinBin() + "\n" + libs.out;
  for (size_t at = 0; (at = paths.find('/', at)) != std::string::npos;) {
    const size_t end = paths.find_first_of(" \n", at);
    const std::string path = paths.substr(at, end == std::string::npos ? end : end - at);
    struct stat ls;
    if (stat(path.c_str(), &ls) == 0) touched.insert({KernelDevOf(ls.st_dev), ls.st_ino});
    at = end == std::string::npos ? paths.size() : end;
  }
  struct stat st;
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  uint64_t own_pages = 0, foreign_pages = 0;
  std::set<std::pair<uint32_t, uint64_t>> foreign;
  for (const iot_page_cache& c : t.caches) {
    if (c.kind != IOT_PC_DELETE) continue;
    if (c.ino == st.st_ino) own_pages += c.nr_pages;
    if (touched.count({c.dev, c.ino})) continue;
    foreign_pages += c.nr_pages;
    foreign.insert({c.dev, c.ino});
  }
  // The file it read is dropped too: that removal is the workload's.
  EXPECT_GT(own_pages, 0u);
  EXPECT_EQ(foreign.size(), 0u) << foreign_pages << " pages of " << foreign.size()
                                << " files the workload never touched";

  // The report: the pages left out are counted and shown; its files are the workload's.
  RunResult rep = test::Run({IotwinBin(), "report", "--json", "--top", "0", trace}, 120);
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const json m = json::parse(rep.out, nullptr, false);
  ASSERT_TRUE(m.is_object());
  EXPECT_GT(m["capture"].value("untouched_removed_pages", uint64_t{0}), 0u)
      << "no count of the pages left out";
  size_t rows = 0, not_named = 0;
  for (const json& f : m["files"]["rows"]) {
    ++rows;
    if (!touched.count({f.value("dev", uint32_t{0}), f.value("ino", uint64_t{0})})) ++not_named;
  }
  EXPECT_GT(rows, 0u);
  EXPECT_EQ(not_named, 0u) << rows << " file rows, " << not_named << " of files never touched";
  RunResult text = test::Run({IotwinBin(), "report", "--no-progress", trace}, 120);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("pages removed from files the workload never touched"),
            std::string::npos)
      << text.out;
}

}  // namespace
}  // namespace iotwin::test
