// A thread that only reaps an io_uring ring (MariaDB's: io_uring_enter(to_submit 0,
// min_complete 1, GETEVENTS)) while other threads submit to it: each of its waits is ordered
// after the requests the other threads had submitted to the ring when the wait began, so that a
// replay without pacing does not run the reaper ahead of its submitters, into waits for requests
// that come seconds later (which the replay then gives up as wait_timed_out).
#include <fcntl.h>

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "model_test_util.h"

namespace iotwin::test {
namespace {

constexpr uint8_t kRead = 22;  // IORING_OP_READ

iot_syscall& Enter(TraceBuilder& b, uint32_t tid, uint32_t to_submit, uint32_t flags) {
  auto& enter = b.Syscall(tid, IOT_OP_IO_URING_ENTER, to_submit);
  enter.fd = 5;
  enter.aux = to_submit;
  enter.mode = flags ? 1 : 0;  // min_complete
  enter.flags = flags;
  return enter;
}

// The dependency count of the reaper's (tid 102) `nth` io_uring_enter on thread `on`: how many
// of that thread's ops must be done first (0: none).
uint32_t WaitDependsOn(const model::TraceModel& m, int nth, uint32_t on) {
  const model::Thread* reaper = FindThread(m, 102);
  EXPECT_NE(reaper, nullptr);
  if (!reaper) return 0;
  const uint32_t on_index = ThreadIndex(m, on);
  int seen = 0;
  for (const auto& op : reaper->ops) {
    if (op.kind != model::OpKind::kSyscall || op.sc.op != IOT_OP_IO_URING_ENTER) continue;
    if (seen++ != nth) continue;
    uint32_t count = 0;
    for (uint32_t k = 0; k < op.dep_count; k++) {
      const model::Dep& d = m.DepsBegin(op)[k];
      if (d.thread == on_index) count = std::max(count, d.count);
    }
    return count;
  }
  ADD_FAILURE() << "no io_uring_enter #" << nth << " on the reaper";
  return 0;
}

// Main (100) sets the ring up, 101 submits two reads (one per call), 102 waits between them
// and after them.
TEST(ModelUringWaitOrder, AReapersWaitFollowsTheSubmissionsBeforeIt) {
  TraceBuilder b;
  b.Syscall(100, IOT_OP_IO_URING_SETUP, 5).length = 64;
  b.Openat(100, "/d/ibdata1", O_RDONLY | O_DIRECT, 3, 1 << 20);
  b.NewThread(100, 101);
  b.NewThread(100, 102);
  Enter(b, 102, 0, 1);  // a wait before any request: nothing to follow
  b.Async(101, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, kRead, 9, 1, 3, 0, 4096);
  Enter(b, 101, 1, 0);
  b.Async(101, IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE, kRead, 9, 1, 3, 0, 4096, 4096);
  Enter(b, 102, 0, 1);  // after the first request
  b.Async(101, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, kRead, 9, 2, 3, 4096, 4096);
  Enter(b, 101, 1, 0);
  Enter(b, 102, 0, 1);  // after the second
  b.Async(101, IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE, kRead, 9, 2, 3, 4096, 4096, 4096);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const model::Thread* submitter = FindThread(*m, 101);
  ASSERT_NE(submitter, nullptr);
  std::vector<uint32_t> requests;  // op indices of 101's requests
  for (uint32_t i = 0; i < submitter->ops.size(); i++) {
    if (submitter->ops[i].kind == model::OpKind::kAsyncSubmit) requests.push_back(i);
  }
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(WaitDependsOn(*m, 0, 101), 0u);
  EXPECT_GE(WaitDependsOn(*m, 1, 101), requests[0] + 1);
  EXPECT_LT(WaitDependsOn(*m, 1, 101), requests[1] + 1);
  EXPECT_GE(WaitDependsOn(*m, 2, 101), requests[1] + 1);
}

}  // namespace
}  // namespace iotwin::test
