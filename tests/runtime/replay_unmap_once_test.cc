// A replay never unmaps memory it no longer owns. ld.so unmaps its cache with the exact, not
// page-rounded, size (munmap(p, 60179) of a 61440-byte mapping) and places its segments with
// MAP_FIXED inside a reservation; a replay that kept the first's address, or unmapped a segment
// again after its reservation, unmapped at a process's exit whatever the kernel had put at the
// freed address since: another process's fork copy of libc (page touches then fail: `fault`
// mismatches), or the replay's own io_uring ring (SIGSEGV).
#include <string>

#include "replay_util.h"

namespace iotwin::test {
namespace {

TEST(ReplayUnmapOnce, ShortProcessesLeaveNoFaultsInAnyPace) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  const std::string trace = dir / "fork.iotwin";
  const std::string script = "for i in $(seq 1 30); do x=$(echo hi | grep -c h); /bin/true; done";
  RunResult rec = test::Run(
      {IotwinBin(), "record", "-o", trace, "--no-status", "--", "/bin/sh", "-c", script}, 120);
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  for (const std::string pace : {"fast", "gaps"}) {
    SCOPED_TRACE("--pace " + pace);
    auto r = RunReplayCmd(
        {trace, "--root", dir / ("root-" + pace), "--pace", pace, "--json", "-q"}, 120);
    ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
    EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
  }
}

}  // namespace
}  // namespace iotwin::test
