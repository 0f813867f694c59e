// Benchmarks of the replay scheduler alone: ReplayEngine over the null back end (nothing is
// executed, results are the recorded ones), so a figure is the engine's own cost per op —
// dependency waits, argument translation, live-table effects, result checks, statistics —
// with `--pace fast`. Also how much two independent threads overlap over a back end that takes
// a fixed time per call (2.0: fully concurrent, 1.0: serialised).
#include <fcntl.h>
#include <stdlib.h>
#include <sys/uio.h>

#include <algorithm>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "../tests/unit/trace_builder.h"
#include "model/trace_model.h"
#include "replay/backend.h"
#include "replay/engine.h"
#include "replay/pacer.h"
#include "replay/path_mapper.h"
#include "replay/plan.h"
#include "replay/prepare.h"

namespace iotwin::replay {
namespace {

using test::TraceBuilder;

std::unique_ptr<model::TraceModel> BuildModel(const TraceBuilder& b) {
  model::ModelBuilder mb;
  mb.SetMeta(nlohmann::json::object());
  if (!b.Feed(mb).ok()) return nullptr;
  auto r = mb.Finish();
  return r.ok() ? std::move(r).value() : nullptr;
}

// A model and its plan, built once per workload.
struct Prepared {
  std::unique_ptr<model::TraceModel> model;
  std::unique_ptr<ReplayPlan> plan;
  uint64_t ops = 0;
};

bool Prepare(const TraceBuilder& b, Prepared* p) {
  p->model = BuildModel(b);
  if (!p->model) return false;
  auto mapper = PathMapper::Create("/nonexistent-sandbox", {});
  if (!mapper.ok()) return false;
  auto plan = BuildPlan(*p->model, *mapper, 1.0);
  if (!plan.ok()) return false;
  p->plan = std::make_unique<ReplayPlan>(std::move(plan).value());
  return true;
}

// CPU time the threads `tids` of this process have run, ns (the kernel's schedstat): unlike wall
// time it hardly moves when other processes compete for the CPUs.
uint64_t ThreadsCpuNs(const std::vector<pid_t>& tids) {
  uint64_t total = 0;
  for (pid_t tid : tids) {
    std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/schedstat");
    uint64_t ns = 0;
    if (f >> ns) total += ns;
  }
  return total;
}

// Replays `p` once per iteration (setup and teardown untimed); items are replayed ops. Counter
// `worker_cpu_ns_per_op`: the workers' CPU time between the start gate and the end of their ops,
// per op.
void RunEngine(benchmark::State& state, const Prepared& p, Backend* backend) {
  ReplayOptions options;
  options.backend = BackendKind::kNull;
  options.pace = PaceMode::kFast;
  uint64_t ops = 0, skipped = 0, mismatches = 0, worker_cpu = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto engine = std::make_unique<ReplayEngine>(*p.plan, options, backend);
    if (Status st = engine->Setup(); !st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
    const std::vector<pid_t> tids = engine->WorkerTids();
    const uint64_t cpu0 = ThreadsCpuNs(tids);
    state.ResumeTiming();
    engine->Start(NowNs());
    engine->Wait();
    state.PauseTiming();
    // The workers stay parked, alive, until the engine releases them.
    worker_cpu += ThreadsCpuNs(tids) - cpu0;
    ops += engine->ops_done();
    skipped += engine->stats().skipped();
    mismatches += engine->stats().mismatches();
    engine.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(ops));
  // Both should be 0: a skipped op or a mismatch means the workload is not what it measures.
  state.counters["skipped"] = static_cast<double>(skipped);
  state.counters["mismatches"] = static_cast<double>(mismatches);
  state.counters["worker_cpu_ns_per_op"] = ops ? static_cast<double>(worker_cpu) / ops : 0;
}

// One thread: reads, writes, vectored reads, seeks, stats by path and open/close pairs.
void BM_ReplayEngineSyscalls(benchmark::State& state) {
  static Prepared p;
  if (!p.model) {
    TraceBuilder b;
    b.step = 1000;
    b.Openat(100, "/d/a", O_RDWR | O_CREAT, 3, 1 << 20);
    for (int i = 0; i < 20000; i++) {
      uint64_t off = static_cast<uint64_t>(i % 256) * 4096;
      b.Pread(100, 3, off, 4096, 4096, 1 << 20);
      b.Pwrite(100, 3, off, 4096, 4096);
      b.Vectored(100, IOT_OP_PREADV, 3, off, {2048, 2048}, 4096);
      b.Lseek(100, 3, static_cast<int64_t>(off), SEEK_SET, static_cast<int64_t>(off));
      b.PathOp(100, IOT_OP_NEWFSTATAT, "/d/a", 0);
      if (i % 16 == 0) {
        b.Openat(100, "/d/b", O_RDONLY | O_CREAT, 4, 4096);
        b.Close(100, 4);
      }
    }
    b.Close(100, 3);
    if (!Prepare(b, &p)) {
      state.SkipWithError("cannot build the model");
      return;
    }
  }
  auto backend = MakeNullBackend();
  RunEngine(state, p, backend.get());
}
BENCHMARK(BM_ReplayEngineSyscalls)->Unit(benchmark::kMillisecond)->UseRealTime();

// Two threads of one process taking turns on one range: every read waits for the other
// thread's write (cross-thread dependencies on the hot path).
void BM_ReplayEngineDependentThreads(benchmark::State& state) {
  static Prepared p;
  if (!p.model) {
    TraceBuilder b;
    b.step = 1000;
    b.Thread(100, 101);
    b.NewThread(100, 101);
    b.Openat(100, "/d/a", O_RDWR | O_CREAT, 3, 1 << 20);
    for (int i = 0; i < 20000; i++) {
      uint64_t off = static_cast<uint64_t>(i % 256) * 4096;
      uint32_t writer = i % 2 ? 101 : 100, reader = i % 2 ? 100 : 101;
      b.Pwrite(writer, 3, off, 4096, 4096);
      b.Pread(reader, 3, off, 4096, 4096, 1 << 20);
    }
    b.Close(100, 3);
    if (!Prepare(b, &p)) {
      state.SkipWithError("cannot build the model");
      return;
    }
  }
  auto backend = MakeNullBackend();
  RunEngine(state, p, backend.get());
}
BENCHMARK(BM_ReplayEngineDependentThreads)->Unit(benchmark::kMillisecond)->UseRealTime();

// io_uring batches of 8 reads, each submitted and waited for by one io_uring_enter.
void BM_ReplayEngineAsyncBatches(benchmark::State& state) {
  static Prepared p;
  if (!p.model) {
    TraceBuilder b;
    b.Syscall(100, IOT_OP_IO_URING_SETUP, 5).length = 64;
    b.Openat(100, "/d/f", O_RDONLY | O_DIRECT, 3, 1 << 20);
    constexpr uint8_t kUringRead = 22;  // IORING_OP_READ
    uint64_t req = 1;
    for (int batch = 0; batch < 5000; batch++) {
      uint64_t t = b.now() + 100'000;
      for (int k = 0; k < 8; k++) {
        b.SetTime(t + 1'000 + k * 100);
        b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, kUringRead, 9, req + k, 3, k * 4096,
                4096);
      }
      for (int k = 0; k < 8; k++) {
        b.SetTime(t + 20'000 + k * 100);
        b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE, kUringRead, 9, req + k, 3,
                k * 4096, 4096, 4096);
      }
      req += 8;
      b.dur = 50'000;
      b.SetTime(t);
      auto& enter = b.Syscall(100, IOT_OP_IO_URING_ENTER, 8);
      enter.fd = 5;
      enter.flags = 1;  // IORING_ENTER_GETEVENTS
      b.dur = 1'000;
      b.SetTime(t + 100'000);
    }
    b.Close(100, 3);
    if (!Prepare(b, &p)) {
      state.SkipWithError("cannot build the model");
      return;
    }
  }
  auto backend = MakeNullBackend();
  RunEngine(state, p, backend.get());
}
BENCHMARK(BM_ReplayEngineAsyncBatches)->Unit(benchmark::kMillisecond)->UseRealTime();

// The null back end with a fixed time per call, spent sleeping like a device would.
class DelayBackend final : public Backend {
 public:
  explicit DelayBackend(uint64_t delay_ns) : delay_ns_(delay_ns), null_(MakeNullBackend()) {}
  const char* name() const override { return "delay"; }
  int64_t Execute(const LiveArgs& a) override {
    WaitUntil(NowNs() + delay_ns_, 0);
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
  std::unique_ptr<Backend> null_;
};

// Two independent threads of 21 calls of 1 ms each. Counter `overlap`: the time the calls
// would take one after the other over the time the replay took (2.0: fully concurrent, 1.0:
// serialised).
void BM_ReplayEngineIndependentThreadsOverlap(benchmark::State& state) {
  static Prepared p;
  constexpr uint64_t kDelayNs = 1'000'000;
  if (!p.model) {
    TraceBuilder b;
    b.Thread(100, 101);
    b.NewThread(100, 101);
    b.Openat(100, "/d/a", O_RDONLY, 3, 1 << 20);
    b.Openat(101, "/d/b", O_RDONLY, 4, 1 << 20);
    for (int i = 0; i < 20; i++) {
      b.Pread(100, 3, i * 4096, 4096, 4096);
      b.Pread(101, 4, i * 4096, 4096, 4096);
    }
    if (!Prepare(b, &p)) {
      state.SkipWithError("cannot build the model");
      return;
    }
  }
  DelayBackend backend(kDelayNs);
  ReplayOptions options;
  options.backend = BackendKind::kNull;
  options.pace = PaceMode::kFast;
  double overlap_sum = 0;
  int runs = 0;
  for (auto _ : state) {
    ReplayEngine engine(*p.plan, options, &backend);
    if (Status st = engine.Setup(); !st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
    uint64_t t0 = NowNs();
    engine.Start(t0);
    engine.Wait();
    uint64_t elapsed = NowNs() - t0;
    overlap_sum += static_cast<double>(engine.ops_done() * kDelayNs) / static_cast<double>(elapsed);
    runs++;
  }
  state.counters["overlap"] = runs ? overlap_sum / runs : 0;
}
BENCHMARK(BM_ReplayEngineIndependentThreadsOverlap)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- the engine's own cost per op, over the call itself ------------------------------------

// Delegates to another back end and notes when each call entered and left it: the time from one
// call's exit to the next call's entry is the engine's own work between them (the clock reads
// here are inside the calls, not in that time).
class TimingBackend final : public Backend {
 public:
  explicit TimingBackend(Backend* inner) : inner_(inner) {}
  const char* name() const override { return inner_->name(); }
  int64_t Execute(const LiveArgs& a) override {
    enter_.push_back(NowNs());
    int64_t r = inner_->Execute(a);
    exit_.push_back(NowNs());
    return r;
  }
  int CloneFd(int fd) override { return inner_->CloneFd(fd); }
  void CloseFd(int fd) override { inner_->CloseFd(fd); }
  uint8_t* MapFile(const Sandbox* s, const std::string& path, uint64_t length, uint32_t prot,
                   uint32_t flags, uint64_t offset) override {
    return inner_->MapFile(s, path, length, prot, flags, offset);
  }
  void Unmap(uint8_t* addr, uint64_t length) override { inner_->Unmap(addr, length); }
  Result<std::unique_ptr<AsyncEngine>> NewAsyncEngine(uint8_t engine, unsigned depth,
                                                      AsyncKind kind) override {
    return inner_->NewAsyncEngine(engine, depth, kind);
  }
  void Reset(size_t ops) {
    enter_.clear();
    exit_.clear();
    enter_.reserve(ops);  // no allocation inside the timed loop
    exit_.reserve(ops);
  }
  // Engine time between consecutive calls, ns, sorted.
  std::vector<uint64_t> Between() const {
    std::vector<uint64_t> v;
    for (size_t i = 1; i < enter_.size() && i < exit_.size() + 1; i++) {
      v.push_back(enter_[i] - exit_[i - 1]);
    }
    std::sort(v.begin(), v.end());
    return v;
  }
  uint64_t InCalls() const {
    uint64_t t = 0;
    for (size_t i = 0; i < exit_.size(); i++) t += exit_[i] - enter_[i];
    return t;
  }

 private:
  Backend* inner_;
  std::vector<uint64_t> enter_, exit_;
};

// One thread of 4 KiB preads and pwrites of a 1 MiB file, recorded back to back (no think
// time, so every pace issues each op as soon as the engine is ready for it).
TraceBuilder BackToBackReadsWrites() {
  TraceBuilder b;
  b.step = 1;
  b.dur = 1;
  b.Openat(100, "/d/a", O_RDWR, 3, 1 << 20);
  for (int i = 0; i < 10000; i++) {
    uint64_t off = static_cast<uint64_t>(i % 256) * 4096;
    b.Pread(100, 3, off, 4096, 4096, 1 << 20);
    b.Pwrite(100, 3, off, 4096, 4096);
  }
  b.Close(100, 3);
  return b;
}

// Replays `plan` over `timing` in `pace` once per iteration. Counters: `engine_ns_p50` and
// `engine_ns_p90`, the engine's own time between one call's return and the next call's entry;
// `engine_ns_mean` likewise; `call_ns_mean`, the time inside the back end.
void RunPerOp(benchmark::State& state, const ReplayPlan& plan, BackendKind kind,
              TimingBackend* timing, PaceMode pace, uint64_t ops) {
  ReplayOptions options;
  options.backend = kind;
  options.pace = pace;
  std::vector<uint64_t> between;
  uint64_t in_calls = 0, calls = 0;
  for (auto _ : state) {
    state.PauseTiming();
    timing->Reset(ops);
    auto engine = std::make_unique<ReplayEngine>(plan, options, timing);
    if (Status st = engine->Setup(); !st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
    state.ResumeTiming();
    engine->Start(NowNs());
    engine->Wait();
    state.PauseTiming();
    if (engine->stats().mismatches() || engine->stats().skipped()) {
      state.SkipWithError("the replay skipped ops or its results differ");
      return;
    }
    engine.reset();
    std::vector<uint64_t> b = timing->Between();
    between.insert(between.end(), b.begin(), b.end());
    in_calls += timing->InCalls();
    calls += b.size() + 1;
    state.ResumeTiming();
  }
  std::sort(between.begin(), between.end());
  auto q = [&](double f) {
    return between.empty() ? 0.0 : static_cast<double>(between[static_cast<size_t>(f * (between.size() - 1))]);
  };
  double sum = 0;
  for (uint64_t v : between) sum += static_cast<double>(v);
  state.SetItemsProcessed(static_cast<int64_t>(calls));
  state.counters["engine_ns_p50"] = q(0.5);
  state.counters["engine_ns_p90"] = q(0.9);
  state.counters["engine_ns_mean"] = between.empty() ? 0 : sum / static_cast<double>(between.size());
  state.counters["call_ns_mean"] = calls ? static_cast<double>(in_calls) / calls : 0;
}

PaceMode PaceArg(int64_t a) {
  return a == 0 ? PaceMode::kFast : a == 1 ? PaceMode::kGaps : PaceMode::kOriginal;
}

// The null back end: the call itself is nothing, so the figures are the engine alone.
void BM_ReplayEnginePerOpNull(benchmark::State& state) {
  static Prepared p;
  if (!p.model && !Prepare(BackToBackReadsWrites(), &p)) {
    state.SkipWithError("cannot build the model");
    return;
  }
  auto null = MakeNullBackend();
  TimingBackend timing(null.get());
  state.SetLabel(PaceName(PaceArg(state.range(0))));
  RunPerOp(state, *p.plan, BackendKind::kNull, &timing, PaceArg(state.range(0)), 20002);
}
BENCHMARK(BM_ReplayEnginePerOpNull)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// The sync back end on a prepared sandbox (the file in the page cache after the first pass):
// real pread64/pwrite64 system calls, so the engine's cost shows beside a call's.
void BM_ReplayEnginePerOpSync(benchmark::State& state) {
  static Prepared p;
  static std::string root;
  static std::vector<ReplayPlan> plans;
  if (plans.empty()) {
    p.model = BuildModel(BackToBackReadsWrites());
    char tmpl[] = "/var/tmp/iotwin-bench-replay-XXXXXX";
    if (!p.model || !mkdtemp(tmpl)) {
      state.SkipWithError("cannot build the model or the sandbox directory");
      return;
    }
    root = tmpl;
    // The sandbox goes when the benchmark binary exits.
    static struct RemoveRoot {
      ~RemoveRoot() {
        if (!root.empty()) {
          std::string cmd = "rm -rf -- '" + root + "'";
          if (system(cmd.c_str()) != 0) fprintf(stderr, "could not remove %s\n", root.c_str());
        }
      }
    } remove_root;
    ReplayOptions o;
    o.root = root;
    auto mapper = PathMapper::Create(root, {});
    auto plan = mapper.ok() ? BuildPlan(*p.model, *mapper, 1.0) : Result<ReplayPlan>(mapper.status());
    if (!plan.ok()) {
      state.SkipWithError(plan.status().ToString().c_str());
      return;
    }
    plans.push_back(std::move(plan).value());
    auto prep = PrepareSandbox(plans, o);
    if (!prep.ok()) {
      state.SkipWithError(prep.status().ToString().c_str());
      plans.clear();
      return;
    }
  }
  auto sync = MakeSyncBackend();
  TimingBackend timing(sync.get());
  state.SetLabel(PaceName(PaceArg(state.range(0))));
  RunPerOp(state, plans[0], BackendKind::kSync, &timing, PaceArg(state.range(0)), 20002);
}
BENCHMARK(BM_ReplayEnginePerOpSync)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace iotwin::replay
