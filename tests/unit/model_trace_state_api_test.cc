// The model builder keeps no descriptor, flag or path state of its own: what F_SETFL and a
// renamed directory change reaches its ops through TraceState.
#include <fcntl.h>
#include <linux/close_range.h>

#include <gtest/gtest.h>

#include "model_test_util.h"

namespace iotwin::test {
namespace {

using model::Skip;

TEST(ModelTraceStateApi, SetflAppendMovesWritesToTheEnd) {
  TraceBuilder b;
  b.Openat(100, "/d/log", O_WRONLY, 3, 5000);
  b.Fcntl(100, 3, F_SETFL, O_APPEND, 0);
  b.Write(100, 3, 100, 100).fsize = 5100;
  b.Fcntl(100, 3, F_SETFL, 0, 0);
  b.Write(100, 3, 10, 10).fsize = 5100;
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto* t = FindThread(*m, 100);
  ASSERT_TRUE(t);
  ASSERT_EQ(t->ops.size(), 5u);
  EXPECT_EQ(t->ops[2].pos, 5000u);  // O_APPEND: at the end
  EXPECT_EQ(t->ops[4].pos, 5100u);  // the position the append write left
}

}  // namespace
}  // namespace iotwin::test
