// The scheduler alone: ReplayEngine over a back end that executes nothing but logs when each
// op ran, so ordering, pacing and descriptor remapping can be checked without I/O.
#include <fcntl.h>
#include <sys/mman.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "format/records.h"
#include "model/trace_model.h"
#include "model_test_util.h"
#include "replay/backend.h"
#include "replay/engine.h"
#include "replay/pacer.h"
#include "replay/plan.h"

namespace iotwin::replay {
namespace {

using test::TraceBuilder;

struct Exec {
  const model::Op* op;
  uint64_t start, end;
  LiveArgs args;
};

// Returns recorded results (like the null back end) after an optional per-op delay; logs.
class LoggingBackend : public Backend {
 public:
  explicit LoggingBackend(uint64_t delay_ns = 0) : delay_ns_(delay_ns) {}
  const char* name() const override { return "logging"; }
  int64_t Execute(const LiveArgs& a) override {
    uint64_t s = NowNs();
    if (delay_ns_) WaitUntil(s + delay_ns_, 0);  // sleeps, like a device would
    std::lock_guard<std::mutex> l(mu_);
    log_.push_back(Exec{a.op, s, NowNs(), a});
    return a.recorded;
  }
  int CloneFd(int fd) override { return fd + 1000; }
  void CloseFd(int fd) override {
    std::lock_guard<std::mutex> l(mu_);
    closed_.push_back(fd);
  }
  uint8_t* MapFile(const Sandbox*, const std::string&, uint64_t, uint32_t, uint32_t,
                   uint64_t) override {
    return reinterpret_cast<uint8_t*>(uintptr_t{1} << 40);
  }
  void Unmap(uint8_t*, uint64_t) override {}
  Result<std::unique_ptr<AsyncEngine>> NewAsyncEngine(uint8_t, unsigned, AsyncKind) override {
    return Status::Unsupported("no async here");
  }
  std::vector<Exec> log() {
    std::lock_guard<std::mutex> l(mu_);
    return log_;
  }
  std::vector<int> closed() {
    std::lock_guard<std::mutex> l(mu_);
    return closed_;
  }

 private:
  uint64_t delay_ns_;
  std::mutex mu_;
  std::vector<Exec> log_;
  std::vector<int> closed_;
};

struct Harness {
  std::unique_ptr<model::TraceModel> model;
  std::unique_ptr<ReplayPlan> plan;
  ReplayOptions options;
  std::unique_ptr<ReplayEngine> engine;

