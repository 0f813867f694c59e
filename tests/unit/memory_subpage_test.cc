// The memory layer's user-space parts without BPF: --memory parsing, residency measurement,
// the sub-page tracker's comparisons against a real file, and the rule that classes a late-
// resolved fault as major.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/page_cache.h"
#include "capture/memory_options.h"
#include "capture/memory_subpage.h"
#include "memory_wire.h"

namespace iotwin::capture {
namespace {

class TempFile {
 public:
  explicit TempFile(size_t size) {
    const char* base = getenv("TMPDIR");
    path_ = std::string(base && *base ? base : "/tmp") + "/iotwin-subpage-XXXXXX";
    fd_ = mkstemp(path_.data());
    if (fd_ >= 0 && ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~TempFile() {
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
  }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

TEST(MemoryOptions, ParsesPartListsAndRejectsUnknownParts) {
  auto all = ParseMemoryParts("all");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->faults && all->cache && all->writeback && all->state);
  auto none = ParseMemoryParts("none");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->Any());
  EXPECT_FALSE(none->off_reason.empty());
  auto two = ParseMemoryParts("faults,writeback");
  ASSERT_TRUE(two.ok());
  EXPECT_TRUE(two->faults);
  EXPECT_TRUE(two->writeback);
  EXPECT_FALSE(two->cache);
  EXPECT_FALSE(two->state);
  EXPECT_EQ(MemoryPartsString(two.value()), "faults,writeback");
  auto bad = ParseMemoryParts("faults,pagecache");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("pagecache"), std::string::npos);
  EXPECT_FALSE(ParseMemoryParts("").ok());
}

TEST(MemoryCacheState, CountsResidentPagesWithoutReadingThem) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  TempFile f(64 * page);
  ASSERT_GE(f.fd(), 0);
  // Write 5 pages: they are in the page cache (dirty); the other 59 are holes never read.
  std::vector<uint8_t> buf(page, 0xab);
  for (size_t p : {0, 1, 2, 10, 63}) {
    ASSERT_EQ(pwrite(f.fd(), buf.data(), page, static_cast<off_t>(p * page)),
              static_cast<ssize_t>(page));
  }
  auto r = MeasureResidency(f.fd());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->fsize, 64 * page);
  EXPECT_EQ(r->total_pages, 64u);
  EXPECT_EQ(r->resident_pages, 5u);
  if (r->by_cachestat) {
    EXPECT_EQ(r->dirty_pages, 5u);
  }
  // Measuring again gives the same answer: measuring brought nothing in.
  auto again = MeasureResidency(f.fd());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->resident_pages, 5u);
}

TEST(SubpageTracker, DiffWordsMarksEachChangedWord) {
  std::vector<uint8_t> a(kSubpageSize, 0), b(kSubpageSize, 0);
  b[0] = 1;            // word 0
  b[7] = 1;            // word 0 again
  b[8 * 63 + 3] = 9;   // word 63
  b[8 * 64] = 2;       // word 64 (second bitmap word)
  b[4095] = 0xff;      // word 511
  uint64_t bitmap[8];
  EXPECT_EQ(SubpageTracker::DiffWords(a.data(), b.data(), bitmap), 4u);
  EXPECT_EQ(bitmap[0], (1ull << 0) | (1ull << 63));
  EXPECT_EQ(bitmap[1], 1ull);
  EXPECT_EQ(bitmap[7], 1ull << 63);
  for (int i = 2; i < 7; i++) EXPECT_EQ(bitmap[i], 0u);
  EXPECT_EQ(SubpageTracker::DiffWords(a.data(), a.data(), bitmap), 0u);
}

