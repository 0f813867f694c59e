// The model builder keeps no descriptor, flag or path state of its own: what F_SETFL and a
// renamed directory change reaches its ops through TraceState.
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/mman.h>

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

TEST(ModelTraceStateApi, MappingsSplitCoverAndAreInheritedThroughTraceState) {
  TraceBuilder b;
  b.Openat(100, "/d/f", O_RDWR, 3, 1 << 20);
  b.Mmap(100, 3, 0, 3 * 4096, PROT_READ, MAP_SHARED, 0x10000);
  b.MemOp(100, IOT_OP_MUNMAP, 0x11000, 4096);  // leaves [0x10000, 0x11000) and [0x12000, 0x13000)
  b.Mmap(100, 3, 0x8000, 4096, PROT_READ, MAP_SHARED | MAP_FIXED, 0x12000);
  b.Fork(100, 200);
  b.MemOp(200, IOT_OP_MSYNC, 0x10000, 4096);
  b.MemOp(200, IOT_OP_MSYNC, 0x12000, 4096);
  b.MemOp(200, IOT_OP_MSYNC, 0x11000, 4096);
  b.MemOp(100, IOT_OP_MREMAP, 0x10000, 4096, 8192).ret = 0x40000;
  b.MemOp(100, IOT_OP_MSYNC, 0x40000 + 4096, 4096);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto* parent = FindThread(*m, 100);
  const auto* child = FindThread(*m, 200);
  ASSERT_TRUE(parent && child);
  ASSERT_EQ(parent->ops.size(), 7u);
  ASSERT_EQ(child->ops.size(), 3u);
  const uint32_t first = parent->ops[1].mapping;
  ASSERT_NE(first, model::kNone);
  EXPECT_EQ(parent->ops[2].mapping, first);  // munmap inside it
  EXPECT_EQ(parent->ops[3].fixed_in, first);  // MAP_FIXED over a piece the munmap left
  EXPECT_EQ(parent->ops[3].map_offset, 0x2000u);
  const uint32_t fixed = parent->ops[3].mapping;
  ASSERT_NE(fixed, model::kNone);
  EXPECT_NE(fixed, first);
  // The child's pieces are mappings of its own, copied from the parent's.
  const uint32_t c0 = child->ops[0].mapping, c1 = child->ops[1].mapping;
  ASSERT_NE(c0, model::kNone);
  ASSERT_NE(c1, model::kNone);
  EXPECT_EQ(m->mappings()[c0].inherited_from, first);
  EXPECT_EQ(m->mappings()[c1].inherited_from, fixed);
  EXPECT_EQ(m->mappings()[c0].start, 0x10000u);
  EXPECT_EQ(child->ops[2].skip, Skip::kUnknownMapping);  // the hole
  // mremap moves the first piece; the new mapping is found at its new address.
  ASSERT_EQ(parent->ops[5].extra_count, 1u);
  const uint32_t moved = static_cast<uint32_t>(m->ExtraBegin(parent->ops[5])[0]);
  EXPECT_EQ(parent->ops[6].mapping, moved);
  EXPECT_EQ(parent->ops[6].map_offset, 4096u);
}

}  // namespace
}  // namespace iotwin::test
