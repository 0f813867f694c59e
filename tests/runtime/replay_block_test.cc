// Device-level replay (--layer block) onto a loop device backed by a file in /var/tmp.
// Needs root for losetup (no BPF).
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "block_loop.h"
#include "replay_util.h"

namespace iotwin::test {
namespace {

TraceBuilder BlockTrace(int n) {
  TraceBuilder b;
  b.meta()["layers"] = {{"syscall", {{"enabled", false}}}, {"block", {{"enabled", true}}}};
  uint64_t rq = 1;
  for (int i = 0; i < n; i++) {
    bool write = i % 3 == 0;
    uint64_t sector = (static_cast<uint64_t>(i) * 2654435761u % 1024) * 8;  // 4 KiB aligned
    b.Block(IOT_BLK_ISSUE, sector, 4096, write ? IOT_BLKF_WRITE : IOT_BLKF_READ, rq);
    b.Block(IOT_BLK_COMPLETE, sector, 4096, write ? IOT_BLKF_WRITE : IOT_BLKF_READ, rq);
    rq++;
  }
  // A flush, and a write at a known place to check on the device afterwards.
  b.Block(IOT_BLK_ISSUE, 0, 0, IOT_BLKF_WRITE | IOT_BLKF_PREFLUSH | IOT_BLKF_FLUSH, rq);
  b.Block(IOT_BLK_COMPLETE, 0, 0, IOT_BLKF_WRITE | IOT_BLKF_FLUSH, rq++);
  b.Block(IOT_BLK_ISSUE, 16384, 8192, IOT_BLKF_WRITE | IOT_BLKF_FUA, rq);
  b.Block(IOT_BLK_COMPLETE, 16384, 8192, IOT_BLKF_WRITE, rq++);
  return b;
}

TEST(ReplayBlock, ReplaysTheRequestStreamOntoALoopDevice) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for losetup";
  RawLoop loop(16 << 20);
  ASSERT_FALSE(loop.dev().empty());
  TempDir tmp;
  std::string trace = WriteTrace(BlockTrace(90), tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--layer", "block", "--device", loop.dev(), "--allow-device",
                         "--pace", "fast", "--json", "-q", "--device-offset", "1048576"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err << r.run.out;
  EXPECT_EQ(J(r.summary, "/requests"), 92u);
  EXPECT_EQ(J(r.summary, "/per_op/block_read/count"), 60u) << r.summary.dump(2);
  EXPECT_EQ(J(r.summary, "/per_op/block_write/count"), 31u);
  EXPECT_EQ(J(r.summary, "/per_op/block_flush/count"), 1u);
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u);
  // The FUA write at sector 16384 landed at 16384*512 + 1 MiB with the (random) fill.
  std::ifstream img(loop.image(), std::ios::binary);
  img.seekg(16384 * 512 + (1 << 20));
  std::string data(8192, '\0');
  img.read(data.data(), data.size());
  EXPECT_NE(data, std::string(8192, '\0'));
  // Nothing before the device offset was touched.
  img.seekg(0);
  std::string head(1 << 20, '\0');
  img.read(head.data(), head.size());
  EXPECT_EQ(head, std::string(1 << 20, '\0'));
}

TEST(ReplayBlock, OriginalPacingKeepsTheRecordedTimes) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for losetup";
  RawLoop loop(16 << 20);
  ASSERT_FALSE(loop.dev().empty());
  TempDir tmp;
  TraceBuilder b = BlockTrace(0);
  b.step = 1'000'000;  // 1 ms between records: 2 ms per request
  for (int i = 0; i < 40; i++) {
    b.Block(IOT_BLK_ISSUE, i * 8, 4096, IOT_BLKF_READ, 100 + i);
    b.Block(IOT_BLK_COMPLETE, i * 8, 4096, IOT_BLKF_READ, 100 + i);
  }
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--layer", "block", "--device", loop.dev(), "--allow-device",
                         "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  double secs = r.summary["duration_s"].get<double>();
  EXPECT_GE(secs, 0.078);  // the ~78 ms between first and last issue, never less
  EXPECT_EQ(J(r.summary, "/schedule_error_ns/count"), 42u);
}

