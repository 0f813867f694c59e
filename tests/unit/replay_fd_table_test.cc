// The replay grows its descriptor table before it starts, so that the first recorded dup2 onto
// a reserved number does not wait for an RCU grace period in the middle of the replay.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "replay/replay.h"

namespace iotwin::replay {
namespace {

// FDSize in /proc/self/status: how many descriptors the table holds now.
long FdTableSize() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("FDSize:", 0) == 0) return std::stol(line.substr(7));
  }
  return -1;
}

TEST(ReplayDescriptorTable, GrowsToTheDescriptorLimitBeforeTheReplay) {
  const long before = FdTableSize();
  ASSERT_GT(before, 0);
  const int asked = GrowDescriptorTable();
  ASSERT_GT(asked, 1);
  EXPECT_GE(FdTableSize(), asked);
  EXPECT_LE(static_cast<uint64_t>(asked), kMaxGrownDescriptors);
}

}  // namespace
}  // namespace iotwin::replay
