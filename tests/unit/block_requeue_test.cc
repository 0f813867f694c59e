// A requeued block request (issued, given back by its driver, issued again, completed) is one
// request with its bytes once, in every reader of block records: the report (analyzer), the
// trace model behind compare and replay, layers (correlator), the Chrome export and
// `export --fio --layer block`. Queue depth: requests in flight per device, time-weighted as
// iostat's aqu-sz, in the report and layers.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "analysis/analyzer.h"
#include "correlate/correlate.h"
#include "correlate/layers_report.h"
#include "interop/exporters.h"
#include "model/block_requests.h"
#include "model/trace_model.h"
#include "temp_dir.h"
#include "trace_builder.h"

namespace iotwin {
namespace {

constexpr uint32_t kDisk = 254u << 20;
constexpr uint64_t kT0 = 1'000'000'000ULL;

// Request 1 (8 KiB at sector 0): issued at +1000, requeued at +2000, issued again at +2500,
// completed at +9000. Request 2 (4 KiB at sector 100): issued at +1500, completed at +3000.
// At most two requests were ever in flight.
test::TraceBuilder RequeueTrace() {
  test::TraceBuilder t(test::FullCaptureMeta());
  t.BlockAt(IOT_BLK_INSERT, kT0 + 1000, kDisk, 0, 8192, IOT_BLKF_READ, 1);
  t.BlockAt(IOT_BLK_ISSUE, kT0 + 1000, kDisk, 0, 8192, IOT_BLKF_READ, 1);
  t.BlockAt(IOT_BLK_INSERT, kT0 + 1500, kDisk, 100, 4096, IOT_BLKF_READ, 2);
  t.BlockAt(IOT_BLK_ISSUE, kT0 + 1500, kDisk, 100, 4096, IOT_BLKF_READ, 2);
  t.BlockAt(IOT_BLK_REQUEUE, kT0 + 2000, kDisk, 0, 8192, IOT_BLKF_READ, 1);
  t.BlockAt(IOT_BLK_ISSUE, kT0 + 2500, kDisk, 0, 8192, IOT_BLKF_READ, 1);
  t.BlockAt(IOT_BLK_COMPLETE, kT0 + 3000, kDisk, 100, 4096, IOT_BLKF_READ, 2);
  t.BlockAt(IOT_BLK_COMPLETE, kT0 + 9000, kDisk, 0, 8192, IOT_BLKF_READ, 1);
  return t;
}

TEST(BlockRequeue, RuleSaysWhatEachRecordMeans) {
  model::BlockRequestRule rule;
  std::vector<model::BlockStep> steps;
  RequeueTrace().ForEach([&](const iot_rec_hdr* h) {
    if (h->type == IOT_REC_BLOCK) steps.push_back(rule.Step(As<iot_block>(h)));
  });
  using S = model::BlockStep;
  EXPECT_EQ(steps, (std::vector<S>{S::kOther, S::kFirstIssue, S::kOther, S::kFirstIssue,
                                   S::kRequeue, S::kReissue, S::kComplete, S::kComplete}));
  EXPECT_EQ(rule.in_flight(), 0u);
}

TEST(BlockRequeue, ReportCountsARequeuedRequestOnce) {
  analysis::Analyzer a;
  a.SetMeta(test::FullCaptureMeta());
  RequeueTrace().ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  const nlohmann::json m = a.Model(std::nullopt);
  const nlohmann::json& b = m["block"];
  EXPECT_EQ(b["requests"], 2);
  const nlohmann::json& d = b["devices"][0];
  EXPECT_EQ(d["requests"], 2);
  EXPECT_EQ(d["requeues"], 1);
  EXPECT_EQ(d["reissues"], 1);
  EXPECT_EQ(d["read"]["ops"], 2);
  EXPECT_EQ(d["read"]["bytes"], 8192 + 4096);
  // D2C from the last issue: 9000 - 2500 and 3000 - 1500.
  EXPECT_EQ(b["latency_ns"]["D2C"]["count"], 2);
  EXPECT_EQ(b["latency_ns"]["D2C"]["max"], 6500) << b["latency_ns"].dump();
  // In flight: request 1 for 8000 ns, request 2 for 1500 ns, over the 8000 ns window; on the
  // device: request 1 for 1000 + 6500 ns.
  const nlohmann::json& q = d["queue_depth"];
  EXPECT_EQ(q["in_flight_ns"], 9500);
  EXPECT_EQ(q["window_ns"], 8000);
  EXPECT_DOUBLE_EQ(q["average"].get<double>(), 1.1875);
  EXPECT_EQ(q["max"], 2);
  EXPECT_EQ(q["p99"], 2);
  EXPECT_EQ(q["device"]["in_flight_ns"], 9000);
  EXPECT_EQ(q["device"]["max"], 2);
}

// Records from two CPUs can reach the trace out of time order: here request 1's completion
// (+3000) comes before its bio's queue record (+1000). The next request at the same sector
// (queued +50000, issued +50100, completed +51000) starts at its own bio's queue time, not at
// the stale one: in flight 2000 + 1000 ns, never two at once.
TEST(BlockRequeue, AStaleQueueRecordDoesNotStartALaterRequest) {
  test::TraceBuilder t(test::FullCaptureMeta());
  t.BlockAt(IOT_BLK_ISSUE, kT0 + 1000, kDisk, 0, 4096, IOT_BLKF_READ, 1);
  t.BlockAt(IOT_BLK_COMPLETE, kT0 + 3000, kDisk, 0, 4096, IOT_BLKF_READ, 1);
  t.BlockAt(IOT_BLK_QUEUE, kT0 + 1000, kDisk, 0, 4096, IOT_BLKF_READ, 0);
  t.BlockAt(IOT_BLK_QUEUE, kT0 + 50000, kDisk, 0, 4096, IOT_BLKF_READ, 0);
  t.BlockAt(IOT_BLK_ISSUE, kT0 + 50100, kDisk, 0, 4096, IOT_BLKF_READ, 2);
  t.BlockAt(IOT_BLK_COMPLETE, kT0 + 51000, kDisk, 0, 4096, IOT_BLKF_READ, 2);
  analysis::Analyzer a;
  a.SetMeta(test::FullCaptureMeta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  const nlohmann::json m = a.Model(std::nullopt);
  const nlohmann::json& q = m["block"]["devices"][0]["queue_depth"];
  EXPECT_EQ(q["in_flight_ns"], 2000 + 1000) << q.dump();
  EXPECT_EQ(q["max"], 1) << q.dump();
}

TEST(BlockRequeue, TraceModelHasOneRequestAndItsDepth) {
  model::ModelBuilder mb;
  mb.SetMeta(test::FullCaptureMeta());
  ASSERT_TRUE(RequeueTrace().Feed(mb).ok());
  auto m = mb.Finish();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const auto& reqs = (*m)->block_requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].ts, kT0 + 1000);
  EXPECT_EQ(reqs[0].last_issue, kT0 + 2500);
  EXPECT_EQ(reqs[0].end, kT0 + 9000);
  EXPECT_EQ(reqs[1].inflight, 2u);
}

TEST(BlockRequeue, LayersCountsOnceAndStatesQueueDepth) {
  correlate::Correlator c;
  c.SetMeta(test::FullCaptureMeta(), nlohmann::json::object());
  RequeueTrace().ForEach([&](const iot_rec_hdr* r) { c.Add(r); });
  const correlate::Correlation corr = c.Finish();
  const nlohmann::json j = correlate::LayersReport(corr);
  EXPECT_EQ(j["coverage"]["requests"], 2);
  const nlohmann::json& q = j["queue_depth"]["254:0"];
  EXPECT_EQ(q["in_flight_ns"], 9500) << j["queue_depth"].dump();
  EXPECT_EQ(q["max"], 2);
  EXPECT_EQ(q["device"]["max"], 2);
}

TEST(BlockRequeue, FioBlockExportIodepthIsTheDepthReached) {
  test::TempDir dir;
  ASSERT_TRUE(RequeueTrace().WriteFile(dir / "r.iotwin").ok());
  interop::FioExportOptions o;
  o.dir = dir / "fio";
  o.block_layer = true;
  auto r = interop::ExportFio(dir / "r.iotwin", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->reads, 2u);
  std::ifstream in(dir / "fio/replay.fio");
  const std::string job((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(job.find("iodepth=2\n"), std::string::npos) << job;
}

TEST(BlockRequeue, ChromeExportDrawsOneSlicePerRequest) {
  test::TempDir dir;
  ASSERT_TRUE(RequeueTrace().WriteFile(dir / "r.iotwin").ok());
  auto r = interop::ExportChrome(dir / "r.iotwin", dir / "r.json");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->device_slices, 2u);
}

// Two libaio contexts: 0xa with two requests overlapping for 1000 ns, 0xb with one request still
// in flight at the end. The window starts at the open, 100 us before the first submission.
TEST(AsyncQueueDepth, PerContextTimeWeighted) {
  test::TraceBuilder t(test::FullCaptureMeta());
  const uint8_t kPread = 0;  // IOCB_CMD_PREAD
  t.SetTime(kT0 - 100'000);
  t.Openat(7, "/data/f", O_RDONLY, 3, 1 << 20);
  t.SetTime(kT0);
  t.Async(7, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_SUBMIT, kPread, 0xa, 1, 3, 0, 4096);
  t.SetTime(kT0 + 1000);
  t.Async(7, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_SUBMIT, kPread, 0xb, 3, 3, 0, 4096);
  t.SetTime(kT0 + 2000);
  t.Async(7, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_SUBMIT, kPread, 0xa, 2, 3, 4096, 4096);
  t.SetTime(kT0 + 3000);
  t.Async(7, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_COMPLETE, kPread, 0xa, 1, 3, 0, 4096, 4096);
  t.SetTime(kT0 + 4000);
  t.Async(7, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_COMPLETE, kPread, 0xa, 2, 3, 4096, 4096, 4096);
  analysis::Analyzer a;
  a.SetMeta(test::FullCaptureMeta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  const nlohmann::json m = a.Model(std::nullopt);
  const nlohmann::json& ctx = m["async"]["contexts"];
  ASSERT_EQ(ctx.size(), 2u) << m["async"].dump();
  EXPECT_EQ(ctx[0]["ctx"], "0xa");
  EXPECT_EQ(ctx[0]["requests"], 2);
  EXPECT_EQ(ctx[0]["queue_depth"]["in_flight_ns"], 3000 + 2000);
  EXPECT_EQ(ctx[0]["queue_depth"]["max"], 2);
  EXPECT_NEAR(ctx[0]["queue_depth"]["average"].get<double>(), 5000.0 / 104000, 1e-4);
  EXPECT_EQ(ctx[1]["ctx"], "0xb");
  EXPECT_EQ(ctx[1]["queue_depth"]["in_flight_ns"], 3000);
  EXPECT_EQ(ctx[1]["queue_depth"]["max"], 1);
}

}  // namespace
}  // namespace iotwin
