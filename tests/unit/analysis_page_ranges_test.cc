// PendingPages: the pages of files added to the page cache and not yet read.
#include <gtest/gtest.h>

#include <cstdint>

#include "analysis/page_ranges.h"

namespace iotwin::analysis {
namespace {

TEST(PendingPages, AddCountsOnlyNewPagesAcrossChunks) {
  PendingPages p;
  EXPECT_EQ(p.Add(1, 10, 15), 5u);
  EXPECT_EQ(p.Add(1, 12, 17), 2u);
  EXPECT_EQ(p.Add(1, 60, 200), 140u);  // spans three 64-page chunks
  EXPECT_EQ(p.Add(2, 10, 15), 5u);     // another file
  EXPECT_EQ(p.pages(), 152u);
  EXPECT_EQ(p.Add(1, 5, 5), 0u);
}

TEST(PendingPages, TakeRemovesAndCountsWhatWasThere) {
  PendingPages p;
  p.Add(1, 0, 16);
  p.Add(1, 32, 48);
  EXPECT_EQ(p.Take(1, 4, 8), 4u);
  EXPECT_EQ(p.Take(1, 4, 8), 0u);  // already taken
  EXPECT_EQ(p.Take(2, 0, 100), 0u);  // another file's
  EXPECT_EQ(p.Take(1, 10, 40), 6u + 8u);
  EXPECT_EQ(p.pages(), 4u + 2u + 8u);
  EXPECT_EQ(p.Take(1, 0, 1000), 14u);
  EXPECT_EQ(p.pages(), 0u);
  EXPECT_EQ(p.chunks(), 0u);  // emptied bitmaps are dropped
}

// Untrusted ranges: indices near 2^64, files beyond the packing, huge claimed lengths.
TEST(PendingPages, UntrustedRangesStayBounded) {
  PendingPages p(/*max_chunks=*/4);
  EXPECT_EQ(p.Add(1, UINT64_MAX - 2, PendingPages::End(UINT64_MAX - 2, 10)), 0u);
  EXPECT_EQ(p.untracked(), 2u);
  EXPECT_EQ(p.Add(PendingPages::kMaxFiles, 0, 8), 0u);
  EXPECT_EQ(p.untracked(), 10u);
  // A claimed length of 2^60 pages: one access examines a bounded number of bitmaps, and the
  // map holds at most max_chunks of them.
  EXPECT_EQ(p.Add(1, 0, uint64_t{1} << 60), 4u * 64u);
  EXPECT_EQ(p.chunks(), 4u);
  EXPECT_GT(p.untracked(), 10u);
  EXPECT_EQ(p.Take(1, 0, UINT64_MAX), 4u * 64u);
}

}  // namespace
}  // namespace iotwin::analysis
