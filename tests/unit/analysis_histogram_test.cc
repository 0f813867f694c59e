// Histograms, percentiles, top values, time series and the access-pattern classifier.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "analysis/histogram.h"
#include "analysis/pattern.h"

namespace iotwin::analysis {
namespace {

TEST(SizeHistogram, PowerOfTwoSizesGetTheirOwnBucket) {
  EXPECT_EQ(SizeHistogram::BucketOf(0), 0);
  EXPECT_EQ(SizeHistogram::BucketOf(1), 1);
  EXPECT_EQ(SizeHistogram::BucketOf(2), 2);
  EXPECT_EQ(SizeHistogram::BucketOf(3), 3);
  EXPECT_EQ(SizeHistogram::BucketOf(4), 3);
  EXPECT_EQ(SizeHistogram::BucketOf(5), 4);
  // 128 KiB is the upper bound of its bucket; one byte more starts the next bucket.
  int b = SizeHistogram::BucketOf(128 * 1024);
  EXPECT_EQ(SizeHistogram::BucketUpper(b), 128u * 1024);
  EXPECT_EQ(SizeHistogram::BucketOf(128 * 1024 + 1), b + 1);
  EXPECT_EQ(SizeHistogram::BucketOf(64 * 1024 + 1), b);
  EXPECT_EQ(SizeHistogram::BucketOf(UINT64_MAX), SizeHistogram::kBuckets - 1);

  SizeHistogram h;
  h.Add(4096, 3);
  h.Add(4000);
  h.Add(131072);
  EXPECT_EQ(h.total(), 5u);
  EXPECT_EQ(h.count(SizeHistogram::BucketOf(4096)), 4u);
  EXPECT_EQ(h.sum(SizeHistogram::BucketOf(4096)), 3u * 4096 + 4000);
  EXPECT_EQ(h.count(SizeHistogram::BucketOf(131072)), 1u);
}

TEST(LogLinearHistogram, BucketsAreContiguousAndTight) {
  // Every bucket's range starts right after the previous one ends, and is narrow.
  for (int b = 1; b < LogLinearHistogram::kBuckets; b++) {
    ASSERT_EQ(LogLinearHistogram::BucketLow(b), LogLinearHistogram::BucketHigh(b - 1) + 1) << b;
    uint64_t lo = LogLinearHistogram::BucketLow(b), hi = LogLinearHistogram::BucketHigh(b);
    ASSERT_LE(static_cast<double>(hi - lo), static_cast<double>(lo) / 64.0) << b;
    ASSERT_EQ(LogLinearHistogram::BucketOf(lo), b);
    ASSERT_EQ(LogLinearHistogram::BucketOf(hi), b);
  }
  EXPECT_EQ(LogLinearHistogram::BucketHigh(LogLinearHistogram::kBuckets - 1), UINT64_MAX);
}

TEST(LogLinearHistogram, PercentilesOfSmallValuesAreExact) {
  LogLinearHistogram h;
  for (uint64_t v = 1; v <= 10; v++) h.Add(v);
  // Nearest rank: p50 -> 5th smallest, p90 -> 9th, p99 -> ceil(9.9) = 10th.
  EXPECT_EQ(h.Percentile(50), 5u);
  EXPECT_EQ(h.Percentile(90), 9u);
  EXPECT_EQ(h.Percentile(99), 10u);
  EXPECT_EQ(h.Percentile(0), 1u);
  EXPECT_EQ(h.max(), 10u);
  EXPECT_EQ(h.min(), 1u);
  EXPECT_DOUBLE_EQ(h.mean(), 5.5);
  EXPECT_DOUBLE_EQ(h.CdfAt(3), 0.3);
}

TEST(LogLinearHistogram, PercentilesOfLargeValuesWithinBucketError) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(12.0, 1.5);
  std::vector<uint64_t> values;
  LogLinearHistogram h;
  for (int i = 0; i < 20000; i++) {
    uint64_t v = static_cast<uint64_t>(dist(rng)) + 1;
    values.push_back(v);
    h.Add(v);
  }
  std::sort(values.begin(), values.end());
  for (double p : {50.0, 90.0, 99.0}) {
    size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
    uint64_t exact = values[rank - 1];
    double rel = std::fabs(static_cast<double>(h.Percentile(p)) - static_cast<double>(exact)) /
                 static_cast<double>(exact);
    EXPECT_LE(rel, 1.0 / 64) << "p" << p << " exact " << exact << " got " << h.Percentile(p);
  }
  EXPECT_EQ(h.Percentile(100), values.back());
}

TEST(LogLinearHistogram, MergeAddsCounts) {
  LogLinearHistogram a, b;
  a.Add(10);
  a.Add(1000);
  b.Add(5);
  b.Add(100000);
  a.Merge(b);
  EXPECT_EQ(a.total(), 4u);
  EXPECT_EQ(a.min(), 5u);
  EXPECT_EQ(a.max(), 100000u);
  EXPECT_EQ(a.Percentile(50), 10u);
}

TEST(TopValues, ExactWhileWithinCapacity) {
  TopValues t(4);
  for (int i = 0; i < 90; i++) t.Add(131072);
  for (int i = 0; i < 7; i++) t.Add(4096);
  t.Add(512, 3);
  auto s = t.Sorted();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].value, 131072u);
  EXPECT_EQ(s[0].count, 90u);
  EXPECT_EQ(s[1].value, 4096u);
  EXPECT_EQ(s[1].count, 7u);
  EXPECT_EQ(s[2].value, 512u);
  EXPECT_EQ(s[2].count, 3u);
  EXPECT_TRUE(t.exact());
  EXPECT_EQ(t.total(), 100u);
}

