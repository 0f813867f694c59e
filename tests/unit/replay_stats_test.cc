// Histogram accuracy and result classification.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "replay/histogram.h"
#include "replay/stats.h"

namespace iotwin::replay {
namespace {

TEST(ReplayHistogram, QuantilesWithinBucketPrecision) {
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> dist(9.0, 1.5);  // ~8 us median, long tail
  std::vector<uint64_t> v;
  Histogram h;
  for (int i = 0; i < 100000; i++) {
    uint64_t x = static_cast<uint64_t>(dist(rng));
    v.push_back(x);
    h.Add(x);
  }
  std::sort(v.begin(), v.end());
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    double exact = static_cast<double>(v[static_cast<size_t>(q * (v.size() - 1))]);
    double got = static_cast<double>(h.Quantile(q));
    EXPECT_NEAR(got, exact, exact * 0.035 + 1) << q;
  }
  EXPECT_EQ(h.max(), v.back());
  EXPECT_EQ(h.min(), v.front());
  EXPECT_EQ(h.count(), v.size());
}

TEST(ReplayHistogram, BucketsAreContiguous) {
  for (int b = 0; b + 1 < Histogram::kBuckets; b++) {
    ASSERT_EQ(Histogram::BucketHigh(b), Histogram::BucketLow(b + 1)) << b;
    ASSERT_EQ(Histogram::BucketOf(Histogram::BucketLow(b)), b);
  }
  EXPECT_EQ(Histogram::BucketOf(UINT64_MAX), Histogram::kBuckets - 1);
}

TEST(ReplayHistogram, MergeAddsCounts) {
  Histogram a, b;
  for (int i = 1; i <= 100; i++) a.Add(i * 1000);
  for (int i = 101; i <= 200; i++) b.Add(i * 1000);
  a.Merge(b);
  EXPECT_EQ(a.count(), 200u);
  EXPECT_NEAR(static_cast<double>(a.Quantile(0.5)), 100'000, 3500);
}

TEST(ReplayStats, CompareResultClassifies) {
  Mismatch m;
  EXPECT_FALSE(CompareResult(4096, 4096, true, &m));
  EXPECT_TRUE(CompareResult(4096, 100, true, &m));
  EXPECT_EQ(m, Mismatch::kShort);
  EXPECT_TRUE(CompareResult(100, 4096, true, &m));
  EXPECT_EQ(m, Mismatch::kLong);
  EXPECT_FALSE(CompareResult(3, 7, false, &m));  // descriptors differ, both succeeded
  EXPECT_TRUE(CompareResult(3, -2, false, &m));
  EXPECT_EQ(m, Mismatch::kErrorVsSuccess);
  EXPECT_TRUE(CompareResult(-2, 5, false, &m));
  EXPECT_EQ(m, Mismatch::kSuccessVsError);
  EXPECT_FALSE(CompareResult(-2, -2, true, &m));
  EXPECT_TRUE(CompareResult(-2, -13, true, &m));
  EXPECT_EQ(m, Mismatch::kErrno);
}

TEST(ReplayStats, MergeKeepsExamplesBounded) {
  ReplayStats a, b;
  for (int i = 0; i < 4; i++) a.AddMismatch(Mismatch::kShort, "read", MismatchExample{"read"}, 3);
  for (int i = 0; i < 4; i++) b.AddMismatch(Mismatch::kShort, "read", MismatchExample{"read"}, 3);
  a.Merge(b, 3);
  EXPECT_EQ(a.mismatches(), 8u);
  EXPECT_EQ(a.examples("short").size(), 3u);
}

}  // namespace
}  // namespace iotwin::replay
