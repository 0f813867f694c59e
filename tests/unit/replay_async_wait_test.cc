// The replay of recorded async waits on a fast device: a libaio batch's completions reach the
// context's ring before the recorded io_getevents is due, and that call is still replayed (and
// reaps them), so a recording of the replay shows it and the completions it carries; io_destroy
// tears the context down where the original destroyed it.
#include <fcntl.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
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

// Requests complete as soon as they are submitted: a poll (Reap with min_wait 0) finds them.
// Logs the calls a real engine would make a system call for.
class InstantAsyncEngine final : public AsyncEngine {
 public:
  explicit InstantAsyncEngine(std::vector<std::string>* log) : log_(log) {}
  ~InstantAsyncEngine() override { log_->push_back("teardown"); }
  const char* name() const override { return "instant"; }
  bool Queue(const AsyncRequest& r) override {
    queued_.push_back(AsyncCompletion{r.token, r.recorded});
    return true;
  }
  int Flush() override {
    log_->push_back("flush " + std::to_string(queued_.size()));
    return Submit();
  }
  int Reap(AsyncCompletion* out, int max, int min_wait) override {
    if (min_wait == 0) {
      const int n = Take(out, max);
      if (n > 0) log_->push_back("poll " + std::to_string(n));
      return n;
    }
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
    const int n = static_cast<int>(queued_.size());
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

class InstantBackend : public Backend {
 public:
  const char* name() const override { return "instant"; }
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
  Result<std::unique_ptr<AsyncEngine>> NewAsyncEngine(uint8_t, unsigned, AsyncKind) override {
    calls.push_back("setup");
    return std::unique_ptr<AsyncEngine>(std::make_unique<InstantAsyncEngine>(&calls));
  }
  std::vector<std::string> calls;
};

// Two dependent hops of 2 reads each, as iotwin-workload vector-search --io libaio issues them:
// io_submit(2), io_getevents(ctx, 2, 2), io_submit(2), io_getevents(ctx, 2, 2), then
// io_destroy(ctx) and the close of the file. `think_ns` is the time between a hop's
// completion and the next hop's submission.
TraceBuilder TwoLibaioHops(uint64_t think_ns) {
  TraceBuilder b;
  auto& setup = b.Syscall(100, IOT_OP_IO_SETUP, 0);
  setup.length = 2;  // nr_events
  setup.aux = 9;     // the context address
  b.Openat(100, "/d/index", O_RDONLY | O_DIRECT, 3, 1 << 20);
  uint64_t t = b.now() + 100'000;
  uint64_t user_data = 1;
  for (int hop = 0; hop < 2; hop++) {
    b.dur = 5'000;
    b.SetTime(t);
    b.Syscall(100, IOT_OP_IO_SUBMIT, 2);
    for (int k = 0; k < 2; k++) {
      b.SetTime(t);
      b.Async(100, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_SUBMIT, 0 /*IOCB_CMD_PREAD*/, 9,
              user_data + static_cast<uint64_t>(k), 3, (hop * 2 + k) * 4096, 4096);
    }
    b.dur = 100'000;  // waits for the device
    b.SetTime(t + 10'000);
    auto& wait = b.Syscall(100, IOT_OP_IO_GETEVENTS, 2);
    wait.aux = 2;     // min_nr
    wait.length = 2;  // nr
    for (int k = 0; k < 2; k++) {
      // A libaio completion is recorded when io_getevents returns it.
      b.SetTime(t + 110'000);
      b.Async(100, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_COMPLETE, 0, 9,
              user_data + static_cast<uint64_t>(k), 3, (hop * 2 + k) * 4096, 4096, 4096);
    }
    user_data += 2;
    t += 110'000 + think_ns;
  }
  b.dur = 1'000;
  b.SetTime(t);
  b.Syscall(100, IOT_OP_IO_DESTROY, 0).aux = 9;
  b.Close(100, 3);
  return b;
}

std::vector<std::string> ReplayCalls(const TraceBuilder& b, PaceMode pace) {
  auto model = test::BuildModel(b);
  EXPECT_TRUE(model);
  if (!model) return {};
  auto mapper = PathMapper::Create("/nonexistent-sandbox", {});
  EXPECT_TRUE(mapper.ok());
  auto plan = BuildPlan(*model, *mapper, 1.0);
  EXPECT_TRUE(plan.ok());
  ReplayOptions options;
  options.backend = BackendKind::kNull;
  options.pace = pace;
  options.spin_ns = 200'000;
  InstantBackend backend;
  ReplayEngine engine(*plan, options, &backend);
  Status st = engine.Setup();
  EXPECT_TRUE(st.ok()) << st.ToString();
  engine.Start(NowNs() + 1'000'000);
  engine.Wait();
  EXPECT_EQ(engine.stats().mismatches(), 0u);
  return backend.calls;
}

TEST(ReplayAsyncWait, LibaioGeteventsIsReplayedWhenItsCompletionsArrivedEarly) {
  // In every pace, each recorded io_getevents reaps its hop's two reads (no poll takes them
  // first), and the next hop is flushed only after that: the dependence between hops is kept
  // by the replayed wait, and the call is in the replay.
  for (PaceMode pace : {PaceMode::kFast, PaceMode::kGaps, PaceMode::kOriginal}) {
    const std::vector<std::string> calls = ReplayCalls(TwoLibaioHops(300'000), pace);
    EXPECT_EQ(calls, (std::vector<std::string>{"setup", "exec openat", "flush 2", "submit 0 wait 2",
                                               "flush 2", "submit 0 wait 2", "teardown",
                                               "exec close"}))
        << "pace " << static_cast<int>(pace);
  }
}

TEST(ReplayAsyncWait, IoDestroyTearsTheContextDownWhereTheOriginalDestroyedIt) {
  // The teardown (the replay's io_destroy) comes before the close of the file, as recorded,
  // not when the thread ends.
  const std::vector<std::string> calls = ReplayCalls(TwoLibaioHops(0), PaceMode::kFast);
  const auto teardown = std::find(calls.begin(), calls.end(), "teardown");
  const auto close = std::find(calls.begin(), calls.end(), "exec close");
  ASSERT_NE(teardown, calls.end());
  ASSERT_NE(close, calls.end());
  EXPECT_LT(teardown, close);
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "teardown"), 1);
}

}  // namespace
}  // namespace iotwin::replay
