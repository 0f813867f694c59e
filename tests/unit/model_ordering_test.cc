// Cross-thread ordering dependencies (resource-oriented, ARTC-style).
#include <fcntl.h>

#include <gtest/gtest.h>

#include "model/ordering.h"
#include "model_test_util.h"

namespace iotwin::test {
namespace {

using model::Dep;

std::vector<Dep> DepsOf(const model::TraceModel& m, uint32_t tid, size_t op) {
  const auto* t = FindThread(m, tid);
  const auto& o = t->ops.at(op);
  return std::vector<Dep>(m.DepsBegin(o), m.DepsBegin(o) + o.dep_count);
}

TEST(ModelOrdering, CreateThenOpenInAnotherThreadIsOrdered) {
  TraceBuilder b;
  b.Thread(100, 101);
  b.Openat(100, "/d/f", O_WRONLY | O_CREAT | O_EXCL, 3);
  b.Openat(101, "/d/f", O_RDONLY, 4);
  auto m = BuildModel(b);
  auto d = DepsOf(*m, 101, 0);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].thread, ThreadIndex(*m, 100));
  EXPECT_EQ(d[0].count, 1u);
}

TEST(ModelOrdering, UnrelatedThreadsAreNotSerialised) {
  TraceBuilder b;
  b.Thread(100, 101);
  b.Openat(100, "/d/a", O_RDONLY, 3, 1 << 20);
  b.Openat(101, "/d/b", O_RDONLY, 4, 1 << 20);
  for (int i = 0; i < 10; i++) {
    b.Pread(100, 3, i * 4096, 4096, 4096);
    b.Pread(101, 4, i * 4096, 4096, 4096);
  }
  auto m = BuildModel(b);
  // Different paths under a common parent: only shared (lookup) uses of "/d", no edges.
  EXPECT_EQ(m->stats().deps, 0u);
}

TEST(ModelOrdering, SharedDescriptorCloseWaitsForOtherThreadsUses) {
  TraceBuilder b;
  b.Thread(100, 101);
  b.Thread(100, 102);
  b.Openat(100, "/d/a", O_RDONLY, 3, 1 << 20);
  b.Pread(101, 3, 0, 4096, 4096);
  b.Pread(102, 3, 4096, 4096, 4096);
  b.Close(100, 3);
  auto m = BuildModel(b);
  // Each reader waits for the open.
  EXPECT_EQ(DepsOf(*m, 101, 0).size(), 1u);
  EXPECT_EQ(DepsOf(*m, 102, 0).size(), 1u);
  // The close waits for both readers.
  auto d = DepsOf(*m, 100, 1);
  ASSERT_EQ(d.size(), 2u);
}

TEST(ModelOrdering, OverlappingWritesKeepOrderDisjointDoNot) {
  TraceBuilder b;
  b.Thread(100, 101);
  b.Openat(100, "/d/a", O_RDWR, 3, 1 << 20);
  b.Pwrite(100, 3, 0, 8192, 8192);
  b.Pwrite(101, 3, 4096, 4096, 4096);      // overlaps the first write
  b.Pwrite(101, 3, 1 << 19, 4096, 4096);   // disjoint
  b.Pread(100, 3, 1 << 19, 100, 100);      // reads what 101 wrote
  auto m = BuildModel(b);
  auto d1 = DepsOf(*m, 101, 0);
  ASSERT_EQ(d1.size(), 1u);
  EXPECT_EQ(d1[0].count, 2u);  // after 100's open and first write
  EXPECT_TRUE(DepsOf(*m, 101, 1).empty());  // already covered by the previous wait
  auto d3 = DepsOf(*m, 100, 2);
  ASSERT_EQ(d3.size(), 1u);
  EXPECT_EQ(d3[0].thread, ThreadIndex(*m, 101));
  EXPECT_EQ(d3[0].count, 2u);
}

