// The page-cache hit ratio against what the device read: the capture writes a run of page-cache
// insertions when the run ends, after the reads that found its pages; every such read missed.
#include <gtest/gtest.h>

#include "analysis/analyzer.h"
#include "trace_builder.h"

namespace iotwin::analysis {
namespace {

using nlohmann::json;
using test::TraceBuilder;

constexpr uint32_t kDev = (8u << 20) | 1;
constexpr uint64_t kStart = 1'000'000'000ULL;  // FullCaptureMeta's anchor
constexpr uint64_t kPage = 4096;

json Analyze(TraceBuilder& t) {
  Analyzer a;
  a.SetMeta(t.meta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  return a.Model(std::nullopt);
}

void Call(TraceBuilder& t, uint16_t op, uint64_t ts, int fd, int64_t ret, uint64_t offset = 0,
          std::string_view path = {}) {
  t.FileCall(op, ts, fd, kDev, 9, 8, ret, offset, path);
}

void Fault(TraceBuilder& t, uint64_t ts, uint64_t pgoff, uint32_t pages) {
  iot_page_fault f{};
  InitRecord(&f, IOT_REC_PAGE_FAULT);
  f.ts = ts;
  f.tgid = f.tid = 1;
  f.dev = kDev;
  f.ino = 9;
  f.pgoff = pgoff;
  f.around_start = pgoff;
  f.nr_pages = pages;
  f.flags = IOT_PFF_SHARED;
  t.Add(f);
}

TraceBuilder Capture() {
  json meta = test::FullCaptureMeta();
  meta["capture"] = {{"mode", "command"}};
  return TraceBuilder(meta);
}

// A cold file read in four calls: readahead inserts its 64 pages during the first call; the
// capture writes the insertions after the fourth. The device read all 64 pages: no hit.
TEST(HitRatio, ReadsBeforeTheirRunOfInsertionsIsWrittenMissed) {
  TraceBuilder t = Capture();
  uint64_t ts = kStart + 1000;
  Call(t, IOT_OP_OPENAT, ts, 3, 3, 0, "/kv/block0");
  t.PageCacheAt(IOT_PC_READAHEAD, ts + 50, kDev, 9, 0, 64);
  const uint64_t run_began = ts + 60;
  for (uint64_t i = 0; i < 4; i++) Call(t, IOT_OP_PREAD64, ts += 2000, 3, 16 * kPage, i * 16 * kPage);
  t.PageCacheAt(IOT_PC_ADD, run_began, kDev, 9, 0, 64);
  const json m = Analyze(t);
  EXPECT_EQ(m["memory"]["misses"]["missed_call_pages"], 64) << m["memory"].dump();
  EXPECT_EQ(m["memory"]["read_hit_ratio"], 0.0) << m["memory"].dump();
}

// The same for faults: each fault on the window the run brought in missed. None is major: the
// capture did not flag them (they waited for a readahead under way, which the kernel counts
// minor), and major is the kernel's count.
TEST(HitRatio, FaultsBeforeTheirRunOfInsertionsIsWrittenMissed) {
  TraceBuilder t = Capture();
  uint64_t ts = kStart + 1000;
  Call(t, IOT_OP_OPENAT, ts, 3, 3, 0, "/kv/block0");
  const uint64_t run_began = ts + 60;
  for (uint64_t i = 0; i < 4; i++) Fault(t, ts += 2000, i * 16, 16);
  t.PageCacheAt(IOT_PC_ADD, run_began, kDev, 9, 0, 64);
  const json m = Analyze(t);
  EXPECT_EQ(m["memory"]["misses"]["missed_fault_pages"], 64) << m["memory"].dump();
  EXPECT_EQ(m["memory"]["faults"]["major"], 0) << m["memory"].dump();
  EXPECT_EQ(m["memory"]["read_hit_ratio"], 0.0) << m["memory"].dump();
}

// Reads of cached pages stay hits when those pages are evicted and read in again long after
// (by another program): the insertion is not theirs.
TEST(HitRatio, AnInsertionLongAfterAReadIsNotItsMiss) {
  TraceBuilder t = Capture();
  uint64_t ts = kStart + 1000;
  Call(t, IOT_OP_OPENAT, ts, 3, 3, 0, "/kv/block0");
  for (uint64_t i = 0; i < 4; i++) Call(t, IOT_OP_PREAD64, ts += 2000, 3, 16 * kPage, i * 16 * kPage);
  t.PageCacheAt(IOT_PC_ADD, ts += 50'000'000, kDev, 9, 0, 64);
  const json m = Analyze(t);
  EXPECT_EQ(m["memory"]["misses"]["missed_call_pages"], 0) << m["memory"].dump();
  EXPECT_EQ(m["memory"]["read_hit_ratio"], 1.0) << m["memory"].dump();
}

// Pages written in four calls and inserted in one run written after them are the program's own:
// reading them back hits the cache (the device read nothing).
TEST(HitRatio, PagesWrittenBeforeTheirRunOfInsertionsIsWrittenAreHitsWhenReadBack) {
  TraceBuilder t = Capture();
  uint64_t ts = kStart + 1000;
  Call(t, IOT_OP_OPENAT, ts, 3, 3, 0, "/kv/block0");
  const uint64_t run_began = ts + 60;
  for (uint64_t i = 0; i < 4; i++) {
    Call(t, IOT_OP_PWRITE64, ts += 2000, 3, 16 * kPage, i * 16 * kPage);
  }
  t.PageCacheAt(IOT_PC_ADD, run_began, kDev, 9, 0, 64);
  Call(t, IOT_OP_PREAD64, ts += 2000, 3, 64 * kPage, 0);
  const json m = Analyze(t);
  EXPECT_EQ(m["memory"]["misses"]["missed_call_pages"], 0) << m["memory"].dump();
  EXPECT_EQ(m["memory"]["read_hit_ratio"], 1.0) << m["memory"].dump();
}

}  // namespace
}  // namespace iotwin::analysis
