// iotwin record, syscall layer: the recorded call sequence of each thread equals what the test
// program logged it did, with exact arguments, results and file identities.
#include <sys/stat.h>

#include <filesystem>
#include <set>

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

TEST(RecordSyscalls, ThreadsEachMatchTheirOwnSequence) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  Recorded r = RecordProg(dir, "io_threads", {dir.path(), "4"});
  ExpectCleanTrace(r);
  std::set<uint32_t> tids;
  for (const auto& e : r.log) tids.insert(e["tid"].get<uint32_t>());
  EXPECT_EQ(tids.size(), 4u);
  auto problems = CompareCalls(r.log, r.trace);
  EXPECT_TRUE(problems.empty()) << Join(problems);
  // Each new thread was reported as such, in the traced process.
  size_t threads = 0;
  for (const auto& p : r.trace.procs) {
    if (p.kind == IOT_PROC_THREAD && tids.count(p.child_tid)) {
      threads++;
      EXPECT_EQ(p.child_tgid, r.log[0]["pid"].get<uint32_t>());
      EXPECT_NE(p.clone_flags & 0x10000, 0u);  // CLONE_THREAD
      EXPECT_NE(p.clone_flags & 0x400, 0u);    // CLONE_FILES
    }
  }
  EXPECT_EQ(threads, 4u);
}

TEST(RecordSyscalls, ForkAndExecAreFollowed) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  Recorded r = RecordProg(dir, "io_fork_exec", {dir.path()});
  ExpectCleanTrace(r);
  auto problems = CompareCalls(r.log, r.trace);
  EXPECT_TRUE(problems.empty()) << Join(problems);
  ExpectForkExecExitOfIoForkExec(r.log, r.trace);
}

TEST(RecordSyscalls, DescriptorDuplication) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  Recorded r = RecordProg(dir, "io_dup", {dir.path()});
  ExpectCleanTrace(r);
  auto problems = CompareCalls(r.log, r.trace);
  EXPECT_TRUE(problems.empty()) << Join(problems);
  // Every copy resolves to the file the original opened.
  auto calls = BracketedByTid(r.trace)[r.log[0]["tid"].get<uint32_t>()];
  ASSERT_FALSE(calls.empty());
  uint64_t ino = calls[0].sc.ino;
  EXPECT_NE(ino, 0u);
  for (const auto& c : calls) {
    if (c.sc.op == IOT_OP_WRITE) {
      EXPECT_EQ(c.sc.ino, ino);
    }
  }
}

TEST(RecordSyscalls, DirectIo) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  Recorded r = RecordProg(dir, "io_direct", {dir.path()});
  if (r.run.exit_code == 4) GTEST_SKIP() << "no O_DIRECT on " << dir.path();
  ExpectCleanTrace(r);
  auto problems = CompareCalls(r.log, r.trace);
  EXPECT_TRUE(problems.empty()) << Join(problems);
}

TEST(RecordSyscalls, VectoredCallsWithRwfFlags) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  Recorded r = RecordProg(dir, "io_rwf", {dir.path()});
  ExpectCleanTrace(r);
  auto problems = CompareCalls(r.log, r.trace);
  EXPECT_TRUE(problems.empty()) << Join(problems);
}

TEST(RecordSyscalls, RelativePathsAndDirectoryDescriptors) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  Recorded r = RecordProg(dir, "io_relpaths", {dir.path()});
  ExpectCleanTrace(r);
  auto problems = CompareCalls(r.log, r.trace);
  EXPECT_TRUE(problems.empty()) << Join(problems);
  // The cwd the command started in is recorded, so relative paths can be resolved.
  std::error_code ec;
  std::string cwd = std::filesystem::current_path(ec).string();
  bool found = false;
  for (size_t i = 0; i < r.trace.procs.size(); i++) {
    if (r.trace.procs[i].kind == IOT_PROC_CWD) {
      found = true;
      EXPECT_EQ(r.trace.proc_paths[i], cwd);
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace iotwin::test
