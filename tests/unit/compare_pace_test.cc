// compare judges each pace by what it keeps, against the original paced on the replay's target
// (each call taking what it took in the replay): a gaps replay by the idle time between calls, an
// original-paced one by its rates.
#include <gtest/gtest.h>

#include <functional>

#include "analysis/compare.h"
#include "analysis/distance.h"
#include "trace_builder.h"
#include "base/gap_floor.h"
#include "interop_test_util.h"

namespace iotwin::analysis {
namespace {

using test::FullCaptureMeta;
using test::TraceBuilder;
constexpr uint64_t kStart = 2'000'000'000;
constexpr uint64_t kUs = 1'000;
constexpr uint64_t kMs = 1'000'000;
constexpr uint32_t kDev = 0x800001;
constexpr uint64_t kIno = 141;
constexpr int kFd = 3;

// Thread 101 of process 100: 200 preads of 4 KiB, each `dur(i)` long, `idle` apart (end of one
// to start of the next).
void Reads(TraceBuilder* t, uint64_t idle, const std::function<uint64_t(size_t)>& dur) {
  t->Open(101, kStart - 10 * kUs, "/data/f", kFd, kDev, kIno, O_RDONLY, 100);
  uint64_t ts = kStart;
  for (size_t i = 0; i < 200; i++) {
    const uint64_t d = dur(i);
    t->Io(IOT_OP_PREAD64, 101, ts, d, kFd, kDev, kIno, i * 4096, 4096, 4096, 100);
    ts += d + idle;
  }
  t->CloseAt(101, ts, kFd, kDev, kIno, 100);
}

TraceBuilder Replay(const char* pace) {
  TraceBuilder t(FullCaptureMeta());
  t.meta()["replay"] = {{"source", "orig.iotwin"}, {"pace", pace}, {"speed", 1.0}};
  return t;
}

nlohmann::json Compare(const TraceBuilder& orig, const TraceBuilder& replay) {
  interop::testing::ScratchDir dir;
  std::string a = dir / "orig.iotwin", b = dir / "replay.iotwin";
  EXPECT_TRUE(orig.WriteFile(a, {}).ok());
  EXPECT_TRUE(replay.WriteFile(b, {}).ok());
  auto r = CompareTraces(a, b, {});
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : nlohmann::json::object();
}

const nlohmann::json& Measure(const nlohmann::json& r, const char* name) {
  for (const auto& m : r["measures"])
    if (m["name"] == name) return m;
  static const nlohmann::json kNone = nlohmann::json::object();
  return kNone;
}

// Two calls 15 ms long where the original's took 20 us (a sync flushing more, a descriptor
// table growing): the run is 30 ms longer with every recorded gap kept.
uint64_t TwoSlowCalls(size_t i) { return i == 50 || i == 150 ? 15 * kMs : 20 * kUs; }
uint64_t Fast(size_t) { return 20 * kUs; }

TEST(ComparePace, GapsReplayWithSlowerCallsKeepsItsThinkTimeAndPasses) {
  TraceBuilder orig(FullCaptureMeta());
  Reads(&orig, 100 * kUs, Fast);
  TraceBuilder replay = Replay("gaps");
  Reads(&replay, 100 * kUs, TwoSlowCalls);
  nlohmann::json r = Compare(orig, replay);
  const std::string text = RenderCompareText(r);
  EXPECT_EQ(r["verdict"], "pass") << text;
  // The recorded rates are off by the calls' own time; against the original paced with the
  // replay's call durations they are not.
  const nlohmann::json& iops = Measure(r, "iops-rel-err");
  EXPECT_GT(RelativeError(iops["recorded_original"].get<double>(), iops["replay"].get<double>()), 0.5)
      << text;
  EXPECT_LT(iops["value"].get<double>(), 0.01) << text;
  EXPECT_FALSE(Measure(r, "iops-rel-err")["judged"].get<bool>());
  EXPECT_FALSE(Measure(r, "throughput-rel-err")["judged"].get<bool>());
  EXPECT_TRUE(Measure(r, "idle-rel-err")["judged"].get<bool>()) << text;
  EXPECT_LT(Measure(r, "idle-rel-err")["value"].get<double>(), 1e-6);
  EXPECT_NE(text.find("pace gaps: idle time between calls"), std::string::npos) << text;
}

TEST(ComparePace, GapsReplayThatStretchesThinkTimeFailsIdle) {
  TraceBuilder orig(FullCaptureMeta());
  Reads(&orig, 100 * kUs, Fast);
  TraceBuilder replay = Replay("gaps");
  // Calls 40 us slower too: more time than the idle time gained, and no cause of the FAIL.
  Reads(&replay, 125 * kUs, [](size_t) { return 60 * kUs; });
  nlohmann::json r = Compare(orig, replay);
  EXPECT_NEAR(Measure(r, "idle-rel-err")["value"].get<double>(), 0.25, 1e-3);
  bool idle_failed = false;
  for (const auto& f : r["failed"]) idle_failed |= f == "idle-rel-err";
  EXPECT_TRUE(idle_failed) << RenderCompareText(r);
  ASSERT_FALSE(r["causes"].empty());
  EXPECT_EQ(r["causes"][0]["cause"], "replay overhead or pacing (idle time between calls differs)");
}

TEST(ComparePace, OriginalPacedReplayIsJudgedOnItsRates) {
  TraceBuilder orig(FullCaptureMeta());
  Reads(&orig, 100 * kUs, Fast);
  TraceBuilder replay = Replay("original");
  Reads(&replay, 100 * kUs, TwoSlowCalls);
  nlohmann::json r = Compare(orig, replay);
  EXPECT_TRUE(Measure(r, "iops-rel-err")["judged"].get<bool>());
  EXPECT_FALSE(Measure(r, "iops-rel-err")["pass"].get<bool>());
  EXPECT_TRUE(Measure(r, "idle-rel-err").empty());  // measured for gaps replays only
}

// A device-bound thread, as pace original replays it: the original's calls take 80 us with 20 us
// of think time after each (one every 100 us); on the replay's target they take 130 us, so every
// call is due before the previous one returned and is issued as soon as the replayer can: the
// thread's gap floor after it (base/gap_floor.h; 2 us here, the floor's cap).
constexpr uint64_t kThink = 20 * kUs;
uint64_t Recorded(size_t) { return 80 * kUs; }
uint64_t SlowerTarget(size_t) { return 130 * kUs; }

bool FailedMeasure(const nlohmann::json& r, const char* name) {
  for (const auto& f : r["failed"])
    if (f == name) return true;
  return false;
}

TEST(ComparePace, OriginalPacedReplayOnASlowerTargetIssuingFaithfullyPasses) {
  TraceBuilder orig(FullCaptureMeta());
  Reads(&orig, kThink, Recorded);
  TraceBuilder replay = Replay("original");
  Reads(&replay, kMaxGapFloorNs, SlowerTarget);
  nlohmann::json r = Compare(orig, replay);
  const std::string text = RenderCompareText(r);
  EXPECT_EQ(r["verdict"], "pass") << text;
  const nlohmann::json& iops = Measure(r, "iops-rel-err");
  EXPECT_TRUE(iops["judged"].get<bool>());
  EXPECT_LT(iops["value"].get<double>(), 0.01) << text;
  // The replay ran 30% longer than the recording, and says so: the recorded rate and the cause.
  EXPECT_GT(RelativeError(iops["recorded_original"].get<double>(), iops["replay"].get<double>()), 0.2);
  EXPECT_EQ(r["paced"]["paced_calls"], r["paced"]["calls"]);
  ASSERT_FALSE(r["paced"]["target"].empty()) << r["paced"].dump();
  EXPECT_EQ(r["paced"]["target"][0]["cause"], "calls slower (device or cache state)");
  EXPECT_NE(text.find("  target    calls slower"), std::string::npos) << text;
  for (const char* name : {"iops-series-err", "thread-series-err", "iat-ks"})
    EXPECT_LT(Measure(r, name)["value"].get<double>(), 0.02) << name << "\n" << text;
}

TEST(ComparePace, OriginalPacedReplayAddingTimeBetweenCallsFails) {
  // (b) the recorded call times, 20 us more between calls; (c) the slower target and 30 us more
  // between calls than the late schedule allows.
  struct Case {
    const char* name;
    uint64_t idle;
    uint64_t (*dur)(size_t);
  };
  for (const Case& c : {Case{"same calls, more idle", kThink + 20 * kUs, Recorded},
                        Case{"slower calls, idle added", 30 * kUs, SlowerTarget}}) {
    SCOPED_TRACE(c.name);
    TraceBuilder orig(FullCaptureMeta());
    Reads(&orig, kThink, Recorded);
    TraceBuilder replay = Replay("original");
    Reads(&replay, c.idle, c.dur);
    nlohmann::json r = Compare(orig, replay);
    const std::string text = RenderCompareText(r);
    EXPECT_TRUE(FailedMeasure(r, "iops-rel-err")) << text;
    EXPECT_TRUE(FailedMeasure(r, "throughput-rel-err")) << text;
    EXPECT_GT(Measure(r, "iops-rel-err")["value"].get<double>(), 0.15) << text;
    ASSERT_FALSE(r["causes"].empty()) << text;
    EXPECT_EQ(r["causes"][0]["cause"], "replay overhead or pacing (idle time between calls differs)")
        << text;
  }
}

TEST(ComparePace, OriginalPacedReplayThatStallsOnASlowerTargetFails) {
  TraceBuilder orig(FullCaptureMeta());
  Reads(&orig, kThink, Recorded);
  TraceBuilder replay = Replay("original");
  // Faithful on the slower target but for one 20 ms pause before call 100.
  replay.Open(101, kStart - 10 * kUs, "/data/f", kFd, kDev, kIno, O_RDONLY, 100);
  uint64_t ts = kStart;
  for (size_t i = 0; i < 200; i++) {
    if (i == 100) ts += 20 * kMs;
    replay.Io(IOT_OP_PREAD64, 101, ts, 130 * kUs, kFd, kDev, kIno, i * 4096, 4096, 4096, 100);
    ts += 130 * kUs;
  }
  replay.CloseAt(101, ts, kFd, kDev, kIno, 100);
  nlohmann::json r = Compare(orig, replay);
  const std::string text = RenderCompareText(r);
  EXPECT_TRUE(FailedMeasure(r, "stall-ms")) << text;
  EXPECT_TRUE(FailedMeasure(r, "iops-rel-err")) << text;
  EXPECT_NEAR(Measure(r, "stall-ms")["value"].get<double>(), 20.0, 0.5) << text;
}

// Reads every `step` from kStart, each 20 us long.
void Every(TraceBuilder* t, uint64_t step) {
  t->Open(101, kStart - 10 * kUs, "/data/f", kFd, kDev, kIno, O_RDONLY, 100);
  for (size_t i = 0; i < 200; i++) {
    t->Io(IOT_OP_PREAD64, 101, kStart + i * step, 20 * kUs, kFd, kDev, kIno, i * 4096, 4096, 4096,
          100);
  }
  t->CloseAt(101, kStart + 200 * step, kFd, kDev, kIno, 100);
}

TEST(ComparePace, ReplayAtSpeedTwoIsJudgedAgainstTheOriginalAtSpeedTwo) {
  for (const char* pace : {"original", "gaps"}) {
    TraceBuilder orig(FullCaptureMeta());
    Every(&orig, 1 * kMs);
    TraceBuilder replay = Replay(pace);
    replay.meta()["replay"]["speed"] = 2.0;
    // Calls every 0.5 ms: the schedule halved, or each 980 us gap halved (+ the 20 us call).
    Every(&replay, std::string(pace) == "gaps" ? 510 * kUs : 500 * kUs);
    nlohmann::json r = Compare(orig, replay);
    const std::string text = RenderCompareText(r);
    EXPECT_EQ(r["verdict"], "pass") << pace << "\n" << text;
    EXPECT_LT(Measure(r, "iat-ks")["value"].get<double>(), 0.01) << text;
    EXPECT_NE(text.find("speed     2: the original's timeline is scaled by 1/2"), std::string::npos)
        << text;
    EXPECT_NE(text.find("pace " + std::string(pace) + ", speed 2"), std::string::npos) << text;
  }
  // Where the original was too busy for double speed, a call waits for its predecessor (and the
  // gap floor after it: the recorded 10 us gaps put it at its 2 us cap).
  TraceBuilder orig(FullCaptureMeta());
  Every(&orig, 30 * kUs);
  TraceBuilder replay = Replay("original");
  replay.meta()["replay"]["speed"] = 2.0;
  Every(&replay, 20 * kUs + kMaxGapFloorNs);
  nlohmann::json r = Compare(orig, replay);
  EXPECT_LT(Measure(r, "iops-rel-err")["value"].get<double>(), 0.01) << RenderCompareText(r);
}

// An strace import's gaps carry strace's own cost per call: a replay that runs the same calls
// closer together (catching up after a slower call) differs in iat-ks for that reason alone.
TEST(ComparePace, StraceImportedOriginalReportsIatWithoutJudgingIt) {
  for (bool strace : {false, true}) {
    TraceBuilder orig(FullCaptureMeta());
    if (strace) orig.meta()["tool"] = "iotwin import (strace)";
    Every(&orig, 100 * kUs);
    TraceBuilder replay = Replay("original");
    // About the same window; the calls in bursts 10 us apart where the original had them 100 us
    // apart (inter-arrival times under 50 us count as 50 us: --iat-resolution-us).
    replay.Open(101, kStart - 10 * kUs, "/data/f", kFd, kDev, kIno, O_RDONLY, 100);
    for (size_t i = 0; i < 200; i++) {
      const uint64_t at = kStart + (i / 20) * 2190 * kUs + (i % 20) * 10 * kUs;
      replay.Io(IOT_OP_PREAD64, 101, at, 2 * kUs, kFd, kDev, kIno, i * 4096, 4096, 4096, 100);
    }
    replay.CloseAt(101, kStart + 200 * 100 * kUs, kFd, kDev, kIno, 100);
    nlohmann::json r = Compare(orig, replay);
    const std::string text = RenderCompareText(r);
    EXPECT_GT(Measure(r, "iat-ks")["value"].get<double>(), 0.5) << text;
    EXPECT_EQ(Measure(r, "iat-ks")["judged"].get<bool>(), !strace) << text;
    EXPECT_EQ(text.find("the original is an strace import") != std::string::npos, strace) << text;
  }
}

// A paced trace compared with itself passes, even where its clock shows a thread's calls
// overlapping (a call entered before the previous one returned: clock skew between CPUs, or a
// forged trace): the model keeps the recorded overlap instead of moving the call after its
// predecessor's return.
TEST(ComparePace, APacedTraceWithOverlappingCallsPassesAgainstItself) {
  for (const char* pace : {"original", "gaps"}) {
    TraceBuilder t = Replay(pace);
    t.Open(101, kStart - 10 * kUs, "/data/f", kFd, kDev, kIno, O_RDONLY, 100);
    uint64_t ts = kStart;
    for (size_t i = 0; i < 32; i++) {
      t.Io(IOT_OP_PREAD64, 101, ts, 1 * kUs, kFd, kDev, kIno, i * 4096, 4096, 4096, 100);
      // Every fourth call starts 500 ns before the previous one returned.
      ts += (i % 4 == 3) ? 500 : 1 * kUs + (i % 3 + 1) * 5 * kUs;
    }
    t.CloseAt(101, ts + 10 * kUs, kFd, kDev, kIno, 100);
    nlohmann::json r = Compare(t, t);
    EXPECT_EQ(r["verdict"], "pass") << pace << "\n" << RenderCompareText(r);
    EXPECT_EQ(r["paced"]["window_ns"]["paced"], r["paced"]["window_ns"]["recorded"]) << pace;
    EXPECT_EQ(r["paced"]["idle_ns"]["paced"], r["paced"]["idle_ns"]["recorded"]) << pace;
  }
}

}  // namespace
}  // namespace iotwin::analysis
