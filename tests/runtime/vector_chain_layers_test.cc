// `iotwin layers` finds the dependent read chains of vector-search (docs/block-layer.md,
// "Dependent read chains"): recorded with the block layer on an ext4 file system on a loop
// device, for each I/O engine, one and two searcher threads, with the intent markers and
// without them, the chains' members scored against the generator's read log (chain_truth.h)
// reach pairwise precision and recall of chain membership >= 0.95.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "block_loop.h"
#include "chain_truth.h"
#include "record_check.h"

namespace iotwin::test {
namespace {

// The trace's node reads in time order (ts, tid, offset): 4 KiB pread64 calls, or async
// submissions.
std::vector<std::tuple<uint64_t, uint32_t, uint64_t>> NodeReads(const LoadedTrace& t,
                                                                const std::string& io) {
  std::vector<std::tuple<uint64_t, uint32_t, uint64_t>> out;
  if (io == "pread") {
    for (const auto& s : t.syscalls) {
      if (s.sc.op == IOT_OP_PREAD64 && s.sc.length == 4096) {
        out.emplace_back(s.sc.ts, s.sc.tid, s.sc.offset);
      }
    }
  } else {
    for (const auto& a : t.asyncs) {
      if (a.phase == IOT_AIO_SUBMIT) out.emplace_back(a.ts, a.tid, a.offset);
    }
  }
  // Trace order among equal timestamps: one io_submit stamps its requests alike.
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
  return out;
}

using Case = std::tuple<const char*, int, bool>;  // engine, threads, markers

class VectorChainLayers : public ::testing::TestWithParam<Case> {};

TEST_P(VectorChainLayers, ChainsMatchTheReadLogWithPrecisionAndRecallOf95Percent) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  const auto [engine, threads, markers] = GetParam();
  const std::string io = engine;
  LoopFs fs;
  ASSERT_TRUE(fs.ok()) << fs.error();
  TempDir dir;
  const std::string trace = dir / "t.iotwin", read_log = dir / "reads.jsonl";
  std::vector<std::string> argv = {IotwinBin(), "record", "-o", trace, "--no-status"};
  if (!markers) argv.push_back("--no-markers");
  for (const std::string& a :
       {std::string("--"), WorkloadBin(), std::string("vector-search"), std::string("--small"),
        std::string("--dir"), fs.path("w"), std::string("--io"), io, std::string("--threads"),
        std::to_string(threads), std::string("--read-log"), read_log, std::string("--quiet")}) {
    argv.push_back(a);
  }
  const RunResult rec = test::Run(argv, 180);
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  const LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  ASSERT_EQ(LostInSummary(t), 0u);
  EXPECT_EQ(t.intents.empty(), !markers);
  const ChainTruth truth = LoadChainTruth(read_log);
  ASSERT_TRUE(truth.error.empty()) << truth.error;

  const RunResult layers = test::Run({IotwinBin(), "layers", "--json", trace}, 180);
  ASSERT_EQ(layers.exit_code, 0) << layers.err;
  const auto report = nlohmann::json::parse(layers.out);
  const auto& dc = report["dependent_chains"];
  ASSERT_TRUE(dc["device_time"].get<bool>());
  // Each chain's members, by (tid, issue ts, offset), and how the chain was told apart.
  std::map<std::tuple<uint32_t, uint64_t, uint64_t>, int64_t> chain_at;
  int64_t index = 0;
  for (const auto& chain : dc["list"]) {
    EXPECT_EQ(chain["by"], markers ? "query_marker" : "dependence") << chain["start_ts"];
    for (const auto& m : chain["members"]) {
      chain_at[{chain["tid"].get<uint32_t>(), m[0].get<uint64_t>(), m[1].get<uint64_t>()}] = index;
    }
    index++;
  }

  const auto reads = NodeReads(t, io);
  std::vector<TraceRead> trace_reads;
  for (const auto& [ts, tid, offset] : reads) trace_reads.push_back({tid, offset});
  const std::vector<int64_t> ids = MatchTraceReads(truth, trace_reads);
  std::vector<int64_t> chain_of(truth.reads.size(), -1);
  size_t matched = 0;
  for (size_t i = 0; i < ids.size(); i++) {
    if (ids[i] < 0) continue;  // the index header, read when a searcher opens the index
    matched++;
    const auto& [ts, tid, offset] = reads[i];
    auto it = chain_at.find({tid, ts, offset});
    chain_of[static_cast<size_t>(ids[i])] = it == chain_at.end() ? -1 : it->second;
  }
  ASSERT_EQ(matched, truth.reads.size()) << "trace and read log differ";
  const MembershipScore s = ScoreChainMembership(truth, chain_of);
  std::printf(
      "[ chain layers ] %s, %d thread(s), %s: %zu chains for 16 queries, precision %.3f, recall "
      "%.3f (%llu true pairs, %llu detected)\n",
      engine, threads, markers ? "query markers" : "no markers", dc["list"].size(), s.precision,
      s.recall, static_cast<unsigned long long>(s.true_pairs),
      static_cast<unsigned long long>(s.detected_pairs));
  EXPECT_GE(s.precision, 0.95) << dc["cuts"].dump();
  EXPECT_GE(s.recall, 0.95) << dc["cuts"].dump();

  // Per chain: hops, reads per hop (at most the beam of 4), and every hop's time split into
  // software and device. Device time is seen for at least 95% of hops, the tolerance of the
  // chain membership above (a hop whose reads were all left out of a chain has none).
  uint64_t hops = 0, hops_with_device = 0;
  for (const auto& chain : dc["list"]) {
    ASSERT_EQ(chain["reads_per_hop"].size(), chain["hops"].get<size_t>());
    for (size_t h = 0; h < chain["reads_per_hop"].size(); h++) {
      EXPECT_LE(chain["reads_per_hop"][h].get<uint64_t>(), io == "pread" && !markers ? 1u : 4u);
      EXPECT_EQ(
          chain["hop_software_ns"][h].get<uint64_t>() + chain["hop_device_ns"][h].get<uint64_t>(),
          chain["hop_ns"][h].get<uint64_t>());
      ++hops;
      if (chain["hop_device_ns"][h].get<uint64_t>() > 0) ++hops_with_device;
    }
    EXPECT_LE(chain["estimated_with_driver_resubmission_ns"].get<uint64_t>(),
              chain["span_ns"].get<uint64_t>());
  }
  ASSERT_GT(hops, 0u);
  EXPECT_GE(hops_with_device * 100, hops * 95) << hops_with_device << " of " << hops;
}

INSTANTIATE_TEST_SUITE_P(EnginesThreadsMarkers, VectorChainLayers,
                         ::testing::Combine(::testing::Values("pread", "uring", "libaio"),
                                            ::testing::Values(1, 2), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(std::get<0>(info.param)) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "threads_" +
                                  (std::get<2>(info.param) ? "markers" : "nomarkers");
                         });

}  // namespace
}  // namespace iotwin::test
