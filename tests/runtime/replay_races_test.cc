// Two processes racing on shared names (mkdir, rmdir, O_CREAT|O_EXCL, unlink) and on one file's
// end (O_APPEND writes, lseek SEEK_END), recorded and replayed several times at full speed: every
// replayed result equals the recorded one. Which process wins each race is the scheduler's
// choice in the recording; the replay must keep it (ordering.h kPath and kSize, race_order.cc).
#include <regex>
#include <string>
#include <vector>

#include "replay_util.h"

namespace iotwin::test {
namespace {

TEST(ReplayRaces, RacingProcessesKeepTheirRecordedOutcomes) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir tmp;
  const std::string work = tmp / "work", trace = tmp / "races.iotwin";
  ASSERT_EQ(mkdir(work.c_str(), 0755), 0);
  RunResult rec =
      test::Run({IotwinBin(), "record", "-o", trace, "--", TestProg("io_races"), work, "200"}, 180);
  ASSERT_EQ(rec.exit_code, 0) << rec.err << rec.out;
  std::smatch won;
  const std::regex wins("mkdir won ([0-9]+)/([0-9]+) excl won ([0-9]+)/([0-9]+)");
  ASSERT_TRUE(std::regex_search(rec.out, won, wins)) << rec.out;
  // Both processes won some of each race: the order is the scheduler's, not the program's.
  EXPECT_GT(std::stoi(won[1]), 0) << rec.out;
  EXPECT_GT(std::stoi(won[2]), 0) << rec.out;
  EXPECT_GT(std::stoi(won[3]) + std::stoi(won[4]), 0) << rec.out;

  for (int i = 0; i < 3; i++) {
    const std::string root = tmp / ("root" + std::to_string(i));
    std::vector<std::string> args = {trace, "--root", root, "--pace", "fast", "--json", "-q"};
    const std::string recorded = tmp / "replay0.iotwin";
    if (i == 0) args.insert(args.end(), {"--record", recorded});
    auto r = RunReplayCmd(args, 180);
    ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
    EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u)
        << "replay " << i << ": " << r.summary["mismatches"].dump(2);
    // 200 rounds of 2 processes: mkdir, rmdir, open, unlink, write, lseek each.
    EXPECT_GE(J(r.summary, "/ops"), 2400u) << r.summary.dump(2).substr(0, 2000);
    if (i != 0) continue;
    // The recorded replay issues every call of each process, in order, with its result.
    RunResult cmp = test::Run({IotwinBin(), "compare", trace, recorded, "--json"}, 120);
    ASSERT_FALSE(cmp.out.empty()) << cmp.err;
    const nlohmann::json c = nlohmann::json::parse(cmp.out);
    EXPECT_TRUE(c["threads"]["exact"].get<bool>()) << c["threads"].dump(2);
    for (const auto& m : c["measures"]) {
      if (m["name"] == "seq-match") {
        EXPECT_EQ(m["value"].get<double>(), 1.0) << m.dump();
      }
    }
  }
}

}  // namespace
}  // namespace iotwin::test
