// Sequence matching (LCS), similarity and thread mapping for compare.
#include <gtest/gtest.h>

#include <random>

#include "analysis/sequence.h"

namespace iotwin::analysis {
namespace {

size_t DpLcs(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  std::vector<std::vector<size_t>> t(a.size() + 1, std::vector<size_t>(b.size() + 1, 0));
  for (size_t i = 1; i <= a.size(); i++)
    for (size_t j = 1; j <= b.size(); j++)
      t[i][j] = a[i - 1] == b[j - 1] ? t[i - 1][j - 1] + 1 : std::max(t[i - 1][j], t[i][j - 1]);
  return t[a.size()][b.size()];
}

TEST(Lcs, HandComputed) {
  auto r = LongestCommonSubsequence({1, 2, 3, 4, 5}, {1, 3, 4, 6, 5});
  EXPECT_EQ(r.length, 4u);  // 1 3 4 5
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.first_difference, 1u);
  EXPECT_EQ(LongestCommonSubsequence({}, {1, 2}).length, 0u);
  EXPECT_EQ(LongestCommonSubsequence({7, 7, 7}, {7, 7, 7}).length, 3u);
  EXPECT_EQ(LongestCommonSubsequence({7, 7, 7}, {7, 7, 7}).first_difference, 3u);
  EXPECT_EQ(LongestCommonSubsequence({1, 2, 3}, {3, 2, 1}).length, 1u);
  // Swapping two neighbours costs exactly one match.
  EXPECT_EQ(LongestCommonSubsequence({1, 2, 3, 4}, {1, 3, 2, 4}).length, 3u);
}

TEST(Lcs, InsertionsAndDeletionsInLongSequences) {
  std::vector<uint64_t> a(100000);
  for (size_t i = 0; i < a.size(); i++) a[i] = i * 2654435761u;
  std::vector<uint64_t> b = a;
  for (int k = 0; k < 10; k++) b.insert(b.begin() + 5000 * k + 17, 0xdead0000 + k);  // 10 extra ops
  b.erase(b.begin() + 90000);                                                       // 1 missing op
  auto r = LongestCommonSubsequence(a, b);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(r.length, a.size() - 1);
  EXPECT_EQ(r.first_difference, 17u);
}

TEST(Lcs, MatchesDynamicProgrammingOnRandomInputs) {
  std::mt19937_64 rng(3);
  for (int iter = 0; iter < 300; iter++) {
    size_t n = rng() % 60, m = rng() % 60;
    std::vector<uint64_t> a(n), b(m);
    for (auto& x : a) x = rng() % 4;
    for (auto& x : b) x = rng() % 4;
    auto r = LongestCommonSubsequence(a, b);
    ASSERT_TRUE(r.exact);
    ASSERT_EQ(r.length, DpLcs(a, b)) << iter;
  }
}

TEST(Lcs, FallbackIsALowerBound) {
  std::mt19937_64 rng(5);
  std::vector<uint64_t> a(3000), b(3000);
  for (auto& x : a) x = rng() % 8;
  for (auto& x : b) x = rng() % 8;
  size_t exact = DpLcs(a, b);
  auto r = LongestCommonSubsequence(a, b, /*max_work=*/1000, /*window=*/16);
  EXPECT_FALSE(r.exact);
  EXPECT_LE(r.length, exact);
  EXPECT_GT(r.length, exact / 2);
}

TEST(Similarity, JaccardOfDistinctFingerprints) {
  std::vector<uint64_t> a = {1, 2, 3, 4}, b = {3, 4, 5, 6};
  EXPECT_DOUBLE_EQ(SequenceSimilarity(a, a), 1.0);
  EXPECT_NEAR(SequenceSimilarity(a, b), 2.0 / 6, 1e-12);  // {3,4} of {1..6}
  EXPECT_DOUBLE_EQ(SequenceSimilarity(a, {9, 10}), 0.0);
  // Repeats do not matter (sets).
  EXPECT_DOUBLE_EQ(SequenceSimilarity({1, 1, 2}, {2, 1}), 1.0);
}

TEST(MapThreads, ByOrderThenBySimilarity) {
  std::vector<uint64_t> reader = {1, 2, 3, 4, 5}, writer = {10, 11, 12}, other = {20, 21};
  // Original: process 0 has threads reader (rank 0) and writer (rank 1).
  std::vector<ThreadSeq> a = {{100, 100, 0, 0, &reader}, {101, 100, 0, 1, &writer}};
  // Replay: the writer started first this time, plus an extra thread.
  std::vector<ThreadSeq> b = {{200, 200, 0, 0, &writer}, {201, 200, 0, 1, &reader},
                              {202, 200, 0, 2, &other}};
  auto pairs = MapThreads(a, b);
  ASSERT_EQ(pairs.size(), 3u);
  EXPECT_EQ(pairs[0].a, 0);
  EXPECT_EQ(pairs[0].b, 1);  // reader <-> reader despite the order
  EXPECT_EQ(pairs[1].a, 1);
  EXPECT_EQ(pairs[1].b, 0);
  EXPECT_EQ(pairs[2].a, -1);
  EXPECT_EQ(pairs[2].b, 2);  // the extra thread has no counterpart

  // Identical workers: order of appearance decides.
  std::vector<uint64_t> w = {7, 8, 9};
  std::vector<ThreadSeq> c = {{1, 1, 0, 0, &w}, {2, 1, 0, 1, &w}};
  std::vector<ThreadSeq> d = {{5, 5, 0, 0, &w}, {6, 5, 0, 1, &w}};
  auto p2 = MapThreads(c, d);
  ASSERT_EQ(p2.size(), 2u);
  EXPECT_EQ(p2[0].b, 0);
  EXPECT_EQ(p2[1].b, 1);
}

// Two readers with much the same calls that started in the other order in the replay: the
// replay's thread map pairs them as they were replayed, where order and similarity cannot.
TEST(MapThreads, KnownPairsFromTheReplayComeFirst) {
  std::vector<uint64_t> r1 = {1, 2, 3, 4, 5, 6}, r2 = {6, 5, 4, 3, 2, 1};
  std::vector<ThreadSeq> a = {{10, 10, 0, 0, &r1}, {11, 10, 0, 1, &r2}};
  std::vector<ThreadSeq> b = {{20, 20, 0, 0, &r2}, {21, 20, 0, 1, &r1}};
  auto guessed = MapThreads(a, b);
  ASSERT_EQ(guessed.size(), 2u);
  EXPECT_EQ(guessed[0].b, 0) << "similarity ties, order decides: the test no longer tests it";
  auto known = MapThreads(a, b, {{10, 21}, {11, 20}});
  ASSERT_EQ(known.size(), 2u);
  EXPECT_EQ(known[0].a, 0);
  EXPECT_EQ(known[0].b, 1);
  EXPECT_EQ(known[1].a, 1);
  EXPECT_EQ(known[1].b, 0);
  // A pair naming a tid twice on a side (reused), or no thread at all, is not taken.
  std::vector<ThreadSeq> reused = {{10, 10, 0, 0, &r1}, {10, 12, 1, 0, &r2}};
  auto partial = MapThreads(reused, b, {{10, 21}, {99, 20}});
  ASSERT_EQ(partial.size(), 2u);
  EXPECT_EQ(partial[0].b, 0);
  EXPECT_EQ(partial[1].b, 1);
}

}  // namespace
}  // namespace iotwin::analysis
