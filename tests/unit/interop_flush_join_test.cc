// A data-less flush completes the oldest outstanding flush of its device: its completion prints
// sector (sector_t)-1 and its issue 0, so (dev, sector) cannot join them.
#include <gtest/gtest.h>

#include <cstring>

#include "format/records.h"
#include "interop_test_util.h"

namespace iotwin::interop {
namespace {

constexpr const char* kTwoFlushes =
    "  kworker-1 [001] d.... 100.000000: block_rq_issue: 254,0 FF 0 () 0 + 0 [kworker]\n"
    "  kworker-1 [001] d.... 100.000010: block_rq_issue: 254,0 WS 4096 () 8 + 8 [kworker]\n"
    "  kworker-1 [001] d.... 100.000020: block_rq_issue: 254,0 FF 0 () 0 + 0 [kworker]\n"
    "  kworker-1 [001] d.... 100.000030: block_rq_issue: 254,1 FF 0 () 0 + 0 [kworker]\n"
    "     <idle>-0 [000] d.h1. 100.000100: block_rq_complete: 254,0 FF () 18446744073709551615 + 0 "
    "[0]\n"
    "     <idle>-0 [000] d.h1. 100.000110: block_rq_complete: 254,1 FF () 18446744073709551615 + 0 "
    "[0]\n"
    "     <idle>-0 [000] d.h1. 100.000120: block_rq_complete: 254,0 WS () 8 + 8 [0]\n"
    "     <idle>-0 [000] d.h1. 100.000130: block_rq_complete: 254,0 FF () 18446744073709551615 + 0 "
    "[0]\n"
    "     <idle>-0 [000] d.h1. 100.000140: block_rq_complete: 254,0 FF () 18446744073709551615 + 0 "
    "[0]\n";

TEST(FtraceImport, FlushCompletionJoinsTheOldestOutstandingFlushOfItsDevice) {
  testing::ImportOutcome out;
  testing::ImportText(&out, ImportFormat::kFtraceBlock, kTwoFlushes);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  auto b = out.sink.Of<iot_block>(IOT_REC_BLOCK);
  ASSERT_EQ(b.size(), 9u);
  for (int i = 0; i < 4; i++) EXPECT_NE(b[i].rq_id, 0u) << i;
  EXPECT_NE(b[0].rq_id, b[2].rq_id);
  EXPECT_EQ(b[4].rq_id, b[0].rq_id);  // 254,0: the first flush issued
  EXPECT_EQ(b[5].rq_id, b[3].rq_id);  // 254,1: its own
  EXPECT_EQ(b[6].rq_id, b[1].rq_id);  // the write, by sector
  EXPECT_EQ(b[7].rq_id, b[2].rq_id);  // 254,0: the second flush
  EXPECT_EQ(b[8].rq_id, 0u);          // no flush left in flight
}

}  // namespace
}  // namespace iotwin::interop
