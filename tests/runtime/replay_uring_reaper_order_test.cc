// A thread that only reaps an io_uring ring, waiting briefly for requests another thread
// submits only after seconds of synchronous writes (tests/progs/io_uring_late_submitter.cc, the
// pattern of MariaDB's reaping thread and its page cleaner). Replayed without pacing, the
// reaper has nothing to wait for but the submissions: its wait must follow the submitter's first
// request (the model orders it after the requests submitted before it began), not run ahead
// and give up as wait_timed_out after 1 s.
#include <algorithm>
#include <cstdint>
#include <string>

#include "model/trace_model.h"
#include "replay_util.h"

namespace iotwin::test {
namespace {

TEST(ReplayUringReaperOrder, AReapersWaitFollowsALateSubmitterWithoutPacing) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  const std::string work = dir / "work", trace = dir / "orig.iotwin", replayed = dir / "r.iotwin";
  ASSERT_EQ(mkdir(work.c_str(), 0755), 0);
  RunResult rec = test::Run({IotwinBin(), "record", "-o", trace, "--",
                             TestProg("io_uring_late_submitter"), work, "3"},
                            120);
  ASSERT_EQ(rec.exit_code, 0) << rec.err << rec.out;
  auto r = RunReplayCmd({trace, "--root", dir / "root", "--pace", "fast", "--record", replayed,
                         "--json", "-q"},
                        120);
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
  // The replay's first waiting io_uring_enter comes after its first request.
  auto m = model::LoadTraceModel(replayed);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  uint64_t first_wait = UINT64_MAX, first_request = UINT64_MAX;
  for (const auto& th : m.value()->threads()) {
    for (const auto& op : th.ops) {
      if (op.kind == model::OpKind::kAsyncSubmit) first_request = std::min(first_request, op.ts);
      if (op.kind == model::OpKind::kSyscall && op.sc.op == IOT_OP_IO_URING_ENTER &&
          (op.sc.flags & 1 /*GETEVENTS*/)) {
        first_wait = std::min(first_wait, op.ts);
      }
    }
  }
  ASSERT_NE(first_request, UINT64_MAX) << "the replay submitted no request";
  ASSERT_NE(first_wait, UINT64_MAX) << "the replay made no waiting io_uring_enter";
  EXPECT_GT(first_wait, first_request) << "the reaper waited before any request was submitted";
}

}  // namespace
}  // namespace iotwin::test
