// Kolmogorov-Smirnov and Jensen-Shannon distances against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/distance.h"

namespace iotwin::analysis {
namespace {

TEST(Distance, KolmogorovSmirnovHandComputed) {
  // Samples {1,2,3} vs {2,3,4} over bins 1..4: CDFs (1/3,2/3,1,1) vs (0,1/3,2/3,1): max gap 1/3.
  std::vector<uint64_t> a = {1, 1, 1, 0}, b = {0, 1, 1, 1};
  EXPECT_NEAR(KsDistance(a, b), 1.0 / 3, 1e-12);
  EXPECT_NEAR(KsDistance(b, a), 1.0 / 3, 1e-12);
  // Scale does not matter, only the shape.
  std::vector<uint64_t> a10 = {10, 10, 10, 0};
  EXPECT_NEAR(KsDistance(a10, a), 0.0, 1e-12);
  // {1,1,1,1} vs {4 at bin 3}: CDF 1/4,1/2,3/4,1 vs 0,0,0,1 -> 3/4.
  EXPECT_NEAR(KsDistance({1, 1, 1, 1}, {0, 0, 0, 4}), 0.75, 1e-12);
  EXPECT_EQ(KsDistance(std::vector<uint64_t>{}, std::vector<uint64_t>{}), 0.0);
  EXPECT_EQ(KsDistance(std::vector<uint64_t>{1}, std::vector<uint64_t>{}), 1.0);
  // Different lengths: missing bins are empty.
  EXPECT_NEAR(KsDistance({2}, {1, 1}), 0.5, 1e-12);
}

TEST(Distance, JensenShannonHandComputed) {
  // P = (1/3,1/3,1/3,0), Q = (0,1/3,1/3,1/3), M = (1/6,1/3,1/3,1/6).
  // KL(P||M) = 1/3 * log2(2) = 1/3 = KL(Q||M); JSD = 1/3; distance = sqrt(1/3).
  std::vector<uint64_t> a = {1, 1, 1, 0}, b = {0, 1, 1, 1};
  EXPECT_NEAR(JsDistance(a, b), std::sqrt(1.0 / 3), 1e-12);
  EXPECT_NEAR(JsDistance(a, a), 0.0, 1e-12);
  // Disjoint supports: divergence 1 bit, distance 1.
  EXPECT_NEAR(JsDistance({5, 0}, {0, 3}), 1.0, 1e-12);
  // P = (1/2,1/2), Q = (1,0): M = (3/4,1/4).
  // KL(P||M) = 1/2 log2(2/3) + 1/2 log2(2) ; KL(Q||M) = log2(4/3).
  double kl_p = 0.5 * std::log2(0.5 / 0.75) + 0.5 * std::log2(0.5 / 0.25);
  double kl_q = std::log2(1.0 / 0.75);
  EXPECT_NEAR(JsDistance({1, 1}, {2, 0}), std::sqrt(0.5 * kl_p + 0.5 * kl_q), 1e-12);
  EXPECT_EQ(JsDistance(std::vector<uint64_t>{}, std::vector<uint64_t>{}), 0.0);
  EXPECT_EQ(JsDistance(std::vector<uint64_t>{}, std::vector<uint64_t>{3}), 1.0);
}

TEST(Distance, HistogramsUseTheSameBins) {
  LogLinearHistogram a, b;
  for (int i = 0; i < 100; i++) a.Add(131072);
  for (int i = 0; i < 100; i++) b.Add(131072);
  EXPECT_EQ(KsDistance(a, b), 0.0);
  EXPECT_EQ(JsDistance(a, b), 0.0);
  LogLinearHistogram c;
  for (int i = 0; i < 50; i++) c.Add(131072);
  for (int i = 0; i < 50; i++) c.Add(4096);
  EXPECT_NEAR(KsDistance(a, c), 0.5, 1e-12);
  // P = (0,1), Q = (1/2,1/2): M = (1/4,3/4); KL(P||M) = log2(4/3), KL(Q||M) = 1/2(1) + 1/2 log2(2/3).
  double jsd = 0.5 * std::log2(4.0 / 3) + 0.5 * (0.5 * 1 + 0.5 * std::log2(2.0 / 3));
  EXPECT_NEAR(JsDistance(a, c), std::sqrt(jsd), 1e-12);
}

TEST(Distance, RelativeAndSeriesErrors) {
  EXPECT_DOUBLE_EQ(RelativeError(100, 95), 0.05);
  EXPECT_DOUBLE_EQ(RelativeError(100, 110), 0.10);
  EXPECT_DOUBLE_EQ(RelativeError(0, 0), 0.0);
  EXPECT_DOUBLE_EQ(RelativeError(0, 3), 1.0);
  // |10-8| + |10-12| + |0-1| = 5 over 20.
  EXPECT_DOUBLE_EQ(SeriesError({10, 10, 0}, {8, 12, 1}), 0.25);
  EXPECT_DOUBLE_EQ(SeriesError({1, 2}, {1, 2, 0, 0}), 0.0);
  EXPECT_DOUBLE_EQ(SeriesError({}, {}), 0.0);
}

}  // namespace
}  // namespace iotwin::analysis
