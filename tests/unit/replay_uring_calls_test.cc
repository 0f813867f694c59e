// io_uring_enter and io_uring_register are replayed one for one with their recorded arguments:
// the worker hands each recorded call to the ring engine (Enter, Register) instead of
// submitting and waiting by what the requests need.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/trace_model.h"
#include "model_test_util.h"
#include "replay/backend.h"
#include "replay/engine.h"
#include "replay/pacer.h"
#include "replay/plan.h"

namespace iotwin::replay {

// async_engines.cc (declared where the sync back end uses it).
Result<std::unique_ptr<AsyncEngine>> MakeUringEngine(unsigned depth);

namespace {

using test::TraceBuilder;

// A ring whose requests complete as soon as they are submitted (a fast device); logs the calls.
class FakeRingEngine final : public AsyncEngine {
 public:
  explicit FakeRingEngine(std::vector<std::string>* log) : log_(log) {}
  ~FakeRingEngine() override { log_->push_back("teardown"); }
  const char* name() const override { return "fake-ring"; }
  bool Queue(const AsyncRequest& r) override {
    queued_.push_back(AsyncCompletion{r.token, r.recorded});
    return true;
  }
  int Flush() override {
    log_->push_back("flush " + std::to_string(queued_.size()));
    return Submit();
  }
  int Reap(AsyncCompletion* out, int max, int min_wait) override {
    if (min_wait > 0) log_->push_back("wait " + std::to_string(min_wait));
    return Take(out, max);
  }
  int SubmitAndReap(AsyncCompletion* out, int max, int min_wait) override {
    log_->push_back("submit " + std::to_string(queued_.size()) + " wait " + std::to_string(min_wait));
    Submit();
    return Take(out, max);
  }
  unsigned queued() const override { return static_cast<unsigned>(queued_.size()); }
  bool replays_ring_calls() const override { return true; }
  // A recorded io_uring_enter: armed with its arguments, made without the lock, collected.
  void ArmWait(AsyncWait* w, unsigned min_complete, bool submit) override {
    log_->push_back("enter submit " + std::to_string(submit ? queued_.size() : 0) + " min " +
                    std::to_string(min_complete) + " flags " + std::to_string(w->flags));
    if (submit) Submit();
    w->want = 0;
  }
  int FinishWait(AsyncWait*, AsyncCompletion* out, int max) override { return Take(out, max); }
  int Register(unsigned opcode, unsigned nr_args) override {
    log_->push_back("register " + std::to_string(opcode) + " " + std::to_string(nr_args));
    return 0;
  }

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

class RingBackend final : public Backend {
 public:
  const char* name() const override { return "ring-logging"; }
  int64_t Execute(const LiveArgs& a) override {
    calls.push_back("exec " + std::string(OpName(a.op->sc.op)));
    return a.recorded;
  }
  int CloneFd(int fd) override { return fd + 1000; }
  void CloseFd(int) override {}
  uint8_t* MapFile(const Sandbox*, const std::string&, uint64_t, uint32_t, uint32_t,
                   uint64_t) override {
    return nullptr;
  }
  void Unmap(uint8_t*, uint64_t) override {}
  Result<std::unique_ptr<AsyncEngine>> NewAsyncEngine(uint8_t, unsigned depth, AsyncKind) override {
    calls.push_back("setup " + std::to_string(depth));
    return std::unique_ptr<AsyncEngine>(std::make_unique<FakeRingEngine>(&calls));
  }
  std::vector<std::string> calls;
};

void Replay(const TraceBuilder& b, Backend* backend) {
  auto model = test::BuildModel(b);
  ASSERT_TRUE(model);
  auto mapper = PathMapper::Create("/nonexistent-sandbox", {});
  ASSERT_TRUE(mapper.ok());
  auto plan = BuildPlan(*model, *mapper, 1.0);
  ASSERT_TRUE(plan.ok());
  ReplayOptions options;
  options.backend = BackendKind::kNull;
  options.pace = PaceMode::kFast;
  ReplayEngine engine(*plan, options, backend);
  Status st = engine.Setup();
  ASSERT_TRUE(st.ok()) << st.ToString();
  engine.Start(NowNs() + 1'000'000);
  engine.Wait();
  EXPECT_EQ(engine.stats().mismatches(), 0u);
}

// fio's io_uring engine at depth 8: a probe, then one io_uring_enter(fd, 1, 0, GETEVENTS) per
// request and an io_uring_enter(fd, 0, 1, GETEVENTS) when it waits.
TEST(ReplayUringCalls, EnterAndRegisterAreReplayedOneForOneWithTheirArguments) {
  TraceBuilder b;
  b.Syscall(100, IOT_OP_IO_URING_SETUP, 5).length = 8;  // entries
  auto& probe = b.Syscall(100, IOT_OP_IO_URING_REGISTER, 0);
  probe.fd = 5;
  probe.mode = 8;      // IORING_REGISTER_PROBE
  probe.length = 256;  // nr_args
  b.Openat(100, "/d/f", O_RDWR | O_DIRECT, 3, 1 << 20);
  const uint64_t t = b.now() + 100'000;
  for (int k = 0; k < 3; k++) {
    const uint64_t at = t + static_cast<uint64_t>(k) * 100'000;
    b.SetTime(at + 1'000);
    b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, 23 /*IORING_OP_WRITE*/, 9, k + 1, 3,
            static_cast<uint64_t>(k) * 4096, 4096);
    b.SetTime(at + 60'000);
    b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE, 23, 9, k + 1, 3,
            static_cast<uint64_t>(k) * 4096, 4096, 4096);
    b.dur = 5'000;
    b.SetTime(at);
    auto& enter = b.Syscall(100, IOT_OP_IO_URING_ENTER, 1);
    enter.fd = 5;
    enter.aux = 1;    // to_submit
    enter.mode = 0;   // min_complete
    enter.flags = 1;  // IORING_ENTER_GETEVENTS
  }
  b.SetTime(t + 400'000);
  auto& wait = b.Syscall(100, IOT_OP_IO_URING_ENTER, 0);
  wait.fd = 5;
  wait.mode = 1;
  wait.flags = 1;
  b.dur = 1'000;
  b.SetTime(t + 500'000);
  b.Close(100, 3);
  RingBackend be;
  Replay(b, &be);
  EXPECT_EQ(be.calls, (std::vector<std::string>{
                          "setup 8", "register 8 256", "exec openat",
                          "enter submit 1 min 0 flags 1", "enter submit 1 min 0 flags 1",
                          "enter submit 1 min 0 flags 1", "enter submit 0 min 1 flags 1",
                          "exec close", "teardown"}));
}

// The real ring: a recorded enter's min_complete never waits for more than can complete, and
// the completions come back from the ring's memory.
TEST(ReplayUringCalls, RingEnterWaitsOnlyForWhatIsInFlight) {
  auto engine = MakeUringEngine(8);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  AsyncEngine* e = engine->get();
  ASSERT_TRUE(e->replays_ring_calls());
  char path[] = "/tmp/iotwin-uring-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  unlink(path);
  std::vector<char> buf(4096, 'x');
  for (uint64_t k = 0; k < 2; k++) {
    AsyncRequest r;
    r.token = k;
    r.engine = IOT_AIO_ENGINE_URING;
    r.opcode = 23;  // IORING_OP_WRITE
    r.fd = fd;
    r.offset = k * 4096;
    r.len = 4096;
    r.buf = reinterpret_cast<uint8_t*>(buf.data());
    ASSERT_TRUE(e->Queue(r));
  }
  AsyncCompletion out[64];
  // min_complete 5 with two requests: waits for the two, not for ever.
  AsyncWait w;
  w.call = true;
  w.flags = 1;  // IORING_ENTER_GETEVENTS
  e->ArmWait(&w, 5, /*submit=*/true);
  EXPECT_EQ(w.want, 2u);
  EXPECT_EQ(w.to_submit, 2u);
  ASSERT_GE(e->BlockWait(&w, 10'000'000'000ull), 0);
  int got = e->FinishWait(&w, out, 64);
  while (got >= 0 && got < 2) {
    const int more = e->Reap(out + got, 64 - got, 2 - got);
    if (more < 0) got = more;
    else got += more;
  }
  ASSERT_EQ(got, 2);
  EXPECT_EQ(out[0].res, 4096);
  EXPECT_EQ(out[1].res, 4096);
  EXPECT_EQ(e->queued(), 0u);
  EXPECT_EQ(e->Register(8 /*IORING_REGISTER_PROBE*/, 256), 0);
  EXPECT_EQ(e->Register(0 /*IORING_REGISTER_BUFFERS: the trace has no buffers*/, 1), -EOPNOTSUPP);
  close(fd);
}

}  // namespace
}  // namespace iotwin::replay