  void Run(const TraceBuilder& b, Backend* backend, PaceMode pace, double speed = 1.0) {
    model = test::BuildModel(b);
    ASSERT_TRUE(model);
    auto mapper = PathMapper::Create("/nonexistent-sandbox", {});
    ASSERT_TRUE(mapper.ok());
    auto p = BuildPlan(*model, *mapper, speed);
    ASSERT_TRUE(p.ok());
    plan = std::make_unique<ReplayPlan>(std::move(p).value());
    options.backend = BackendKind::kNull;
    options.pace = pace;
    options.speed = speed;
    options.spin_ns = 200'000;
    engine = std::make_unique<ReplayEngine>(*plan, options, backend);
    Status st = engine->Setup();
    ASSERT_TRUE(st.ok()) << st.ToString();
    engine->Start(NowNs() + 1'000'000);
    engine->Wait();
  }
};

TEST(ReplayEngine, DependenciesHoldEvenWhenTheAwaitedOpIsSlow) {
  // Thread 100 creates a file (slowly), thread 101 opens it right after: 101 must wait.
  TraceBuilder b;
  b.Thread(100, 101);
  b.NewThread(100, 101);
  b.Openat(100, "/d/f", O_WRONLY | O_CREAT | O_EXCL, 3);
  b.Openat(101, "/d/f", O_RDONLY, 4, 0);
  b.Pwrite(100, 3, 0, 4096, 4096);
  b.Pread(101, 4, 0, 4096, 4096);  // read-after-write of the same range
  LoggingBackend be(/*delay_ns=*/3'000'000);
  Harness h;
  h.Run(b, &be, PaceMode::kFast);
  auto log = be.log();
  ASSERT_EQ(log.size(), 4u);
  auto find = [&](uint16_t op, uint32_t tid) -> const Exec* {
    for (const auto& e : log) {
      if (e.op->sc.op == op && e.op->sc.tid == tid) return &e;
    }
    return nullptr;
  };
  const Exec* create = find(IOT_OP_OPENAT, 100);
  const Exec* open = find(IOT_OP_OPENAT, 101);
  const Exec* write = find(IOT_OP_PWRITE64, 100);
  const Exec* read = find(IOT_OP_PREAD64, 101);
  ASSERT_TRUE(create && open && write && read);
  EXPECT_GE(open->start, create->end);
  EXPECT_GE(read->start, write->end);
  EXPECT_EQ(h.engine->stats().mismatches(), 0u);
}

TEST(ReplayEngine, SkippedOpsStillWaitForTheirDependencies) {
  // The new thread's creation wait sits on its first op, which is skipped (stdin); the wait on
  // the file's creation was reduced into it. The open must still come after the create.
  TraceBuilder b;
  b.Openat(100, "/d/f", O_WRONLY | O_CREAT | O_EXCL, 3);
  b.NewThread(100, 101);
  b.Read(101, 0, 10, 10);
  b.Openat(101, "/d/f", O_RDONLY, 4, 0);
  LoggingBackend be(/*delay_ns=*/3'000'000);
  Harness h;
  h.Run(b, &be, PaceMode::kFast);
  auto log = be.log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].op->sc.tid, 100u);
  EXPECT_GE(log[1].start, log[0].end);
}

