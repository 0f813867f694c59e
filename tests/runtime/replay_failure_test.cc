// A replay that cannot perform what the trace holds stops with an error that names the op, its
// recorded arguments, the thread and the place in the trace, in the text summary and in --json,
// exits non-zero, and still writes --json and --record whole.
#include <fcntl.h>

#include <cstdio>
#include <string>

#include "model/trace_model.h"
#include "replay_util.h"

namespace iotwin::test {
namespace {

// A libaio context of 1,048,576 events, which a machine with a larger fs.aio-max-nr than this
// one's (65536 by default) gave the recorded program: the replay's io_setup is refused. Before,
// its 16 requests were skipped ("async_engine") and the replay passed.
TraceBuilder HugeAioContextTrace() {
  TraceBuilder b;
  b.Openat(100, "/a/data", O_RDWR, 3, 1 << 20);
  auto& setup = b.Syscall(100, IOT_OP_IO_SETUP, 0);
  setup.length = 1 << 20;  // nr_events
  setup.aux = 0x7000;      // the context
  const uint64_t t = b.now();
  auto& sub = b.Syscall(100, IOT_OP_IO_SUBMIT, 16);
  sub.aux = 0x7000;
  sub.length = 16;
  sub.dur = 20'000;
  for (int i = 0; i < 16; i++) {
    b.SetTime(t + 100 + i * 100);
    b.Async(100, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_SUBMIT, 0 /*IOCB_CMD_PREAD*/, 0x7000,
            0x5000 + i * 64, 3, i * 65536, 65536);
  }
  b.SetTime(t + 30'000);
  auto& get = b.Syscall(100, IOT_OP_IO_GETEVENTS, 16);
  get.aux = 16;  // min_nr
  get.length = 16;
  get.dur = 500'000;
  for (int i = 0; i < 16; i++) {
    b.SetTime(t + 100'000 + i * 20'000);
    b.Async(100, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_COMPLETE, 0, 0x7000, 0x5000 + i * 64, 3, 0,
            65536, 65536);
  }
  b.SetTime(t + 700'000);
  b.Close(100, 3);
  return b;
}

TEST(ReplayFailure, AContextTheBackEndCannotSetUpStopsTheReplayNamingTheOp) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir tmp;
  const std::string trace = WriteTrace(HugeAioContextTrace(), tmp / "t.iotwin");
  const std::string rec = tmp / "replay.iotwin";
  auto r = RunReplayCmd({trace, "--root", tmp / "root", "--pace", "fast", "--json", "-q",
                         "--record", rec});
  EXPECT_EQ(r.run.exit_code, 1) << r.run.err << r.run.out;
  ASSERT_TRUE(r.summary.is_object()) << r.run.out << r.run.err;
  ASSERT_TRUE(r.summary.contains("failure")) << r.summary.dump(2);
  const auto& f = r.summary["failure"];
  std::printf("failure: %s\n", f.dump().c_str());
  EXPECT_EQ(f.value("op", ""), "io_setup") << f.dump(2);
  EXPECT_EQ(f.value("recorded_tid", 0u), 100u);
  EXPECT_EQ(f.value("worker", 99u), 0u);
  EXPECT_EQ(f.value("op_index", 99u), 1u);  // after the openat
  EXPECT_GT(f.value("ts_ns", 0u), 0u);
  EXPECT_NE(f.value("args", "").find("length 1048576"), std::string::npos) << f.dump(2);
  EXPECT_NE(f.value("error", "").find("io_setup"), std::string::npos) << f.dump(2);
  EXPECT_NE(r.summary.value("aborted", "").find("failed: io_setup"), std::string::npos)
      << r.summary.dump(2);
  // The recording of what ran is whole.
  ASSERT_TRUE(r.summary["record"].value("ok", false)) << r.summary["record"].dump();
  auto replayed = model::LoadTraceModel(rec);
  EXPECT_TRUE(replayed.ok()) << replayed.status().ToString();
  // The text summary says it too.
  auto text = RunReplayCmd({trace, "--root", tmp / "root2", "--pace", "fast"});
  EXPECT_EQ(text.run.exit_code, 1);
  EXPECT_NE(text.run.out.find("stopped: failed: io_setup"), std::string::npos) << text.run.out;
}

// A thread wakes the ring's reaper with an IORING_OP_NOP at shutdown (MariaDB's tpool), its fd
// 0 (mariadbd's /dev/null, or never opened): the NOP names no file and must be replayed, or the
// reaper's last recorded wait has nothing to wait for. Before, it was skipped (unknown_fd,
// pseudo_fs).
TEST(ReplayAsyncNop, ARingNopIsReplayedWhateverItsFd) {
  TempDir tmp;
  TraceBuilder b;
  b.meta()["layers"]["async"] = {{"enabled", true}};
  b.Syscall(100, IOT_OP_IO_URING_SETUP, 4).length = 8;
  const uint64_t t = b.now();
  auto& enter = b.Syscall(100, IOT_OP_IO_URING_ENTER, 1);
  enter.fd = 4;
  enter.aux = 1;    // to_submit
  enter.mode = 1;   // min_complete
  enter.flags = 1;  // IORING_ENTER_GETEVENTS
  enter.dur = 50'000;
  b.SetTime(t + 1000);
  b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, 0 /*IORING_OP_NOP*/, 0xabc, 1, 0, 0, 0);
  b.SetTime(t + 20'000);
  b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE, 0, 0xabc, 1, 0, 0, 0, 0);
  b.SetTime(t + 100'000);
  const std::string trace = WriteTrace(b, tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--root", tmp / "root", "--pace", "fast", "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  EXPECT_EQ(J(r.summary, "/skipped/total"), 0u) << r.summary["skipped"].dump();
  EXPECT_EQ(J(r.summary, "/per_op/uring:nop/count"), 1u) << r.summary["per_op"].dump();
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
}

}  // namespace
}  // namespace iotwin::test
