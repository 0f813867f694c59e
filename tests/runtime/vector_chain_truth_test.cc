// The validation data for dependent-chain detection (chain_truth.h): the pairwise membership
// score, and, on a recorded vector-search run, that the read log lines up read for read with the
// trace and that grouping the trace's reads by the `query` markers reproduces it exactly.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <tuple>

#include "chain_truth.h"
#include "record_check.h"

namespace iotwin::test {
namespace {

ChainTruth TwoQueries() {
  // Query 0: reads 0 <- 1, 0 <- 2; query 1: reads 3 <- 4.
  ChainTruth t;
  t.reads = {{0, 0, 0, 1, 4096, -1},
             {1, 0, 1, 1, 8192, 0},
             {2, 0, 1, 1, 12288, 0},
             {3, 1, 0, 1, 4096, -1},
             {4, 1, 1, 1, 16384, 3}};
  return t;
}

TEST(ChainTruthScore, PairwiseMembershipPrecisionAndRecall) {
  const ChainTruth t = TwoQueries();
  MembershipScore exact = ScoreChainMembership(t, {7, 7, 7, 9, 9});
  EXPECT_EQ(exact.true_pairs, 4u);  // 3 in query 0, 1 in query 1
  EXPECT_DOUBLE_EQ(exact.precision, 1.0);
  EXPECT_DOUBLE_EQ(exact.recall, 1.0);
  // One chain for everything: every true pair found, 4 of its 10 pairs right.
  MembershipScore merged = ScoreChainMembership(t, {0, 0, 0, 0, 0});
  EXPECT_DOUBLE_EQ(merged.precision, 0.4);
  EXPECT_DOUBLE_EQ(merged.recall, 1.0);
  // Query 0 cut in two: what is found is right, half the pairs are missed.
  MembershipScore split = ScoreChainMembership(t, {0, 0, 1, 2, 2});
  EXPECT_DOUBLE_EQ(split.precision, 1.0);
  EXPECT_DOUBLE_EQ(split.recall, 0.5);
  // Nothing detected scores 0, not a vacuous 1.
  MembershipScore none = ScoreChainMembership(t, {-1, -1, -1, -1, -1});
  EXPECT_DOUBLE_EQ(none.precision, 0.0);
  EXPECT_DOUBLE_EQ(none.recall, 0.0);
}

TEST(ChainTruthScore, TraceReadsMatchPerThreadInOrder) {
  const ChainTruth t = TwoQueries();
  EXPECT_EQ(MatchTraceReads(t, {{1, 4096}, {1, 8192}, {1, 12288}, {1, 4096}, {1, 16384}}),
            (std::vector<int64_t>{0, 1, 2, 3, 4}));
  // A read the log does not have next for that thread, or another thread's, matches nothing.
  EXPECT_EQ(MatchTraceReads(t, {{1, 4096}, {1, 12288}, {2, 8192}}),
            (std::vector<int64_t>{0, -1, -1}));
}

TEST(ChainTruthScore, LoadRefusesALogWhoseDependenceIsNotBackwards) {
  TempDir dir;
  const std::string good = dir / "good.jsonl", bad = dir / "bad.jsonl";
  std::ofstream(good) << R"({"read":0,"query":0,"hop":0,"tid":5,"offset":4096,"depends_on":[]})"
                      << "\n"
                      << R"({"read":1,"query":0,"hop":1,"tid":5,"offset":8192,"depends_on":[0]})"
                      << "\n";
  std::ofstream(bad) << R"({"read":0,"query":0,"hop":0,"tid":5,"offset":4096,"depends_on":[]})"
                     << "\n"
                     << R"({"read":1,"query":1,"hop":1,"tid":5,"offset":8192,"depends_on":[0]})"
                     << "\n";
  const ChainTruth g = LoadChainTruth(good);
  EXPECT_TRUE(g.error.empty()) << g.error;
  EXPECT_EQ(g.reads.size(), 2u);
  EXPECT_EQ(g.reads[1].depends_on, 0);
  EXPECT_FALSE(LoadChainTruth(bad).error.empty());
}

// The trace's node reads in time order: pread64s of one node, or async submissions.
std::vector<std::tuple<uint64_t, uint32_t, uint64_t>> NodeReads(const LoadedTrace& t,
                                                                const std::string& io) {
  std::vector<std::tuple<uint64_t, uint32_t, uint64_t>> out;  // ts, tid, offset
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
  std::sort(out.begin(), out.end());
  return out;
}

class VectorChainTruth : public ::testing::TestWithParam<const char*> {};

TEST_P(VectorChainTruth, QueryMarkersGroupTheTraceReadsIntoTheLoggedChains) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  const std::string io = GetParam();
  TempDir dir;
  const std::string trace = dir / "t.iotwin", read_log = dir / "reads.jsonl";
  const RunResult rec =
      test::Run({IotwinBin(), "record", "-o", trace, "--no-status", "--", WorkloadBin(),
                 "vector-search", "--small", "--buffered", "--threads", "2", "--io", io, "--dir",
                 dir / "w", "--read-log", read_log, "--quiet"},
                180);
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  const LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  ASSERT_EQ(LostInSummary(t), 0u);
  const ChainTruth truth = LoadChainTruth(read_log);
  ASSERT_TRUE(truth.error.empty()) << truth.error;

