// Replay of mmap page touches, io_uring and libaio requests, on synthetic traces (no BPF).
#include <fcntl.h>
#include <sys/mman.h>

#include "replay_util.h"

namespace iotwin::test {
namespace {

constexpr uint64_t kBase = 0x7f1200000000ull;

TEST(ReplayMemory, MappingsAndFaultsReplay) {
  TempDir tmp;
  TraceBuilder b;
  b.meta()["layers"]["memory"] = {{"enabled", true}};
  b.Openat(100, "/m/weights.bin", O_RDWR, 3, 4 << 20);
  b.Mmap(100, 3, 0, 4 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, kBase);
  b.Close(100, 3);  // the mapping outlives the descriptor
  for (int i = 0; i < 64; i++) b.Fault(100, kBase + i * 7 * 4096 % (4 << 20) + 123, i % 4 == 0, i * 7 % 1024);
  b.MemOp(100, IOT_OP_MADVISE, kBase, 1 << 20, MADV_SEQUENTIAL);
  b.MemOp(100, IOT_OP_MSYNC, kBase, 4 << 20, 0, MS_SYNC);
  b.MemOp(100, IOT_OP_MUNMAP, kBase, 4 << 20);
  // A second, private read-only mapping at an offset, touched by another thread.
  b.Thread(100, 101);
  b.NewThread(100, 101);
  b.Openat(101, "/m/weights.bin", O_RDONLY, 4, 4 << 20);
  b.Mmap(101, 4, 1 << 20, 1 << 20, PROT_READ, MAP_PRIVATE, kBase + (8 << 20));
  for (int i = 0; i < 16; i++) b.Fault(101, kBase + (8 << 20) + i * 4096, false, 256 + i);
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--root", tmp / "root", "--pace", "fast", "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
  EXPECT_EQ(J(r.summary, "/per_op/page_fault/count"), 48u + 16u);
  EXPECT_EQ(J(r.summary, "/per_op/page_fault_write/count"), 16u);
  EXPECT_EQ(J(r.summary, "/per_op/mmap/count"), 2u);
  EXPECT_EQ(J(r.summary, "/per_op/munmap/count"), 1u);
  EXPECT_EQ(J(r.summary, "/per_op/msync/count"), 1u);
  EXPECT_EQ(J(r.summary, "/per_op/madvise/count"), 1u);
  EXPECT_EQ(J(r.summary, "/skipped/total"), 0u) << r.summary["skipped"].dump();
}

TEST(ReplayMemory, FaultBeyondTheReplayFileIsAMismatchNotACrash) {
  TempDir tmp;
  TraceBuilder b;
  // The file is truncated under its mapping, then a page past the new end is touched: SIGBUS.
  // The replay must survive it, count it, and go on.
  b.Openat(100, "/m/shrinking", O_RDWR, 3, 65536);
  b.Mmap(100, 3, 0, 65536, PROT_READ, MAP_SHARED, kBase);
  b.Fault(100, kBase, false, 0);
  b.FdOp(100, IOT_OP_FTRUNCATE, 3).length = 4096;
  b.Fault(100, kBase + 10 * 4096, false, 10);
  // Again: the first jump out of the handler must leave SIGBUS deliverable (a blocked
  // synchronous SIGBUS kills the process).
  b.Fault(100, kBase + 12 * 4096, false, 12);
  b.Pread(100, 3, 0, 100, 100);
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--root", tmp / "root", "--pace", "fast", "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  EXPECT_EQ(J(r.summary, "/mismatches/by_kind/fault/page_fault"), 2u) << r.run.out;
  EXPECT_EQ(J(r.summary, "/per_op/pread64/count"), 1u);  // went on after the fault
}

// io_uring: `batches` io_uring_enter calls each submitting `per_batch` reads and waiting for
// them, then one batch of writes to a new file.
TraceBuilder UringTrace(int batches, int per_batch) {
  TraceBuilder b;
  b.meta()["layers"]["async"] = {{"enabled", true}};
  b.Openat(100, "/u/data", O_RDONLY, 3, 16 << 20);
  b.Openat(100, "/u/out", O_WRONLY | O_CREAT | O_EXCL, 5);
  b.Syscall(100, IOT_OP_IO_URING_SETUP, 4).length = 64;
  uint64_t req = 1;
  for (int k = 0; k <= batches; k++) {
    bool writes = k == batches;
    uint64_t t = b.now();
    auto& enter = b.Syscall(100, IOT_OP_IO_URING_ENTER, per_batch);
    enter.fd = 4;
    enter.length = per_batch;
    enter.offset = per_batch;
    enter.flags = 1;  // IORING_ENTER_GETEVENTS
    enter.dur = 300'000;
    for (int i = 0; i < per_batch; i++) {
      b.SetTime(t + 1000 + i * 500);
      uint64_t off = writes ? i * 4096 : ((k * per_batch + i) * 7919 % 4000) * 4096;
      b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, writes ? 23 : 22, 0xabc, req + i,
              writes ? 5 : 3, off, 4096);
    }
    for (int i = 0; i < per_batch; i++) {
      b.SetTime(t + 100'000 + i * 10'000);
      b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE, writes ? 23 : 22, 0xabc, req + i,
              writes ? 5 : 3, 0, 4096, 4096);
    }
    req += per_batch;
    b.SetTime(t + 400'000);
  }
  return b;
}

TEST(ReplayAsync, IoUringRequestsReplayAsynchronously) {
  TempDir tmp;
  std::string trace = WriteTrace(UringTrace(4, 8), tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--root", tmp / "root", "--pace", "fast", "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
  EXPECT_EQ(J(r.summary, "/per_op/uring:read/count"), 32u) << r.summary["per_op"].dump();
  EXPECT_EQ(J(r.summary, "/per_op/uring:read/bytes"), 32u * 4096);
  EXPECT_EQ(J(r.summary, "/per_op/uring:write/count"), 8u);
  EXPECT_EQ(J(r.summary, "/per_op/io_uring_enter/count"), 5u);
  EXPECT_EQ(J(r.summary, "/skipped/total"), 0u) << r.summary["skipped"].dump();
  EXPECT_EQ(FileSize(tmp / "root/u/out"), 8 * 4096);
}

TEST(ReplayAsync, LibaioRequestsReplayAsynchronously) {
  TempDir tmp;
  TraceBuilder b;
  b.Openat(100, "/a/data", O_RDWR | O_DIRECT, 3, 8 << 20);
  auto& setup = b.Syscall(100, IOT_OP_IO_SETUP, 0);
  setup.length = 32;
  setup.aux = 0x7000;
  uint64_t req = 0x5000;
  for (int k = 0; k < 3; k++) {
    uint64_t t = b.now();
    auto& sub = b.Syscall(100, IOT_OP_IO_SUBMIT, 16);
    sub.aux = 0x7000;
    sub.length = 16;
    sub.dur = 20'000;
    for (int i = 0; i < 16; i++) {
      b.SetTime(t + 100 + i * 100);
      bool w = i % 4 == 3;
      b.Async(100, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_SUBMIT, w ? 1 : 0, 0x7000, req + i * 64, 3,
              (k * 16 + i) * 65536, 65536);
    }
    b.SetTime(t + 30'000);
    auto& get = b.Syscall(100, IOT_OP_IO_GETEVENTS, 16);
    get.aux = 0x7000;
    get.offset = 16;
    get.length = 16;
    get.dur = 500'000;
    for (int i = 0; i < 16; i++) {
      b.SetTime(t + 100'000 + i * 20'000);
      bool w = i % 4 == 3;
      b.Async(100, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_COMPLETE, w ? 1 : 0, 0x7000, req + i * 64, 3,
              0, 65536, 65536);
    }
    req += 16 * 64;
    b.SetTime(t + 700'000);
  }
  std::string trace = WriteTrace(b, tmp / "t.iotwin");
  // /var/tmp: O_DIRECT needs a file system that supports it (tmpfs does not).
  TempDir disk("iotwin-replay-aio", "/var/tmp");
  ASSERT_TRUE(disk.ok());
  auto r = RunReplayCmd({trace, "--root", disk / "root", "--pace", "fast", "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << r.summary["mismatches"].dump(2);
  EXPECT_EQ(J(r.summary, "/per_op/libaio:pread/count"), 36u) << r.summary["per_op"].dump();
  EXPECT_EQ(J(r.summary, "/per_op/libaio:pwrite/count"), 12u);
  EXPECT_EQ(J(r.summary, "/per_op/libaio:pread/bytes"), 36u * 65536);
  EXPECT_EQ(J(r.summary, "/per_op/io_getevents/count"), 3u);
}

TEST(ReplayAsync, SyncFallbackKeepsResults) {
  TempDir tmp;
  std::string trace = WriteTrace(UringTrace(2, 4), tmp / "t.iotwin");
  auto r = RunReplayCmd({trace, "--root", tmp / "root", "--pace", "fast", "--async", "sync",
                         "--json", "-q"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u);
  EXPECT_EQ(J(r.summary, "/per_op/uring:read/count"), 8u);
}

}  // namespace
}  // namespace iotwin::test
