// Descriptor numbers reused across threads (docs/validation.md, the `mixed` defect): one thread
// closes fd N while another opens a file and gets N. Replay must keep every op on an instance of
// N between the op that created that instance and the op that retires it, across threads, even
// when the close and the open overlapped in time in the trace (the kernel frees the number at
// the start of close, so the open can get it while the close is still returning).
//
// The back end here hands out its own live descriptor numbers and checks every use: a use or a
// close of a live descriptor that is not open fails with EBADF, a read through a descriptor that
// belongs to another file comes back short. Any race between the threads' live-table updates
// then shows as live_fd_missing skips or result mismatches.
#include <fcntl.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "format/records.h"
#include "model/op_fields.h"
#include "model/trace_model.h"
#include "model_test_util.h"
#include "replay/backend.h"
#include "replay/engine.h"
#include "replay/pacer.h"
#include "replay/plan.h"

namespace iotwin::replay {
namespace {

using test::TraceBuilder;

class FdCheckingBackend : public Backend {
 public:
  // Every system call takes `op_ns` (it sleeps, after the engine resolved its descriptors and
  // before the engine updates its tables), a close `close_ns`: the threads run side by side and
  // a close stays in progress long enough for the other thread's open to overtake it.
  FdCheckingBackend(uint64_t op_ns, uint64_t close_ns) : op_ns_(op_ns), close_ns_(close_ns) {}
  const char* name() const override { return "fd-checking"; }

  int64_t Execute(const LiveArgs& a) override {
    const model::Op& op = *a.op;
    if (op.kind == model::OpKind::kSyscall) {
      WaitUntil(NowNs() + (op.sc.op == IOT_OP_CLOSE ? close_ns_ : op_ns_), 0);
    }
    std::lock_guard<std::mutex> l(mu_);
    if (op.kind != model::OpKind::kSyscall) return a.recorded;
    const iot_syscall& sc = op.sc;
    if (model::OpReturnsFd(sc)) {
      if (a.recorded < 0) return a.recorded;
      int live = next_++;
      open_[live] = op.file;
      return live;
    }
    if (sc.op == IOT_OP_CLOSE) {
      if (open_.erase(a.fd) == 0) return -EBADF;
      return 0;
    }
    if (model::OpHasDataFd(sc)) {
      auto it = open_.find(a.fd);
      if (it == open_.end()) return -EBADF;
      if (it->second != op.file) return 0;  // another file behind the descriptor: "short"
    }
    return a.recorded;
  }
  int CloneFd(int fd) override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = open_.find(fd);
    if (it == open_.end()) return -EBADF;
    int live = next_++;
    open_[live] = it->second;
    return live;
  }
  void CloseFd(int fd) override {
    std::lock_guard<std::mutex> l(mu_);
    open_.erase(fd);
  }
  uint8_t* MapFile(const Sandbox*, const std::string&, uint64_t, uint32_t, uint32_t,
                   uint64_t) override {
    return nullptr;
  }
  void Unmap(uint8_t*, uint64_t) override {}
  Result<std::unique_ptr<AsyncEngine>> NewAsyncEngine(uint8_t, unsigned, AsyncKind) override {
    return Status::Unsupported("no async here");
  }