// The tracker against a real file: baselines as the kernel would send them, stores made through
// the page cache, samples that must report exactly the changed words.
TEST(SubpageTracker, ReportsChangesAgainstBaselinesAndFollowsTheShadow) {
  TempFile f(4 * kSubpageSize);
  ASSERT_GE(f.fd(), 0);
  auto* map = static_cast<uint8_t*>(
      mmap(nullptr, 4 * kSubpageSize, PROT_READ | PROT_WRITE, MAP_SHARED, f.fd(), 0));
  ASSERT_NE(map, MAP_FAILED);
  std::vector<iot_subpage> out;
  SubpageTracker t(
      1 << 20, [&out](const iot_subpage& r) { out.push_back(r); return Status::Ok(); },
      [&f](const PageBaseline&) -> Result<UniqueFd> {
        return UniqueFd(open(f.path().c_str(), O_RDONLY | O_CLOEXEC));
      });

  // Page 1 is about to be stored to: baseline = its content now (zeros).
  std::vector<uint8_t> before(map + kSubpageSize, map + 2 * kSubpageSize);
  PageBaseline b;
  b.ts = 100;
  b.ino = 7;
  b.dev = 3;
  b.pgoff = 1;
  b.tgid = 42;
  b.data = before.data();
  ASSERT_TRUE(t.OnBaseline(b).ok());
  EXPECT_EQ(t.pages(), 1u);

  map[kSubpageSize + 16] = 1;   // word 2
  map[kSubpageSize + 17] = 1;   // word 2
  map[kSubpageSize + 800] = 5;  // word 100
  ASSERT_TRUE(t.Sample(200).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].pgoff, 1u);
  EXPECT_EQ(out[0].ino, 7u);
  EXPECT_EQ(out[0].dev, 3u);
  EXPECT_EQ(out[0].tgid, 42u);
  EXPECT_EQ(out[0].ts, 200u);
  EXPECT_EQ(out[0].changed_words, 2u);
  EXPECT_EQ(out[0].bitmap[0], 1ull << 2);
  EXPECT_EQ(out[0].bitmap[1], 1ull << (100 - 64));

  // Nothing changed since: nothing reported. A store that puts back the same value is invisible.
  map[kSubpageSize + 800] = 5;
  ASSERT_TRUE(t.Sample(300).ok());
  EXPECT_EQ(out.size(), 1u);

  // Changed again: only the new word, against the updated shadow.
  map[kSubpageSize + 4088] = 9;  // word 511
  ASSERT_TRUE(t.Sample(400).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].changed_words, 1u);
  EXPECT_EQ(out[1].bitmap[7], 1ull << 63);

  // Written back and dirtied again before a sample saw the last store: the new baseline holds
  // that store, which is reported at the baseline's time.
  map[kSubpageSize + 24] = 3;  // word 3
  std::vector<uint8_t> written(map + kSubpageSize, map + 2 * kSubpageSize);
  b.ts = 450;
  b.data = written.data();
  ASSERT_TRUE(t.OnBaseline(b).ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2].ts, 450u);
  EXPECT_EQ(out[2].changed_words, 1u);
  EXPECT_EQ(out[2].bitmap[0], 1ull << 3);

  // A baseline the kernel could not copy: the first sample only takes the shadow.
  PageBaseline late = b;
  late.pgoff = 3;
  late.data = nullptr;
  map[3 * kSubpageSize] = 1;
  ASSERT_TRUE(t.OnBaseline(late).ok());
  ASSERT_TRUE(t.Sample(500).ok());
  EXPECT_EQ(out.size(), 3u);
  map[3 * kSubpageSize + 8] = 1;
  ASSERT_TRUE(t.Sample(600).ok());
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[3].pgoff, 3u);
  EXPECT_EQ(out[3].bitmap[0], 1ull << 1);
  EXPECT_EQ(t.stats().baselines_without_data, 1u);

  // Once written back (clean), pages leave the tracker after a last comparison.
  ASSERT_EQ(msync(map, 4 * kSubpageSize, MS_SYNC), 0);
  ASSERT_TRUE(t.Sample(700).ok());
  if (CachestatAvailable()) {
    EXPECT_EQ(t.pages(), 0u);
    EXPECT_EQ(t.stats().pages_cleaned, 2u);
  }
  munmap(map, 4 * kSubpageSize);
}

TEST(SubpageTracker, KeepsShadowMemoryWithinItsBudget) {
  TempFile f(8 * kSubpageSize);
  ASSERT_GE(f.fd(), 0);
  std::vector<iot_subpage> out;
  SubpageTracker t(
      2 * kSubpageSize, [&out](const iot_subpage& r) { out.push_back(r); return Status::Ok(); },
      [&f](const PageBaseline&) -> Result<UniqueFd> {
        return UniqueFd(open(f.path().c_str(), O_RDONLY | O_CLOEXEC));
      });
  std::vector<uint8_t> zero(kSubpageSize, 0);
  for (uint64_t p = 0; p < 5; p++) {
    PageBaseline b;
    b.pgoff = p;
    b.data = zero.data();
    ASSERT_TRUE(t.OnBaseline(b).ok());
  }
  EXPECT_EQ(t.pages(), 2u);
  EXPECT_EQ(t.stats().over_budget, 3u);
}

// A fault whose VMA lookup had to wait: once resolved to its file and page, it is major exactly
// when that page lies in the run of pages its thread inserted into the page cache meanwhile
// (memory_wire.h; used by the BPF side and by user space's resolution from /proc/PID/maps).
TEST(UnresolvedFault, MajorExactlyWhenItsPageWasInsertedMeanwhile) {
  iot_mem_thread t{};
  t.pf.ino = 42;
  t.pf.dev = 7;
  t.pf.pgoff = 100;
  EXPECT_FALSE(iot_mem_unresolved_was_major(&t)) << "no insertion at all";
  t.ur_add_ino = 42;
  t.ur_add_dev = 7;
  t.ur_add_start = 96;
  t.ur_add_end = 128;  // the fault's read-around window
  EXPECT_TRUE(iot_mem_unresolved_was_major(&t));
  t.ur_add_start = 101;  // readahead ahead of the page only: the page was cached already
  EXPECT_FALSE(iot_mem_unresolved_was_major(&t));
  t.ur_add_start = 96;
  t.ur_add_end = 100;  // end is exclusive
  EXPECT_FALSE(iot_mem_unresolved_was_major(&t));
  t.ur_add_end = 101;
  EXPECT_TRUE(iot_mem_unresolved_was_major(&t));
  t.ur_add_ino = 43;  // another file's pages
  EXPECT_FALSE(iot_mem_unresolved_was_major(&t));
  t.ur_add_ino = 42;
  t.ur_add_dev = 8;  // same inode number, another device
  EXPECT_FALSE(iot_mem_unresolved_was_major(&t));
}

}  // namespace
}  // namespace iotwin::capture
