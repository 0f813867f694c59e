// The replay unmaps a process where its last thread exits: that must come after the faults the
// process's other threads replay on its mappings, or their touches find nothing mapped (EFAULT).
#include <fcntl.h>
#include <sys/mman.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
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

constexpr uint64_t kBase = 0x7f0000000000;

// Returns recorded results; page touches take `touch_ns`; logs when touches ended and when
// mappings were unmapped.
class UnmapLoggingBackend : public Backend {
 public:
  explicit UnmapLoggingBackend(uint64_t touch_ns) : touch_ns_(touch_ns) {}
  const char* name() const override { return "unmap-logging"; }
  int64_t Execute(const LiveArgs& a) override {
    if (a.op->kind == model::OpKind::kPageFault) {
      WaitUntil(NowNs() + touch_ns_, 0);
      std::lock_guard<std::mutex> l(mu_);
      touch_ends_.push_back(NowNs());
    }
    return a.recorded;
  }
  int CloneFd(int fd) override { return fd + 1000; }
  void CloseFd(int) override {}
  uint8_t* MapFile(const Sandbox*, const std::string&, uint64_t, uint32_t, uint32_t,
                   uint64_t) override {
    return nullptr;
  }
  void Unmap(uint8_t*, uint64_t) override {
    std::lock_guard<std::mutex> l(mu_);
    unmaps_.push_back(NowNs());
  }
  Result<std::unique_ptr<AsyncEngine>> NewAsyncEngine(uint8_t, unsigned, AsyncKind) override {
    return Status::Unsupported("no async here");
  }
  std::vector<uint64_t> touch_ends() {
    std::lock_guard<std::mutex> l(mu_);
    return touch_ends_;
  }
  std::vector<uint64_t> unmaps() {
    std::lock_guard<std::mutex> l(mu_);
    return unmaps_;
  }

 private:
  uint64_t touch_ns_;
  std::mutex mu_;
  std::vector<uint64_t> touch_ends_, unmaps_;
};

TEST(ReplayExitUnmap, LastThreadExitUnmapsAfterOtherThreadsFaults) {
  // Thread 100 maps a library, starts 101, faults on the library and exits; 101 exits last.
  TraceBuilder b;
  b.Openat(100, "/lib/libx.so", O_RDONLY | O_CLOEXEC, 3, 1 << 20);
  b.Mmap(100, 3, 0, 1 << 20, PROT_READ | PROT_EXEC, MAP_PRIVATE, kBase);
  b.NewThread(100, 101);
  for (uint64_t page = 0; page < 3; page++) b.Fault(100, kBase + page * 4096, false, page);
  b.Exit(100, false);
  b.Exit(101, false);

  auto model = test::BuildModel(b);
  ASSERT_TRUE(model);
  auto mapper = PathMapper::Create("/nonexistent-sandbox", {});
  ASSERT_TRUE(mapper.ok());
  auto plan = BuildPlan(*model, *mapper, 1.0);
  ASSERT_TRUE(plan.ok());
  ReplayOptions options;
  options.backend = BackendKind::kNull;
  options.pace = PaceMode::kFast;
  UnmapLoggingBackend backend(/*touch_ns=*/3'000'000);
  ReplayEngine engine(*plan, options, &backend);
  Status st = engine.Setup();
  ASSERT_TRUE(st.ok()) << st.ToString();
  engine.Start(NowNs() + 1'000'000);
  engine.Wait();

  const auto touches = backend.touch_ends();
  const auto unmaps = backend.unmaps();
  // A fault reached after the unmap finds no live mapping and is skipped, or touches nothing.
  ASSERT_EQ(touches.size(), 3u);
  ASSERT_FALSE(unmaps.empty());
  EXPECT_GE(*std::min_element(unmaps.begin(), unmaps.end()),
            *std::max_element(touches.begin(), touches.end()));
}

}  // namespace
}  // namespace iotwin::replay
