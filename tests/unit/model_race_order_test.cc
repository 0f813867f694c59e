// Calls whose outcome depends on which process comes first (a name's existence, a file's end)
// keep the recorded order across processes even when they overlapped in time, in the order
// their results show (ordering.h kPath and kSize, race_order.cc).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

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

// Whether op `op` of `tid` waits for at least the first `count` ops of `other`.
bool Waits(const model::TraceModel& m, uint32_t tid, size_t op, uint32_t other, uint32_t count) {
  for (const Dep& d : DepsOf(m, tid, op)) {
    if (d.thread == ThreadIndex(m, other) && d.count >= count) return true;
  }
  return false;
}

// Two processes whose calls overlap: each lasts 50 us, the second starts 10 us after the first.
TraceBuilder Racing() {
  TraceBuilder b;
  b.Thread(100, 100);
  b.Thread(200, 200);
  b.step = 10'000;
  b.dur = 50'000;
  return b;
}

TEST(ModelRaceOrder, OverlappingMkdirsFollowTheWinnerInStartOrder) {
  TraceBuilder b = Racing();
  b.PathOp(100, IOT_OP_MKDIR, "/d/x", 0);
  b.PathOp(200, IOT_OP_MKDIR, "/d/x", -EEXIST);
  auto m = BuildModel(b);
  EXPECT_TRUE(Waits(*m, 200, 0, 100, 1));
  EXPECT_TRUE(DepsOf(*m, 100, 0).empty());
}

TEST(ModelRaceOrder, TheMkdirThatGotZeroCameFirstWhateverItsStart) {
  TraceBuilder b = Racing();
  b.PathOp(100, IOT_OP_MKDIR, "/d/x", -EEXIST);  // entered first, took the lock second
  b.PathOp(200, IOT_OP_MKDIR, "/d/x", 0);
  auto m = BuildModel(b);
  EXPECT_TRUE(Waits(*m, 100, 0, 200, 1));
  EXPECT_TRUE(DepsOf(*m, 200, 0).empty());
}

TEST(ModelRaceOrder, RacingCallsStampedAlikeFollowTheirResults) {
  TraceBuilder b = Racing();
  b.dur = 1'000;
  b.Openat(200, "/d/f", O_WRONLY | O_CREAT | O_EXCL, 3);
  b.dur = 50'000;
  b.step = 0;  // both unlinks enter in the same nanosecond, the one that got ENOENT listed first
  b.PathOp(100, IOT_OP_UNLINK, "/d/f", -ENOENT);
  b.PathOp(200, IOT_OP_UNLINK, "/d/f", 0);
  auto m = BuildModel(b);
  EXPECT_TRUE(Waits(*m, 100, 0, 200, 2));
  EXPECT_FALSE(Waits(*m, 200, 1, 100, 1));
}

TEST(ModelRaceOrder, TheUnlinkThatGotZeroCameFirst) {
  TraceBuilder b = Racing();
  b.PathOp(100, IOT_OP_UNLINK, "/d/f", -ENOENT);
  b.PathOp(200, IOT_OP_UNLINK, "/d/f", 0);
  auto m = BuildModel(b);
  EXPECT_TRUE(Waits(*m, 100, 0, 200, 1));
  EXPECT_TRUE(DepsOf(*m, 200, 0).empty());
}

TEST(ModelRaceOrder, ExclusiveCreateRaceFollowsTheCreator) {
  TraceBuilder b = Racing();
  b.Openat(100, "/d/lock", O_WRONLY | O_CREAT | O_EXCL, -EEXIST);
  b.Openat(200, "/d/lock", O_WRONLY | O_CREAT | O_EXCL, 3);
  auto m = BuildModel(b);
  EXPECT_TRUE(Waits(*m, 100, 0, 200, 1));
  EXPECT_TRUE(DepsOf(*m, 200, 0).empty());
}

TEST(ModelRaceOrder, ALinkAndARenameOntoOneNameAreOrdered) {
  TraceBuilder b = Racing();
  b.Path2Op(100, IOT_OP_LINK, "/d/a", "/d/n", -EEXIST);
  b.Path2Op(200, IOT_OP_RENAME, "/d/b", "/d/n", 0);
  auto m = BuildModel(b);
  // Nothing before them says whether the name existed: start order, kept whatever the overlap.
  EXPECT_TRUE(Waits(*m, 200, 0, 100, 1));
}

TEST(ModelRaceOrder, ConsistentRacesKeepStartOrderAndChainsWork) {
  TraceBuilder b = Racing();
  b.PathOp(100, IOT_OP_MKDIR, "/d/x", 0);
  b.PathOp(200, IOT_OP_RMDIR, "/d/x", 0);
  b.PathOp(100, IOT_OP_RMDIR, "/d/x", -ENOENT);
  auto m = BuildModel(b);
  EXPECT_TRUE(Waits(*m, 200, 0, 100, 1));
  EXPECT_TRUE(Waits(*m, 100, 1, 200, 1));
}

