// close_range acts on the descriptors of its range and no others, wherever the numbers lie: below
// and above the dense part of a descriptor table (1024), and with bounds past INT32_MAX, which no
// descriptor can have.
#include <fcntl.h>
#include <linux/close_range.h>

#include <gtest/gtest.h>

#include "model_test_util.h"

namespace iotwin::test {
namespace {

using model::Skip;

std::vector<uint64_t> Listed(const model::TraceModel& m, const model::Op& op) {
  return std::vector<uint64_t>(m.ExtraBegin(op), m.ExtraBegin(op) + op.extra_count);
}

TEST(ModelCloseRange, BoundsPastInt32MaxCloseNothing) {
  TraceBuilder b;
  b.Openat(100, "/d/low", O_RDONLY, 3);
  b.Openat(100, "/d/high", O_RDONLY, 151552);
  b.CloseRange(100, 0xFFFFFFFFu, 0xFFFFFFFFu);
  b.CloseRange(100, 0x80000000u, 0xFFFFFFFFu, CLOSE_RANGE_CLOEXEC);
  b.Exec(100, "/bin/next");
  b.Read(100, 3, 1, 1);
  b.Read(100, 151552, 1, 1);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto* t = FindThread(*m, 100);
  ASSERT_TRUE(t);
  ASSERT_EQ(t->ops.size(), 7u);
  EXPECT_TRUE(Listed(*m, t->ops[2]).empty());
  EXPECT_TRUE(Listed(*m, t->ops[3]).empty());
  EXPECT_TRUE(Listed(*m, t->ops[4]).empty());  // exec: nothing was close-on-exec
  EXPECT_EQ(t->ops[5].skip, Skip::kReplayable);
  EXPECT_EQ(t->ops[6].skip, Skip::kReplayable);
}

TEST(ModelCloseRange, RangeAcrossTheDenseLimit) {
  TraceBuilder b;
  b.Openat(100, "/d/a", O_RDONLY, 5);
  b.Openat(100, "/d/b", O_RDONLY, 1000);
  b.Openat(100, "/d/c", O_RDONLY, 2000);
  b.Openat(100, "/d/d", O_RDONLY, 70000);
  b.CloseRange(100, 900, 2000);
  b.Read(100, 5, 1, 1);
  b.Read(100, 1000, 1, -EBADF);
  b.Read(100, 2000, 1, -EBADF);
  b.Read(100, 70000, 1, 1);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto* t = FindThread(*m, 100);
  ASSERT_TRUE(t);
  ASSERT_EQ(t->ops.size(), 9u);
  EXPECT_EQ(Listed(*m, t->ops[4]), (std::vector<uint64_t>{1000, 2000}));
  EXPECT_EQ(t->ops[5].skip, Skip::kReplayable);
  EXPECT_EQ(t->ops[6].skip, Skip::kUnknownFd);
  EXPECT_EQ(t->ops[7].skip, Skip::kUnknownFd);
  EXPECT_EQ(t->ops[8].skip, Skip::kReplayable);
}

}  // namespace
}  // namespace iotwin::test
