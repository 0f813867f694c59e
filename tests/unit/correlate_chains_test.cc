// Dependent read chains (src/correlate/chains.h) over hand-built correlations: batches of async
// reads and read calls, cut by query markers, by dependence, by think time and by re-reads;
// hops' software and device time; the estimate of in-kernel resubmission; members in the JSON.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "correlate/chains.h"
#include "correlate/layers_report.h"
#include "format/records.h"

namespace iotwin::correlate {
namespace {

constexpr uint32_t kTid = 7;
constexpr uint8_t kUringRead = 22;  // IORING_OP_READ

// A correlation with the block layer; each read reaches the device unless `cached`.
class Reads {
 public:
  Reads() { c_.block_layer = true; }
  // An io_uring read submitted at `ts`, done `dur` later, device busy for its last `device` ns.
  void Async(uint64_t ts, uint64_t dur, uint64_t offset, uint64_t device = 0, bool cached = false,
             uint32_t tid = kTid) {
    AsyncRequest a;
    a.engine = IOT_AIO_ENGINE_URING;
    a.opcode = kUringRead;
    a.submit_ts = ts;
    a.complete_ts = ts + dur;
    a.tgid = a.tid = tid;
    a.offset = offset;
    a.length = 4096;
    a.res = 4096;
    a.fd = 5;
    if (!cached) a.requests.push_back(AddRequest(ts + dur - device, ts + dur, Cause::kAsync));
    c_.asyncs.push_back(a);
  }
  // The io_uring_enter call that submits reads issued in [ts, ts + dur].
  void Enter(uint64_t ts, uint64_t dur, uint32_t tid = kTid) {
    Syscall s;
    s.ts = ts;
    s.dur = dur;
    s.tgid = s.tid = tid;
    s.op = IOT_OP_IO_URING_ENTER;
    s.ret = 1;
    c_.syscalls.push_back(s);
  }
  void Pread(uint64_t ts, uint64_t dur, uint64_t offset, uint64_t device) {
    Syscall s;
    s.ts = ts;
    s.dur = dur;
    s.tgid = s.tid = kTid;
    s.op = IOT_OP_PREAD64;
    s.fd = 3;
    s.ret = 4096;
    s.offset = offset;
    s.length = 4096;
    s.ino = 12;
    s.dev = 1;
    s.ftype = 8;
    s.requests.push_back(AddRequest(ts + dur - device - 100, ts + dur - 100, Cause::kSyscall));
    c_.syscalls.push_back(s);
  }
  void Marker(uint64_t ts, uint16_t kind, const std::string& label) {
    uint32_t id = 0;
    for (const auto& [known, text] : c_.intent_labels) id = text == label ? known : id;
    if (id == 0) {
      id = static_cast<uint32_t>(c_.intent_labels.size()) + 1;
      c_.intent_labels.emplace(id, label);
    }
    c_.intents.push_back({ts, kTid, kTid, kind, id});
  }
  const Correlation& c() const { return c_; }

