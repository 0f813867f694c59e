// Ops that unmap memory implicitly (the last thread's exit, an exec, a MAP_FIXED mmap replacing
// part of a mapping) follow the other threads' faults on what they unmap: the replay unmaps at
// those points, and a fault replayed after them would touch nothing (EFAULT).
#include <fcntl.h>
#include <sys/mman.h>

#include <gtest/gtest.h>

#include "model_test_util.h"

namespace iotwin::test {
namespace {

constexpr uint64_t kBase = 0x7f0000000000;

// The highest op count of thread `tid` that op `op` of thread `waiter` waits for (0: none).
uint32_t AwaitedCount(const model::TraceModel& m, uint32_t waiter, size_t op, uint32_t tid) {
  const auto& o = FindThread(m, waiter)->ops.at(op);
  uint32_t count = 0;
  for (uint32_t k = 0; k < o.dep_count; k++) {
    const model::Dep& d = m.DepsBegin(o)[k];
    if (d.thread == ThreadIndex(m, tid)) count = std::max(count, d.count);
  }
  return count;
}

// Process 100 maps a library; thread 101 is started, then 100 faults on the mapping and exits;
// 101 exits last, which unmaps the process.
TraceBuilder LibraryFaultBeforeLastExit() {
  TraceBuilder b;
  b.Openat(100, "/lib/libx.so", O_RDONLY | O_CLOEXEC, 3, 1 << 20);
  b.Mmap(100, 3, 0, 1 << 20, PROT_READ | PROT_EXEC, MAP_PRIVATE, kBase);
  b.NewThread(100, 101);
  b.Pread(101, 3, 0, 4096, 4096);
  b.Fault(100, kBase + 0x5000, false, 5);  // op 3 of thread 100
  b.Exit(100, false);
  return b;
}

TEST(ModelUnmapOrdering, LastThreadExitWaitsForOtherThreadsFaults) {
  TraceBuilder b = LibraryFaultBeforeLastExit();
  b.Exit(101, false);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto* t101 = FindThread(*m, 101);
  ASSERT_EQ(t101->ops.size(), 2u);
  ASSERT_EQ(t101->ops[1].kind, model::OpKind::kExit);
  ASSERT_TRUE(t101->ops[1].process_exit);
  ASSERT_EQ(FindThread(*m, 100)->ops.at(3).kind, model::OpKind::kPageFault);
  EXPECT_GE(AwaitedCount(*m, 101, 1, 100), 4u);
}

TEST(ModelUnmapOrdering, ExecWaitsForOtherThreadsFaults) {
  TraceBuilder b;
  b.Openat(100, "/lib/libx.so", O_RDONLY | O_CLOEXEC, 3, 1 << 20);
  b.Mmap(100, 3, 0, 1 << 20, PROT_READ | PROT_EXEC, MAP_PRIVATE, kBase);
  b.NewThread(100, 101);
  b.Pread(101, 3, 0, 4096, 4096);
  b.Fault(100, kBase + 0x5000, false, 5);  // op 3 of thread 100
  b.Exec(101, "/bin/next");
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto* t101 = FindThread(*m, 101);
  ASSERT_EQ(t101->ops.at(1).kind, model::OpKind::kExec);
  EXPECT_GE(AwaitedCount(*m, 101, 1, 100), 4u);
}

TEST(ModelUnmapOrdering, FixedMapInsideMappingWaitsForOtherThreadsFaults) {
  TraceBuilder b;
  b.Openat(100, "/lib/libx.so", O_RDONLY | O_CLOEXEC, 3, 1 << 20);
  b.Mmap(100, 3, 0, 1 << 20, PROT_READ, MAP_PRIVATE, kBase);
  b.NewThread(100, 101);
  b.Pread(101, 3, 0, 4096, 4096);
  b.Fault(100, kBase + 0x5000, false, 5);  // op 3 of thread 100
  b.Mmap(101, 3, 0x4000, 0x4000, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, kBase + 0x4000);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto& remap = FindThread(*m, 101)->ops.at(1);
  ASSERT_NE(remap.fixed_in, model::kNone);
  EXPECT_GE(AwaitedCount(*m, 101, 1, 100), 4u);
}

}  // namespace
}  // namespace iotwin::test
