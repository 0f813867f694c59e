// The model builder keeps no descriptor, flag or path state of its own: what F_SETFL and a
// renamed directory change reaches its ops through TraceState.
#include <fcntl.h>
#include <linux/close_range.h>

#include <string>

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

std::string OpPath(const model::TraceModel& m, const model::Op& op) {
  return op.path == model::kNone ? std::string("<none>") : m.path(op.path);
}

TEST(ModelTraceStateApi, RenamedDirectoryMovesDirfdsAndTheCwd) {
  TraceBuilder b;
  b.Openat(100, "/d/run", O_RDONLY | O_DIRECTORY, 3);
  b.PathOp(100, IOT_OP_CHDIR, "/d/run", 0);
  b.Path2Op(100, IOT_OP_RENAME, "/d/run", "/d/old");
  b.Openat(100, "x", O_RDONLY, 4, 10, 3);  // relative to the renamed dirfd
  b.Openat(100, "y", O_RDONLY, 5, 10);     // relative to the renamed cwd
  b.Read(100, 4, 1, 1);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto* t = FindThread(*m, 100);
  ASSERT_TRUE(t);
  ASSERT_EQ(t->ops.size(), 6u);
  EXPECT_EQ(OpPath(*m, t->ops[3]), "/d/old/x");
  EXPECT_EQ(OpPath(*m, t->ops[4]), "/d/old/y");
  EXPECT_EQ(OpPath(*m, t->ops[5]), "/d/old/x");
  EXPECT_EQ(t->ops[5].skip, Skip::kReplayable);
}

}  // namespace
}  // namespace iotwin::test
