// Numbers from untrusted input that used to overflow: timestamps that wrap in imports, device
// numbers beyond their fields, means of values near 2^64. Each saturates or is refused.
#include <cstdint>

#include <gtest/gtest.h>

#include "base/hdr_histogram.h"
#include "format/dev_number.h"
#include "format/records.h"
#include "interop/importer.h"
#include "interop_test_util.h"

namespace iotwin {
namespace {

TEST(UntrustedNumbers, HistogramMeanIsExactAndWithinMinAndMax) {
  HdrHistogram<6> h;
  h.Add(UINT64_MAX);
  EXPECT_EQ(h.MeanRounded(), UINT64_MAX) << "a double mean of 2^64-1 does not convert back";
  h.Add(UINT64_MAX);
  h.Add(2);
  EXPECT_EQ(h.MeanRounded(), 12297829382473034411ull);  // 2^65 / 3, rounded
  HdrHistogram<6> small;
  small.Add(1);
  small.Add(2);
  EXPECT_EQ(small.MeanRounded(), 2u) << "halves round up";
  EXPECT_EQ(HdrHistogram<6>().MeanRounded(), 0u);
}

TEST(UntrustedNumbers, DeviceNumbersAreDigitsWithinTheirFields) {
  EXPECT_EQ(ParseDev("8:0"), (8u << 20) | 0);
  EXPECT_EQ(ParseDev("4095:1048575"), (4095u << 20) | 1048575u);
  EXPECT_EQ(FormatDev((259u << 20) | 3), "259:3");
  for (const char* bad : {"4096:0", "8:1048576", "4294967297:5", "-1:0", "8:-0", "+8:0", " 8:0",
                          "8:0x", "8", ":", "8:", ":0", "99999999999999999999:0"}) {
    EXPECT_FALSE(ParseDev(bad).has_value()) << bad;
  }
  EXPECT_EQ(ParseDevParts("253", "1"), (253u << 20) | 1);
}

// An iolog v2 wait of about 1.8e16 us: its nanoseconds pass 2^64. The clock saturates; the
// calls after it keep their order instead of jumping back in time.
TEST(UntrustedNumbers, FioIologWaitPastTwoToTheSixtyFourSaturates) {
  interop::testing::ImportOutcome out;
  interop::testing::ImportText(&out, interop::ImportFormat::kFioIolog,
                               "fio version 2 iolog\n/d/f add\n/d/f open\n/d/f read 0 4096\n"
                               "/d/f wait 18446744073709552 0\n/d/f read 4096 4096\n"
                               "/d/f close\n");
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  auto calls = out.sink.Of<iot_syscall>(IOT_REC_SYSCALL);
  ASSERT_EQ(calls.size(), 4u);
  for (size_t i = 1; i < calls.size(); i++) {
    EXPECT_GE(calls[i].ts, calls[i - 1].ts) << "call " << i << " went back in time";
  }
  EXPECT_GT(calls[2].ts - calls[1].ts, uint64_t{1} << 63) << "the wait moved the clock far on";
}

}  // namespace
}  // namespace iotwin
