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

#include "../unit/trace_builder.h"
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

// Runs `replay ARGS` in the background, sends `sig` after 3 s (a loaded machine may take a
// second or two to load the trace and prepare the sandbox), and waits; the replay's exit status
// lands in DIR/rc and its output in DIR/out.
RunResult ReplayAndSignal(const TempDir& dir, const std::string& args, const std::string& sig) {
  const std::string script = "\"" + IotwinBin() + "\" replay " + args + " > " + dir / "out" +
                             " 2> " + dir / "err" + " & p=$!; sleep 3; kill -" + sig +
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
  // The --record tracer's start and stop take seconds of their own on a loaded machine.
  EXPECT_LT(seconds, 9.0) << "the replay did not stop at the signal";
  const nlohmann::json j = nlohmann::json::parse(ReadAll(dir / "out"), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << ReadAll(dir / "out");
  // The replay itself ran about 3 s of the 6 s trace.
  EXPECT_LT(j.value("duration_s", 99.0), 4.5) << "the replay did not stop at the signal";
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

// A device-level replay (--layer block) stops at a signal too, within its 100 ms sleep slices,
// with the summary saying why: two reads recorded 8 s apart, SIGINT after 3 s.
TEST(ReplayInterrupt, SigintStopsABlockReplayBetweenDistantRequests) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for losetup";
  TempDir dir;
  const std::string image = dir / "disk.img";
  ASSERT_EQ(test::Run({"/usr/bin/truncate", "-s", "16M", image}, 30).exit_code, 0);
  const RunResult loop = test::Run({"/usr/sbin/losetup", "-f", "--show", image}, 30);
  ASSERT_EQ(loop.exit_code, 0) << loop.err;
  const std::string dev = loop.out.substr(0, loop.out.find('\n'));
  TraceBuilder b;
  b.meta()["layers"] = {{"syscall", {{"enabled", false}}}, {"block", {{"enabled", true}}}};
  b.step = 4'000'000'000;  // 4 s between records: the second read is due 8 s after the first
  for (uint64_t rq = 1; rq <= 2; rq++) {
    b.Block(IOT_BLK_ISSUE, rq * 8, 4096, IOT_BLKF_READ, rq);
    b.Block(IOT_BLK_COMPLETE, rq * 8, 4096, IOT_BLKF_READ, rq);
  }
  const std::string trace = dir / "block.iotwin";
  ASSERT_TRUE(b.WriteFile(trace).ok());
  const auto t0 = std::chrono::steady_clock::now();
  const RunResult r = ReplayAndSignal(
      dir, trace + " --layer block --device " + dev + " --allow-device --pace original --json",
      "INT");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  test::Run({"/usr/sbin/losetup", "-d", dev}, 30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadAll(dir / "rc"), "1\n") << ReadAll(dir / "err");
  EXPECT_LT(seconds, 6.0) << "the replay did not stop at the signal";
  const nlohmann::json j = nlohmann::json::parse(ReadAll(dir / "out"), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << ReadAll(dir / "out") << ReadAll(dir / "err");
  EXPECT_EQ(j.value("aborted", ""), "interrupted by SIGINT");
  EXPECT_EQ(j["per_op"]["block_read"].value("count", 0), 1);
}

}  // namespace
}  // namespace iotwin::test
