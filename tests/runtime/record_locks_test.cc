// File locks and descriptor flags, recorded and replayed: every fcntl lock (POSIX and open file
// description), F_GETFD/F_SETFD/F_GETFL and flock(2) call of tests/progs/io_locks.cc is in the
// trace with its struct flock, and the replay reproduces every result, the contended lock of
// the child process included (refused, then waited for until the parent's unlock).
#include <sys/stat.h>

#include <set>

#include "record_check.h"
#include "model/op_fields.h"
#include "model/trace_model.h"
#include "replay_util.h"

namespace iotwin::test {
namespace {

TEST(RecordLocks, EveryLockAndFlagCallIsRecordedAndReplayedWithoutMismatch) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string work = dir / "work";
  mkdir(work.c_str(), 0755);
  std::string trace = dir / "trace.iotwin", log = dir / "calls.log";
  RunResult rec =
      test::Run({IotwinBin(), "record", "-o", trace, "--", TestProg("io_locks"), log, work}, 120);
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  EXPECT_EQ(LostInSummary(t), 0u);
  std::vector<nlohmann::json> calls = ReadLog(log);
  ASSERT_FALSE(calls.empty());

  // Both processes' calls, field by field.
  auto problems = CompareCalls(calls, t);
  EXPECT_TRUE(problems.empty()) << Join(problems);
  std::set<uint32_t> pids;
  size_t locks = 0, flocks = 0, refused = 0;
  for (const auto& c : calls) {
    pids.insert(c["pid"].get<uint32_t>());
    std::string op = c["op"].get<std::string>();
    if (op == "flock") flocks++;
    if (op == "fcntl" && c.contains("offset")) locks++;
    if (op == "fcntl" && c["ret"].get<int64_t>() < 0) refused++;
  }
  EXPECT_EQ(pids.size(), 2u);
  EXPECT_EQ(locks, 11u);
  EXPECT_EQ(flocks, 4u);
  EXPECT_EQ(refused, 1u);  // the child's F_SETLK while the parent held the range

  // Replayed: every lock replayable, every result as recorded.
  std::string root = dir / "root";
  auto r = RunReplayCmd({trace, "--root", root, "--json", "-q"}, 120);
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
  ASSERT_TRUE(r.summary.contains("per_op")) << r.run.out;
  EXPECT_EQ(J(r.summary, "/per_op/flock/count"), 4u) << r.summary["per_op"].dump(2);
  EXPECT_GE(J(r.summary, "/per_op/fcntl/count"), 15u) << r.summary["per_op"].dump(2);

  // As fast as it goes, only the model's lock ordering keeps the parent's unlock after the
  // child's refused attempt, and the parent's last lock after the child's unlock.
  auto fast = RunReplayCmd({trace, "--root", dir / "root-fast", "--pace", "fast", "--json", "-q"},
                           120);
  ASSERT_EQ(fast.run.exit_code, 0) << fast.run.err << fast.run.out;
  EXPECT_EQ(J(fast.summary, "/mismatches/total"), 0u) << fast.summary["mismatches"].dump(2);

  // Recorded, the replay holds the workload's unlocks and none of its own: the release of a
  // closed descriptor's locks (POSIX locks replayed as OFD locks) stays out of the recording.
  // (Lock attempts that wait are replayed as non-blocking tries until they succeed, so their
  // count may differ.)
  std::string rep = dir / "replay.iotwin";
  auto recorded = RunReplayCmd({trace, "--root", dir / "root-rec", "--pace", "fast", "--record",
                                rep, "--json", "-q"}, 180);
  ASSERT_EQ(recorded.run.exit_code, 0) << recorded.run.err << recorded.run.out;
  auto count_unlocks = [](const std::string& path, bool replayable_only) {
    auto m = model::LoadTraceModel(path);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    size_t n = 0;
    if (!m.ok()) return n;
    for (const auto& th : m.value()->threads()) {
      for (const auto& op : th.ops) {
        if (op.kind != model::OpKind::kSyscall || op.sc.op != IOT_OP_FCNTL) continue;
        if (!model::FcntlIsLock(model::FcntlCmd(op.sc)) || op.sc.flags != F_UNLCK) continue;
        if (!replayable_only || op.skip == model::Skip::kReplayable) n++;
      }
    }
    return n;
  };
  EXPECT_EQ(count_unlocks(rep, false), count_unlocks(trace, true));
}

}  // namespace
}  // namespace iotwin::test