// A two-party barrier in front of every call: a call proceeds only once a call of the other
// worker thread has arrived too, so both are inside their calls at the same time. The wait is
// bounded by a timeout far past any scheduling delay, so that a replay that serialises
// independent threads fails the test instead of hanging it; after one timeout the barrier
// stands aside and the rest of the calls count as alone.
class RendezvousBackend : public LoggingBackend {
 public:
  int64_t Execute(const LiveArgs& a) override {
    {
      std::unique_lock<std::mutex> l(mu_);
      if (broken_) {
        alone_++;
      } else if (++arrived_ == 2) {
        arrived_ = 0;
        generation_++;
        met_ += 2;
        cv_.notify_all();
      } else {
        const uint64_t gen = generation_;
        if (!cv_.wait_for(l, std::chrono::seconds(20), [&] { return generation_ != gen; })) {
          broken_ = true;
          arrived_ = 0;
          alone_++;
        }
      }
    }
    return LoggingBackend::Execute(a);
  }
  int met() {
    std::lock_guard<std::mutex> l(mu_);
    return met_;
  }
  int alone() {
    std::lock_guard<std::mutex> l(mu_);
    return alone_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool broken_ = false;
  int met_ = 0, alone_ = 0;
};

TEST(ReplayEngine, IndependentThreadsRunConcurrently) {
  TraceBuilder b;
  b.Thread(100, 101);
  b.NewThread(100, 101);
  b.Openat(100, "/d/a", O_RDONLY, 3, 1 << 20);
  b.Openat(101, "/d/b", O_RDONLY, 4, 1 << 20);
  for (int i = 0; i < 5; i++) {
    b.Pread(100, 3, i * 4096, 4096, 4096);
    b.Pread(101, 4, i * 4096, 4096, 4096);
  }
  RendezvousBackend be;
  Harness h;
  h.Run(b, &be, PaceMode::kFast);
  ASSERT_EQ(be.log().size(), 12u);
  // Every call of one thread met a call of the other inside the back end: the threads ran at
  // the same time, whatever the machine's load. (How much they overlap is a benchmark figure:
  // bench/replay_engine_bench.cc.)
  EXPECT_EQ(be.alone(), 0);
  EXPECT_EQ(be.met(), 12);
}

TEST(ReplayEngine, OriginalPacingFollowsTheRecordedSchedule) {
  TraceBuilder b;
  b.step = 2'000'000;  // an op every 2 ms
  b.Openat(100, "/d/a", O_RDONLY, 3, 1 << 20);
  for (int i = 0; i < 20; i++) b.Pread(100, 3, i * 4096, 4096, 4096);
  LoggingBackend be;
  Harness h;
  h.Run(b, &be, PaceMode::kOriginal);
  auto log = be.log();
  ASSERT_EQ(log.size(), 21u);
  uint64_t live0 = h.engine->live_start();
  uint64_t trace0 = h.model->start_ts();
  for (const auto& e : log) {
    uint64_t due = live0 + (e.op->ts - trace0);
    EXPECT_GE(e.start, due);  // never early
  }
  // The whole run spans the recorded 40 ms (never less), with slack for a loaded machine.
  uint64_t span = log.back().start - live0;
  EXPECT_GE(span, 40'000'000u);
  EXPECT_LT(span, 400'000'000u);
  EXPECT_EQ(h.engine->stats().schedule().count(), 21u);
}

TEST(ReplayEngine, SpeedAndFastShortenTheRun) {
  TraceBuilder b;
  b.step = 5'000'000;
  b.Openat(100, "/d/a", O_RDONLY, 3, 1 << 20);
  for (int i = 0; i < 20; i++) b.Pread(100, 3, 0, 4096, 4096);  // 100 ms recorded
  LoggingBackend be1, be2;
  Harness fast, sped;
  uint64_t t0 = NowNs();
  fast.Run(b, &be1, PaceMode::kFast);
  uint64_t t_fast = NowNs() - t0;
  t0 = NowNs();
  sped.Run(b, &be2, PaceMode::kGaps, 10.0);
  uint64_t t_sped = NowNs() - t0;
  EXPECT_LT(t_fast, 60'000'000u);
  EXPECT_GE(t_sped, 10'000'000u);  // 100 ms / 10, never faster
  EXPECT_LT(t_sped, 80'000'000u);
}

TEST(ReplayEngine, DescriptorsAreRemappedPerProcess) {
  TraceBuilder b;
  b.Openat(100, "/d/a", O_RDONLY, 3, 4096);
  b.Fork(100, 200);
  b.Pread(200, 3, 0, 100, 100);
  b.Dup2(200, 3, 9, 9);
  b.Pread(200, 9, 0, 100, 100);
  b.Exit(200, true);
  b.Pread(100, 3, 0, 100, 100);
  LoggingBackend be;
  Harness h;
  h.Run(b, &be, PaceMode::kFast);
  auto log = be.log();
  ASSERT_EQ(log.size(), 5u);
  std::map<std::pair<uint32_t, uint16_t>, std::vector<int>> fds;
  for (const auto& e : log) fds[{e.op->sc.tid, e.op->sc.op}].push_back(e.args.fd);
  // Parent reads through its own descriptor (the open's result), the child through the copy the
  // fork made (CloneFd: +1000), and then through its dup2'd descriptor.
  EXPECT_EQ((fds[{100, IOT_OP_PREAD64}]), (std::vector<int>{3}));
  EXPECT_EQ((fds[{200, IOT_OP_PREAD64}]), (std::vector<int>{1003, 9}));
  // At the child's exit its descriptors were closed by the bookkeeper.
  auto closed = be.closed();
  EXPECT_NE(std::find(closed.begin(), closed.end(), 1003), closed.end());
  EXPECT_NE(std::find(closed.begin(), closed.end(), 9), closed.end());
}

TEST(ReplayEngine, UnknownDescriptorsAreSkippedAndCounted) {
  TraceBuilder b;
  b.Read(100, 0, 10, 10);
  b.Write(100, 1, 10, 10);
  b.Openat(100, "/d/a", O_RDONLY, 3, 4096);
  b.Pread(100, 3, 0, 10, 10);
  LoggingBackend be;
  Harness h;
  h.Run(b, &be, PaceMode::kFast);
  EXPECT_EQ(be.log().size(), 2u);
  EXPECT_EQ(h.engine->stats().skipped(), 2u);
  EXPECT_EQ(h.engine->stats().skipped_by_reason().at("unknown_fd").at("read"), 1u);
}

TEST(ReplayEngine, FaultsTouchTheRecreatedMapping) {
  TraceBuilder b;
  b.Openat(100, "/d/a", O_RDWR, 3, 1 << 20);
  b.Mmap(100, 3, 0, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, 0x7f0000000000);
  b.Fault(100, 0x7f0000000000 + 5 * 4096 + 17, false, 5);
  b.Fault(100, 0x7f0000000000 + 9 * 4096, true, 9);
  b.Fault(100, 0x7e0000000000, false);  // outside any traced mapping
  b.MemOp(100, IOT_OP_MSYNC, 0x7f0000000000, 1 << 20, 0, MS_SYNC);
  b.MemOp(100, IOT_OP_MUNMAP, 0x7f0000000000, 1 << 20);
  LoggingBackend be;
  Harness h;
  h.Run(b, &be, PaceMode::kFast);
  auto log = be.log();
  ASSERT_EQ(log.size(), 6u);  // open, mmap, 2 faults, msync, munmap
  // The null mapping "lives" at the recorded address: the touch lands on the faulting page.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(log[2].args.addr), 0x7f0000000000u + 5 * 4096);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(log[3].args.addr), 0x7f0000000000u + 9 * 4096);
  EXPECT_EQ(log[4].args.mem_len, 1u << 20);
  EXPECT_EQ(h.engine->stats().skipped_by_reason().at("unknown_mapping").at("page_fault"), 1u);
}

// Async engine calls as the replay issues them: an engine whose requests complete when waited
// for, logging Flush / Reap / SubmitAndReap with their waits.
class FakeAsyncEngine final : public AsyncEngine {
 public:
  explicit FakeAsyncEngine(std::vector<std::string>* log) : log_(log) {}
  ~FakeAsyncEngine() override { log_->push_back("teardown"); }
  const char* name() const override { return "fake"; }
  bool Queue(const AsyncRequest& r) override {
    queued_.push_back(AsyncCompletion{r.token, r.recorded});
    return true;
  }
  int Flush() override {
    log_->push_back("flush " + std::to_string(queued_.size()));
    return Submit();
  }
  int Reap(AsyncCompletion* out, int max, int min_wait) override {
    // A slow device: a poll finds nothing; completions arrive when waited for.
    if (min_wait == 0) return 0;
    log_->push_back("wait " + std::to_string(min_wait));
    return Take(out, max);
  }
  int SubmitAndReap(AsyncCompletion* out, int max, int min_wait) override {
    log_->push_back("submit " + std::to_string(queued_.size()) + " wait " + std::to_string(min_wait));
    Submit();
    return Take(out, max);
  }
  unsigned queued() const override { return static_cast<unsigned>(queued_.size()); }

