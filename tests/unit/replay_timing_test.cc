// The replay engine's own timing costs: the gap floor of gaps pacing (pacer.h), and a thread
// waiting on another is woken when it can go on, not at each of the other thread's ops.
#include <algorithm>
#include <fcntl.h>

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "model/trace_model.h"
#include "model_test_util.h"
#include "replay/backend.h"
#include "replay/engine.h"
#include "replay/pacer.h"
#include "replay/plan.h"

namespace iotwin::replay {
namespace {

using test::TraceBuilder;

TEST(ReplayGapFloor, GapsPacingTakesTheFloorOutOfEveryGap) {
  Pacer p(PaceMode::kGaps, 1.0, 0, 0, /*gap_floor=*/400);
  // 1000 ns recorded between the previous end (100) and this start (1100): due 600 after.
  EXPECT_EQ(p.Due(1100, 100, 10'000, 0), 10'600u);
  // A gap no longer than the floor: due at the previous completion, never before it.
  EXPECT_EQ(p.Due(2300, 2000, 20'000, 0), 20'000u);
  // Speed scales the think time left once the floor is out.
  Pacer fast(PaceMode::kGaps, 2.0, 0, 0, 400);
  EXPECT_EQ(fast.Due(1100, 100, 10'000, 0), 10'300u);
  // Original pacing is absolute: the floor does not move it.
  Pacer orig(PaceMode::kOriginal, 1.0, 0, 50'000, 400);
  EXPECT_EQ(orig.Due(1000, 0, 0, 0), 51'000u);
}

TEST(ReplayGapFloor, FloorIsALowQuantileCappedAtACallsCost) {
  std::vector<uint64_t> few(15, 300);
  EXPECT_EQ(GapFloor(few), 0u);  // too few gaps to tell
  // 100 gaps: 5 skewed to 0, the rest 400 ns and up: the 5th percentile is 400.
  std::vector<uint64_t> gaps;
  for (int i = 0; i < 5; i++) gaps.push_back(0);
  for (int i = 0; i < 95; i++) gaps.push_back(400 + static_cast<uint64_t>(i) * 1000);
  EXPECT_EQ(GapFloor(gaps), 400u);
  // A thread that always thinks 5 ms between calls keeps its think time.
  std::vector<uint64_t> thinking(100, 5'000'000);
  EXPECT_EQ(GapFloor(thinking), kMaxGapFloorNs);
}

// Returns recorded results after `delay_ns`, like a device that takes that long: asleep, or
// busy (`spin`, exact to the microsecond).
class DelayBackend final : public Backend {
 public:
  explicit DelayBackend(uint64_t delay_ns, bool spin = false)
      : delay_ns_(delay_ns), spin_(spin), null_(MakeNullBackend()) {}
  const char* name() const override { return "delay"; }
  int64_t Execute(const LiveArgs& a) override {
    WaitUntil(NowNs() + delay_ns_, spin_ ? delay_ns_ : 0);
    return a.recorded;
  }
  int CloneFd(int fd) override { return null_->CloneFd(fd); }
  void CloseFd(int fd) override { null_->CloseFd(fd); }
  uint8_t* MapFile(const Sandbox* s, const std::string& path, uint64_t length, uint32_t prot,
                   uint32_t flags, uint64_t offset) override {
    return null_->MapFile(s, path, length, prot, flags, offset);
  }
  void Unmap(uint8_t* addr, uint64_t length) override { null_->Unmap(addr, length); }
  Result<std::unique_ptr<AsyncEngine>> NewAsyncEngine(uint8_t engine, unsigned depth,
                                                      AsyncKind kind) override {
    return null_->NewAsyncEngine(engine, depth, kind);
  }

 private:
  uint64_t delay_ns_;
  bool spin_;
  std::unique_ptr<Backend> null_;
};

TEST(ReplayGapFloor, ReplayedFaultsAreSpacedAsRecordedNotByTheirSpacingOnTopOfTheirCost) {
  // 300 faults recorded 30 us apart, each touch taking 20 us live. Gaps pacing: each fault
  // is due 30 us after the previous one started (9 ms in all); waiting the whole recorded
  // spacing after each touch would take 300 x 50 us = 15 ms.
  TraceBuilder b;
  b.step = 30'000;
  b.Openat(100, "/d/a", O_RDWR, 3, 1 << 20);
  b.Mmap(100, 3, 0, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, 0x7f0000000000);
  for (int i = 0; i < 300; i++) b.Fault(100, 0x7f0000000000 + (i % 256) * 4096, false, i % 256);
  b.Close(100, 3);
  auto model = test::BuildModel(b);
  ASSERT_TRUE(model);
  auto mapper = PathMapper::Create("/nonexistent-sandbox", {});
  auto plan = BuildPlan(*model, *mapper, 1.0);
  ASSERT_TRUE(plan.ok());
  // The fastest of three runs in a pacing mode: a busy machine only adds time.
  auto fastest_run = [&](PaceMode pace) {
    ReplayOptions options;
    options.backend = BackendKind::kNull;
    options.pace = pace;
    uint64_t fastest = UINT64_MAX;
    for (int attempt = 0; attempt < 3; attempt++) {
      DelayBackend backend(20'000, /*spin=*/true);
      ReplayEngine engine(*plan, options, &backend);
      EXPECT_TRUE(engine.Setup().ok());
      const uint64_t t0 = NowNs() + 1'000'000;
      engine.Start(t0);
      engine.Wait();
      EXPECT_EQ(engine.stats().skipped(), 0u);
      EXPECT_EQ(engine.ops_done(), 303u);
      fastest = std::min(fastest, engine.live_end() - t0);
    }
    return fastest;
  };
  // The touches alone (fast pacing) take 300 x 20 us = 6 ms on an idle machine, longer on a busy
  // one. Gaps pacing that keeps the recorded spacing takes max(9 ms, the touches); one that waits
  // the spacing on top of each touch takes the touches + 9 ms. The bound sits halfway between
  // the two, measured against this machine's own cost of the touches (a loaded machine makes
  // both longer).
  const uint64_t touches = fastest_run(PaceMode::kFast);
  const uint64_t gaps = fastest_run(PaceMode::kGaps);
  const uint64_t kept = std::max<uint64_t>(touches, 9'000'000u), added = touches + 9'000'000u;
  EXPECT_GE(gaps, 9'000'000u);
  EXPECT_LT(gaps, kept + (added - kept) / 2)
      << "gaps replay of the faults took " << gaps / 1e6 << " ms, the touches alone "
      << touches / 1e6 << " ms";
}

uint64_t VoluntarySwitches(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stoull(line.substr(24));
  }
  return 0;
}

TEST(ReplayWakeups, AThreadWaitingForAnothersLastOpIsNotWokenAtEachOfItsOps) {
  // Thread 101 reads what thread 100 wrote last: it waits for all of 100's 2,000 writes, each
  // taking 20 us or more (a sleep). Woken at each of them, it would switch in and out 2,000 times.
  TraceBuilder b;
  b.Thread(100, 101);
  b.NewThread(100, 101);
  b.Openat(100, "/d/f", O_RDWR | O_CREAT, 3, 0);
  for (int i = 0; i < 2000; i++) b.Pwrite(100, 3, 0, 4096, 4096);
  b.Openat(101, "/d/f", O_RDONLY, 4, 4096);
  b.Pread(101, 4, 0, 4096, 4096);
  auto model = test::BuildModel(b);
  ASSERT_TRUE(model);
  auto mapper = PathMapper::Create("/nonexistent-sandbox", {});
  ASSERT_TRUE(mapper.ok());
  auto plan = BuildPlan(*model, *mapper, 1.0);
  ASSERT_TRUE(plan.ok());
  ReplayOptions options;
  options.backend = BackendKind::kNull;
  options.pace = PaceMode::kFast;
  DelayBackend backend(20'000);
  ReplayEngine engine(*plan, options, &backend);
  ASSERT_TRUE(engine.Setup().ok());
  const std::vector<pid_t> tids = engine.WorkerTids();
  ASSERT_EQ(tids.size(), 2u);
  ASSERT_EQ(model->threads()[1].tid, 101u);
  const uint64_t before = VoluntarySwitches(tids[1]);
  engine.Start(NowNs());
  engine.Wait();
  const uint64_t switches = VoluntarySwitches(tids[1]) - before;
  EXPECT_EQ(engine.stats().mismatches(), 0u);
  EXPECT_EQ(engine.ops_done(), 2003u);
  // A few: the start gate, the wait (once or after its 100 ms timeout), the exit gate.
  EXPECT_LT(switches, 50u) << "the waiting thread was woken " << switches << " times";
}

// Replays `b` over the null back end (async requests completed at once with their recorded
// results) in `pace`; returns the wall time from the start gate to the end, ns.
uint64_t ReplayNullNs(const TraceBuilder& b, PaceMode pace, uint64_t* ops_done) {
  auto model = test::BuildModel(b);
  EXPECT_TRUE(model);
  if (!model) return 0;
  auto mapper = PathMapper::Create("/nonexistent-sandbox", {});
  auto plan = BuildPlan(*model, *mapper, 1.0);
  EXPECT_TRUE(plan.ok());
  if (!plan.ok()) return 0;
  ReplayOptions options;
  options.backend = BackendKind::kNull;
  options.pace = pace;
  auto backend = MakeNullBackend();
  ReplayEngine engine(*plan, options, backend.get());
  EXPECT_TRUE(engine.Setup().ok());
  const uint64_t t0 = NowNs() + 1'000'000;
  engine.Start(t0);
  engine.Wait();
  EXPECT_EQ(engine.stats().skipped(), 0u);
  EXPECT_EQ(engine.stats().mismatches(), 0u);
  *ops_done = engine.ops_done();
  return NowNs() - t0;
}

TEST(ReplayAsyncBatches, RequestsCarriedByOneCallAreNotPacedApart) {
  // 40 io_uring_enter calls, each submitting 8 reads that the kernel recorded 100 us apart
  // inside the call (buffered reads are done at submission), then 100 us of think time. Waiting
  // between the requests of a batch would add 7 x 100 us before each call: 28 ms in all.
  TraceBuilder b;
  b.Syscall(100, IOT_OP_IO_URING_SETUP, 5).length = 64;
  b.Openat(100, "/d/f", O_RDONLY, 3, 1 << 20);
  constexpr uint8_t kUringRead = 22;  // IORING_OP_READ
  uint64_t req = 1;
  for (int batch = 0; batch < 40; batch++) {
    const uint64_t t = b.now() + 100'000;
    for (int k = 0; k < 8; k++) {
      b.SetTime(t + 1'000 + k * 100'000);
      b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, kUringRead, 9, req + k, 3, k * 4096,
              4096);
    }
    for (int k = 0; k < 8; k++) {
      b.SetTime(t + 801'000 + k * 100);
      b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE, kUringRead, 9, req + k, 3, k * 4096,
              4096, 4096);
    }
    req += 8;
    b.dur = 802'000;
    b.SetTime(t);
    auto& enter = b.Syscall(100, IOT_OP_IO_URING_ENTER, 8);
    enter.fd = 5;
    enter.flags = 1;  // IORING_ENTER_GETEVENTS
    b.dur = 1'000;
    b.SetTime(t + 802'000);
  }
  b.Close(100, 3);
  uint64_t ops = 0;
  const uint64_t ns = ReplayNullNs(b, PaceMode::kGaps, &ops);
  EXPECT_EQ(ops, 40u * 9u + 3u);
  // Think time: 40 x ~100 us = 4 ms; the null engine's calls take no time.
  EXPECT_LT(ns, 16'000'000u) << "gaps replay took " << ns / 1e6 << " ms";
}

}  // namespace
}  // namespace iotwin::replay
