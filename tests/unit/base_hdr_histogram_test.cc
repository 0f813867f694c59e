// The one log-linear histogram (base/hdr_histogram.h) at the report's and the replay's
// resolutions: bucket layout, exact small values, percentiles, and the replay's quantiles.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "analysis/histogram.h"
#include "base/hdr_histogram.h"
#include "replay/histogram.h"

namespace iotwin {
namespace {

// Values at and around every power of two, and random ones of every magnitude.
std::vector<uint64_t> Probes() {
  std::vector<uint64_t> v = {0, 1, 2, 63, 64, 65, 127, 128, 129, UINT64_MAX};
  for (int e = 1; e < 64; e++) {
    const uint64_t p = uint64_t{1} << e;
    v.insert(v.end(), {p - 1, p, p + 1, p + p / 3});
  }
  std::mt19937_64 rng(7);
  for (int i = 0; i < 4000; i++) v.push_back(rng() >> (rng() % 64));
  return v;
}

template <typename H>
void ExpectContiguousBuckets() {
  for (int b = 1; b < H::kBuckets; b++) {
    ASSERT_EQ(H::BucketLow(b), H::BucketHigh(b - 1) + 1) << b;
    ASSERT_EQ(H::BucketOf(H::BucketLow(b)), b) << b;
    ASSERT_EQ(H::BucketOf(H::BucketHigh(b)), b) << b;
  }
  EXPECT_EQ(H::BucketHigh(H::kBuckets - 1), UINT64_MAX);
  EXPECT_EQ(H::BucketOf(UINT64_MAX), H::kBuckets - 1);
}

TEST(HdrHistogram, BucketsAreContiguousAtBothResolutions) {
  ExpectContiguousBuckets<HdrHistogram<5>>();
  ExpectContiguousBuckets<HdrHistogram<6>>();
}

TEST(HdrHistogram, ValuesBelowTwiceTheSubBucketsHaveABucketEach) {
  for (uint64_t v = 0; v < 64; v++) EXPECT_EQ(HdrHistogram<5>::BucketOf(v), static_cast<int>(v));
  for (uint64_t v = 0; v < 128; v++) EXPECT_EQ(HdrHistogram<6>::BucketOf(v), static_cast<int>(v));
  // From there on, buckets are two wide, then four, ...
  EXPECT_EQ(HdrHistogram<5>::BucketOf(64), HdrHistogram<5>::BucketOf(65));
  EXPECT_NE(HdrHistogram<5>::BucketOf(65), HdrHistogram<5>::BucketOf(66));
  EXPECT_EQ(HdrHistogram<6>::BucketOf(128), HdrHistogram<6>::BucketOf(129));
}

// The replay's buckets are those it had before it shared the histogram: exact below 64, then
// 32 per power of two, numbered 64 + (exponent - 6) * 32 + the next five bits.
TEST(HdrHistogram, ReplayBucketsKeepTheirLayout) {
  EXPECT_EQ(replay::Histogram::kBuckets, 64 + (64 - 6) * 32);
  for (uint64_t v : Probes()) {
    int expected = static_cast<int>(v);
    if (v >= 64) {
      const int e = 63 - __builtin_clzll(v);
      expected = 64 + (e - 6) * 32 + static_cast<int>((v >> (e - 5)) & 31);
    }
    ASSERT_EQ(replay::Histogram::BucketOf(v), expected) << v;
  }
}

// The report's buckets: exact below 64, then 64 per power of two.
TEST(HdrHistogram, ReportBucketsKeepTheirLayout) {
  EXPECT_EQ(analysis::LogLinearHistogram::kBuckets, 64 + (64 - 6) * 64);
  for (uint64_t v : Probes()) {
    int expected = static_cast<int>(v);
    if (v >= 64) {
      const int e = 63 - __builtin_clzll(v);
      expected = 64 + (e - 6) * 64 + static_cast<int>((v >> (e - 6)) & 63);
    }
    ASSERT_EQ(analysis::LogLinearHistogram::BucketOf(v), expected) << v;
  }
}

// Replay quantiles: the sample of rank floor(q (N-1)) + 1, as the midpoint of its bucket.
TEST(HdrHistogram, ReplayQuantileIsTheMidpointOfTheRankedBucket) {
  replay::Histogram h;
  for (int i = 0; i < 3; i++) h.Add(1000);  // bucket [992, 1007]
  for (int i = 0; i < 2; i++) h.Add(4000);  // bucket [3968, 4031]
  h.Add(100'000);
  EXPECT_EQ(h.Quantile(0), 1000u);    // midpoint 999, clamped to the minimum
  EXPECT_EQ(h.Quantile(0.4), 1000u);  // rank 3
  EXPECT_EQ(h.Quantile(0.6), 3999u);  // rank 4: (3968 + 4031) / 2
  EXPECT_EQ(h.Quantile(1), 99'327u);  // midpoint of [98304, 100351]
  EXPECT_EQ(replay::Histogram().Quantile(0.5), 0u);
}

// Report percentiles: nearest rank, the highest value of the bucket.
TEST(HdrHistogram, ReportPercentileIsTheTopOfTheNearestRankBucket) {
  HdrHistogram<6> h;
  for (int i = 0; i < 3; i++) h.Add(1000);  // bucket [1000, 1007]
  for (int i = 0; i < 2; i++) h.Add(4000);  // bucket [4000, 4031]
  h.Add(100'000);
  EXPECT_EQ(h.Percentile(50), 1007u);  // rank 3
  EXPECT_EQ(h.Percentile(60), 4031u);  // rank ceil(3.6) = 4
  EXPECT_EQ(h.Percentile(100), 100'000u);
}

// The replay's mean is the exact sum's: no wrap past 2^64.
TEST(HdrHistogram, ReplayMeanDoesNotWrap) {
  replay::Histogram a, b;
  a.Add(UINT64_MAX);
  b.Add(UINT64_MAX);
  a.Merge(b);
  a.Add(2);
  EXPECT_DOUBLE_EQ(a.mean(), 0x1p65 / 3);
  EXPECT_EQ(a.count(), 3u);
}

}  // namespace
}  // namespace iotwin
