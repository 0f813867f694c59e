// PageRanges: the pages of a file added to the page cache and not yet read.
#include <gtest/gtest.h>

#include <cstdint>

#include "analysis/page_ranges.h"

namespace iotwin::analysis {
namespace {

TEST(PageRanges, AddCountsOnlyNewPagesAndMergesNeighbours) {
  PageRanges r;
  EXPECT_EQ(r.Add(10, 5), 5u);   // [10, 15)
  EXPECT_EQ(r.Add(12, 5), 2u);   // [10, 17)
  EXPECT_EQ(r.Add(17, 3), 3u);   // touches: [10, 20)
  EXPECT_EQ(r.ranges(), 1u);
  EXPECT_EQ(r.Add(30, 2), 2u);
  EXPECT_EQ(r.ranges(), 2u);
  EXPECT_EQ(r.Add(0, 40), 40u - 12u);  // swallows both
  EXPECT_EQ(r.ranges(), 1u);
  EXPECT_EQ(r.pages(), 40u);
  EXPECT_EQ(r.Add(5, 0), 0u);
}

TEST(PageRanges, TakeRemovesAndCountsWhatWasThere) {
  PageRanges r;
  r.Add(0, 16);
  r.Add(32, 16);
  EXPECT_EQ(r.Take(4, 4), 4u);     // splits [0, 16) into [0, 4) and [8, 16)
  EXPECT_EQ(r.ranges(), 3u);
  EXPECT_EQ(r.Take(4, 4), 0u);     // already taken
  EXPECT_EQ(r.Take(10, 30), 6u + 8u);  // [10, 16) and [32, 40)
  EXPECT_EQ(r.pages(), 4u + 2u + 8u);
  EXPECT_EQ(r.Take(0, 100), 14u);
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.pages(), 0u);
}

TEST(PageRanges, RangesNearTheEndOfTheIndexSpaceSaturate) {
  PageRanges r;
  EXPECT_EQ(r.Add(UINT64_MAX - 2, 10), 2u);  // [2^64 - 3, 2^64 - 1)
  EXPECT_EQ(r.Take(UINT64_MAX - 1, 5), 1u);
  EXPECT_EQ(r.Take(0, UINT64_MAX), 1u);
  EXPECT_TRUE(r.empty());
}

}  // namespace
}  // namespace iotwin::analysis
