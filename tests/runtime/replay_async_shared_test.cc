// One asynchronous context shared by a process's threads (tests/progs/io_uring_shared.cc):
// several threads submit to one io_uring ring under a mutex while another reaps every
// completion, and two threads io_submit to one libaio context while a third io_getevents.
// Recorded, then replayed in every pace with --record: the replay must finish (a hang fails
// the run's timeout), match every result, set up one ring / context as the original did, and
// make every asynchronous system call on the thread that made it in the original.
#include <map>
#include <string>
#include <tuple>

#include "model/trace_model.h"
#include "replay_util.h"

namespace iotwin::test {
namespace {

bool IsAsyncCall(uint16_t op) {
  return op == IOT_OP_IO_URING_SETUP || op == IOT_OP_IO_URING_ENTER || op == IOT_OP_IO_SETUP ||
         op == IOT_OP_IO_SUBMIT || op == IOT_OP_IO_GETEVENTS || op == IOT_OP_IO_DESTROY;
}

// (tid, op name) -> calls, for the asynchronous calls of a trace.
using CallCounts = std::map<std::pair<uint32_t, std::string>, uint64_t>;

CallCounts CountAsyncCalls(const std::string& trace) {
  CallCounts counts;
  auto m = model::LoadTraceModel(trace);
  EXPECT_TRUE(m.ok()) << trace << ": " << m.status().ToString();
  if (!m.ok()) return counts;
  for (const auto& th : m.value()->threads()) {
    for (const auto& op : th.ops) {
      if (op.kind == model::OpKind::kSyscall && IsAsyncCall(op.sc.op)) {
        counts[{th.tid, std::string(OpName(op.sc.op))}]++;
      }
    }
  }
  return counts;
}

// Records `io_uring_shared DIR mode`, replays it in each pace with --record, and compares the
// asynchronous calls thread by thread (recorded tid -> the worker that replayed it).
void RecordAndReplayEveryPace(const std::string& mode, const std::string& expect_call) {
  TempDir dir;
  const std::string work = dir / "work", trace = dir / "orig.iotwin";
  ASSERT_EQ(mkdir(work.c_str(), 0755), 0);
  RunResult rec = Run({IotwinBin(), "record", "-o", trace, "--", TestProg("io_uring_shared"),
                       work, mode},
                      120);
  ASSERT_EQ(rec.exit_code, 0) << rec.err << rec.out;
  const CallCounts original = CountAsyncCalls(trace);
  uint64_t expected_calls = 0;
  for (const auto& [key, n] : original) expected_calls += key.second == expect_call ? n : 0;
  ASSERT_GT(expected_calls, 0u) << "the recording holds no " << expect_call;

  for (const std::string pace : {"fast", "gaps", "original"}) {
    SCOPED_TRACE("--pace " + pace);
    const std::string root = dir / ("root-" + pace), replayed = dir / ("replay-" + pace);
    // A hang is killed by the timeout and fails here.
    auto r = RunReplayCmd({trace, "--root", root, "--pace", pace, "--record", replayed, "--json",
                           "-q"},
                          90);
    ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
    EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
    ASSERT_TRUE(r.summary["record"]["ok"].get<bool>()) << r.summary["record"].dump();
    std::map<uint32_t, uint32_t> worker_of;
    for (const auto& t : r.summary["thread_map"]) {
      worker_of[t["recorded_tid"].get<uint32_t>()] = t["worker_tid"].get<uint32_t>();
    }
    const CallCounts live = CountAsyncCalls(replayed);
    CallCounts expect;
    for (const auto& [key, n] : original) {
      ASSERT_TRUE(worker_of.count(key.first)) << "no worker for thread " << key.first;
      expect[{worker_of[key.first], key.second}] = n;
    }
    EXPECT_EQ(live, expect);
  }
}

// Three threads submit to one ring, a fourth reaps every completion (io_uring_wait_cqe):
// one io_uring_setup, and each thread's io_uring_enter calls, the reaper's waits included.
TEST(ReplayAsyncShared, RingSharedByThreadsWithACrossThreadReaper) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  RecordAndReplayEveryPace("uring", "io_uring_enter");
}

// Two threads io_submit to one libaio context, a third io_getevents for all of them, and the
// main thread io_destroy's it after joining them.
TEST(ReplayAsyncShared, LibaioContextSharedByThreadsWithACrossThreadReaper) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  RecordAndReplayEveryPace("libaio", "io_getevents");
}

}  // namespace
}  // namespace iotwin::test
