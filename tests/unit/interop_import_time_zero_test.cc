// A record at time 0 is a real time (blkparse and strace -r start there): it counts towards the
// range of times an import spans, and its footer's duration.
#include <gtest/gtest.h>

#include <cstring>

#include "format/records.h"
#include "interop_test_util.h"

namespace iotwin::interop {
namespace {

TEST(RecordSink, TimeZeroCountsTowardsTheDuration) {
  MemorySink sink;
  iot_syscall s{};
  s.hdr.type = IOT_REC_SYSCALL;
  s.hdr.size = sizeof s;
  s.ts = 0;
  ASSERT_TRUE(sink.Append(&s.hdr).ok());
  s.ts = 5000;
  ASSERT_TRUE(sink.Append(&s.hdr).ok());
  ASSERT_TRUE(sink.InternString("a").ok());
  EXPECT_EQ(sink.min_ts(), 0u);
  EXPECT_EQ(sink.max_ts(), 5000u);
}

TEST(RecordSink, RecordsWithoutTimeLeaveTheRangeEmpty) {
  MemorySink sink;
  std::vector<uint8_t> buf(sizeof(iot_string) + 8, 0);
  auto* h = reinterpret_cast<iot_string*>(buf.data());
  h->hdr.type = IOT_REC_STRING;
  h->hdr.size = static_cast<uint16_t>(buf.size());
  h->id = 1;
  h->len = 1;
  ASSERT_TRUE(sink.Append(&h->hdr).ok());
  iot_syscall s{};
  s.hdr.type = IOT_REC_SYSCALL;
  s.hdr.size = 12;  // too short to hold a time
  ASSERT_TRUE(sink.Append(&s.hdr).ok());
  EXPECT_EQ(sink.min_ts(), 0u);
  EXPECT_EQ(sink.max_ts(), 0u);
}

TEST(BlkparseImport, DurationCountsTheEventAtTimeZero) {
  testing::ImportOutcome out;
  testing::ImportText(&out, ImportFormat::kBlkparse,
                      "  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]\n"
                      "  8,0    0        2     0.000503000     0  C   W 223490 + 8 [0]\n");
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.sink.max_ts() - out.sink.min_ts(), 503000u);
}

// A loss reported before the first event has no time of its own: it takes the first event's,
// not 0 (which would stretch the import's range back to the epoch of the ftrace clock).
TEST(FtraceImport, LostLineBeforeAnyEventTakesTheFirstEventsTime) {
  testing::ImportOutcome out;
  testing::ImportText(
      &out, ImportFormat::kFtraceBlock,
      "CPU:1 [LOST 12 EVENTS]\n"
      "  bash-1 [001] d.... 1000.000100: block_rq_issue: 254,0 R 4096 () 8 + 8 [bash]\n"
      "  <idle>-0 [000] d.h1. 1000.000900: block_rq_complete: 254,0 R () 8 + 8 [0]\n");
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  auto lost = out.sink.Of<iot_lost>(IOT_REC_LOST);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].ts, 1000000100000u);
  EXPECT_EQ(lost[0].count, 12u);
  EXPECT_EQ(out.sink.min_ts(), 1000000100000u);
  EXPECT_EQ(out.sink.max_ts() - out.sink.min_ts(), 800000u);
}

}  // namespace
}  // namespace iotwin::interop
