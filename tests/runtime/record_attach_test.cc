// iotwin record with the attach fallbacks of the attach table (src/capture/attach_table.cc),
// forced with IOTWIN_ATTACH: the syscall, process, io_uring and sched programs attached as
// raw_tp, or the syscall programs as classic raw_syscalls tracepoints, record the same calls and
// requests as tp_btf, exactly as the test program logged them, and the trace header says how
// they were attached.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "record_check.h"

namespace iotwin::test {
namespace {

struct Recorded {
  RunResult run;
  LoadedTrace trace;
  std::vector<nlohmann::json> log;
};

// Records PROG LOG ARGS... in its own directory under `dir`, with `env` added.
Recorded RecordWith(const TempDir& dir, const std::string& name, const std::string& prog,
                    const std::vector<std::string>& env) {
  std::string sub = dir / name;
  mkdir(sub.c_str(), 0755);
  mkdir((sub + "/work").c_str(), 0755);
  std::vector<std::string> argv = {IotwinBin(),           "record",     "-o",
                                   sub + "/trace.iotwin", "--",         TestProg(prog),
                                   sub + "/calls.log",    sub + "/work"};
  Recorded r;
  r.run = Run(argv, 120, env);
  r.trace = LoadTrace(sub + "/trace.iotwin");
  r.log = ReadLog(sub + "/calls.log");
  return r;
}

void ExpectClean(const Recorded& r) {
  EXPECT_EQ(r.run.exit_code, 0) << r.run.err;
  EXPECT_TRUE(r.trace.error.empty()) << r.trace.error;
  ASSERT_TRUE(r.trace.summary.has_value());
  EXPECT_EQ(LostInSummary(r.trace), 0u) << r.trace.summary->dump();
  EXPECT_FALSE(r.log.empty()) << "the test program logged nothing";
  auto problems = CompareCalls(r.log, r.trace);
  EXPECT_TRUE(problems.empty()) << Join(problems);
}

std::string AttachKind(const LoadedTrace& t) {
  if (!t.meta.contains("capture")) return "";
  return t.meta["capture"].value("attach", "");
}

std::string LayerReason(const LoadedTrace& t, const char* layer) {
  if (!t.meta.contains("layers") || !t.meta["layers"].contains(layer)) return "";
  return t.meta["layers"][layer].value("reason", "");
}

// The operations the traced process made, in order.
std::vector<std::string> OpSequence(const LoadedTrace& t) {
  std::vector<std::string> ops;
  for (const auto& s : t.syscalls) ops.emplace_back(OpName(s.sc.op));
  return ops;
}

bool TracefsHasRawSyscalls() {
  return access("/sys/kernel/tracing/events/raw_syscalls/sys_enter/id", R_OK) == 0;
}

void ExpectSameCallsAsTpBtf(const char* method) {
  TempDir dir;
  Recorded btf = RecordWith(dir, "tp_btf", "io_mix", {});
  Recorded forced = RecordWith(dir, method, "io_mix", {std::string("IOTWIN_ATTACH=") + method});
  ExpectClean(btf);
  ExpectClean(forced);
  EXPECT_EQ(AttachKind(btf.trace), "tp_btf");
  EXPECT_EQ(AttachKind(forced.trace), method);
  EXPECT_EQ(LayerReason(forced.trace, "syscall").rfind(std::string(method) + " raw_syscalls", 0),
            0u)
      << LayerReason(forced.trace, "syscall");
  EXPECT_GT(btf.trace.syscalls.size(), 50u);
  EXPECT_EQ(OpSequence(forced.trace), OpSequence(btf.trace));
}

TEST(RecordAttach, RawTpRecordsTheSameCallsAsTpBtf) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  ExpectSameCallsAsTpBtf("raw_tp");
}

TEST(RecordAttach, ClassicTracepointRecordsTheSameCallsAsTpBtf) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  if (!TracefsHasRawSyscalls()) GTEST_SKIP() << "tracefs is not mounted at /sys/kernel/tracing";
  ExpectSameCallsAsTpBtf("tracepoint");
}

// The process programs have raw_tp variants too: fork, exec and exit are followed.
TEST(RecordAttach, RawTpFollowsForkExecAndExit) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  Recorded r = RecordWith(dir, "raw_tp", "io_fork_exec", {"IOTWIN_ATTACH=raw_tp"});
  ExpectClean(r);
  EXPECT_EQ(LayerReason(r.trace, "process").rfind("raw_tp ", 0), 0u)
      << LayerReason(r.trace, "process");
  ExpectForkExecExitOfIoForkExec(r.log, r.trace);
}

// What the io_uring programs recorded of each request, without addresses and times.
std::vector<std::tuple<int, int, int, uint64_t, uint64_t, uint64_t, int64_t>> UringRequests(
    const LoadedTrace& t) {
  std::vector<std::tuple<int, int, int, uint64_t, uint64_t, uint64_t, int64_t>> out;
  for (const auto& a : t.asyncs) {
    if (a.engine != IOT_AIO_ENGINE_URING) continue;
    out.emplace_back(a.phase, a.opcode, a.fd, a.user_data, a.offset, a.length, a.res);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The io_uring programs have raw_tp twins: the same requests, with the same fields; and the
// block and interference (sched) layers attach as raw_tp too.
TEST(RecordAttach, RawTpRecordsTheSameIoUringRequestsAndRunsTheBlockAndSchedLayers) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  Recorded btf = RecordWith(dir, "tp_btf", "io_uring_rw", {});
  if (btf.run.exit_code == 4) GTEST_SKIP() << "io_uring unavailable: " << btf.run.err;
  Recorded raw = RecordWith(dir, "raw_tp", "io_uring_rw", {"IOTWIN_ATTACH=raw_tp"});
  ASSERT_EQ(btf.run.exit_code, 0) << btf.run.err;
  ASSERT_EQ(raw.run.exit_code, 0) << raw.run.err;
  ASSERT_TRUE(raw.trace.meta["layers"]["async"]["enabled"].get<bool>())
      << raw.trace.meta["layers"]["async"].dump();
  auto btf_requests = UringRequests(btf.trace);
  EXPECT_EQ(btf_requests.size(), 16u);  // 8 submitted, 8 completed
  EXPECT_EQ(UringRequests(raw.trace), btf_requests);
  EXPECT_EQ(LayerReason(btf.trace, "sched").rfind("tp_btf ", 0), 0u)
      << LayerReason(btf.trace, "sched");
  EXPECT_EQ(LayerReason(raw.trace, "sched").rfind("raw_tp ", 0), 0u)
      << LayerReason(raw.trace, "sched");
  // The block programs too (the block runtime tests pass with IOTWIN_ATTACH=raw_tp exported).
  EXPECT_EQ(LayerReason(btf.trace, "block").rfind("tp_btf ", 0), 0u)
      << LayerReason(btf.trace, "block");
  EXPECT_EQ(LayerReason(raw.trace, "block").rfind("raw_tp ", 0), 0u)
      << LayerReason(raw.trace, "block");
}

TEST(RecordAttach, UnknownMethodIsRefused) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  RunResult r = test::Run({IotwinBin(), "record", "-o", dir / "t.iotwin", "--", "/bin/true"}, 60,
                          {"IOTWIN_ATTACH=kprobe"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("IOTWIN_ATTACH=kprobe"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace iotwin::test