 private:
  int Submit() {
    int n = static_cast<int>(queued_.size());
    done_.insert(done_.end(), queued_.begin(), queued_.end());
    queued_.clear();
    return n;
  }
  int Take(AsyncCompletion* out, int max) {
    int n = 0;
    while (n < max && !done_.empty()) {
      out[n++] = done_.front();
      done_.erase(done_.begin());
    }
    return n;
  }
  std::vector<std::string>* log_;
  std::vector<AsyncCompletion> queued_, done_;
};

class AsyncLoggingBackend : public LoggingBackend {
 public:
  int64_t Execute(const LiveArgs& a) override {
    calls.push_back("exec " + std::string(OpName(a.op->sc.op)));
    return LoggingBackend::Execute(a);
  }
  Result<std::unique_ptr<AsyncEngine>> NewAsyncEngine(uint8_t, unsigned depth, AsyncKind) override {
    calls.push_back("setup " + std::to_string(depth));
    return std::unique_ptr<AsyncEngine>(std::make_unique<FakeAsyncEngine>(&calls));
  }
  std::vector<std::string> calls;
};

// One recorded batch of 4 reads: `submit` carries the requests, `wait` (the same call for
// io_uring_enter(fd, 4, 4, GETEVENTS)) returns once all four have completed.
// The context is set up before the file is opened, as workloads do (a worker's io_setup first).
void AsyncBatch(TraceBuilder& b, uint8_t engine, uint16_t submit_op, uint16_t wait_op) {
  uint8_t read_op = engine == IOT_AIO_ENGINE_URING ? 22 /*IORING_OP_READ*/ : 0 /*IOCB_CMD_PREAD*/;
  if (engine == IOT_AIO_ENGINE_URING) {
    b.Syscall(100, IOT_OP_IO_URING_SETUP, 5).length = 8;  // entries
  } else {
    auto& setup = b.Syscall(100, IOT_OP_IO_SETUP, 0);
    setup.length = 8;  // nr_events
    setup.aux = 9;     // the context address it returned: the requests' ctx
  }
  b.Openat(100, "/d/f", O_RDONLY | O_DIRECT, 3, 1 << 20);
  uint64_t t = b.now() + 100'000;
  for (int k = 0; k < 4; k++) {
    b.SetTime(t + 1'000 + k * 100);
    b.Async(100, engine, IOT_AIO_SUBMIT, read_op, 9, k + 1, 3, k * 4096, 4096);
  }
  for (int k = 0; k < 4; k++) {
    b.SetTime(t + 20'000 + k * 100);
    b.Async(100, engine, IOT_AIO_COMPLETE, read_op, 9, k + 1, 3, k * 4096, 4096, 4096);
  }
  if (submit_op == wait_op) {
    b.dur = 50'000;  // io_uring_enter(fd, 4, 4, GETEVENTS): spans submissions and completions
    b.SetTime(t);
    auto& enter = b.Syscall(100, submit_op, 4);
    enter.fd = 5;
    enter.flags = 1;  // IORING_ENTER_GETEVENTS
  } else {
    b.dur = 5'000;  // io_submit: spans the submissions
    b.SetTime(t);
    b.Syscall(100, submit_op, 4);
    b.dur = 30'000;  // io_getevents(ctx, 4, 4): returns after the completions
    b.SetTime(t + 10'000);
    auto& wait = b.Syscall(100, wait_op, 4);
    wait.aux = 4;     // min_nr
    wait.length = 4;  // nr
  }
  b.dur = 1'000;
  b.SetTime(t + 200'000);
  b.Close(100, 3);
}

TEST(ReplayEngine, UringSubmitAndWaitIsOneCall) {
  TraceBuilder b;
  AsyncBatch(b, IOT_AIO_ENGINE_URING, IOT_OP_IO_URING_ENTER, IOT_OP_IO_URING_ENTER);
  AsyncLoggingBackend be;
  Harness h;
  h.Run(b, &be, PaceMode::kFast);
  // The recorded io_uring_enter(fd, 4, 4, GETEVENTS) is replayed as one submit-and-wait for all
  // four, not a submit followed by one wait per completion.
  // The ring is set up at the recorded io_uring_setup (before the open, not at the first
  // request) with the recorded 8 entries, not the 4 seen in flight.
  // Without a recorded close of the ring, the engine is torn down when the replay ends.
  EXPECT_EQ(be.calls, (std::vector<std::string>{"setup 8", "exec openat", "submit 4 wait 4",
                                                 "exec close", "teardown"}));
  EXPECT_EQ(h.engine->stats().mismatches(), 0u);
}

TEST(ReplayEngine, LibaioGeteventsWaitsForTheWholeBatchAtOnce) {
  TraceBuilder b;
  AsyncBatch(b, IOT_AIO_ENGINE_LIBAIO, IOT_OP_IO_SUBMIT, IOT_OP_IO_GETEVENTS);
  AsyncLoggingBackend be;
  Harness h;
  h.Run(b, &be, PaceMode::kFast);
  // io_submit(4) then io_getevents(ctx, 4, 4): one submission, one wait for four.
  EXPECT_EQ(be.calls, (std::vector<std::string>{"setup 8", "exec openat", "flush 4", "submit 0 wait 4",
                                                 "exec close", "teardown"}));
  EXPECT_EQ(h.engine->stats().mismatches(), 0u);
}

TEST(ReplayEngine, RingCloseTearsTheEngineDownWhereTheOriginalClosedIt) {
  TraceBuilder b;
  AsyncBatch(b, IOT_AIO_ENGINE_URING, IOT_OP_IO_URING_ENTER, IOT_OP_IO_URING_ENTER);
  b.Close(100, 5);                                    // the ring (io_uring_queue_exit)
  b.Openat(100, "/d/g", O_RDONLY, 5, 4096);            // its number, reused for a file
  b.Close(100, 5);
  AsyncLoggingBackend be;
  Harness h;
  h.Run(b, &be, PaceMode::kFast);
  // The ring's close is the engine's teardown, in its recorded place: before the next open,
  // not when the replay ends; and it is replayed, not skipped for a descriptor the live table
  // never held.
  EXPECT_EQ(be.calls, (std::vector<std::string>{"setup 8", "exec openat", "submit 4 wait 4",
                                                 "exec close", "teardown", "exec openat",
                                                 "exec close"}));
  EXPECT_EQ(h.engine->stats().skipped_by_reason().count("live_fd_missing"), 0u);
  EXPECT_EQ(h.engine->stats().mismatches(), 0u);
}

TEST(ReplayEngine, ClosingADupOfTheRingKeepsTheEngine) {
  TraceBuilder b;
  b.Syscall(100, IOT_OP_DUP, 6).fd = 5;  // before the batch: the ring is open twice
  AsyncBatch(b, IOT_AIO_ENGINE_URING, IOT_OP_IO_URING_ENTER, IOT_OP_IO_URING_ENTER);
  b.Close(100, 6);  // the dup: the ring stays open through fd 5
  b.Openat(100, "/d/g", O_RDONLY, 6, 4096);
  AsyncLoggingBackend be;
  Harness h;
  h.Run(b, &be, PaceMode::kFast);
  // No teardown at the dup's close: the engine goes when the replay ends.
  ASSERT_FALSE(be.calls.empty());
  EXPECT_EQ(be.calls.back(), "teardown");
  EXPECT_EQ(std::count(be.calls.begin(), be.calls.end(), "teardown"), 1);
}

TEST(ReplayEngine, AsyncRequestsMovingDataCountTheirBytes) {
  // Reads of both engines move data (their completions count bytes); the classification of
  // request opcodes is the format's one (AsyncOp).
  for (uint8_t engine : {uint8_t{IOT_AIO_ENGINE_URING}, uint8_t{IOT_AIO_ENGINE_LIBAIO}}) {
    TraceBuilder b;
    if (engine == IOT_AIO_ENGINE_URING) {
      AsyncBatch(b, engine, IOT_OP_IO_URING_ENTER, IOT_OP_IO_URING_ENTER);
    } else {
      AsyncBatch(b, engine, IOT_OP_IO_SUBMIT, IOT_OP_IO_GETEVENTS);
    }
    AsyncLoggingBackend be;
    Harness h;
    h.Run(b, &be, PaceMode::kFast);
    const auto& by_op = h.engine->stats().by_op();
    const char* label = engine == IOT_AIO_ENGINE_URING ? "uring:read" : "libaio:pread";
    ASSERT_TRUE(by_op.count(label)) << label;
    EXPECT_EQ(by_op.at(label).count, 4u) << label;
    EXPECT_EQ(by_op.at(label).bytes, 4u * 4096) << label;
  }
}

}  // namespace
}  // namespace iotwin::replay
