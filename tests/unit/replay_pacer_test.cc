// Pacing arithmetic (no clock) and the waiting primitive.
#include <gtest/gtest.h>

#include "replay/pacer.h"

namespace iotwin::replay {
namespace {

TEST(ReplayPacer, OriginalIsAbsoluteAndNeverCarries) {
  Pacer p(PaceMode::kOriginal, 1.0, /*trace_start=*/1000, /*live_start=*/50'000);
  EXPECT_EQ(p.Due(1000, 0, 0, 0), 50'000u);
  EXPECT_EQ(p.Due(4000, 0, 0, 0), 53'000u);
  p.Issued(53'000, 60'000);  // 7 us late
  // The next op is still due at its own absolute time: lateness does not accumulate.
  EXPECT_EQ(p.Due(5000, 0, 0, 0), 54'000u);
  EXPECT_EQ(p.carried(), 0u);
}

TEST(ReplayPacer, SpeedCompressesTheSchedule) {
  Pacer p(PaceMode::kOriginal, 4.0, 0, 0);
  EXPECT_EQ(p.Due(4'000'000, 0, 0, 0), 1'000'000u);
  Pacer g(PaceMode::kGaps, 2.0, 0, 0);
  EXPECT_EQ(g.Due(/*ts=*/3000, /*prev_rec_end=*/1000, /*prev_live_done=*/10'000, 0), 11'000u);
}

TEST(ReplayPacer, GapsFollowCompletionPlusThinkTime) {
  Pacer p(PaceMode::kGaps, 1.0, 0, 0);
  // Recorded: previous op ended at 100, this one started at 600: 500 ns of think time.
  EXPECT_EQ(p.Due(600, 100, 10'000, 0), 10'500u);
  // An op that started before the previous ended (no gap) is due at once.
  EXPECT_EQ(p.Due(50, 100, 20'000, 0), 20'000u);
}

TEST(ReplayPacer, GapsCarryLatenessIntoLaterGaps) {
  Pacer p(PaceMode::kGaps, 1.0, 0, 0);
  uint64_t due = p.Due(1000, 0, 0, 0);  // 1000
  EXPECT_EQ(due, 1000u);
  p.Issued(due, 1300);  // 300 late
  EXPECT_EQ(p.carried(), 300u);
  // Next gap of 1000 shrinks by the carried 300.
  EXPECT_EQ(p.Due(3000, 2000, 5000, 0), 5700u);
  EXPECT_EQ(p.carried(), 0u);
  // Lateness larger than the next gap: due right at completion, the rest carried further.
  p.Issued(5700, 7700);  // 2000 late
  EXPECT_EQ(p.Due(3500, 3000, 9000, 0), 9000u);  // gap 500 fully absorbed
  EXPECT_EQ(p.carried(), 1500u);
  // Never due before the predecessor completed.
  EXPECT_GE(p.Due(4000, 3500, 12'000, 0), 12'000u);
}

TEST(ReplayPacer, FastIsDueNow) {
  Pacer p(PaceMode::kFast, 1.0, 0, 0);
  EXPECT_EQ(p.Due(123456, 0, 0, 777), 777u);
}

TEST(ReplayPacer, WaitUntilIsNeverEarly) {
  for (uint64_t spin : {0ull, 20'000ull, 200'000ull}) {
    for (int i = 0; i < 20; i++) {
      uint64_t deadline = NowNs() + 100'000 + i * 10'000;
      WaitUntil(deadline, spin);
      EXPECT_GE(NowNs(), deadline);
    }
  }
  uint64_t t = NowNs();
  WaitUntil(t - 1000, 50'000);  // in the past: returns at once
  EXPECT_LT(NowNs() - t, 50'000'000u);
}

TEST(ReplayPacer, HugeRecordedTimesSaturateInsteadOfWrapping) {
  // A trace's timestamps are untrusted: 2^64-1 ns at speed 0.001 is 2^74 ns, past any integer.
  Pacer original(PaceMode::kOriginal, 0.001, 0, 1'000'000);
  EXPECT_EQ(original.Due(UINT64_MAX, 0, 0, 5), UINT64_MAX);
  Pacer gaps(PaceMode::kGaps, 0.001, 0, 0);
  EXPECT_EQ(gaps.Due(UINT64_MAX, 0, 1'000'000, 5), UINT64_MAX);
  EXPECT_EQ(ScaledDue(10, 100, 2.0), 60u);
}

}  // namespace
}  // namespace iotwin::replay