TEST(TopValues, HeavyHitterSurvivesOverflow) {
  TopValues t(8);
  for (uint64_t i = 0; i < 1000; i++) {
    t.Add(131072);
    t.Add(1000 + i);  // a thousand distinct one-off sizes
  }
  EXPECT_FALSE(t.exact());
  auto s = t.Sorted();
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(s[0].value, 131072u);
  EXPECT_EQ(s[0].count, 1000u);  // never evicted, so its count is exact
  EXPECT_EQ(s[0].error, 0u);
  EXPECT_EQ(t.total(), 2000u);
}

TEST(TimeSeries, GrowsByDoublingAndKeepsSums) {
  TimeSeries ts(2, 1000);
  ts.SetStart(10'000);
  ts.Add(0, 10'000, 1);  // bucket 0
  ts.Add(0, 10'999, 1);  // bucket 0
  ts.Add(1, 11'000, 5);  // bucket 1
  EXPECT_EQ(ts.width_ns(), 1000u);
  EXPECT_EQ(ts.at(0, 0), 2u);
  EXPECT_EQ(ts.at(1, 1), 5u);
  // 3,000,000 ns past the start needs 3000 buckets of 1 µs: the width doubles twice to 4 µs.
  ts.Add(0, 10'000 + 3'000'000, 7);
  EXPECT_EQ(ts.width_ns(), 4000u);
  EXPECT_EQ(ts.at(0, 0), 2u);
  EXPECT_EQ(ts.at(1, 0), 5u);
  EXPECT_EQ(ts.at(0, 750), 7u);
  EXPECT_EQ(ts.used_buckets(), 751u);
  uint64_t sum = 0;
  for (uint64_t v : ts.Series(0)) sum += v;
  EXPECT_EQ(sum, 9u);
  auto re = ts.Rebinned(0, 8000, 400);
  EXPECT_EQ(re[0], 2u);
  EXPECT_EQ(re[375], 7u);
}

TEST(SeekHistogram, SignedLogBuckets) {
  EXPECT_EQ(SeekHistogram::BucketOf(0), SeekHistogram::kZero);
  EXPECT_EQ(SeekHistogram::BucketOf(1), SeekHistogram::kZero + 1);
  EXPECT_EQ(SeekHistogram::BucketOf(4096), SeekHistogram::kZero + 13);
  EXPECT_EQ(SeekHistogram::BucketOf(8191), SeekHistogram::kZero + 13);
  EXPECT_EQ(SeekHistogram::BucketOf(-4096), SeekHistogram::kZero - 13);
  EXPECT_EQ(SeekHistogram::BucketLow(SeekHistogram::kZero - 13), -4096);
  EXPECT_EQ(SeekHistogram::BucketOf(INT64_MIN), 0);
}

// The branch-free bucket against its definition (sign, then floor(log2 |d|)) at every power of
// two, its neighbours, and the extremes.
TEST(SeekHistogram, BucketsMatchTheirDefinitionEverywhere) {
  auto reference = [](int64_t d) {
    if (d == 0) return SeekHistogram::kZero;
    const uint64_t m = d > 0 ? static_cast<uint64_t>(d) : uint64_t{0} - static_cast<uint64_t>(d);
    const int log = 63 - __builtin_clzll(m);
    return d > 0 ? SeekHistogram::kZero + 1 + log : SeekHistogram::kZero - 1 - log;
  };
  std::vector<int64_t> values = {0, 1, -1, 2, -2, 3, -3, INT64_MAX, INT64_MIN, INT64_MIN + 1};
  for (int k = 1; k < 63; k++) {
    const int64_t p = int64_t{1} << k;
    for (int64_t v : {p - 1, p, p + 1}) {
      values.push_back(v);
      values.push_back(-v);
    }
  }
  for (int64_t v : values) {
    const int b = SeekHistogram::BucketOf(v);
    EXPECT_EQ(b, reference(v)) << v;
    EXPECT_GE(b, 0) << v;
    EXPECT_LT(b, SeekHistogram::kBuckets) << v;
  }
  EXPECT_EQ(SeekHistogram::BucketOf(INT64_MAX), SeekHistogram::kZero + 63);
}

TEST(LogLinearHistogram, MeanIsExactWhereADoubleSumWouldRound) {
  // 2^53 then a thousand 1s: a double sum stays at 2^53 (each 1 rounds away).
  LogLinearHistogram h;
  h.Add(uint64_t{1} << 53);
  for (int i = 0; i < 1000; i++) h.Add(1);
  EXPECT_DOUBLE_EQ(h.mean(), (0x1p53 + 1000) / 1001);
  // Past 2^64: (2 * (2^64 - 1) + 2) / 3 = 2^65 / 3, through Merge as well.
  LogLinearHistogram big, other;
  big.Add(UINT64_MAX);
  big.Add(2);
  other.Add(UINT64_MAX);
  big.Merge(other);
  EXPECT_DOUBLE_EQ(big.mean(), 0x1p65 / 3);
  EXPECT_EQ(LogLinearHistogram().mean(), 0.0);
}

TEST(TopValues, TwoAlternatingSizesAndAThirdStayExact) {
  TopValues t(8);
  uint64_t expect[3] = {0, 0, 0};
  const uint64_t sizes[3] = {131072, 4096, 512};
  std::mt19937_64 rng(3);
  for (int i = 0; i < 10000; i++) {
    const uint64_t r = rng() % 100;
    const int which = r < 70 ? 0 : r < 97 ? 1 : 2;
    t.Add(sizes[which]);
    expect[which]++;
  }
  auto s = t.Sorted();
  ASSERT_EQ(s.size(), 3u);
  for (const auto& e : s) {
    for (int w = 0; w < 3; w++) {
      if (e.value == sizes[w]) {
        EXPECT_EQ(e.count, expect[w]) << e.value;
      }
    }
  }
  EXPECT_TRUE(t.exact());
  EXPECT_EQ(t.total(), 10000u);
}

TEST(Pattern, SequentialStridedRandom) {
  StreamState s;
  int64_t gap = -1;
  EXPECT_EQ(ClassifyAccess(s, 0, 4096, &gap), Access::kFirst);
  EXPECT_EQ(gap, 0);
  EXPECT_EQ(ClassifyAccess(s, 4096, 4096, &gap), Access::kSequential);
  // Skip 4 KiB: first gap is random, the same gap again is strided.
  EXPECT_EQ(ClassifyAccess(s, 12288, 4096, &gap), Access::kRandom);
  EXPECT_EQ(gap, 4096);
  EXPECT_EQ(ClassifyAccess(s, 20480, 4096, &gap), Access::kStrided);
  EXPECT_EQ(ClassifyAccess(s, 28672, 4096, &gap), Access::kStrided);
  // Backwards jump: btt's distance from the previous request's start.
  EXPECT_EQ(ClassifyAccess(s, 0, 4096, &gap), Access::kRandom);
  EXPECT_EQ(gap, -28672);
  EXPECT_EQ(ClassifyAccess(s, 4096, 4096, &gap), Access::kSequential);
  // A constant backward stride (reading a file back to front in 4 KiB steps).
  StreamState b;
  ClassifyAccess(b, 40960, 4096, &gap);
  EXPECT_EQ(ClassifyAccess(b, 36864, 4096, &gap), Access::kRandom);
  EXPECT_EQ(gap, -4096);
  EXPECT_EQ(ClassifyAccess(b, 32768, 4096, &gap), Access::kStrided);
}

// btt's seek distance: a request starting inside the previous one (stdio seeking 16 bytes
// forward re-reads the 4 KiB block it lands in) is no seek, hence sequential.
TEST(Pattern, StartingInsideThePreviousRequestIsSequential) {
  StreamState s;
  int64_t gap = -1;
  EXPECT_EQ(ClassifyAccess(s, 8192, 32, &gap), Access::kFirst);
  EXPECT_EQ(ClassifyAccess(s, 8224, 4096, &gap), Access::kSequential);
  // Back to the block boundary, 32 bytes before the previous end: inside it.
  EXPECT_EQ(ClassifyAccess(s, 12288, 48, &gap), Access::kSequential);
  EXPECT_EQ(gap, 0);
  EXPECT_EQ(ClassifyAccess(s, 12336, 4096, &gap), Access::kSequential);
  // Re-reading the previous request's own start is no seek either.
  EXPECT_EQ(ClassifyAccess(s, 12336, 4096, &gap), Access::kSequential);
  // One byte before it: a backward seek of one byte.
  EXPECT_EQ(ClassifyAccess(s, 12335, 10, &gap), Access::kRandom);
  EXPECT_EQ(gap, -1);
}

// fio's rw=read:16 ("sequential with holes"): every request skips 16 bytes past the previous
// end, a constant forward distance: strided after the first skip, never sequential.
TEST(Pattern, HolesOfOneSizeAreStrided) {
  StreamState s;
  int64_t gap = -1;
  EXPECT_EQ(ClassifyAccess(s, 0, 4096, &gap), Access::kFirst);
  EXPECT_EQ(ClassifyAccess(s, 4112, 4096, &gap), Access::kRandom);
  EXPECT_EQ(gap, 16);
  for (uint64_t off = 8224; off < 100000; off += 4112) {
    EXPECT_EQ(ClassifyAccess(s, off, 4096, &gap), Access::kStrided) << off;
    EXPECT_EQ(gap, 16);
  }
}

}  // namespace
}  // namespace iotwin::analysis
