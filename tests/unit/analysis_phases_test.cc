// Phases marked by intent markers: each begin..end interval's times, calls, call latency,
// faults and mapped bytes (the marking thread's) and the block requests issued while it was
// open (whoever issued them).
#include <gtest/gtest.h>

#include "analysis/analyzer.h"
#include "analysis/report_text.h"
#include "trace_builder.h"

namespace iotwin::analysis {
namespace {

using nlohmann::json;
using test::TraceBuilder;

constexpr uint32_t kDev = (8u << 20) | 1;
constexpr uint32_t kDisk = 253u << 20;
constexpr uint64_t kStart = 1'000'000'000ULL;  // FullCaptureMeta's anchor

json Analyze(const TraceBuilder& t) {
  Analyzer a;
  a.SetMeta(test::FullCaptureMeta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  return a.Model(std::nullopt);
}

// A block request issued at `issue` by task `tid`, completed at `done`.
void Request(TraceBuilder& t, uint64_t issue, uint64_t done, uint64_t sector, uint32_t bytes,
             uint32_t dir_flag, uint64_t rq, uint32_t tid) {
  t.Add(TraceBuilder::BlockRecord(IOT_BLK_ISSUE, issue, kDisk, sector, bytes, dir_flag, rq, tid));
  t.Add(TraceBuilder::BlockRecord(IOT_BLK_COMPLETE, done, kDisk, sector, bytes, dir_flag, rq, tid));
}

// Two phases of thread 1, "load" (with "parse" nested in it) and "train", block requests in
// each and between them.
TraceBuilder TwoPhases() {
  TraceBuilder t(test::FullCaptureMeta());
  t.Open(1, kStart + 1000, "/data/f", 3, kDev, 7);
  // Issued before "load" began, completed inside it: not the phase's.
  t.Add(TraceBuilder::BlockRecord(IOT_BLK_ISSUE, kStart + 5000, kDisk, 10, 4096, IOT_BLKF_READ, 1, 1));
  t.Intent(IOT_INTENT_BEGIN, kStart + 10'000, 1, "load");
  t.Add(TraceBuilder::BlockRecord(IOT_BLK_COMPLETE, kStart + 10'500, kDisk, 10, 4096, IOT_BLKF_READ, 1, 1));
  t.Io(IOT_OP_PREAD64, 1, kStart + 11'000, 50, 3, kDev, 7, 0, 4096, 4096);
  Request(t, kStart + 11'010, kStart + 11'040, 100, 8192, IOT_BLKF_READ, 2, 1);
  t.Io(IOT_OP_PREAD64, 1, kStart + 12'000, 70, 3, kDev, 7, 4096, 4096, 4096);
  t.FaultAt(kStart + 13'000, 1, kDev, 7, 16, true, 4);
  t.Intent(IOT_INTENT_BEGIN, kStart + 14'000, 1, "parse");
  t.Io(IOT_OP_PREAD64, 1, kStart + 15'000, 90, 3, kDev, 7, 8192, 4096, 4096);
  Request(t, kStart + 15'010, kStart + 15'090, 200, 4096, IOT_BLKF_READ, 3, 1);
  t.Intent(IOT_INTENT_END, kStart + 16'000, 1, "parse");
  t.Intent(IOT_INTENT_END, kStart + 20'000, 1, "load");
  // Between the phases: nobody's.
  Request(t, kStart + 25'000, kStart + 25'500, 300, 65536, IOT_BLKF_WRITE, 4, 50);
  t.Intent(IOT_INTENT_BEGIN, kStart + 30'000, 1, "train");
  t.Io(IOT_OP_PWRITE64, 1, kStart + 31'000, 120, 3, kDev, 7, 0, 1 << 20, 1 << 20);
  // Written back by a kernel worker while "train" is open; completed after it ended.
  Request(t, kStart + 32'000, kStart + 45'000, 400, 1 << 20, IOT_BLKF_WRITE, 5, 50);
  // Another thread's call is not the phase's.
  t.Io(IOT_OP_PREAD64, 2, kStart + 33'000, 60, 3, kDev, 7, 0, 4096, 4096, 1);
  t.Intent(IOT_INTENT_END, kStart + 40'000, 1, "train");
  return t;
}

const json& Phase(const json& m, const char* label) {
  for (const json& p : m["intents"]["phases"])
    if (p["label"] == label) return p;
  ADD_FAILURE() << "no phase " << label;
  static const json kNone = json::object();
  return kNone;
}

TEST(Phases, TimesCallsLatencyFaultsAndDeviceRequestsIssuedWhileOpen) {
  const json m = Analyze(TwoPhases());
  ASSERT_TRUE(m["intents"].is_object());
  ASSERT_EQ(m["intents"]["phases"].size(), 3u);
  const json& load = Phase(m, "load");
  EXPECT_EQ(load["begin_ts_ns"], kStart + 10'000);
  EXPECT_EQ(load["end_ts_ns"], kStart + 20'000);
  EXPECT_EQ(load["start_ns"], 10'000);  // from the trace's start, its anchor
  EXPECT_EQ(load["end_ns"].get<uint64_t>() - load["start_ns"].get<uint64_t>(), 10'000u);
  EXPECT_EQ(load["duration_ns"], 10'000);
  EXPECT_EQ(load["depth"], 0);
  EXPECT_EQ(load["open"], false);
  // Its own calls and those of the phase nested in it.
  EXPECT_EQ(load["read_calls"], 3);
  EXPECT_EQ(load["read_bytes"], 3 * 4096);
  EXPECT_EQ(load["write_calls"], 0);
  EXPECT_EQ(load["read_p50_ns"], 70);
  EXPECT_EQ(load["read_p99_ns"], 90);
  EXPECT_EQ(load["device_read_requests"], 2);
  EXPECT_EQ(load["device_read_bytes"], 8192 + 4096);
  EXPECT_EQ(load["device_write_requests"], 0);
  EXPECT_EQ(load["device_write_bytes"], 0);
  ASSERT_EQ(load["devices"].size(), 1u);
  EXPECT_EQ(load["devices"][0]["name"], "253:0");
  EXPECT_EQ(load["devices"][0]["read_bytes"], 8192 + 4096);
  EXPECT_EQ(load["faults"], 1);
  EXPECT_EQ(load["major_faults"], 1);
  EXPECT_EQ(load["mapped_bytes"], 4 * 4096);

  const json& parse = Phase(m, "parse");
  EXPECT_EQ(parse["depth"], 1);
  EXPECT_EQ(parse["duration_ns"], 2000);
  EXPECT_EQ(parse["read_calls"], 1);
  EXPECT_EQ(parse["read_p50_ns"], 90);
  EXPECT_EQ(parse["device_read_requests"], 1);
  EXPECT_EQ(parse["device_read_bytes"], 4096);
  EXPECT_EQ(parse["faults"], 0);

  const json& train = Phase(m, "train");
  EXPECT_EQ(train["start_ns"].get<uint64_t>() - load["start_ns"].get<uint64_t>(), 20'000u);
  EXPECT_EQ(train["duration_ns"], 10'000);
  EXPECT_EQ(train["read_calls"], 0);
  EXPECT_EQ(train["write_calls"], 1);
  EXPECT_EQ(train["write_bytes"], 1 << 20);
  EXPECT_EQ(train["write_p50_ns"], 120);
  EXPECT_EQ(train["write_p99_ns"], 120);
  EXPECT_EQ(train["device_read_requests"], 0);
  EXPECT_EQ(train["device_write_requests"], 1);
  EXPECT_EQ(train["device_write_bytes"], 1 << 20);
  EXPECT_EQ(train["mapped_bytes"], 0);
  EXPECT_EQ(m["intents"]["phases_dropped"], 0);

  // The text report shows them, the nested one indented.
  const std::string text = RenderText(m);
  EXPECT_NE(text.find("PHASES"), std::string::npos) << text;
  EXPECT_NE(text.find("  parse"), std::string::npos) << text;
}

TEST(Phases, OpenAtTheEndOfTheTraceEndsAtItsLastRecord) {
  TraceBuilder t(test::FullCaptureMeta());
  t.Open(1, kStart + 1000, "/data/f", 3, kDev, 7);
  t.Intent(IOT_INTENT_BEGIN, kStart + 2000, 1, "serve");
  Request(t, kStart + 3000, kStart + 4000, 8, 4096, IOT_BLKF_READ, 1, 9);
  t.Io(IOT_OP_PREAD64, 1, kStart + 5000, 40, 3, kDev, 7, 0, 4096, 4096);
  const json m = Analyze(t);
  const json& serve = Phase(m, "serve");
  EXPECT_EQ(serve["open"], true);
  EXPECT_EQ(serve["end_ts_ns"], kStart + 5040);  // its last record: the call's exit
  EXPECT_EQ(serve["device_read_requests"], 1);
  EXPECT_EQ(serve["read_calls"], 1);
}

}  // namespace
}  // namespace iotwin::analysis
