// iotwin replay's pacing options on a synthetic trace: --rt-priority puts the replay threads in
// SCHED_FIFO (root) and the replay still reproduces the trace; invalid values are refused;
// without the option the threads stay in the normal class.
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