 private:
  size_t AddRequest(uint64_t d_ts, uint64_t c_ts, Cause cause) {
    Request q;
    q.flags = IOT_BLKF_READ;
    q.d_ts = d_ts;
    q.c_ts = c_ts;
    q.cause = cause;
    c_.requests.push_back(q);
    return c_.requests.size() - 1;
  }
  Correlation c_;
};

// Two queries of one thread: the entry node, then two hops of two reads, then (query 2) the
// entry node again. Each hop is one io_uring_enter, 1000 ns after the previous hop completed.
Reads TwoQueries() {
  Reads r;
  uint64_t ts = 10'000;
  auto hop = [&](std::vector<uint64_t> offsets) {
    r.Enter(ts, 200);
    for (size_t i = 0; i < offsets.size(); i++) r.Async(ts + 10 * i, 5000, offsets[i], 3000);
    ts += 5000 + 10 * (offsets.size() - 1) + 1000;
  };
  hop({4096});
  hop({8192, 12288});
  hop({16384, 20480});
  hop({4096});
  hop({24576, 28672});
  hop({32768});
  return r;
}

TEST(DependentChains, WithoutMarkersTheEntryNodeReadAgainStartsTheNextQuery) {
  const ChainDetection d = DetectChains(TwoQueries().c(), ChainOptions{});
  ASSERT_EQ(d.chains.size(), 2u);
  EXPECT_EQ(d.chains[0].cut, ChainCut::kReRead);
  EXPECT_FALSE(d.chains[0].by_marker);
  ASSERT_EQ(d.chains[0].hops.size(), 3u);
  EXPECT_EQ(d.chains[0].hops[1].reads, 2u);
  EXPECT_EQ(d.chains[0].reads.size(), 5u);
  EXPECT_EQ(d.chains[1].reads.size(), 4u);
  EXPECT_EQ(d.chains[1].reads.front().offset, 4096u);
  // A hop of two reads: issued 10 ns apart, each done 5000 ns later, device busy 3000 ns each.
  EXPECT_EQ(d.chains[0].hops[1].end_ts - d.chains[0].hops[1].start_ts, 5010u);
  EXPECT_EQ(d.chains[0].hops[1].device_ns, 3010u);
}

TEST(DependentChains, ThinkTimeAndOverlapCutAChainWithoutMarkers) {
  Reads gap;  // three dependent reads, then 2 ms of think time, then three more
  for (uint64_t i = 0; i < 6; i++) {
    gap.Async(10'000 + i * 6000 + (i >= 3 ? 2'000'000 : 0), 5000, 4096 * (i + 1), 3000);
  }
  ChainDetection d = DetectChains(gap.c(), ChainOptions{});
  ASSERT_EQ(d.chains.size(), 2u);
  EXPECT_EQ(d.chains[0].cut, ChainCut::kGap);
  Reads overlap;  // the fourth read's call is issued before the third completed
  for (uint64_t i = 0; i < 6; i++) {
    const uint64_t ts = 10'000 + i * 6000 - (i == 3 ? 2000 : 0);
    overlap.Enter(ts, 100);
    overlap.Async(ts, 5000, 4096 * (i + 1), 3000);
  }
  d = DetectChains(overlap.c(), ChainOptions{});
  ASSERT_EQ(d.chains.size(), 2u);
  EXPECT_EQ(d.chains[0].cut, ChainCut::kNotDependent);
}

TEST(DependentChains, QueryMarkersDecideWhereTheyArePresent) {
  Reads r = TwoQueries();
  // Query 1 ends after its third hop; the markers say the fourth hop (the entry node) already
  // belongs to query 2 ... and a re-read inside a query does not cut it.
  r.Marker(9000, IOT_INTENT_BEGIN, "query");
  r.Marker(27'500, IOT_INTENT_END, "query");
  r.Marker(27'800, IOT_INTENT_BEGIN, "query");
  r.Marker(80'000, IOT_INTENT_END, "query");
  r.Async(50'000, 5000, 24576, 3000);  // query 2 reads one of its nodes again
  ChainDetection d = DetectChains(r.c(), ChainOptions{});
  ASSERT_EQ(d.chains.size(), 2u);
  EXPECT_TRUE(d.chains[0].by_marker);
  EXPECT_EQ(d.chains[0].cut, ChainCut::kQueryMarker);
  EXPECT_EQ(d.chains[0].reads.size(), 5u);
  EXPECT_EQ(d.chains[1].reads.size(), 5u);
  EXPECT_EQ(d.short_runs, 0u);
  // The same trace with markers ignored: the re-read cuts query 2, leaving a run of one read.
  ChainOptions no_markers;
  no_markers.query_marker.clear();
  d = DetectChains(r.c(), no_markers);
  ASSERT_EQ(d.chains.size(), 2u);
  EXPECT_FALSE(d.chains[1].by_marker);
  EXPECT_EQ(d.chains[1].cut, ChainCut::kReRead);
  EXPECT_EQ(d.chains[1].reads.size(), 4u);
  EXPECT_EQ(d.short_runs, 1u);
}

TEST(DependentChains, HopMarkersGroupReadCallsIntoOneHop) {
  Reads r;
  uint64_t ts = 1000;
  for (int hop = 0; hop < 3; hop++) {
    r.Marker(ts, IOT_INTENT_BEGIN, "hop");
    for (int i = 0; i < 2; i++) {
      r.Pread(ts + 10, 4000, 4096 * static_cast<uint64_t>(1 + 2 * hop + i), 2500);
      ts += 4010;
    }
    r.Marker(ts + 20, IOT_INTENT_END, "hop");
    ts += 1000;
  }
  const ChainDetection d = DetectChains(r.c(), ChainOptions{});
  ASSERT_EQ(d.chains.size(), 1u);
  ASSERT_EQ(d.chains[0].hops.size(), 3u);
  EXPECT_EQ(d.chains[0].hops[0].reads, 2u);
  EXPECT_EQ(d.chains[0].hops[0].device_ns, 5000u);
}

// Regression: two threads read the entry node at once and the block layer gave the request to
// the other thread's read, so this thread's entry read looks served from the page cache. Such a
// batch is no hop, but it still starts the next query.
TEST(DependentChains, ACachedEntryReadStillCutsTheChain) {
  Reads r;
  uint64_t ts = 10'000;
  for (int query = 0; query < 2; query++) {
    r.Async(ts, 5000, 4096, 3000, /*cached=*/query == 1);
    ts += 6000;
    for (uint64_t i = 0; i < 3; i++, ts += 6000)
      r.Async(ts, 5000, 4096 * (2 + i + 3 * query), 3000);
  }
  const ChainDetection d = DetectChains(r.c(), ChainOptions{});
  ASSERT_EQ(d.chains.size(), 2u);
  EXPECT_EQ(d.chains[0].reads.size(), 4u);
  EXPECT_EQ(d.chains[1].reads.size(), 3u);  // the cached entry read is no hop of it
}

// Regression: a query split by a gap (its thread preempted between two hops) must still end
// where the next query reads the entry node again, though that read is in the other piece.
TEST(DependentChains, AQuerySplitByAGapStillEndsAtTheNextEntryRead) {
  Reads r;
  uint64_t ts = 10'000;
  auto read = [&](uint64_t offset, uint64_t pause) {
    r.Async(ts, 5000, offset, 3000);
    ts += 6000 + pause;
  };
  read(4096, 0);  // query 0: the entry node, three hops, 2 ms away from the CPU, three more
  for (uint64_t i = 0; i < 3; i++) read(4096 * (2 + i), i == 2 ? 2'000'000 : 0);
  for (uint64_t i = 0; i < 3; i++) read(4096 * (5 + i), 0);
  read(4096, 0);  // query 1 starts at the entry node again
  for (uint64_t i = 0; i < 3; i++) read(4096 * (8 + i), 0);
  const ChainDetection d = DetectChains(r.c(), ChainOptions{});
  ASSERT_EQ(d.chains.size(), 3u);
  EXPECT_EQ(d.chains[0].cut, ChainCut::kGap);
  EXPECT_EQ(d.chains[1].cut, ChainCut::kReRead);
  EXPECT_EQ(d.chains[1].reads.size(), 3u);
  EXPECT_EQ(d.chains[2].reads.size(), 4u);
  EXPECT_EQ(d.chains[2].reads.front().offset, 4096u);
}

// With think time between queries, the query after the gap is not cut at its own later hops.
TEST(DependentChains, ThinkTimeBetweenQueriesCutsOnceAtTheGap) {
  Reads r;
  uint64_t ts = 10'000;
  for (uint64_t q = 0; q < 2; q++) {
    r.Async(ts, 5000, 4096, 3000);
    ts += 6000;
    for (uint64_t i = 0; i < 3; i++, ts += 6000) r.Async(ts, 5000, 4096 * (2 + i + 3 * q), 3000);
    ts += 2'000'000;
  }
  const ChainDetection d = DetectChains(r.c(), ChainOptions{});
  ASSERT_EQ(d.chains.size(), 2u);
  EXPECT_EQ(d.chains[0].cut, ChainCut::kGap);
  EXPECT_EQ(d.chains[1].reads.size(), 4u);
}

TEST(DependentChains, JsonListsMembersAndSplitsHopsIntoSoftwareAndDevice) {
  const Reads r = TwoQueries();
  const nlohmann::json dc = LayersReport(r.c())["dependent_chains"];
  EXPECT_EQ(dc["chains"], 2);
  EXPECT_EQ(dc["chains_by_dependence"], 2);
  EXPECT_EQ(dc["cuts"]["reread"], 1);
  ASSERT_EQ(dc["list"].size(), 2u);
  const auto& first = dc["list"][0];
  EXPECT_EQ(first["tid"], kTid);
  EXPECT_EQ(first["reads_per_hop"], nlohmann::json({1, 2, 2}));
  EXPECT_EQ(first["members"][1], nlohmann::json({16'000, 8192}));
  EXPECT_EQ(first["hop_ns"][1], 5010);
  EXPECT_EQ(first["hop_device_ns"][1], 3010);
  EXPECT_EQ(first["hop_software_ns"][1], 2000);
  // Span: three hops of 5000, 5010, 5010 and two gaps of 1000. With resubmission: the first hop,
  // then the later hops' device time.
  EXPECT_EQ(first["span_ns"], 5000 + 5010 + 5010 + 2000);
  EXPECT_EQ(first["estimated_with_driver_resubmission_ns"], 5000 + 3010 + 3010);
  EXPECT_FALSE(dc["top"][0].contains("members"));
  EXPECT_NE(RenderLayersText(LayersReport(r.c())).find("3.0 hops of 1.5 reads"), std::string::npos);
}

// Untrusted numbers: a completion before its submission and a call whose end overflows are
// no reads of a chain, and nothing underflows.
TEST(DependentChains, InvertedAndOverflowingTimesAreRefusedOrSaturated) {
  Reads r;
  r.Async(10'000, 5000, 4096, 3000);
  AsyncRequest backwards = r.c().asyncs[0];
  backwards.complete_ts = 5;
  Correlation c = r.c();
  c.asyncs.push_back(backwards);
  Syscall huge;
  huge.ts = UINT64_MAX - 10;
  huge.dur = 100;
  huge.tid = kTid;
  huge.op = IOT_OP_PREAD64;
  huge.ret = 4096;
  huge.ftype = 8;
  c.syscalls.push_back(huge);
  c.block_layer = false;
  const ChainDetection d = DetectChains(c, ChainOptions{});
  for (const Chain& chain : d.chains) {
    for (const ChainHop& h : chain.hops) EXPECT_LE(h.start_ts, h.end_ts);
  }
  const nlohmann::json dc = LayersReport(c)["dependent_chains"];
  EXPECT_EQ(dc["device_time"], false);
}

}  // namespace
}  // namespace iotwin::correlate
