// iotwin replay --cache: the page-cache state of the prepared file set when the replay starts,
// checked with mincore on the real files. No BPF needed, but a runtime test: residency is the
// whole machine's, and a test dropping caches in parallel would change it.
#include <fcntl.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "replay_util.h"

namespace iotwin::test {
namespace {

constexpr uint64_t kFileBytes = 8 << 20;

long PageBytes() { return sysconf(_SC_PAGESIZE); }

// tmpfs pages are the files themselves: no drop can evict them.
bool OnTmpfs(const std::string& dir) {
  struct statfs fs;
  return statfs(dir.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

// Thread 100 reads the pre-existing 8 MiB /data/weights.bin in 1 MiB preads.
void ReadWeights(TraceBuilder& b) {
  b.Thread(100, 100);
  b.Openat(100, "/data/weights.bin", O_RDONLY, 3, kFileBytes);
  for (uint64_t off = 0; off < kFileBytes; off += 1 << 20) {
    b.Pread(100, 3, off, 1 << 20, 1 << 20, kFileBytes);
  }
  b.Close(100, 3);
}

std::string WeightsTrace(const TempDir& tmp) {
  TraceBuilder b;
  ReadWeights(b);
  return WriteTrace(b, tmp / "t.iotwin");
}

// Pages [first, first + n) of `path` in the page cache, or -1 when it cannot be mapped.
long ResidentPagesIn(const std::string& path, long first, long n) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  long resident = -1;
  void* map = mmap(nullptr, static_cast<size_t>(n * PageBytes()), PROT_READ, MAP_SHARED, fd,
                   first * PageBytes());
  if (map != MAP_FAILED) {
    std::vector<unsigned char> vec(static_cast<size_t>(n));
    if (mincore(map, static_cast<size_t>(n * PageBytes()), vec.data()) == 0) {
      resident = 0;
      for (unsigned char v : vec) resident += v & 1;
    }
    munmap(map, static_cast<size_t>(n * PageBytes()));
  }
  close(fd);
  return resident;
}

// Pages of `path` in the page cache, or -1 when it cannot be measured.
long ResidentPages(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || st.st_size <= 0) return -1;
  return ResidentPagesIn(path, 0, (st.st_size + PageBytes() - 1) / PageBytes());
}

// The preparation has just written the file: cold must still leave none of its pages cached.
TEST(ReplayCache, ColdLeavesNoPageOfThePreparedFileResident) {
  TempDir tmp;
  if (OnTmpfs(tmp.path())) GTEST_SKIP() << tmp.path() << " is on tmpfs: pages cannot be dropped";
  std::string trace = WeightsTrace(tmp);
  std::string root = tmp / "root";
  auto r = RunReplayCmd({trace, "--root", root, "--prepare-only", "--cache", "cold", "--json"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  ASSERT_TRUE(r.summary.is_object()) << r.run.out;
  const auto& prep = r.summary["prepare"];
  EXPECT_EQ(prep["files_written"].get<int>(), 1) << prep.dump();
  EXPECT_EQ(prep["cache_files_dropped"].get<int>(), 1) << prep.dump();
  EXPECT_EQ(prep["cache_pages_left_resident"].get<int>(), 0) << prep.dump();
  EXPECT_EQ(ResidentPages(root + "/data/weights.bin"), 0);
  EXPECT_EQ(prep["cache_pages_target"].get<int>(), 0) << prep.dump();
  EXPECT_EQ(prep["cache_pages_resident"].get<int>(), 0) << prep.dump();
}

TEST(ReplayCache, WarmLeavesEveryPageResident) {
  TempDir tmp;
  std::string trace = WeightsTrace(tmp);
  std::string root = tmp / "root";
  auto r = RunReplayCmd({trace, "--root", root, "--prepare-only", "--cache", "warm", "--json"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  ASSERT_TRUE(r.summary.is_object()) << r.run.out;
  EXPECT_EQ(r.summary["prepare"]["cache_files_warmed"].get<int>(), 1) << r.summary.dump();
  EXPECT_EQ(ResidentPages(root + "/data/weights.bin"), static_cast<long>(kFileBytes / PageBytes()));
  // The summary reports what it measured, which here is every page.
  const auto& prep = r.summary["prepare"];
  EXPECT_EQ(prep["cache_files_measured"].get<long>(), 1) << prep.dump();
  EXPECT_EQ(prep["cache_pages_target"].get<long>(), static_cast<long>(kFileBytes / PageBytes()));
  EXPECT_EQ(prep["cache_pages_resident"].get<long>(), static_cast<long>(kFileBytes / PageBytes()));
}

// as-captured: the trace says a quarter of the file was cached when the workload opened it; the
// preparation warms that many pages and reports the residency it measured.
TEST(ReplayCache, AsCapturedReportsTheMeasuredResidency) {
  TempDir tmp;
  if (OnTmpfs(tmp.path())) GTEST_SKIP() << tmp.path() << " is on tmpfs: pages cannot be dropped";
  const long pages = static_cast<long>(kFileBytes / PageBytes());
  TraceBuilder b;
  b.Thread(100, 100);
  b.CacheState("/data/weights.bin", kFileBytes, static_cast<uint64_t>(pages / 4),
               static_cast<uint64_t>(pages));
  b.Openat(100, "/data/weights.bin", O_RDONLY, 3, kFileBytes);
  b.Pread(100, 3, 0, 1 << 20, 1 << 20, kFileBytes);
  b.Close(100, 3);
  std::string root = tmp / "root";
  auto r = RunReplayCmd({WriteTrace(b, tmp / "t.iotwin"), "--root", root, "--prepare-only",
                         "--cache", "as-captured", "--json"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  const auto& prep = r.summary["prepare"];
  EXPECT_EQ(prep["cache_pages_target"].get<long>(), pages / 4) << prep.dump();
  EXPECT_EQ(prep["cache_pages_resident"].get<long>(), ResidentPages(root + "/data/weights.bin"));
  // Readahead may bring in a little more than was read; never less.
  EXPECT_GE(prep["cache_pages_resident"].get<long>(), pages / 4) << prep.dump();
  EXPECT_LT(prep["cache_pages_resident"].get<long>(), pages) << prep.dump();
}

// The capture counted 256 resident pages, and its page-cache records show which: the workload
// read 1 MiB at 4 MiB without the kernel inserting anything. as-captured warms those pages, not
// the first 256.
TEST(ReplayCache, AsCapturedWarmsThePagesTheWorkloadFoundResident) {
  TempDir tmp;
  if (OnTmpfs(tmp.path())) GTEST_SKIP() << tmp.path() << " is on tmpfs: pages cannot be dropped";
  const long pages = static_cast<long>(kFileBytes / PageBytes());
  ASSERT_EQ(PageBytes(), 4096) << "the trace below is written in 4 KiB pages";
  TraceBuilder b;
  b.meta()["layers"]["memory"]["parts"]["cache"]["enabled"] = true;
  b.Thread(100, 100);
  auto& cs = b.CacheState("/data/weights.bin", kFileBytes, 256, static_cast<uint64_t>(pages));
  cs.dev = 0xfe00000;
  cs.ino = 4242;
  auto& o = b.Openat(100, "/data/weights.bin", O_RDONLY, 3, kFileBytes);
  o.dev = cs.dev;
  o.ino = cs.ino;
  auto& rd = b.Pread(100, 3, 4 << 20, 1 << 20, 1 << 20, kFileBytes);
  rd.dev = cs.dev;
  rd.ino = cs.ino;
  rd.ftype = S_IFREG >> 12;
  b.Close(100, 3);
  std::string root = tmp / "root";
  auto r = RunReplayCmd({WriteTrace(b, tmp / "t.iotwin"), "--root", root, "--prepare-only",
                         "--cache", "as-captured", "--json"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  const auto& prep = r.summary["prepare"];
  EXPECT_EQ(prep["cache_files_by_extents"].get<long>(), 1) << prep.dump();
  EXPECT_EQ(prep["cache_pages_target"].get<long>(), 256) << prep.dump();
  const std::string file = root + "/data/weights.bin";
  EXPECT_EQ(ResidentPagesIn(file, 1024, 256), 256);
  EXPECT_EQ(ResidentPagesIn(file, 0, 256), 0);
  EXPECT_EQ(ResidentPages(file), 256) << "warming read ahead beyond the pages asked for";
}

// The weights read through, then (when `drop`) "echo 3 > /proc/sys/vm/drop_caches".
std::string ReadThenDropTrace(const TempDir& tmp, bool drop) {
  TraceBuilder b;
  ReadWeights(b);
  if (drop) {
    b.Openat(100, "/proc/sys/vm/drop_caches", O_WRONLY, 4, 0);
    b.Write(100, 4, 2, 2);
    b.Close(100, 4);
  }
  return WriteTrace(b, tmp / (drop ? "drop.iotwin" : "nodrop.iotwin"));
}

// The workload's drop_caches write evicts the sandbox's files at that point of the replay (and
// only them: the replay never writes /proc/sys/vm/drop_caches itself).
TEST(ReplayCache, WorkloadDropCachesEvictsTheSandboxFiles) {
  TempDir tmp;
  if (OnTmpfs(tmp.path())) GTEST_SKIP() << tmp.path() << " is on tmpfs: pages cannot be dropped";
  for (bool drop : {false, true}) {
    SCOPED_TRACE(drop ? "with the drop" : "without the drop");
    std::string root = tmp / (drop ? "root-drop" : "root-nodrop");
    auto r = RunReplayCmd({ReadThenDropTrace(tmp, drop), "--root", root, "--pace", "fast",
                           "--cache", "cold", "--json", "-q"});
    ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
    ASSERT_TRUE(r.summary.is_object()) << r.run.out;
    EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary.dump();
    const long resident = ResidentPages(root + "/data/weights.bin");
    if (drop) {
      EXPECT_EQ(resident, 0);
      EXPECT_EQ(r.summary["per_op"]["page_cache_drop"]["count"], 1) << r.summary.dump();
    } else {
      // The replay's reads left the file cached: what the drop has to undo.
      EXPECT_EQ(resident, static_cast<long>(kFileBytes / PageBytes()));
    }
  }
}

}  // namespace
}  // namespace iotwin::test
