// Which pages a workload found in the page cache, from the trace's evidence
// (model/initial_residency.h), and the model's cache states that carry it.
#include "model/initial_residency.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include "model/trace_model.h"
#include "trace_builder.h"

namespace iotwin::test {
namespace {

using model::PageExtent;
using model::ResidencyEvidence;
using K = ResidencyEvidence::Kind;

constexpr uint32_t kDev = 0xfe00000;
constexpr uint64_t kIno = 77;

TEST(InitialResidency, ReadWithoutInsertionWasResident) {
  ResidencyEvidence e;
  e.Add(kDev, kIno, 10, K::kUsed, 0, 4);
  EXPECT_EQ(e.Decide(kDev, kIno).resident, (std::vector<PageExtent>{{0, 4}}));
  EXPECT_TRUE(e.Decide(kDev, kIno + 1).resident.empty());
}

TEST(InitialResidency, PagesInsertedBeforeTheReadReturnedWereNot) {
  ResidencyEvidence e;
  e.Add(kDev, kIno, 10, K::kUsed, 0, 4);     // the read returned at 10
  e.Add(kDev, kIno, 5, K::kInserted, 0, 2);  // its miss inserted pages 0-1 at 5
  e.Add(kDev, kIno, 10, K::kInserted, 3, 1); // and page 3 at the same instant it returned
  EXPECT_EQ(e.Decide(kDev, kIno).resident, (std::vector<PageExtent>{{2, 1}}));
}

TEST(InitialResidency, FirstEventDecides) {
  ResidencyEvidence e;
  e.Add(kDev, kIno, 1, K::kUsed, 8, 1);       // hit at 1: resident
  e.Add(kDev, kIno, 2, K::kRemoved, 8, 1);    // evicted later
  e.Add(kDev, kIno, 3, K::kInserted, 8, 1);   // read back later: still resident at start
  e.Add(kDev, kIno, 4, K::kMissed, 20, 1);    // major fault: absent
  e.Add(kDev, kIno, 5, K::kUsed, 20, 1);
  e.Add(kDev, kIno, 6, K::kRemoved, 30, 3);   // removed before any insertion: resident
  e.Add(kDev, kIno, 7, K::kUsed, 9, 1);       // adjacent to page 8: merged
  EXPECT_EQ(e.Decide(kDev, kIno).resident, (std::vector<PageExtent>{{8, 2}, {30, 3}}));
  EXPECT_EQ(e.Decide(kDev, kIno).absent, (std::vector<PageExtent>{{20, 1}}));
}

TEST(InitialResidency, OverlappingEventsSplitAtDecidedPages) {
  ResidencyEvidence e;
  e.Add(kDev, kIno, 1, K::kInserted, 4, 2);  // 4-5 absent
  e.Add(kDev, kIno, 2, K::kUsed, 0, 10);     // 0-3 and 6-9 resident
  EXPECT_EQ(e.Decide(kDev, kIno).resident, (std::vector<PageExtent>{{0, 4}, {6, 4}}));
}

TEST(InitialResidency, HugeRangesFromATraceNeverWrap) {
  ResidencyEvidence e;
  e.Add(kDev, kIno, 1, K::kUsed, UINT64_MAX - 2, UINT64_MAX);
  e.Add(kDev, kIno, 2, K::kInserted, UINT64_MAX - 1, 5);
  EXPECT_EQ(e.Decide(kDev, kIno).resident, (std::vector<PageExtent>{{UINT64_MAX - 2, 2}}));
}

TEST(InitialResidency, PagesToWarmKnownFirstThenTheirWindowsThenTheStart) {
  using model::PagesToWarm;
  // Known pages 20-21 of 100; 10 to warm: the known two, then their 16-page window (16-31)
  // until the budget runs out.
  EXPECT_EQ(PagesToWarm({{20, 2}}, {}, 10, 100), (std::vector<PageExtent>{{16, 10}}));
  // The window filled (16-31, 16 pages), then the file's start.
  EXPECT_EQ(PagesToWarm({{20, 2}}, {}, 20, 100), (std::vector<PageExtent>{{0, 4}, {16, 16}}));
  // Nothing known: the first pages, as with a count alone.
  EXPECT_EQ(PagesToWarm({}, {}, 5, 100), (std::vector<PageExtent>{{0, 5}}));
  // The known pages stay even beyond the count; windows stop at the file's end.
  EXPECT_EQ(PagesToWarm({{0, 3}, {97, 3}}, {}, 2, 100), (std::vector<PageExtent>{{0, 3}, {97, 3}}));
  // Page 98 and its window 96-99 (4), then 46 from the start.
  EXPECT_EQ(PagesToWarm({{98, 1}}, {}, 50, 100), (std::vector<PageExtent>{{0, 46}, {96, 4}}));
  // A count beyond the file warms all of it; huge numbers from a trace never wrap.
  EXPECT_EQ(PagesToWarm({{3, 1}}, {}, UINT64_MAX, 8), (std::vector<PageExtent>{{0, 8}}));
  // Pages the workload found missing are never warmed: 16-17 and 0-9 are skipped.
  EXPECT_EQ(PagesToWarm({{20, 2}}, {{16, 2}, {0, 10}}, 20, 100),
            (std::vector<PageExtent>{{10, 6}, {18, 14}}));
  EXPECT_EQ(PagesToWarm({{UINT64_MAX - 4, 2}}, {}, 3, UINT64_MAX),
            (std::vector<PageExtent>{{UINT64_MAX - 15, 1}, {UINT64_MAX - 4, 2}}));
}

// A partially cached file: the workload reads pages 0-3 (hits) and 4-7 (the kernel inserts
// them); the model's cache state says pages 0-3, not the first N pages by the count alone.
std::unique_ptr<model::TraceModel> PartialTrace(bool cache_layer_on, bool lost_memory_events) {
  TraceBuilder b;
  b.Thread(100, 100);
  auto& cs = b.CacheState("/data/w.bin", 64 << 10, 6, 16);
  cs.dev = kDev;
  cs.ino = kIno;
  auto& open = b.Openat(100, "/data/w.bin", O_RDONLY, 3, 64 << 10);
  open.ino = kIno;
  open.dev = kDev;
  auto& hit = b.Pread(100, 3, 0, 16 << 10, 16 << 10, 64 << 10);
  hit.ino = kIno;
  hit.dev = kDev;
  hit.ftype = S_IFREG >> 12;
  b.PageCache(100, IOT_PC_ADD, kDev, kIno, 4, 4);
  auto& miss = b.Pread(100, 3, 16 << 10, 16 << 10, 16 << 10, 64 << 10);
  miss.ino = kIno;
  miss.dev = kDev;
  miss.ftype = S_IFREG >> 12;
  b.Close(100, 3);
  if (lost_memory_events) b.Lost(IOT_SRC_MEMORY, 3);
  model::ModelBuilder mb;
  nlohmann::json meta = nlohmann::json::object();
  meta["layers"]["memory"]["parts"]["cache"]["enabled"] = cache_layer_on;
  mb.SetMeta(meta);
  EXPECT_TRUE(b.Feed(mb).ok());
  auto r = mb.Finish();
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

TEST(InitialResidency, ModelCacheStateCarriesTheResidentExtents) {
  auto m = PartialTrace(true, false);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->cache_states().size(), 1u);
  const model::CacheState& cs = m->cache_states()[0];
  EXPECT_TRUE(cs.extents_known);
  EXPECT_EQ(cs.resident_pages, 6u);
  EXPECT_EQ(cs.resident_extents, (std::vector<PageExtent>{{0, 4}}));
}

// Without the insertions (cache layer off) or with some of them lost, every read would look
// like a hit: the extents are not claimed.
TEST(InitialResidency, NoExtentsWithoutTheCacheLayerOrWithLostEvents) {
  for (auto [on, lost] : {std::pair{false, false}, std::pair{true, true}}) {
    auto m = PartialTrace(on, lost);
    ASSERT_TRUE(m);
    ASSERT_EQ(m->cache_states().size(), 1u);
    EXPECT_FALSE(m->cache_states()[0].extents_known) << on << lost;
    EXPECT_TRUE(m->cache_states()[0].resident_extents.empty());
  }
}

// The capture names a file's cache state by the kernel's name for the inode (/usr/lib/...), the
// workload opens it through a symlinked directory (/lib/...): the state is the opened file's.
TEST(InitialResidency, CacheStateLinksToTheFileOfTheSameInode) {
  TraceBuilder b;
  b.Thread(100, 100);
  auto& cs = b.CacheState("/usr/lib/x86_64-linux-gnu/libc.so.6", 8192, 2, 2);
  cs.dev = kDev;
  cs.ino = kIno;
  auto& open = b.Openat(100, "/lib/x86_64-linux-gnu/libc.so.6", O_RDONLY, 3, 8192);
  open.dev = kDev;
  open.ino = kIno;
  b.Close(100, 3);
  auto& other = b.CacheState("/data/never-opened", 4096, 1, 1);
  other.dev = kDev;
  other.ino = kIno + 1;
  model::ModelBuilder mb;
  mb.SetMeta(nlohmann::json::object());
  ASSERT_TRUE(b.Feed(mb).ok());
  auto m = mb.Finish();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const auto& states = m.value()->cache_states();
  ASSERT_EQ(states.size(), 2u);
  ASSERT_NE(states[0].file, model::kNone);
  EXPECT_EQ(m.value()->path(m.value()->files()[states[0].file].path),
            "/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(states[1].file, model::kNone);
}

}  // namespace
}  // namespace iotwin::test
