// compare's time base and time measures on synthetic traces: rates over the active window,
// cumulative work curves that ignore a few ms of jitter, stalls, threads trading places, and
// the explanation of a FAIL.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "analysis/compare.h"
#include "analysis/compare_timing.h"
#include "analysis/distance.h"
#include "trace_builder.h"
#include "base/gap_floor.h"
#include "interop_test_util.h"

namespace iotwin::analysis {
namespace {

using test::FullCaptureMeta;
using test::TraceBuilder;
constexpr uint64_t kStart = 2'000'000'000;
constexpr uint64_t kMs = 1'000'000;
constexpr uint32_t kDev = 0x800001;

// One thread of process 100: opens its own file, issues one pread per entry of `times`
// (`length` bytes at consecutive offsets, each call `dur` long), closes it.
void Thread(TraceBuilder* t, uint32_t tid, const std::vector<uint64_t>& times, uint64_t length,
            uint64_t dur = 20'000) {
  const int fd = static_cast<int>(tid - 98);  // 101 -> 3, 102 -> 4
  const uint64_t ino = 40 + tid;
  t->Open(tid, times.front() - 10'000, "/data/file" + std::to_string(tid), fd, kDev, ino,
          O_RDONLY, 100);
  for (size_t i = 0; i < times.size(); i++) {
    t->Io(IOT_OP_PREAD64, tid, times[i], dur, fd, kDev, ino, i * length, length,
          static_cast<int64_t>(length), 100);
  }
  t->CloseAt(tid, times.back() + dur + 10'000, fd, kDev, ino, 100);
}

// `n` calls every `step` ns from `from`, each moved by `shift(i)`.
std::vector<uint64_t> Times(size_t n, uint64_t from, uint64_t step,
                            const std::function<uint64_t(size_t)>& shift = nullptr) {
  std::vector<uint64_t> v;
  for (size_t i = 0; i < n; i++) v.push_back(from + i * step + (shift ? shift(i) : 0));
  return v;
}

const nlohmann::json& MeasureOf(const nlohmann::json& r, const char* name) {
  for (const auto& m : r["measures"])
    if (m["name"] == name) return m;
  static const nlohmann::json kNone;
  ADD_FAILURE() << "no measure " << name;
  return kNone;
}
double Value(const nlohmann::json& r, const char* name) {
  const auto& m = MeasureOf(r, name);
  return m.is_null() ? -1 : m["value"].get<double>();
}
bool Failed(const nlohmann::json& r, const char* name) {
  for (const auto& f : r["failed"])
    if (f == name) return true;
  return false;
}

nlohmann::json Compare(const TraceBuilder& orig, const TraceBuilder& replay,
                       CompareOptions o = {}) {
  interop::testing::ScratchDir dir;
  std::string a = dir / "orig.iotwin", b = dir / "replay.iotwin";
  EXPECT_TRUE(orig.WriteFile(a, {}).ok());
  EXPECT_TRUE(replay.WriteFile(b, {}).ok());
  auto r = CompareTraces(a, b, o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : nlohmann::json::object();
}

// A write to an inherited stdout (fd 1): not a call a replay re-issues.
void Stdout(TraceBuilder* t, uint64_t ts) {
  t->Io(IOT_OP_WRITE, 101, ts, 5'000, 1, 0, 0, 0, 64, 64, 100);
}

TEST(CompareTiming, RatesUseTheActiveWindowOfJudgedCalls) {
  TraceBuilder orig(FullCaptureMeta()), replay(FullCaptureMeta());
  Thread(&orig, 101, Times(200, kStart, kMs), 4096);
  // The replay's own start-up and teardown: 300 ms before and after the workload's calls.
  Stdout(&replay, kStart - 300 * kMs);
  Thread(&replay, 101, Times(200, kStart, kMs), 4096);
  Stdout(&replay, kStart + 500 * kMs);
  nlohmann::json r = Compare(orig, replay);
  EXPECT_LT(Value(r, "iops-rel-err"), 1e-9) << r["timing"].dump();
  EXPECT_EQ(r["timing"]["window"]["original"]["ns"], r["timing"]["window"]["replay"]["ns"]);
  EXPECT_EQ(r["timing"]["window"]["original"]["ns"].get<uint64_t>(), 199 * kMs + 40'000);
  EXPECT_EQ(r["verdict"], "pass") << RenderCompareText(r);
  EXPECT_NE(RenderCompareText(r).find("first to last judged call"), std::string::npos);

  // Judging every call, the stdout writes are the workload's: the window grows with them.
  CompareOptions all;
  all.storage_calls_only = false;
  nlohmann::json r_all = Compare(orig, replay, all);
  EXPECT_GT(r_all["timing"]["window"]["replay"]["ns"].get<uint64_t>(), 700 * kMs);
}

TEST(CompareTiming, SeriesIgnoreAFewMsOfJitterInAMultiSecondRun) {
  TraceBuilder orig(FullCaptureMeta()), replay(FullCaptureMeta());
  Thread(&orig, 101, Times(1000, kStart, 4 * kMs), 4096);
  Thread(&orig, 102, Times(1000, kStart + kMs, 4 * kMs), 8192);
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint64_t> late(0, 3 * kMs);
  Thread(&replay, 101, Times(1000, kStart, 4 * kMs, [&](size_t) { return late(rng); }), 4096);
  Thread(&replay, 102, Times(1000, kStart + kMs, 4 * kMs, [&](size_t) { return late(rng); }), 8192);
  // Independent lateness of every call changes the think times themselves (all exactly 4 ms
  // here): iat-ks is meant to see that, the time series are not.
  CompareOptions o;
  ASSERT_TRUE(ParseThreshold("iat-ks=off", &o).ok());
  nlohmann::json r = Compare(orig, replay, o);
  EXPECT_LT(Value(r, "iops-series-err"), 0.005);
  EXPECT_LT(Value(r, "throughput-series-err"), 0.005);
  EXPECT_LT(Value(r, "thread-series-err"), 0.005);
  EXPECT_LT(Value(r, "stall-ms"), 3.01);
  EXPECT_EQ(r["verdict"], "pass") << RenderCompareText(r);
}

TEST(CompareTiming, AStallThatIsNotMadeUpFails) {
  TraceBuilder orig(FullCaptureMeta()), stalled(FullCaptureMeta()), caught_up(FullCaptureMeta());
  Thread(&orig, 101, Times(500, kStart, 2 * kMs), 4096);
  // Everything from call 250 on 20 ms later.
  Thread(&stalled, 101, Times(500, kStart, 2 * kMs, [](size_t i) { return i >= 250 ? 20 * kMs : 0; }), 4096);
  nlohmann::json r = Compare(orig, stalled);
  EXPECT_NEAR(Value(r, "stall-ms"), 20.0, 0.1);
  EXPECT_TRUE(Failed(r, "stall-ms")) << RenderCompareText(r);
  EXPECT_LT(Value(r, "iops-rel-err"), 0.05);  // 20 ms in a 1 s run: the rate alone misses it
  EXPECT_EQ(r["timing"]["stall"]["call"].get<uint64_t>(), 251u) << r["timing"]["stall"].dump();  // open is call 0
  // One call 30 ms late, the next ones on time again (original pacing catching up): no stall.
  TraceBuilder slow_orig(FullCaptureMeta());
  Thread(&slow_orig, 101, Times(100, kStart, 50 * kMs), 4096);
  Thread(&caught_up, 101, Times(100, kStart, 50 * kMs, [](size_t i) { return i == 50 ? 30 * kMs : 0; }), 4096);
  nlohmann::json late = Compare(slow_orig, caught_up);
  EXPECT_LT(Value(late, "stall-ms"), 1.01);
  EXPECT_EQ(late["verdict"], "pass") << RenderCompareText(late);
}

TEST(CompareTiming, AStallIsOneEveryRunningThreadShows) {
  auto shifted = [](uint32_t tid, size_t from) {
    return Times(500, kStart + (tid - 101) * 500'000, 2 * kMs,
                 [from](size_t i) { return i >= from ? 20 * kMs : 0; });
  };
  TraceBuilder orig(FullCaptureMeta()), both(FullCaptureMeta()), one(FullCaptureMeta());
  Thread(&orig, 101, shifted(101, 500), 4096);
  Thread(&orig, 102, shifted(102, 500), 8192);
  // The replay as a whole stops for 20 ms: both threads.
  Thread(&both, 101, shifted(101, 250), 4096);
  Thread(&both, 102, shifted(102, 250), 8192);
  nlohmann::json r = Compare(orig, both);
  EXPECT_NEAR(Value(r, "stall-ms"), 20.0, 0.1) << r["timing"]["stall"].dump();
  EXPECT_EQ(r["timing"]["stall"]["threads"], 2);
  EXPECT_TRUE(Failed(r, "stall-ms"));
  ASSERT_FALSE(r["causes"].empty());
  EXPECT_NE(r["causes"][0]["cause"].get<std::string>().find("stalled"), std::string::npos)
      << r["causes"].dump();
  // One thread waits 20 ms (on a lock, a queue) while the other runs on: not a stall.
  Thread(&one, 101, shifted(101, 250), 4096);
  Thread(&one, 102, shifted(102, 500), 8192);
  nlohmann::json w = Compare(orig, one);
  // (What remains, under 2 ms, is thread 102's last gap: 101 ended inside it in the original,
  // so its idle time counts from that end there, from 102's previous call in the replay.)
  EXPECT_LT(Value(w, "stall-ms"), 2.0) << w["timing"]["stall"].dump();
  EXPECT_FALSE(Failed(w, "stall-ms"));
}

// One thread: a read `first_dur` long, then 20 more reads on the original's schedule.
TraceBuilder FirstCallThenSchedule(uint64_t first_dur) {
  TraceBuilder t(FullCaptureMeta());
  t.Open(101, kStart, "/data/f", 3, kDev, 1, O_RDONLY, 100);
  t.Io(IOT_OP_PREAD64, 101, kStart + 10'000, first_dur, 3, kDev, 1, 0, 4096, 4096, 100);
  for (uint64_t i = 1; i <= 20; i++) {
    t.Io(IOT_OP_PREAD64, 101, kStart + 80 * kMs + i * kMs, 20'000, 3, kDev, 1, i * 4096, 4096,
         4096, 100);
  }
  t.CloseAt(101, kStart + 102 * kMs, 3, kDev, 1, 100);
  return t;
}

TEST(CompareTiming, WaitingForTheScheduleAfterAFasterCallIsNotAStall) {
  // The first read took 80 ms in the original and 1 ms in the replay, which then waits 79 ms
  // for the next call's recorded instant (original pacing): more idle time, issued on time.
  nlohmann::json r = Compare(FirstCallThenSchedule(80 * kMs), FirstCallThenSchedule(kMs));
  EXPECT_LT(Value(r, "stall-ms"), 0.1) << r["timing"]["stall"].dump();
  EXPECT_FALSE(Failed(r, "stall-ms"));
}

// Thread 101 does 100 calls, each `dur` long with 980 us idle between them, then creates
// thread 102, which starts its 100 calls 50 us later.
TraceBuilder CreatorThenWorker(uint64_t dur) {
  TraceBuilder t(FullCaptureMeta());
  std::vector<uint64_t> times = Times(100, kStart, 980'000 + dur);
  Thread(&t, 101, times, 4096, dur);
  const uint64_t created = times.back() + dur + 20'000;
  t.ProcAt(IOT_PROC_THREAD, created, 100, 101, "worker", 100, 102);
  Thread(&t, 102, Times(100, created + 60'000, kMs), 8192);
  return t;
}

TEST(CompareTiming, AThreadCreatedLaterByItsSlowerCreatorIsNotAStall) {
  // The creator's calls take 200 us longer each in the replay: the worker starts 20 ms later,
  // waiting on its creator, never idle itself.
  nlohmann::json r = Compare(CreatorThenWorker(20'000), CreatorThenWorker(220'000));
  EXPECT_LT(Value(r, "stall-ms"), 0.1) << r["timing"]["stall"].dump();
  EXPECT_FALSE(Failed(r, "stall-ms"));
}

// Thread 101 reads once, creates worker 102 (100 calls, each `dur` long, 980 us idle between
// them), joins it (102 exits) and reads once more 50 us later.
TraceBuilder WorkerThenJoin(uint64_t dur, int64_t main_after_close = 80'000) {
  TraceBuilder t(FullCaptureMeta());
  t.Open(101, kStart, "/data/main", 3, kDev, 1, O_RDONLY, 100);
  t.Io(IOT_OP_PREAD64, 101, kStart + 10'000, 20'000, 3, kDev, 1, 0, 4096, 4096, 100);
  t.ProcAt(IOT_PROC_THREAD, kStart + 40'000, 100, 101, "worker", 100, 102);
  std::vector<uint64_t> times = Times(100, kStart + 100'000, 980'000 + dur);
  t.Open(102, times.front() - 10'000, "/data/worker", 4, kDev, 2, O_RDONLY, 100);
  for (size_t i = 0; i < times.size(); i++)
    t.Io(IOT_OP_PREAD64, 102, times[i], dur, 4, kDev, 2, i * 8192, 8192, 8192, 100);
  const uint64_t close = times.back() + dur + 10'000;
  t.CloseAt(102, close, 4, kDev, 2, 100);
  const uint64_t exit = times.back() + dur + 30'000;
  t.ProcAt(IOT_PROC_EXIT, exit, 100, 102, "worker");
  const uint64_t main_read = static_cast<uint64_t>(static_cast<int64_t>(close) + main_after_close);
  t.Io(IOT_OP_PREAD64, 101, main_read, 20'000, 3, kDev, 1, 4096, 4096, 4096, 100);
  t.CloseAt(101, std::max(exit, main_read) + 100'000, 3, kDev, 1, 100);
  return t;
}

TEST(CompareTiming, AJoinWaitingOnASlowerThreadIsNotAStall) {
  // The worker's calls take 200 us longer each in the replay: the main thread's join waits
  // 20 ms longer, on the worker, never idle itself.
  nlohmann::json r = Compare(WorkerThenJoin(20'000), WorkerThenJoin(220'000));
  EXPECT_LT(Value(r, "stall-ms"), 0.1) << r["timing"]["stall"].dump();
  EXPECT_FALSE(Failed(r, "stall-ms"));
}

// The main thread's call after the join is issued while, in the replay, the worker's last call
// is still completing (nothing orders them: a join makes no call). The original waited for the
// worker there, and so did the replay: no stall.
TEST(CompareTiming, ACallAfterAJoinThatOverlapsTheOtherThreadsLastCallIsNotAStall) {
  nlohmann::json r = Compare(WorkerThenJoin(20'000), WorkerThenJoin(20'000, 0));
  EXPECT_LT(Value(r, "stall-ms"), 0.1) << r["timing"]["stall"].dump();
  EXPECT_FALSE(Failed(r, "stall-ms"));
}

TEST(CompareTiming, ThreadsTradingPlacesFailThreadSeries) {
  TraceBuilder orig(FullCaptureMeta()), swapped(FullCaptureMeta());
  Thread(&orig, 101, Times(100, kStart, kMs), 4096);              // first half of the run
  Thread(&orig, 102, Times(100, kStart + 100 * kMs, kMs), 8192);  // second half
  Thread(&swapped, 101, Times(100, kStart + 100 * kMs, kMs), 4096);
  Thread(&swapped, 102, Times(100, kStart, kMs), 8192);
  nlohmann::json r = Compare(orig, swapped);
  EXPECT_EQ(Value(r, "seq-match"), 1.0);
  EXPECT_GT(Value(r, "thread-series-err"), 0.4);
  EXPECT_TRUE(Failed(r, "thread-series-err")) << RenderCompareText(r);
  EXPECT_LT(Value(r, "iops-series-err"), 0.01);  // the run as a whole looks the same
}

TEST(CompareTiming, AFailExplainsItself) {
  TraceBuilder orig(FullCaptureMeta()), slower(FullCaptureMeta());
  Thread(&orig, 101, Times(300, kStart, kMs, nullptr), 4096, 100'000);
  // Each call 500 us long instead of 100 us, issued as soon as the previous returned.
  Thread(&slower, 101, Times(300, kStart, kMs + 400'000), 4096, 500'000);
  nlohmann::json r = Compare(orig, slower);
  ASSERT_EQ(r["verdict"], "fail");
  EXPECT_TRUE(Failed(r, "iops-rel-err"));
  ASSERT_FALSE(r["causes"].empty());
  EXPECT_NE(r["causes"][0]["cause"].get<std::string>().find("calls slower"), std::string::npos)
      << r["causes"].dump();
  const auto& lat = r["timing"]["latency_ns"];
  ASSERT_FALSE(lat.empty());
  EXPECT_EQ(lat[0]["op"], "pread64");
  EXPECT_LT(lat[0]["original"]["p50"].get<uint64_t>(), lat[0]["replay"]["p50"].get<uint64_t>());
  std::string text = RenderCompareText(r);
  for (const char* want : {"WHY", "likely cause: calls slower", "most diverged stretch", "pread64"})
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
}

// A dependent chain of one thread: each call waits on the device (`dur`), then `think` ns pass
// before the next (none from call `skip_think_from` on); each call carries one async request.
// A thread of `calls` calls of `dur` ns, `think` ns apart; from call `skip_think_from` on only
// `late_gap` ns apart (a replay catching up on its schedule: one call right after the other).
CallTimeline Chain(uint64_t dur, uint64_t think, int calls, uint64_t skip_think_from = UINT64_MAX,
                   uint64_t late_gap = 0) {
  CallTimeline t;
  uint64_t ts = kStart;
  for (int i = 0; i < calls; i++) {
    t.Add(100, 101, TimedCall{ts, ts + dur, 4096, true, false});
    t.Add(100, 101, TimedCall{ts + 1000, ts + dur, 4096, true, true});  // async: left out
    ts += dur + (static_cast<uint64_t>(i) >= skip_think_from ? late_gap : think);
  }
  t.Finish();
  return t;
}

// The replay's target twice as slow as the original's: the replay's own inter-arrival times are
// longer, which iat-ks judges against the original's schedule paced with the replay's call
// durations. Gaps pacing keeps the think time after each longer call; original pacing, late
// after each call that outlasts the recorded spacing, issues the next as soon as it can: after
// the thread's gap floor (the cost of one call's return and the next's entry: here 2 us, the
// floor's cap, as every recorded gap is 20 us).
TEST(CompareTiming, InterArrivalIsJudgedAgainstTheScheduleThePaceKeepsOnTheReplaysTarget) {
  const CallTimeline original = Chain(100'000, 20'000, 200);
  const CallTimeline think_kept = Chain(200'000, 20'000, 200);
  const CallTimeline think_lost = Chain(200'000, 20'000, 200, 0, kMaxGapFloorNs);
  auto paced = [&](const CallTimeline& replay, const char* pace) {
    return PaceOnReplayTarget(original, replay, {{original.Find(100, 101), replay.Find(100, 101)}},
                              pace, 1.0);
  };
  auto ks = [&](const CallTimeline& replay, const char* pace) {
    const PacedTimeline p = paced(replay, pace);
    EXPECT_EQ(p.paced_calls, 200u);
    EXPECT_EQ(p.calls, 200u);
    const PacedArrivals arrivals = PacedInterArrival(p, replay);
    EXPECT_EQ(arrivals.original.total(), 199u);
    return KsDistanceFrom(arrivals.original, arrivals.replay, 1);
  };
  EXPECT_GT(KsDistanceFrom(InterArrival(original), InterArrival(think_kept), 1), 0.9);
  EXPECT_LT(ks(think_kept, "gaps"), 0.01);
  EXPECT_GT(ks(think_lost, "gaps"), 0.9);
  EXPECT_LT(ks(think_lost, "original"), 0.01);
  EXPECT_GT(ks(think_kept, "original"), 0.9);
  // Original pacing on a faster target waits for the schedule: the original's own times.
  const CallTimeline faster = Chain(50'000, 70'000, 200);
  EXPECT_LT(ks(faster, "original"), 0.01);
  EXPECT_GT(ks(faster, "gaps"), 0.9);
  // The paced window is the replay's where it kept what the pace keeps.
  EXPECT_EQ(paced(think_kept, "gaps").timeline.window_ns(), think_kept.window_ns());
  EXPECT_EQ(paced(think_lost, "original").timeline.window_ns(), think_lost.window_ns());
  EXPECT_EQ(paced(faster, "original").timeline.window_ns(), original.window_ns());
  // Async requests move with the call that carried them.
  const PacedTimeline moved = paced(think_lost, "original");
  const ThreadCalls* th = moved.timeline.Find(100, 101);
  ASSERT_NE(th, nullptr);
  EXPECT_EQ(th->calls[2].ts, kStart + 202'000);
  EXPECT_TRUE(th->calls[3].async);
  EXPECT_EQ(th->calls[3].ts, kStart + 203'000);
  EXPECT_EQ(moved.Map(101, kStart + 120'000 + 500), kStart + 202'000 + 500);
  // The floor is in the model: a replay issuing each late call with no gap at all differs.
  const CallTimeline no_gap = Chain(200'000, 20'000, 200, 0);
  EXPECT_GT(ks(no_gap, "original"), 0.9);
  // Call counts that differ: the recorded times.
  const CallTimeline shorter = Chain(200'000, 20'000, 150);
  const PacedTimeline u = paced(shorter, "gaps");
  EXPECT_EQ(u.paced_calls, 0u);
  EXPECT_EQ(u.timeline.window_ns(), original.window_ns());
  const PacedArrivals ua = PacedInterArrival(u, shorter);
  EXPECT_EQ(ua.original.total(), 199u);
  EXPECT_EQ(ua.replay.total(), 149u);
}

TEST(Distance, CurveDistanceIsTheMeanShiftOfTheWork) {
  std::vector<WorkPoint> a, shifted;
  for (int i = 0; i < 100; i++) {
    a.push_back({i / 200.0, 1});
    shifted.push_back({i / 200.0 + 0.1, 1});
  }
  EXPECT_NEAR(CurveDistance(a, a), 0.0, 1e-12);
  EXPECT_NEAR(CurveDistance(a, shifted), 0.1, 1e-9);
  EXPECT_NEAR(CurveDistance({{0, 1}}, {{1, 1}}), 1.0, 1e-12);
  EXPECT_EQ(CurveDistance({}, {}), 0.0);
  EXPECT_EQ(CurveDistance({{0.5, 1}}, {}), 1.0);
  // Weights: half the bytes at the start and half at the end against all of them at the end.
  EXPECT_NEAR(CurveDistance({{0, 1}, {1, 1}}, {{1, 2}}), 0.5, 1e-12);
  // Hostile inputs stay in range.
  EXPECT_NEAR(CurveDistance({{-5, 1}, {NAN, 1}}, {{0, 1}}), 0.0, 1e-12);
  EXPECT_EQ(CurveDistance({{0.5, -1}}, {{0.5, 1}}), 1.0);
}

}  // namespace
}  // namespace iotwin::analysis