  const auto reads = NodeReads(t, io);
  std::vector<TraceRead> trace_reads;
  for (const auto& [ts, tid, offset] : reads) trace_reads.push_back({tid, offset});
  const std::vector<int64_t> ids = MatchTraceReads(truth, trace_reads);
  ASSERT_EQ(ids.size(), truth.reads.size()) << "trace and read log differ in read count";
  std::vector<bool> seen(truth.reads.size(), false);
  for (size_t i = 0; i < ids.size(); i++) {
    ASSERT_GE(ids[i], 0) << "trace read " << i << " (offset " << trace_reads[i].offset
                         << ") is not the log's next read of its thread";
    seen[static_cast<size_t>(ids[i])] = true;
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](bool b) { return b; }));

  // Oracle detector: the `query` marker around each read. It must reproduce the truth exactly,
  // which checks the markers, the matching and the score end to end.
  std::vector<std::tuple<uint64_t, uint32_t, int>> events;  // ts, tid, 0 = query begin, 1 = read
  for (size_t i = 0; i < t.intents.size(); i++) {
    if (t.intent_labels[i] == "query" && t.intents[i].kind == IOT_INTENT_BEGIN) {
      events.emplace_back(t.intents[i].ts, t.intents[i].tid, 0);
    }
  }
  for (const auto& [ts, tid, offset] : reads) events.emplace_back(ts, tid, 1);
  std::sort(events.begin(), events.end());
  std::map<uint32_t, int64_t> current;  // tid -> chain of its open query
  int64_t chains = 0;
  std::vector<int64_t> by_marker(truth.reads.size(), -1), by_thread(truth.reads.size(), -1);
  size_t r = 0;
  for (const auto& [ts, tid, kind] : events) {
    if (kind == 0) {
      current[tid] = chains++;
      continue;
    }
    const auto id = static_cast<size_t>(ids[r++]);
    by_marker[id] = current.count(tid) ? current[tid] : -1;
    by_thread[id] = tid;
  }
  EXPECT_EQ(chains, 16);
  const MembershipScore oracle = ScoreChainMembership(truth, by_marker);
  EXPECT_DOUBLE_EQ(oracle.precision, 1.0);
  EXPECT_DOUBLE_EQ(oracle.recall, 1.0);
  // One chain per thread (a detector that only follows a thread's reads of one file) finds
  // every true pair but is far from the 0.95 precision required.
  const MembershipScore per_thread = ScoreChainMembership(truth, by_thread);
  EXPECT_DOUBLE_EQ(per_thread.recall, 1.0);
  EXPECT_LT(per_thread.precision, 0.5);
  std::printf(
      "[ chain truth ] %s: %zu reads, 16 queries; one chain per thread scores precision "
      "%.3f\n",
      io.c_str(), truth.reads.size(), per_thread.precision);
}

INSTANTIATE_TEST_SUITE_P(Engines, VectorChainTruth, ::testing::Values("pread", "uring"));

}  // namespace
}  // namespace iotwin::test
