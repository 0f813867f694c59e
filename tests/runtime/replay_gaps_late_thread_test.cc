// gaps pacing of a thread that starts after the trace: its first gap runs from its creation.
#include <string>

#include "replay_util.h"

namespace iotwin::test {
namespace {

// gaps pacing: a thread created at the start whose first call (1 s later) depends on the main
// thread's writes (tests/progs/late_thread_sync.cc) runs its recorded gap from its creation;
// before, the gap was slept again after the wait for those writes (1.9 s instead of 1.0 s).
TEST(ReplayGapsLateThread, FirstGapRunsFromTheThreadsCreation) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  const std::string trace = dir / "late.iotwin";
  RunResult rec = test::Run({IotwinBin(), "record", "-o", trace, "--no-status", "--",
                             TestProg("late_thread_sync"), dir / "f"},
                            120);
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  auto r = RunReplayCmd({trace, "--root", dir / "root", "--pace", "gaps", "--json", "-q"}, 120);
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  const double window = r.summary["window_s"].get<double>();
  EXPECT_GT(window, 0.9);
  EXPECT_LT(window, 1.5) << "the late thread's first gap was slept after its dependency wait";
}

}  // namespace
}  // namespace iotwin::test
