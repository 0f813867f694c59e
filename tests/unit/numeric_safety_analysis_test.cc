// Numbers from untrusted traces in analysis (`iotwin report`), correlation (`iotwin layers`) and
// block import: every sector, length and offset sum saturates instead of wrapping, so no range
// is ever reversed and no statistic jumps to a wrapped value.
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/analyzer.h"
#include "trace_builder.h"
#include "correlate/correlate.h"
#include "format/records.h"
#include "interop/importer.h"
#include "interop_test_util.h"

namespace iotwin {
namespace {

constexpr uint32_t kDev = (254u << 20) | 0;

// ---- analysis --------------------------------------------------------------------------------

nlohmann::json AnalyzeTrace(const test::TraceBuilder& t) {
  analysis::Analyzer a;
  a.SetMeta(test::FullCaptureMeta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  return a.Model(std::nullopt);
}

// `block_rq_complete: 254,0 FF () 18446744073709551615 + 0` made sector + nr wrap to 0 and
// erase(lo, hi) ran with hi before lo: heap corruption in `iotwin report`.
TEST(Security, FlushCompletionAtTheLastSectorKeepsTheQueueIntact) {
  test::TraceBuilder t(test::FullCaptureMeta());
  const uint64_t base = 1'000'000'000ULL;
  t.BlockAt(IOT_BLK_QUEUE, base + 10, kDev, 8, 4096, IOT_BLKF_WRITE, 0);
  t.BlockAt(IOT_BLK_QUEUE, base + 20, kDev, 16, 4096, IOT_BLKF_WRITE, 0);
  t.BlockAt(IOT_BLK_QUEUE, base + 25, kDev + 1, 0, 4096, IOT_BLKF_WRITE, 0);
  // the flush: issue and completion at sector 2^64 - 1 with no sectors
  t.BlockAt(IOT_BLK_ISSUE, base + 30, kDev, UINT64_MAX, 0, IOT_BLKF_FLUSH, 0);
  t.BlockAt(IOT_BLK_COMPLETE, base + 40, kDev, UINT64_MAX, 0, IOT_BLKF_FLUSH, 0);
  // a completion claiming 2^32 - 1 sectors from near the end
  iot_block huge{};
  InitRecord(&huge, IOT_REC_BLOCK);
  huge.phase = IOT_BLK_COMPLETE;
  huge.ts = base + 45;
  huge.dev = kDev;
  huge.sector = UINT64_MAX - 5;
  huge.nr_sector = UINT32_MAX;
  t.Add(huge);
  // the bios at 8 and 16 are still pending: their requests complete with a Q2C each
  t.BlockAt(IOT_BLK_ISSUE, base + 50, kDev, 8, 4096, IOT_BLKF_WRITE, 0);
  t.BlockAt(IOT_BLK_COMPLETE, base + 60, kDev, 8, 4096, IOT_BLKF_WRITE, 0);
  t.BlockAt(IOT_BLK_ISSUE, base + 70, kDev, 16, 4096, IOT_BLKF_WRITE, 0);
  t.BlockAt(IOT_BLK_COMPLETE, base + 80, kDev, 16, 4096, IOT_BLKF_WRITE, 0);
  nlohmann::json m = AnalyzeTrace(t);
  ASSERT_TRUE(m["block"].is_object()) << m.dump();
  const auto& lat = m["block"]["latency_ns"];
  ASSERT_TRUE(lat.contains("Q2C")) << m["block"].dump();
  EXPECT_EQ(lat["Q2C"]["count"], 2u);
}

// The same line through the ftrace importer into the analyzer.
TEST(Security, ImportedFtraceFlushAtTheLastSectorIsAnalyzed) {
  interop::testing::ImportOutcome out;
  interop::testing::ImportText(
      &out, interop::ImportFormat::kFtraceBlock,
      "  fio-100 [000] ..... 1000.000100: block_bio_queue: 254,0 W 8 + 8 [fio]\n"
      "  fio-100 [000] ..... 1000.000110: block_bio_queue: 254,0 W 64 + 8 [fio]\n"
      "  fio-100 [000] ..... 1000.000200: block_rq_issue: 254,0 FF 0 () "
      "18446744073709551615 + 0 [fio]\n"
      "  <idle>-0 [000] d.h1. 1000.000300: block_rq_complete: 254,0 FF () "
      "18446744073709551615 + 0 [0]\n"
      "  fio-100 [000] ..... 1000.000400: block_rq_issue: 254,0 W 4096 () 8 + 8 [fio]\n"
      "  <idle>-0 [000] d.h1. 1000.000500: block_rq_complete: 254,0 W () 8 + 8 [0]\n");
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  ASSERT_EQ(out.stats.unknown_lines, 0u);
  analysis::Analyzer a;
  a.SetMeta(test::FullCaptureMeta());
  std::vector<uint8_t> buf;
  for (const auto& rec : out.sink.records()) {
    const auto* h = reinterpret_cast<const iot_rec_hdr*>(rec.data());
    buf.assign(std::max<size_t>(rec.size(), RecordFixedSize(h->type)), 0);
    std::memcpy(buf.data(), rec.data(), rec.size());
    a.Consume(reinterpret_cast<const iot_rec_hdr*>(buf.data()));
  }
  nlohmann::json m = a.Model(std::nullopt);
  EXPECT_EQ(m["block"]["latency_ns"]["Q2C"]["count"], 1u) << m["block"].dump();
}

// A read near 2^64: its end saturates (max_end) and its page count is that of its bytes, not of
// a wrapped end (which counted some 2^64 pages and made the hit ratio 1).
TEST(Security, ReadPagesNearTheEndOfTheOffsetSpace) {
  test::TraceBuilder t(test::FullCaptureMeta());
  const uint64_t base = 1'000'000'000ULL;
  t.Open(10, base + 1, "/data/f", 3, kDev, 42);
  t.Io(IOT_OP_PREAD64, 10, base + 10, 100, 3, kDev, 42, UINT64_MAX - 100, 8192, 8192);
  t.PageCacheAt(IOT_PC_ADD, base + 20, kDev, 42, (UINT64_MAX - 100) >> 12, 1);
  nlohmann::json m = AnalyzeTrace(t);
  ASSERT_EQ(m["files"]["rows"].size(), 1u) << m["files"].dump();
  const auto& f = m["files"]["rows"][0];
  EXPECT_EQ(f["max_end"].get<uint64_t>(), UINT64_MAX) << f.dump();
  // one page read, one page added: nothing was a hit
  ASSERT_TRUE(f.contains("hit_ratio")) << f.dump();
  EXPECT_EQ(f["hit_ratio"].get<double>(), 0.0) << f.dump();
}

// Two reads whose byte counts and durations sum past 2^64: totals saturate, never wrap to a
// small number.
TEST(Security, ByteAndTimeTotalsSaturate) {
  test::TraceBuilder t(test::FullCaptureMeta());
  const uint64_t base = 1'000'000'000ULL;
  t.Open(10, base + 1, "/data/f", 3, kDev, 42);
  t.Io(IOT_OP_PREAD64, 10, base + 10, UINT64_MAX - 5, 3, kDev, 42, 0, INT64_MAX, INT64_MAX);
  t.Io(IOT_OP_PREAD64, 10, base + 20, 10, 3, kDev, 42, 0, INT64_MAX, INT64_MAX);
  t.Io(IOT_OP_PREAD64, 10, base + 30, 10, 3, kDev, 42, 0, INT64_MAX, INT64_MAX);
  nlohmann::json m = AnalyzeTrace(t);
  bool found = false;
  for (const auto& o : m["ops"]) {
    if (o["op"] != "pread64") continue;
    found = true;
    EXPECT_EQ(o["io_ns"].get<uint64_t>(), UINT64_MAX) << o.dump();
    EXPECT_EQ(o["bytes"].get<uint64_t>(), UINT64_MAX) << o.dump();
  }
  EXPECT_TRUE(found) << m["ops"].dump();
}

// ---- correlation -----------------------------------------------------------------------------

iot_block Blk(uint16_t phase, uint64_t ts, uint64_t sector, uint32_t bytes, uint32_t flags,
              uint64_t rq_id, uint64_t bio_id, uint32_t tid) {
  iot_block b{};
  InitRecord(&b, IOT_REC_BLOCK);
  b.phase = phase;
  b.ts = ts;
  b.dev = kDev;
  b.sector = sector;
  b.bytes = bytes;
  b.nr_sector = bytes / 512;
  b.flags = flags;
  b.rq_id = rq_id;
  b.bio_id = bio_id;
  b.tid = tid;
  b.tgid = tid;
  return b;
}

// A call whose recorded duration reaches past 2^64 ns: its end saturates instead of wrapping to
// a time before its start, so the request it caused still gets its layers.
TEST(Security, CallEndPastTheClockSaturates) {
  correlate::Correlator c;
  iot_syscall s{};
  InitRecord(&s, IOT_REC_SYSCALL);
  s.op = IOT_OP_PREAD64;
  s.tid = s.tgid = 10;
  s.ts = 1000;
  s.dur = UINT64_MAX - 10;
  s.fd = 3;
  s.ret = 4096;
  s.length = 4096;
  c.Add(&s.hdr);
  for (const iot_block& b : {Blk(IOT_BLK_QUEUE, 2000, 8, 4096, IOT_BLKF_READ, 0, 1, 10),
                             Blk(IOT_BLK_ISSUE, 3000, 8, 4096, IOT_BLKF_READ, 7, 1, 10),
                             Blk(IOT_BLK_COMPLETE, 4000, 8, 4096, IOT_BLKF_READ, 7, 0, 0)}) {
    c.Add(&b.hdr);
  }
  correlate::Correlation r = c.Finish();
  ASSERT_EQ(r.requests.size(), 1u);
  const auto& l = r.requests[0].layers;
  EXPECT_EQ(r.requests[0].cause, correlate::Cause::kSyscall);
  EXPECT_TRUE(l.has_app);
  EXPECT_GT(l.total, 0);
  EXPECT_GT(l.c_to_app, 0);
  EXPECT_GE(l.deviation, 0);
}

// A merged bio near the last sector joins the request that contains it; the request's end
// saturates rather than wrapping below its start.
TEST(Security, MergedBioNearTheLastSectorJoinsItsRequest) {
  correlate::Correlator c;
  const uint64_t q_sector = UINT64_MAX - 15;
  for (const iot_block& b :
       {Blk(IOT_BLK_QUEUE, 100, q_sector, 4096, IOT_BLKF_WRITE, 0, 5, 10),
        Blk(IOT_BLK_FRONTMERGE, 110, q_sector, 4096, IOT_BLKF_WRITE, 0, 5, 10),
        Blk(IOT_BLK_ISSUE, 200, q_sector, 8192 + 4096, IOT_BLKF_WRITE, 9, 0, 10),
        Blk(IOT_BLK_COMPLETE, 300, q_sector, 8192 + 4096, IOT_BLKF_WRITE, 9, 0, 0)}) {
    c.Add(&b.hdr);
  }
  correlate::Correlation r = c.Finish();
  ASSERT_EQ(r.requests.size(), 1u);
  ASSERT_EQ(r.bios.size(), 1u);
  EXPECT_EQ(r.bios[0].request, 0u);
}

// ---- block import ----------------------------------------------------------------------------

// "+ NR" of 2^55 sectors made nr * 512 wrap to 0 bytes; it saturates at the field's maximum.
TEST(Security, FtraceSectorCountPastTheByteRangeSaturates) {
  interop::testing::ImportOutcome out;
  interop::testing::ImportText(
      &out, interop::ImportFormat::kFtraceBlock,
      "  fio-100 [000] ..... 1000.000100: block_bio_queue: 254,0 W 8 + 36028797018963968 [fio]\n");
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  auto b = out.sink.Of<iot_block>(IOT_REC_BLOCK);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].bytes, UINT32_MAX);
  EXPECT_EQ(b[0].nr_sector, UINT32_MAX);
}

}  // namespace
}  // namespace iotwin
