// The BLOCK LAYER line of the text report states the read share of reads and writes: flushes and
// discards are requests too, but not in that share's denominator, so the label must not say
// "of requests". The device table counts preflushes as flushes.
#include <gtest/gtest.h>

#include <string>

#include "analysis/analyzer.h"
#include "analysis/report_text.h"
#include "trace_builder.h"

namespace iotwin::analysis {
namespace {

TEST(ReportText, BlockReadShareSaysItIsOfReadsAndWrites) {
  test::TraceBuilder t(test::FullCaptureMeta());
  const uint32_t disk = 254u << 20;
  const uint64_t t0 = 1'000'000'000ULL;
  const uint32_t kinds[] = {IOT_BLKF_READ, IOT_BLKF_WRITE, IOT_BLKF_DISCARD,
                            IOT_BLKF_FLUSH | IOT_BLKF_PREFLUSH};
  uint64_t rq = 1;
  for (uint32_t flags : kinds) {
    const uint32_t bytes = (flags & IOT_BLKF_FLUSH) ? 0 : 4096;
    t.BlockAt(IOT_BLK_ISSUE, t0 + rq * 1000, disk, rq * 8, bytes, flags, rq);
    t.BlockAt(IOT_BLK_COMPLETE, t0 + rq * 1000 + 500, disk, rq * 8, bytes, flags, rq);
    rq++;
  }
  Analyzer a;
  a.SetMeta(test::FullCaptureMeta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  const std::string text = RenderText(a.Model(nlohmann::json::object(), nlohmann::json::object()));
  EXPECT_NE(
      text.find("  requests     4; reads are 50.0% of reads and writes, 50.0% of their bytes"),
      std::string::npos)
      << text;
}

// A preflush makes the device flush its cache as a flush request does (ftrace's "FWS 0 + 0" is
// nothing else): the device table counts both.
TEST(ReportText, BlockPreflushCountsAsAFlush) {
  test::TraceBuilder t(test::FullCaptureMeta());
  const uint32_t disk = 8u << 20;
  const uint64_t t0 = 1'000'000'000ULL;
  t.BlockAt(IOT_BLK_ISSUE, t0, disk, 0, 0, IOT_BLKF_PREFLUSH | IOT_BLKF_WRITE | IOT_BLKF_SYNC, 1);
  t.BlockAt(IOT_BLK_ISSUE, t0 + 1000, disk, 8, 4096, IOT_BLKF_PREFLUSH | IOT_BLKF_WRITE, 2);
  t.BlockAt(IOT_BLK_ISSUE, t0 + 2000, disk, 0, 0, IOT_BLKF_FLUSH, 3);
  t.BlockAt(IOT_BLK_ISSUE, t0 + 3000, disk, 16, 4096, IOT_BLKF_WRITE, 4);
  Analyzer a;
  a.SetMeta(test::FullCaptureMeta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  const nlohmann::json model = a.Model(nlohmann::json::object(), nlohmann::json::object());
  ASSERT_EQ(model["block"]["devices"].size(), 1u) << model["block"].dump();
  EXPECT_EQ(model["block"]["devices"][0]["flushes"], 3) << model["block"]["devices"][0].dump();
}

}  // namespace
}  // namespace iotwin::analysis