TEST(ModelOrdering, OpsOverlappingInTimeAreLeftFree) {
  TraceBuilder b;
  b.Thread(100, 101);
  b.Openat(100, "/d/a", O_RDWR, 3, 1 << 20);
  b.step = 1000;
  auto& w = b.Pwrite(100, 3, 0, 4096, 4096);
  w.dur = 50'000;  // still running when 101's write starts
  b.Pwrite(101, 3, 0, 4096, 4096);
  auto m = BuildModel(b);
  auto d = DepsOf(*m, 101, 0);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].count, 1u);  // only the open, not the concurrent write
}

TEST(ModelOrdering, RenameUnlinkChainAcrossThreads) {
  TraceBuilder b;
  b.Thread(100, 101);
  b.Thread(100, 102);
  b.Openat(100, "/c/tmp", O_WRONLY | O_CREAT | O_EXCL, 3);
  b.Close(100, 3);
  b.Path2Op(101, IOT_OP_RENAME, "/c/tmp", "/c/final");
  b.PathOp(102, IOT_OP_UNLINK, "/c/final", 0);
  auto m = BuildModel(b);
  auto d1 = DepsOf(*m, 101, 0);
  ASSERT_EQ(d1.size(), 1u);
  EXPECT_EQ(d1[0].thread, ThreadIndex(*m, 100));
  auto d2 = DepsOf(*m, 102, 0);
  ASSERT_EQ(d2.size(), 1u);
  EXPECT_EQ(d2[0].thread, ThreadIndex(*m, 101));
}

TEST(ModelOrdering, DirectoryCreationOrdersChildren) {
  TraceBuilder b;
  b.Thread(100, 101);
  b.PathOp(100, IOT_OP_MKDIR, "/o/run1", 0);
  b.Openat(101, "/o/run1/x", O_WRONLY | O_CREAT, 3);
  auto m = BuildModel(b);
  auto d = DepsOf(*m, 101, 0);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].thread, ThreadIndex(*m, 100));
}

TEST(ModelOrdering, DependenciesPointBackwardsOnly) {
  // A random-ish multi-thread trace: every dependency must refer to an op that started earlier.
  TraceBuilder b;
  for (uint32_t t = 0; t < 4; t++) b.Thread(100, 100 + t);
  b.Openat(100, "/d/a", O_RDWR | O_CREAT, 3);
  uint32_t x = 12345;
  for (int i = 0; i < 400; i++) {
    x = x * 1103515245 + 12345;
    uint32_t tid = 100 + (x >> 8) % 4;
    uint64_t off = ((x >> 12) % 16) * 4096;
    if ((x >> 20) % 3 == 0) b.Pwrite(tid, 3, off, 4096, 4096);
    else b.Pread(tid, 3, off, 4096, 4096);
  }
  auto m = BuildModel(b);
  ASSERT_GT(m->stats().deps, 0u);
  for (uint32_t ti = 0; ti < m->threads().size(); ti++) {
    for (const auto& op : m->threads()[ti].ops) {
      for (uint32_t k = 0; k < op.dep_count; k++) {
        const Dep& d = m->DepsBegin(op)[k];
        ASSERT_NE(d.thread, ti);
        const auto& awaited = m->threads()[d.thread].ops.at(d.count - 1);
        EXPECT_LE(awaited.end, op.ts);
      }
    }
  }
}

TEST(ModelOrderingTracker, ReductionDropsImpliedWaits) {
  model::DependencyTracker t;
  std::vector<Dep> out;
  const uint64_t r = model::ResourceKey(model::ResourceTag::kPath, 1);
  t.Begin(0, 0, 0, 10);
  t.Write(r);
  EXPECT_EQ(t.End(&out), 0u);
  t.Begin(1, 0, 20, 30);
  t.Read(r);
  EXPECT_EQ(t.End(&out), 1u);
  t.Begin(1, 1, 40, 50);
  t.Read(r);  // same writer, already awaited
  EXPECT_EQ(t.End(&out), 0u);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].thread, 0u);
  EXPECT_EQ(out[0].count, 1u);
}

}  // namespace
}  // namespace iotwin::test