 private:
  uint64_t op_ns_;
  uint64_t close_ns_;
  std::mutex mu_;
  int next_ = 1000;
  std::map<int, uint32_t> open_;  // live fd -> model file index
};

uint64_t Skipped(const ReplayStats& s, const std::string& reason) {
  auto it = s.skipped_by_reason().find(reason);
  if (it == s.skipped_by_reason().end()) return 0;
  uint64_t n = 0;
  for (const auto& [op, c] : it->second) n += c;
  return n;
}

// Thread 100 and thread 101 of one process hand descriptor 3 back and forth `rounds` times:
// each round one thread reads a file through 3 and closes it; the other opens its own file
// while that close is still in progress in the trace (the open starts 2 us after the close
// started, the close lasts 20 us), gets 3, reads through it and later closes it.
TraceBuilder FdReuseTrace(int rounds) {
  TraceBuilder b;
  b.Thread(100, 101);
  b.NewThread(100, 101);
  b.Openat(100, "/d/f0", O_RDONLY, 3, 1 << 20);
  for (int r = 0; r < rounds; r++) {
    uint32_t owner = r % 2 ? 101 : 100;
    uint32_t next = r % 2 ? 100 : 101;
    b.Pread(owner, 3, 0, 4096, 4096, 1 << 20);
    b.Pread(owner, 3, 4096, 4096, 4096, 1 << 20);
    uint64_t close_ts = b.now();
    b.Close(owner, 3).dur = 20'000;
    b.SetTime(close_ts + 2'000);
    b.Openat(next, "/d/f" + std::to_string(r + 1), O_RDONLY, 3, 1 << 20).dur = 5'000;
    b.SetTime(close_ts + 30'000);
  }
  b.Close(rounds % 2 ? 101 : 100, 3);
  return b;
}

TEST(ReplayFdReuse, ModelOrdersTheOpenAfterTheOverlappingClose) {
  auto m = test::BuildModel(FdReuseTrace(2));
  ASSERT_TRUE(m);
  const model::Thread* t101 = test::FindThread(*m, 101);
  ASSERT_NE(t101, nullptr);
  // 101's first op is its open of /d/f1 (instance 2 of fd 3): after 100's close (op 4 of
  // thread 100: thread start, open, pread, pread, close).
  const model::Op* open = nullptr;
  for (const auto& op : t101->ops) {
    if (op.kind == model::OpKind::kSyscall && op.sc.op == IOT_OP_OPENAT) {
      open = &op;
      break;
    }
  }
  ASSERT_NE(open, nullptr);
  uint32_t t100 = test::ThreadIndex(*m, 100);
  uint32_t close_count = 0;
  const auto& ops100 = test::FindThread(*m, 100)->ops;
  for (uint32_t i = 0; i < ops100.size(); i++) {
    if (ops100[i].kind == model::OpKind::kSyscall && ops100[i].sc.op == IOT_OP_CLOSE) {
      close_count = i + 1;
      break;
    }
  }
  ASSERT_GT(close_count, 0u);
  bool waits = false;
  for (uint32_t k = 0; k < open->dep_count; k++) {
    const model::Dep& d = m->DepsBegin(*open)[k];
    if (d.thread == t100 && d.count >= close_count) waits = true;
  }
  // Earlier waits of 101 (none here: its open is its first syscall) could cover it too.
  EXPECT_TRUE(waits) << "the open that reuses fd 3 does not wait for the close that freed it";
}

TEST(ReplayFdReuse, OpenStampedBeforeTheCloseThatFreedItsNumberFollowsThatClose) {
  // 101's open gets 3 from 100's close although the capture stamped the open 500 ns earlier; 100
  // still reads its own file through 3 in between.
  TraceBuilder b;
  b.Thread(100, 101);
  b.NewThread(100, 101);
  b.Openat(100, "/d/a", O_RDONLY, 3, 1 << 20);
  uint64_t t = b.now() + 100'000;
  b.SetTime(t - 500);
  b.Openat(101, "/d/b", O_RDONLY, 3, 1 << 20).dur = 10'000;
  b.SetTime(t - 300);
  b.Pread(100, 3, 0, 4096, 4096, 1 << 20).dur = 200;
  b.SetTime(t);
  b.Close(100, 3).dur = 2'000;
  b.SetTime(t + 20'000);
  b.Pread(101, 3, 0, 4096, 4096, 1 << 20);
  b.Close(101, 3);
  auto m = test::BuildModel(b);
  ASSERT_TRUE(m);
  const model::FileInfo* fa = test::FindFile(*m, "/d/a");
  const model::FileInfo* fb = test::FindFile(*m, "/d/b");
  ASSERT_TRUE(fa && fb);
  auto file_index = [&](const model::FileInfo* f) {
    return static_cast<uint32_t>(f - m->files().data());
  };
  auto syscalls_of = [&](uint32_t tid, uint16_t code) {
    std::vector<const model::Op*> v;
    for (const auto& op : test::FindThread(*m, tid)->ops) {
      if (op.kind == model::OpKind::kSyscall && op.sc.op == code) v.push_back(&op);
    }
    return v;
  };
  auto reads100 = syscalls_of(100, IOT_OP_PREAD64);
  auto reads101 = syscalls_of(101, IOT_OP_PREAD64);
  ASSERT_EQ(reads100.size(), 1u);
  ASSERT_EQ(reads101.size(), 1u);
  EXPECT_EQ(reads100[0]->skip, model::Skip::kReplayable);
  EXPECT_EQ(reads100[0]->file, file_index(fa));
  EXPECT_EQ(reads101[0]->skip, model::Skip::kReplayable);
  EXPECT_EQ(reads101[0]->file, file_index(fb));
  // The open waits for 100's close (thread start, open, pread, close: count 4).
  const model::Op* open = syscalls_of(101, IOT_OP_OPENAT).at(0);
  bool waits = false;
  for (uint32_t k = 0; k < open->dep_count; k++) {
    const model::Dep& d = m->DepsBegin(*open)[k];
    if (d.thread == test::ThreadIndex(*m, 100) && d.count >= 4) waits = true;
  }
  EXPECT_TRUE(waits);
}

TEST(ReplayFdReuse, ThreadsReusingADescriptorNumberReplayCleanlyUnderFastPace) {
  constexpr int kRounds = 20;
  constexpr int kIterations = 10;
  uint64_t missing = 0, mismatches = 0, ops = 0;
  for (int it = 0; it < kIterations; it++) {
    TraceBuilder b = FdReuseTrace(kRounds);
    auto m = test::BuildModel(b);
    ASSERT_TRUE(m);
    auto mapper = PathMapper::Create("/nonexistent-sandbox", {});
    ASSERT_TRUE(mapper.ok());
    auto p = BuildPlan(*m, *mapper, 1.0);
    ASSERT_TRUE(p.ok());
    ReplayPlan plan = std::move(p).value();
    ReplayOptions options;
    options.backend = BackendKind::kNull;
    options.pace = PaceMode::kFast;
    FdCheckingBackend be(/*op_ns=*/20'000, /*close_ns=*/200'000);
    ReplayEngine engine(plan, options, &be);
    Status st = engine.Setup();
    ASSERT_TRUE(st.ok()) << st.ToString();
    engine.Start(NowNs());
    engine.Wait();
    missing += Skipped(engine.stats(), "live_fd_missing");
    mismatches += engine.stats().mismatches();
    ops += engine.stats().ops();
  }
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(mismatches, 0u);
  // Every round's 2 preads, close and open, plus the first open and last close, each replay.
  EXPECT_EQ(ops, static_cast<uint64_t>(kIterations) * (kRounds * 4 + 2));
}

}  // namespace
}  // namespace iotwin::replay