// Time 0 is a real time: blkparse, strace -r and fio iologs start there. The analysis starts its
// clock at the first record, even one at 0, so the span and the time series count it.
#include <gtest/gtest.h>

#include "analysis/analyzer.h"
#include "trace_builder.h"

namespace iotwin::analysis {
namespace {

TEST(Analyzer, FirstRecordAtTimeZeroStartsTheSpan) {
  test::TraceBuilder t(test::FullCaptureMeta());
  const uint32_t disk = 8u << 20;
  t.BlockAt(IOT_BLK_ISSUE, 0, disk, 8, 4096, IOT_BLKF_WRITE, 1);
  t.BlockAt(IOT_BLK_COMPLETE, 503'000, disk, 8, 4096, IOT_BLKF_WRITE, 1);
  t.BlockAt(IOT_BLK_ISSUE, 4'000'000, disk, 64, 4096, IOT_BLKF_READ, 2);
  Analyzer a;
  nlohmann::json meta = test::FullCaptureMeta();
  meta["host"].erase("anchor");  // an import: no capture anchor
  a.SetMeta(meta);
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  const nlohmann::json m = a.Model(nlohmann::json::object(), nlohmann::json::object());
  EXPECT_EQ(m["totals"]["start_ns"], 0u) << m["totals"].dump();
  EXPECT_EQ(m["totals"]["span_ns"], 4'000'000u) << m["totals"].dump();
}

}  // namespace
}  // namespace iotwin::analysis
