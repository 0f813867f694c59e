// Sockets as far as they touch files, recorded and replayed (tests/progs/io_sockets.cc): an
// AF_UNIX bind to a path makes a socket file, which the replay makes too, so the program's later
// stat and unlink of it replay with their recorded results; a descriptor passed over a Unix
// socket (SCM_RIGHTS) is known in the receiver, whose reads, fstat and mmap of it replay.
#include <sys/stat.h>

#include "record_check.h"
#include "model/trace_model.h"
#include "replay_util.h"

namespace iotwin::test {
namespace {

TEST(RecordSockets, UnixBindMakesASocketFileTheReplayMakesToo) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string work = dir / "work";
  mkdir(work.c_str(), 0755);
  std::string trace = dir / "trace.iotwin", log = dir / "calls.log";
  RunResult rec = test::Run(
      {IotwinBin(), "record", "-o", trace, "--", TestProg("io_sockets"), log, work, "bind"}, 120);
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  std::vector<nlohmann::json> calls = ReadLog(log);
  ASSERT_EQ(calls.size(), 8u);
  // The binds to paths are in the trace with their paths as passed (the one without a NUL cut at
  // its address length) and results; the abstract name's is not.
  auto problems = CompareCalls(calls, t);
  EXPECT_TRUE(problems.empty()) << Join(problems);

  auto m = model::LoadTraceModel(trace);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  size_t binds = 0;
  for (const auto& th : m.value()->threads()) {
    for (const auto& op : th.ops) {
      if (op.kind != model::OpKind::kSyscall || op.sc.op != IOT_OP_BIND) continue;
      binds++;
      EXPECT_EQ(op.skip, model::Skip::kReplayable);
    }
  }
  EXPECT_EQ(binds, 3u);

  // Replayed by confined workers, then by workers that cannot be confined (nested --map
  // prefixes keep them out of a chroot, and their calls go through the sandbox): the socket
  // files are made, so the stats and unlinks that follow find them, and the second bind to a
  // taken name fails as recorded.
  for (bool confined : {true, false}) {
    SCOPED_TRACE(confined ? "confined workers" : "unconfined workers");
    std::vector<std::string> args = {trace, "--root", dir / (confined ? "root" : "root2"),
                                     "--json", "-q"};
    if (!confined) {
      for (std::string m : {"/m=" + (dir / "m"), "/m/n=" + (dir / "n")}) {
        args.push_back("--map");
        args.push_back(m);
      }
    }
    auto r = RunReplayCmd(args, 120);
    ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
    EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
    EXPECT_EQ(J(r.summary, "/per_op/bind/count"), 3u) << r.summary["per_op"].dump(2);
    EXPECT_EQ(J(r.summary, "/per_op/unlinkat/count"), 2u) << r.summary["per_op"].dump(2);
  }
}

TEST(RecordSockets, DescriptorPassedBySCMRightsIsReplayedInTheReceiver) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  std::string work = dir / "work";
  mkdir(work.c_str(), 0755);
  std::string trace = dir / "trace.iotwin", log = dir / "calls.log";
  RunResult rec = test::Run(
      {IotwinBin(), "record", "-o", trace, "--", TestProg("io_sockets"), log, work, "pass"}, 120);
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  std::vector<nlohmann::json> calls = ReadLog(log);
  ASSERT_EQ(calls.size(), 9u);
  auto problems = CompareCalls(calls, t);  // recvmsg: recorded, as it received a descriptor
  EXPECT_TRUE(problems.empty()) << Join(problems);
  int received = -1;
  uint32_t child = 0;
  for (const auto& c : calls) {
    if (c["op"] == "pread64") {
      received = c["fd"].get<int>();
      child = c["tid"].get<uint32_t>();
    }
  }
  ASSERT_GE(received, 0);

  // The model: the receiver's descriptor is an open of the sender's file, and what the receiver
  // does with it is replayable.
  auto m = model::LoadTraceModel(trace);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  size_t replayable = 0, opens = 0;
  for (const auto& th : m.value()->threads()) {
    if (th.tid != child) continue;
    for (const auto& op : th.ops) {
      if (op.kind != model::OpKind::kSyscall) continue;
      // The first open returning the number (the log's own open of its file comes later).
      if (op.sc.op == IOT_OP_OPENAT && op.result == received && opens++ == 0) {
        EXPECT_EQ(op.skip, model::Skip::kReplayable);
        ASSERT_NE(op.path, model::kNone);
        EXPECT_EQ(m.value()->path(op.path), work + "/passed.dat");
      }
      const bool on_it = op.sc.fd == received && (op.sc.op == IOT_OP_PREAD64 ||
                                                   op.sc.op == IOT_OP_FSTAT ||
                                                   op.sc.op == IOT_OP_MMAP);
      if (on_it) {
        EXPECT_EQ(op.skip, model::Skip::kReplayable) << OpName(op.sc.op);
        replayable++;
      }
    }
  }
  EXPECT_EQ(replayable, 3u);
  EXPECT_GE(opens, 1u);

  // Replayed (as recorded, and as fast as it goes): every result as recorded, the receiver's
  // pread64 reading the bytes the sender wrote.
  for (const char* pace : {"original", "fast"}) {
    SCOPED_TRACE(pace);
    auto r = RunReplayCmd({trace, "--root", dir / (std::string("root-") + pace), "--pace", pace,
                           "--json", "-q"}, 120);
    ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
    EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
    const nlohmann::json& skipped = r.summary["skipped"]["by_reason"];
    for (const char* op : {"pread64", "fstat", "munmap"}) {
      for (const auto& [reason, ops] : skipped.items()) {
        EXPECT_FALSE(ops.contains(op)) << reason << " " << ops.dump();
      }
    }
    EXPECT_GE(J(r.summary, "/per_op/pread64/bytes"), 4096u) << r.summary["per_op"].dump(2);
  }
}

}  // namespace
}  // namespace iotwin::test
