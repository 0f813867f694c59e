// A signal stops a replay cleanly: the summary and --json are whole and say why, the --record
// trace is whole, and nothing the replay wrote meanwhile is left beside them.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "record_check.h"
#include "runtime_util.h"

namespace iotwin::test {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A 6 s trace: a shell appending a line a second.
std::string RecordSlowTrace(const TempDir& dir) {
  const std::string trace = dir / "slow.iotwin";
  const RunResult rec =
      Run({IotwinBin(), "record", "-o", trace, "--no-status", "--", "/bin/sh", "-c",
           "for i in 1 2 3 4 5 6; do echo x >> " + dir / "f" + "; sleep 1; done"},
          60);
  EXPECT_EQ(rec.exit_code, 0) << rec.err;
  return trace;
}

// Runs `replay ARGS` in the background, sends `sig` after 2 s, and waits; the replay's exit
// status lands in DIR/rc and its output in DIR/out.
RunResult ReplayAndSignal(const TempDir& dir, const std::string& args, const std::string& sig) {
  const std::string script = "\"" + IotwinBin() + "\" replay " + args + " > " + dir / "out" +
                             " 2> " + dir / "err" + " & p=$!; sleep 2; kill -" + sig +
                             " $p; wait $p; echo $? > " + dir / "rc";
  return Run({"/bin/sh", "-c", script}, 60);
}

// Names in `dir` other than `keep`.
std::vector<std::string> Leftovers(const std::string& dir, const std::set<std::string>& keep) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!keep.count(name)) out.push_back(name);
  }
  return out;
}

TEST(ReplayInterrupt, SigtermLeavesWholeJsonAndRecordAndNoTemporaries) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  const std::string trace = RecordSlowTrace(dir);
  const std::string out_dir = dir / "outputs";
  std::filesystem::create_directory(out_dir);
  const std::string rec = out_dir + "/replay.iotwin";
  const auto t0 = std::chrono::steady_clock::now();
  const RunResult r = ReplayAndSignal(
      dir, trace + " --root " + dir / "root" + " --pace original --json --record " + rec, "TERM");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadAll(dir / "rc"), "1\n") << ReadAll(dir / "err");
  EXPECT_LT(seconds, 5.0) << "the replay did not stop at the signal";
  const nlohmann::json j = nlohmann::json::parse(ReadAll(dir / "out"), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << ReadAll(dir / "out");
  EXPECT_EQ(j.value("aborted", ""), "interrupted by SIGTERM");
  EXPECT_EQ(j["record"].value("ok", false), true);
  const LoadedTrace replayed = LoadTrace(rec);
  EXPECT_TRUE(replayed.error.empty()) << replayed.error;
  EXPECT_FALSE(replayed.truncated);
  EXPECT_GT(replayed.syscalls.size(), 0u);
  EXPECT_EQ(Leftovers(out_dir, {"replay.iotwin"}), std::vector<std::string>{});
}

TEST(ReplayInterrupt, SighupStopsATextReplayThatSaysWhy) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  const std::string trace = RecordSlowTrace(dir);
  const RunResult r =
      ReplayAndSignal(dir, trace + " --root " + dir / "root" + " --pace original", "HUP");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadAll(dir / "rc"), "1\n") << ReadAll(dir / "err");
  EXPECT_NE(ReadAll(dir / "out").find("interrupted by SIGHUP"), std::string::npos)
      << ReadAll(dir / "out");
}

}  // namespace
}  // namespace iotwin::test