// Original pacing issues each request at its time even when the target is slower than the
// recorded device: an 8 MiB FUA write recorded as done within 50 us, then 4 KiB reads every
// 100 us each recorded alone in flight. The loop device takes longer for the write (a
// synchronous write-through of 8 MiB), so the reads find it still in flight: they go deeper
// than recorded instead of waiting for it (none is held for the recorded queue depth).
TEST(ReplayBlock, OriginalPacingDoesNotWaitForTheRecordedQueueDepth) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for losetup";
  RawLoop loop(32 << 20);
  ASSERT_FALSE(loop.dev().empty());
  TempDir tmp;
  TraceBuilder b = BlockTrace(0);
  b.step = 50'000;
  b.Block(IOT_BLK_ISSUE, 16384, 8 << 20, IOT_BLKF_WRITE | IOT_BLKF_FUA, 1);
  b.Block(IOT_BLK_COMPLETE, 16384, 8 << 20, IOT_BLKF_WRITE, 1);
  for (int i = 0; i < 20; i++) {
    b.Block(IOT_BLK_ISSUE, i * 8, 4096, IOT_BLKF_READ, 10 + i);
    b.Block(IOT_BLK_COMPLETE, i * 8, 4096, IOT_BLKF_READ, 10 + i);
  }
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--layer", "block", "--device", loop.dev(), "--allow-device",
                         "--pace", "original", "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  const uint64_t scheduled = J(r.summary, "/schedule_error_ns/count");
  EXPECT_EQ(scheduled, 23u) << r.summary.dump(2);  // BlockTrace(0)'s flush and write too
  EXPECT_EQ(J(r.summary, "/schedule_error_ns/held_by_queue_depth/count"), 0u);
  EXPECT_EQ(J(r.summary, "/schedule_error_ns/not_held/count"), scheduled);
  EXPECT_GE(J(r.summary, "/deeper_than_recorded"), 1u) << r.summary.dump(2);
  EXPECT_TRUE(r.summary["registered_buffers"].get<bool>());
}

TEST(ReplayBlock, RefusesWithoutPermissionTooSmallOrMounted) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for losetup";
  TempDir tmp;
  std::string trace = WriteTrace(BlockTrace(30), tmp / "t.iotwin");
  RawLoop small(1 << 20);  // the trace reaches ~4 MiB
  ASSERT_FALSE(small.dev().empty());
  auto no_allow = RunReplayCmd({trace, "--layer", "block", "--device", small.dev(), "-q"});
  EXPECT_EQ(no_allow.run.exit_code, 2);
  EXPECT_NE(no_allow.run.err.find("--allow-device"), std::string::npos) << no_allow.run.err;
  auto too_small = RunReplayCmd({trace, "--layer", "block", "--device", small.dev(),
                                 "--allow-device", "-q"});
  EXPECT_EQ(too_small.run.exit_code, 2);
  EXPECT_NE(too_small.run.err.find("--wrap"), std::string::npos) << too_small.run.err;
  auto wrapped = RunReplayCmd({trace, "--layer", "block", "--device", small.dev(),
                               "--allow-device", "--wrap", "--pace", "fast", "--json", "-q"});
  EXPECT_EQ(wrapped.run.exit_code, 0) << wrapped.run.err;
  EXPECT_EQ(J(wrapped.summary, "/mismatches/total"), 0u);

  RawLoop mounted(32 << 20);
  ASSERT_FALSE(mounted.dev().empty());
  ASSERT_FALSE(mounted.Mount().empty());
  auto m = RunReplayCmd({trace, "--layer", "block", "--device", mounted.dev(), "--allow-device",
                         "-q"});
  EXPECT_EQ(m.run.exit_code, 2);
  EXPECT_NE(m.run.err.find("mounted"), std::string::npos) << m.run.err;
  // A regular file is not a block device.
  auto f = RunReplayCmd({trace, "--layer", "block", "--device", trace, "--allow-device", "-q"});
  EXPECT_EQ(f.run.exit_code, 2);
}

}  // namespace
}  // namespace iotwin::test
