// iotwin record, syscall layer: the recorded call sequence of each thread equals what the test
// program logged it did, with exact arguments, results and file identities.
#include <sys/stat.h>

#include "record_check.h"

namespace iotwin::test {
namespace {

struct Recorded {
  RunResult run;
  LoadedTrace trace;
  std::vector<nlohmann::json> log;
};

// Runs `iotwin record -o DIR/trace.iotwin [extra] -- PROG LOG ARGS...` and loads both sides.
Recorded RecordProg(const TempDir& dir, const std::string& prog,
                    const std::vector<std::string>& prog_args,
                    const std::vector<std::string>& extra = {}) {
  Recorded r;
  std::string trace = dir / "trace.iotwin";
  std::string log = dir / "calls.log";
  std::vector<std::string> argv = {IotwinBin(), "record", "-o", trace};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("--");
  argv.push_back(TestProg(prog));
  argv.push_back(log);
  argv.insert(argv.end(), prog_args.begin(), prog_args.end());
  r.run = Run(argv, 120);
  r.trace = LoadTrace(trace);
  r.log = ReadLog(log);
  return r;
}

void ExpectCleanTrace(const Recorded& r) {
  EXPECT_EQ(r.run.exit_code, 0) << r.run.err;
  EXPECT_TRUE(r.trace.error.empty()) << r.trace.error;
  EXPECT_FALSE(r.trace.truncated);
  ASSERT_TRUE(r.trace.summary.has_value());
  EXPECT_EQ(LostInSummary(r.trace), 0u) << r.trace.summary->dump();
  EXPECT_EQ((*r.trace.summary)["stop_reason"], "command exited");
  EXPECT_FALSE(r.log.empty()) << "the test program logged nothing";
}

TEST(RecordSyscalls, SingleThreadMixMatchesTheProgramsLog) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  mkdir((dir / "work").c_str(), 0755);
  Recorded r = RecordProg(dir, "io_mix", {dir / "work"});
  ExpectCleanTrace(r);
  EXPECT_GT(r.log.size(), 50u);
  auto problems = CompareCalls(r.log, r.trace);
  EXPECT_TRUE(problems.empty()) << Join(problems);
}

TEST(RecordSyscalls, RecordsCarryTimesAndTheTracedProcess) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  mkdir((dir / "work").c_str(), 0755);
  Recorded r = RecordProg(dir, "io_mix", {dir / "work"});
  ExpectCleanTrace(r);
  ASSERT_FALSE(r.log.empty());
  uint32_t pid = r.log[0]["pid"].get<uint32_t>();
  auto calls = BracketedByTid(r.trace)[pid];
  ASSERT_FALSE(calls.empty());
  uint64_t prev = 0;
  for (const auto& c : calls) {
    EXPECT_EQ(c.sc.tgid, pid);
    EXPECT_GT(c.sc.ts, prev) << OpName(c.sc.op);  // one thread: strictly increasing enter times
    EXPECT_GT(c.sc.dur, 0u);
    EXPECT_LT(c.sc.dur, 10'000'000'000ull);
    prev = c.sc.ts + c.sc.dur;
  }
  // The root command's start, cwd and exec are recorded before its calls.
  bool start = false, cwd = false, exec = false;
  for (size_t i = 0; i < r.trace.procs.size(); i++) {
    const auto& p = r.trace.procs[i];
    if (p.tgid != pid) continue;
    start |= p.kind == IOT_PROC_START;
    cwd |= p.kind == IOT_PROC_CWD && !r.trace.proc_paths[i].empty();
    exec |= p.kind == IOT_PROC_EXEC && r.trace.proc_paths[i] == TestProg("io_mix");
  }
  EXPECT_TRUE(start);
  EXPECT_TRUE(cwd);
  EXPECT_TRUE(exec);
}

}  // namespace
}  // namespace iotwin::test
