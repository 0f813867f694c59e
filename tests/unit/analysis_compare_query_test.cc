// compare's per-query measures on synthetic vector searches: an original whose queries and hops
// are marked, and replays (no markers) that keep the hops dependent and the batches whole, or
// issue a hop before the previous one completed, serialise a batch, or leave a query out.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <string>

#include "analysis/compare.h"
#include "trace_builder.h"
#include "interop_test_util.h"

namespace iotwin::analysis {
namespace {

using test::FullCaptureMeta;
using test::TraceBuilder;
constexpr uint64_t kStart = 2'000'000'000;
constexpr uint32_t kDev = 0x800001, kTid = 7;
constexpr int kQueries = 4, kHops = 5, kBeam = 4;
constexpr uint64_t kDeviceNs = 100'000, kThinkNs = 20'000;

enum class Replay { kOriginal, kFaithful, kOverlappingHops, kSerialBatches, kDroppedQuery };

// A beam search of kQueries queries of kHops hops, each hop one libaio batch of kBeam 4 KiB
// reads: io_submit, then io_getevents returning when the device completed all of them. The
// original carries `query` and `hop` markers; a replay none.
TraceBuilder Search(Replay mode) {
  TraceBuilder t(FullCaptureMeta());
  const bool markers = mode == Replay::kOriginal;
  uint64_t ts = kStart;
  t.Open(kTid, ts, "/data/disk.index", 3, kDev, 42, O_RDONLY | O_DIRECT);
  uint64_t req = 1;
  for (int q = 0; q < kQueries; q++) {
    if (mode == Replay::kDroppedQuery && q == 2) continue;
    ts += kThinkNs;
    if (markers) t.Intent(IOT_INTENT_BEGIN, ts, kTid, "query");
    for (int h = 0; h < kHops; h++) {
      if (markers) t.Intent(IOT_INTENT_BEGIN, ts + 100, kTid, "hop");
      const uint64_t node = static_cast<uint64_t>((q * kHops + h) * kBeam);
      if (mode == Replay::kSerialBatches) {
        // Each read submitted and waited for alone: the batch's reads never in flight together.
        for (int k = 0; k < kBeam; k++) {
          const uint64_t at = ts + 1'000 + static_cast<uint64_t>(k) * (kDeviceNs + 2'000);
          t.Io(IOT_OP_IO_SUBMIT, kTid, at, 1'000, -1, 0, 0, 0, 0, 1);
          t.AsyncAt(IOT_AIO_ENGINE_LIBAIO, IOT_AIO_SUBMIT, 0, at, kTid, 3, req, (node + k) * 4096, 4096, 0);
          t.Io(IOT_OP_IO_GETEVENTS, kTid, at + 1'000, kDeviceNs, -1, 0, 0, 0, 1, 1);
          t.AsyncAt(IOT_AIO_ENGINE_LIBAIO, IOT_AIO_COMPLETE, 0, at + 1'000 + kDeviceNs, kTid, -1, req, 0, 0, 4096);
          req++;
        }
        ts += 1'000 + kBeam * (kDeviceNs + 2'000);
      } else {
        t.Io(IOT_OP_IO_SUBMIT, kTid, ts + 1'000, 2'000, -1, 0, 0, 0, 0, kBeam);
        for (int k = 0; k < kBeam; k++)
          t.AsyncAt(IOT_AIO_ENGINE_LIBAIO, IOT_AIO_SUBMIT, 0, ts + 1'000, kTid, 3, req + k, (node + k) * 4096, 4096, 0);
        t.Io(IOT_OP_IO_GETEVENTS, kTid, ts + 4'000, kDeviceNs, -1, 0, 0, 0, kBeam, kBeam);
        for (int k = 0; k < kBeam; k++)
          t.AsyncAt(IOT_AIO_ENGINE_LIBAIO, IOT_AIO_COMPLETE, 0, ts + 4'000 + kDeviceNs, kTid, -1, req + k, 0, 0, 4096);
        req += kBeam;
        // A replay that issues the next hop at its recorded time, not after this one completed,
        // on a device twice as slow: the next hop starts half-way through this one.
        ts += mode == Replay::kOverlappingHops ? (4'000 + kDeviceNs) / 2 : 4'000 + kDeviceNs;
      }
      if (markers) t.Intent(IOT_INTENT_END, ts + 200, kTid, "hop");
      ts += kThinkNs;
    }
    if (markers) t.Intent(IOT_INTENT_END, ts, kTid, "query");
  }
  t.CloseAt(kTid, ts + kThinkNs, 3, kDev, 42);
  return t;
}

const nlohmann::json* Find(const nlohmann::json& r, const char* name) {
  for (const auto& m : r["measures"])
    if (m["name"] == name) return &m;
  return nullptr;
}

nlohmann::json CompareWith(Replay mode) {
  interop::testing::ScratchDir f;
  const std::string orig = f / "orig.iotwin", rep = f / "rep.iotwin";
  EXPECT_TRUE(Search(Replay::kOriginal).WriteFile(orig, {}).ok());
  EXPECT_TRUE(Search(mode).WriteFile(rep, {}).ok());
  auto r = CompareTraces(orig, rep, CompareOptions{});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : nlohmann::json();
}

bool Failed(const nlohmann::json& r, const char* name) {
  for (const auto& f : r["failed"])
    if (f == name) return true;
  return false;
}

std::string Causes(const nlohmann::json& r) {
  std::string all;
  for (const auto& c : r["causes"]) all += c["cause"].get<std::string>() + ": " + c["evidence"].get<std::string>() + "\n";
  return all;
}

TEST(CompareQuery, AFaithfulReplayKeepsEveryQueryHopAndBatch) {
  const nlohmann::json r = CompareWith(Replay::kFaithful);
  ASSERT_TRUE(r.contains("queries")) << r.dump(2);
  EXPECT_EQ(r["queries"]["queries"], kQueries);
  EXPECT_EQ(r["queries"]["reads"], kQueries * kHops * kBeam);
  EXPECT_EQ(r["queries"]["reads_found"], kQueries * kHops * kBeam);
  EXPECT_EQ(r["queries"]["dependent_hops_per_query"]["original"], kHops);
  EXPECT_EQ(r["queries"]["dependent_hops_per_query"]["replay"], kHops);
  for (const char* name : {"query-match", "query-hops-err", "hop-depth-err", "query-latency-p50-rel-err"}) {
    const nlohmann::json* m = Find(r, name);
    ASSERT_NE(m, nullptr) << name;
    EXPECT_TRUE((*m)["judged"].get<bool>()) << name;
    EXPECT_TRUE((*m)["pass"].get<bool>()) << name << " " << m->dump();
  }
  EXPECT_EQ((*Find(r, "hop-depth-err"))["original"], kBeam);  // mean reads in flight per hop
  EXPECT_EQ(r["verdict"], "pass") << r["failed"].dump();
}

TEST(CompareQuery, AHopIssuedBeforeThePreviousHopCompletedFails) {
  const nlohmann::json r = CompareWith(Replay::kOverlappingHops);
  EXPECT_TRUE(Failed(r, "query-hops-err")) << r["failed"].dump();
  EXPECT_EQ(r["queries"]["dependent_hops_per_query"]["replay"], 1);  // every hop overlaps
  EXPECT_EQ(r["queries"]["queries_with_other_hops"], kQueries);
  // The reads and batches are the same: only the dependence was lost.
  EXPECT_FALSE(Failed(r, "query-match"));
  EXPECT_FALSE(Failed(r, "hop-depth-err"));
  const std::string causes = Causes(r);
  EXPECT_NE(causes.find("hops not dependent as recorded"), std::string::npos) << causes;
  EXPECT_NE(causes.find("query 1 (thread 7): 5 dependent hops in the original, 1 in the replay: "
                        "hop 2 was issued 31.0 us before hop 1's reads completed"),
            std::string::npos)
      << causes;
}

TEST(CompareQuery, ASerialisedBatchFailsOnDepth) {
  const nlohmann::json r = CompareWith(Replay::kSerialBatches);
  EXPECT_TRUE(Failed(r, "hop-depth-err")) << r["failed"].dump();
  EXPECT_EQ((*Find(r, "hop-depth-err"))["replay"], 1);
  EXPECT_FALSE(Failed(r, "query-hops-err"));  // still dependent
  EXPECT_FALSE(Failed(r, "query-match"));
  // Four device times per hop instead of one.
  EXPECT_TRUE(Failed(r, "query-latency-p50-rel-err")) << r["failed"].dump();
  const std::string causes = Causes(r);
  EXPECT_NE(causes.find("query 1 (thread 7) hop 1: 4 of its 4 reads in flight at once in the "
                        "original, 1 in the replay"),
            std::string::npos)
      << causes;
}

TEST(CompareQuery, ADroppedQueryFails) {
  const nlohmann::json r = CompareWith(Replay::kDroppedQuery);
  EXPECT_TRUE(Failed(r, "query-match")) << r["failed"].dump();
  EXPECT_DOUBLE_EQ((*Find(r, "query-match"))["value"].get<double>(), 0.75);
  EXPECT_TRUE(Failed(r, "query-hops-err"));
  EXPECT_NE(Causes(r).find("query 3 (thread 7): 20 of its 20 reads not in the replay"), std::string::npos)
      << Causes(r);
}

TEST(CompareQuery, NoQueryMarkersNoQueryMeasures) {
  interop::testing::ScratchDir f;
  const std::string a = f / "a.iotwin";
  ASSERT_TRUE(Search(Replay::kFaithful).WriteFile(a, {}).ok());
  auto r = CompareTraces(a, a, CompareOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->contains("queries"));
  EXPECT_EQ(Find(*r, "query-match"), nullptr);
}

}  // namespace
}  // namespace iotwin::analysis