TEST(ModelRaceOrder, DifferentNamesStayFree) {
  TraceBuilder b = Racing();
  b.PathOp(100, IOT_OP_MKDIR, "/d/x", 0);
  b.PathOp(200, IOT_OP_MKDIR, "/d/y", 0);
  b.PathOp(100, IOT_OP_UNLINK, "/d/f", 0);
  b.PathOp(200, IOT_OP_UNLINK, "/d/g", -ENOENT);
  auto m = BuildModel(b);
  EXPECT_EQ(m->stats().deps, 0u);
}

// O_APPEND descriptors of the same file in two processes.
void OpenLogs(TraceBuilder& b) {
  b.dur = 1'000;
  b.Openat(100, "/d/log", O_WRONLY | O_APPEND, 3);
  b.Openat(200, "/d/log", O_WRONLY | O_APPEND, 3);
  b.dur = 50'000;
}
iot_syscall& SizeCall(iot_syscall& sc, uint64_t fsize) {
  sc.ino = 777;
  sc.fsize = fsize;
  return sc;
}

TEST(ModelRaceOrder, SeekEndFollowsTheAppendWhoseSizeItSaw) {
  TraceBuilder b = Racing();
  OpenLogs(b);
  SizeCall(b.Lseek(200, 3, 0, SEEK_END, 100), 100);  // entered first, saw the append's 100
  SizeCall(b.Write(100, 3, 100, 100), 100);
  auto m = BuildModel(b);
  EXPECT_TRUE(Waits(*m, 200, 1, 100, 2));
  EXPECT_TRUE(DepsOf(*m, 100, 1).empty());
}

TEST(ModelRaceOrder, SeekEndWithAnOffsetSawTheSizeItWasAddedTo) {
  TraceBuilder b = Racing();
  OpenLogs(b);
  SizeCall(b.Lseek(200, 3, -40, SEEK_END, 60), 100);  // 100 - 40: after the append
  SizeCall(b.Write(100, 3, 100, 100), 100);
  auto m = BuildModel(b);
  EXPECT_TRUE(Waits(*m, 200, 1, 100, 2));
}

TEST(ModelRaceOrder, SeekEndBeforeTheAppendItDidNotSee) {
  TraceBuilder b = Racing();
  OpenLogs(b);
  SizeCall(b.Write(100, 3, 100, 100), 100);
  SizeCall(b.Lseek(200, 3, 0, SEEK_END, 0), 0);  // overlapped the append, saw the empty file
  auto m = BuildModel(b);
  EXPECT_TRUE(Waits(*m, 100, 1, 200, 2));
  EXPECT_TRUE(DepsOf(*m, 200, 1).empty());
}

TEST(ModelRaceOrder, AppendsInTheOrderOfTheirOffsets) {
  TraceBuilder b = Racing();
  OpenLogs(b);
  SizeCall(b.Write(100, 3, 100, 100), 200);  // wrote at 100: second
  SizeCall(b.Write(200, 3, 100, 100), 100);  // wrote at 0: first
  auto m = BuildModel(b);
  EXPECT_TRUE(Waits(*m, 100, 1, 200, 2));
  EXPECT_TRUE(DepsOf(*m, 200, 1).empty());
}

TEST(ModelRaceOrder, ExtendingPwritesOfTwoThreadsStayFree) {
  TraceBuilder b = Racing();
  b.Thread(100, 101);
  b.dur = 1'000;
  b.Openat(100, "/d/wal", O_RDWR, 3);
  b.dur = 50'000;
  for (uint64_t i = 0; i < 8; i++) {
    SizeCall(b.Pwrite(i % 2 ? 101 : 100, 3, i * 4096, 4096, 4096), (i + 1) * 4096);
  }
  auto m = BuildModel(b);
  // Disjoint ranges, each reaching the end: no reader of the size, so no edge but the open's.
  for (size_t k = 0; k < 4; k++) EXPECT_TRUE(DepsOf(*m, 100, 1 + k).empty()) << k;
  EXPECT_EQ(m->stats().deps, 1u);  // 101's first write after the open
}

TEST(ModelRaceOrder, OverlappingReadsAndWritesOfDisjointRangesStayFree) {
  TraceBuilder b = Racing();
  b.dur = 1'000;
  b.Openat(100, "/d/data", O_RDWR, 3, 1 << 20);
  b.Openat(200, "/d/data", O_RDWR, 3, 1 << 20);
  b.dur = 50'000;
  for (uint64_t i = 0; i < 8; i++) {
    SizeCall(b.Pwrite(100, 3, i * 8192, 4096, 4096), 1 << 20);
    SizeCall(b.Pread(200, 3, i * 8192 + 4096, 4096, 4096, 1 << 20), 1 << 20);
  }
  auto m = BuildModel(b);
  EXPECT_EQ(m->stats().deps, 0u);
}

}  // namespace
}  // namespace iotwin::test
