// Ground truth for dependent-read-chain detection: the vector-search scenario's read log
// (docs/workloads.md "vector-search", `--read-log`) says which query each node read belongs to
// and which earlier read it depended on. A query's reads form one dependent chain (hop after
// hop); a detector is scored on chain membership with pairwise precision and recall: of the
// pairs of reads it puts in one chain, how many share a query, and of the pairs sharing a query,
// how many it puts in one chain.
#pragma once

#include <cstdint>
#include <deque>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace iotwin::test {

struct TruthRead {
  uint64_t id = 0;
  uint64_t query = 0;
  uint64_t hop = 0;
  uint32_t tid = 0;
  uint64_t offset = 0;
  int64_t depends_on = -1;  // -1: the query's entry read
};

struct ChainTruth {
  std::vector<TruthRead> reads;  // by id
  std::string error;             // empty when the log is consistent
};

// Loads a read log and checks what the scoring relies on: ids 0, 1, 2, ...; each dependence on
// an earlier read of an earlier hop of the same query.
inline ChainTruth LoadChainTruth(const std::string& path) {
  ChainTruth t;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) {
      t.error = "unparsable line " + std::to_string(t.reads.size());
      return t;
    }
    TruthRead r;
    r.id = j.value("read", uint64_t{0});
    r.query = j.value("query", uint64_t{0});
    r.hop = j.value("hop", uint64_t{0});
    r.tid = j.value("tid", uint32_t{0});
    r.offset = j.value("offset", uint64_t{0});
    const auto& dep = j["depends_on"];
    if (dep.is_array() && dep.size() == 1) r.depends_on = dep[0].get<int64_t>();
    if (r.id != t.reads.size()) {
      t.error = "read " + std::to_string(r.id) + " out of order";
      return t;
    }
    if (r.depends_on >= 0) {
      const auto d = static_cast<uint64_t>(r.depends_on);
      if (d >= r.id || t.reads[d].query != r.query || t.reads[d].hop >= r.hop) {
        t.error = "read " + std::to_string(r.id) + " depends on " + std::to_string(d) +
                  ", not an earlier hop of its query";
        return t;
      }
    }
    t.reads.push_back(r);
  }
  if (t.reads.empty() && t.error.empty()) t.error = "no reads in " + path;
  return t;
}

struct TraceRead {
  uint32_t tid = 0;
  uint64_t offset = 0;
};

// The read-log id of each read of a trace, given in the trace's order: per thread, the trace's
// reads and the log's reads (queries in order, reads in issue order) must be the same sequence
// of offsets. -1 where they differ or the log has no more reads for that thread.
inline std::vector<int64_t> MatchTraceReads(const ChainTruth& truth,
                                            const std::vector<TraceRead>& trace) {
  std::map<uint32_t, std::deque<const TruthRead*>> pending;
  for (const TruthRead& r : truth.reads) pending[r.tid].push_back(&r);
  std::vector<int64_t> out;
  out.reserve(trace.size());
  for (const TraceRead& tr : trace) {
    auto& q = pending[tr.tid];
    if (q.empty() || q.front()->offset != tr.offset) {
      out.push_back(-1);
      continue;
    }
    out.push_back(static_cast<int64_t>(q.front()->id));
    q.pop_front();
  }
  return out;
}

struct MembershipScore {
  double precision = 0;  // 0 when the detector put no two reads in one chain
  double recall = 0;
  uint64_t true_pairs = 0, detected_pairs = 0, common_pairs = 0;
};

// chain_of[id]: the detector's chain of read `id`, or -1 when it put the read in no chain.
inline MembershipScore ScoreChainMembership(const ChainTruth& truth,
                                            const std::vector<int64_t>& chain_of) {
  auto pairs = [](uint64_t n) { return n < 2 ? 0 : n * (n - 1) / 2; };
  std::map<uint64_t, uint64_t> per_query;
  std::map<int64_t, uint64_t> per_chain;
  std::map<std::pair<int64_t, uint64_t>, uint64_t> per_cell;
  for (const TruthRead& r : truth.reads) {
    per_query[r.query]++;
    const int64_t c = r.id < chain_of.size() ? chain_of[r.id] : -1;
    if (c < 0) continue;
    per_chain[c]++;
    per_cell[{c, r.query}]++;
  }
  MembershipScore s;
  for (const auto& [q, n] : per_query) s.true_pairs += pairs(n);
  for (const auto& [c, n] : per_chain) s.detected_pairs += pairs(n);
  for (const auto& [cell, n] : per_cell) s.common_pairs += pairs(n);
  if (s.detected_pairs > 0) {
    s.precision = static_cast<double>(s.common_pairs) / static_cast<double>(s.detected_pairs);
  }
  s.recall = s.true_pairs == 0
                 ? 1.0
                 : static_cast<double>(s.common_pairs) / static_cast<double>(s.true_pairs);
  return s;
}

}  // namespace iotwin::test
