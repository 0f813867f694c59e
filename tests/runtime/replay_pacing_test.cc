// iotwin replay's pacing options on a synthetic trace: --rt-priority puts the replay threads in
// SCHED_FIFO (root) and the replay still reproduces the trace; invalid values are refused;
// without the option the threads stay in the normal class. Gaps pacing counts a late thread's
// first gap from its creation, so that waiting for another thread's calls is taken out of it.
// Schedule accuracy itself is measured by bench/replay/replay_bench.cc, not asserted here.
#include <fcntl.h>
#include <sched.h>

#include <cerrno>
#include <cstring>

#include "replay_util.h"

namespace iotwin::test {
namespace {

// 200 preads of 4 KiB, 100 us apart (10k ops/s), on a pre-existing 1 MiB file.
std::string TenThousandPerSecond(const TempDir& tmp) {
  TraceBuilder b;
  b.Thread(100, 100);
  b.Openat(100, "/data/f.bin", O_RDONLY, 3, 1 << 20);
  for (int i = 0; i < 200; i++) {
    b.Pread(100, 3, (i % 256) * 4096, 4096, 4096, 1 << 20);
    b.Advance(90'000);
  }
  b.Close(100, 3);
  return WriteTrace(b, tmp / "t.iotwin");
}

// Whether this process may enter SCHED_FIFO (root without real-time bandwidth in its cgroup may
// not); restores the normal policy.
bool CanRunFifo() {
  sched_param p{};
  p.sched_priority = 1;
  if (sched_setscheduler(0, SCHED_FIFO, &p) != 0) return false;
  p.sched_priority = 0;
  sched_setscheduler(0, SCHED_OTHER, &p);
  return true;
}

// A thread created at the start whose first call, 1 s later, is an fdatasync of the file the main
// thread appends 4 KiB to every 100 ms (its last write at 0.9 s): the fdatasync depends on those
// writes. Recorded span 1.0 s.
std::string LateSyncer(const TempDir& tmp) {
  TraceBuilder b;
  b.Thread(100, 100);
  b.Openat(100, "/data/f.bin", O_WRONLY | O_CREAT | O_TRUNC, 3);
  const uint64_t created = b.now();
  b.NewThread(100, 101);
  for (int i = 0; i < 9; i++) {
    b.Advance(100'000'000);
    b.Write(100, 3, 4096, 4096);
  }
  b.SetTime(created + 1'000'000'000);
  b.Syscall(101, IOT_OP_FDATASYNC, 0).fd = 3;
  b.Close(100, 3);
  return WriteTrace(b, tmp / "late.iotwin");
}

// Gaps pacing measures a thread's first gap from its creation point; the time its first call
// waits for the main thread's writes is part of that gap. Counted from the end of that wait
// instead, the 1 s gap was slept again: a 1.9 s replay. Margins are wide (a loaded machine).
TEST(ReplayPacing, GapsCountsALateThreadsFirstGapFromItsCreation) {
  TempDir tmp;
  std::string trace = LateSyncer(tmp);
  for (const char* pace : {"original", "gaps"}) {
    auto r = RunReplayCmd({trace, "--root", tmp / (std::string("root-") + pace), "--pace", pace,
                           "--json", "-q"});
    ASSERT_EQ(r.run.exit_code, 0) << pace << ": " << r.run.err << r.run.out;
    EXPECT_EQ(r.summary["mismatches"]["total"].get<int>(), 0) << pace << ": " << r.summary.dump();
    const double window = r.summary["window_s"].get<double>();
    EXPECT_GT(window, 0.95) << pace;
    EXPECT_LT(window, 1.4) << pace << ": the syncer's first gap was slept after its wait";
  }
}

TEST(ReplayPacing, RtPriorityReplaysTheTraceUnderSchedFifo) {
  if (!CanRunFifo()) GTEST_SKIP() << "SCHED_FIFO not permitted here: " << strerror(errno);
  TempDir tmp;
  std::string trace = TenThousandPerSecond(tmp);
  auto r = RunReplayCmd({trace, "--root", tmp / "root", "--pace", "original", "--rt-priority",
                         "1", "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  ASSERT_TRUE(r.summary.is_object()) << r.run.out;
  EXPECT_EQ(r.summary["rt_priority"].get<int>(), 1);
  // The worker's own view of its policy, not an echo of the option.
  EXPECT_EQ(r.summary["fifo_threads"].get<int>(), 1) << r.summary.dump();
  EXPECT_EQ(r.summary["mismatches"]["total"].get<int>(), 0) << r.summary.dump();
  EXPECT_EQ(r.summary["schedule_error_ns"]["count"].get<int>(), 202) << r.summary.dump();
}

TEST(ReplayPacing, WithoutRtPriorityTheThreadsStayInTheNormalClass) {
  TempDir tmp;
  std::string trace = TenThousandPerSecond(tmp);
  auto r = RunReplayCmd({trace, "--root", tmp / "root", "--pace", "fast", "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  EXPECT_EQ(r.summary["fifo_threads"].get<int>(), 0) << r.summary.dump();
}

TEST(ReplayPacing, RtPriorityOutOfRangeIsRefused) {
  TempDir tmp;
  std::string trace = TenThousandPerSecond(tmp);
  for (const char* bad : {"0", "100", "-1"}) {
    auto r = RunReplayCmd({trace, "--root", tmp / "root", "--rt-priority", bad});
    EXPECT_EQ(r.run.exit_code, 2) << bad << ": " << r.run.err;
    EXPECT_NE(r.run.err.find("--rt-priority"), std::string::npos) << r.run.err;
  }
}

}  // namespace
}  // namespace iotwin::test
