#include "analysis/compare_query.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "analysis/analyzer.h"
#include "analysis/distance.h"
#include "base/checked_math.h"
#include "format/records.h"
#include "format/trace_reader.h"

namespace iotwin::analysis {
// The shapes QueryReads::Data holds (a named namespace: an anonymous one would give that struct
// internal-linkage members).
namespace query_reads {

using nlohmann::json;

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
constexpr size_t kNone = std::numeric_limits<size_t>::max();
// How far past the last match a replay read is looked for: reads the replay added or the
// original's that it left out are passed over, a whole different run is not searched.
constexpr size_t kMatchWindow = 1024;
constexpr size_t kMaxDifferences = 5;

// A read call or an async read request: issue (call entry, submission) and completion (call
// exit, async completion; kNever when the trace does not show it).
struct Read {
  uint64_t issue = 0, done = kNever, offset = 0, length = 0;
};
struct Span {
  uint64_t begin = 0, end = kNever;
};
struct ThreadTrace {
  std::vector<Read> reads;          // by issue time
  std::vector<Span> queries, hops;  // marker phases by begin time (hops: `hop` and `rerank`)
};
using TraceReads = std::map<uint32_t, ThreadTrace>;  // by tid

// The submission and completion records of one request share engine, context, request identity
// and user data.
using AsyncKey = std::tuple<uint8_t, uint64_t, uint64_t, uint64_t>;
struct AsyncEvent {
  uint64_t ts;
  bool complete;
  uint32_t tid;
  AsyncKey key;
  uint64_t offset, length;
};

enum class Phase { kNone, kQuery, kHop };

}  // namespace query_reads

namespace {

using namespace query_reads;  // NOLINT(google-build-using-namespace): this file's own types

Phase PhaseOfLabel(std::string_view label) {
  if (label == "query") return Phase::kQuery;
  if (label == "hop" || label == "rerank") return Phase::kHop;
  return Phase::kNone;
}

// Async reads get their completion: the earliest pending submission with the same key.
void PairAsyncReads(std::vector<AsyncEvent> events, TraceReads* out) {
  std::stable_sort(events.begin(), events.end(), [](const AsyncEvent& x, const AsyncEvent& y) {
    return x.ts != y.ts ? x.ts < y.ts : !x.complete && y.complete;
  });
  std::map<AsyncKey, std::deque<std::pair<uint32_t, size_t>>> pending;
  for (const AsyncEvent& e : events) {
    if (!e.complete) {
      std::vector<Read>& reads = (*out)[e.tid].reads;
      reads.push_back(Read{e.ts, kNever, e.offset, e.length});
      pending[e.key].emplace_back(e.tid, reads.size() - 1);
      continue;
    }
    auto it = pending.find(e.key);
    if (it == pending.end()) continue;  // a request that is not a read, or submitted unseen
    auto [tid, index] = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) pending.erase(it);
    Read& r = (*out)[tid].reads[index];
    r.done = std::max(e.ts, r.issue);
  }
}

}  // namespace

struct QueryReads::Data {
  bool markers = false;
  TraceReads threads;
  std::vector<AsyncEvent> asyncs;
  std::map<std::pair<uint32_t, Phase>, std::vector<uint64_t>> open;  // begins not yet ended
};

QueryReads::QueryReads(bool markers) : data_(std::make_unique<Data>()) { data_->markers = markers; }
QueryReads::~QueryReads() = default;
QueryReads::QueryReads(QueryReads&&) noexcept = default;
QueryReads& QueryReads::operator=(QueryReads&&) noexcept = default;

void QueryReads::Add(const iot_rec_hdr* h, const TraceReader& reader) {
  Data& d = *data_;
  if (h->type == IOT_REC_SYSCALL) {
    const iot_syscall& sc = As<iot_syscall>(h);
    if (!OpIsRead(sc.op) || sc.ret <= 0) return;
    const uint64_t done = sc.sflags & IOT_SCF_INTERRUPTED ? kNever : SaturatingAdd(sc.ts, sc.dur);
    d.threads[sc.tid].reads.push_back(Read{sc.ts, done, sc.offset, sc.length});
  } else if (h->type == IOT_REC_ASYNC_IO) {
    const iot_async_io& a = As<iot_async_io>(h);
    const bool complete = a.phase == IOT_AIO_COMPLETE;
    if (!complete && (a.phase != IOT_AIO_SUBMIT || AsyncDirection(a.engine, a.opcode) != 0)) return;
    d.asyncs.push_back(AsyncEvent{a.ts, complete, a.tid, {a.engine, a.ctx, a.req_id, a.user_data},
                                  a.offset, AsyncLengthKnown(a) ? a.length : 0});
  } else if (h->type == IOT_REC_INTENT && d.markers) {
    const iot_intent& in = As<iot_intent>(h);
    const Phase phase = PhaseOfLabel(reader.String(in.label_id));
    if (phase == Phase::kNone) return;
    std::vector<uint64_t>& begins = d.open[{in.tid, phase}];
    if (in.kind == IOT_INTENT_BEGIN) {
      begins.push_back(in.ts);
    } else if (in.kind == IOT_INTENT_END && !begins.empty()) {
      ThreadTrace& t = d.threads[in.tid];
      (phase == Phase::kQuery ? t.queries : t.hops).push_back(Span{begins.back(), in.ts});
      begins.pop_back();
    }
  }
}

void QueryReads::Finish() {
  Data& d = *data_;
  for (const auto& [key, begins] : d.open) {  // a phase the trace never closed runs to its end
    ThreadTrace& t = d.threads[key.first];
    for (uint64_t b : begins) (key.second == Phase::kQuery ? t.queries : t.hops).push_back(Span{b, kNever});
  }
  d.open.clear();
  PairAsyncReads(std::move(d.asyncs), &d.threads);
  d.asyncs.clear();
  auto by_begin = [](const Span& x, const Span& y) { return x.begin < y.begin; };
  for (auto& [tid, t] : d.threads) {
    std::stable_sort(t.reads.begin(), t.reads.end(),
                     [](const Read& x, const Read& y) { return x.issue < y.issue; });
    std::sort(t.queries.begin(), t.queries.end(), by_begin);
    std::sort(t.hops.begin(), t.hops.end(), by_begin);
  }
}

namespace {

// Index of the latest-begun span holding `ts`, or kNone.
size_t SpanOf(const std::vector<Span>& spans, uint64_t ts) {
  auto pos = std::upper_bound(spans.begin(), spans.end(), ts,
                              [](uint64_t t, const Span& s) { return t < s.begin; });
  if (pos == spans.begin()) return kNone;
  --pos;
  return ts <= pos->end ? static_cast<size_t>(pos - spans.begin()) : kNone;
}

// One marked query of the original: its reads (indices into its thread's reads) and their
// grouping into hops, in order.
struct MarkedQuery {
  uint32_t tid = 0;
  uint64_t begin = 0;
  std::vector<size_t> reads;
  std::vector<std::vector<size_t>> hops;
};

std::vector<MarkedQuery> QueriesOf(uint32_t tid, const ThreadTrace& t) {
  std::vector<MarkedQuery> out(t.queries.size());
  std::vector<size_t> last_hop(t.queries.size(), kNone);
  for (size_t q = 0; q < out.size(); q++) {
    out[q].tid = tid;
    out[q].begin = t.queries[q].begin;
  }
  for (size_t i = 0; i < t.reads.size(); i++) {
    const size_t q = SpanOf(t.queries, t.reads[i].issue);
    if (q == kNone) continue;
    out[q].reads.push_back(i);
    const size_t hop = SpanOf(t.hops, t.reads[i].issue);
    if (hop == kNone) continue;  // counts for the query, not for a hop
    if (hop != last_hop[q]) out[q].hops.emplace_back();
    last_hop[q] = hop;
    out[q].hops.back().push_back(i);
  }
  return out;
}

// For each read of `a` flagged in `wanted`: the index of the replay read that reproduces it
// (same offset and length, after the previous match), or kNone.
std::vector<size_t> MatchReads(const std::vector<Read>& a, const std::vector<bool>& wanted,
                               const std::vector<Read>* b) {
  std::vector<size_t> match(a.size(), kNone);
  if (b == nullptr) return match;
  size_t next = 0;
  for (size_t i = 0; i < a.size(); i++) {
    if (!wanted[i]) continue;
    const size_t stop = std::min(b->size(), next + kMatchWindow);
    for (size_t j = next; j < stop; j++) {
      if ((*b)[j].offset == a[i].offset && (*b)[j].length == a[i].length) {
        match[i] = j;
        next = j + 1;
        break;
      }
    }
  }
  return match;
}

// A query as one trace shows it.
struct QueryShape {
  size_t found = 0;           // reads present
  bool complete = false;      // every read present and completed
  uint64_t latency = 0;       // first issue to last completion (complete only)
  uint32_t rounds = 0;        // dependent hops: hops issued after the previous one completed
  size_t overlap_hop = kNone; // the first hop issued before the previous hop's reads completed
  uint64_t overlap_ns = 0;    //   by how much
  std::vector<uint32_t> depth;  // per hop: most of its reads in flight at once
};

// `read(i)`: the read reproducing read i of the original thread in this trace, or nullptr.
template <typename Lookup>
QueryShape Shape(const MarkedQuery& q, const Lookup& read) {
  QueryShape s;
  uint64_t first = kNever, last = 0;
  for (size_t i : q.reads) {
    const Read* r = read(i);
    if (r == nullptr) continue;
    s.found++;
    first = std::min(first, r->issue);
    last = std::max(last, r->done);
  }
  s.complete = s.found == q.reads.size() && last != kNever && !q.reads.empty();
  if (s.complete) s.latency = last - first;
  uint64_t round_done = 0;
  for (size_t h = 0; h < q.hops.size(); h++) {
    std::vector<std::pair<uint64_t, int>> events;  // (time, +1 issue / -1 completion)
    uint64_t hop_first = kNever, hop_last = 0;
    for (size_t i : q.hops[h]) {
      const Read* r = read(i);
      if (r == nullptr) continue;
      events.emplace_back(r->issue, 1);
      events.emplace_back(r->done, -1);
      hop_first = std::min(hop_first, r->issue);
      hop_last = std::max(hop_last, r->done);
    }
    std::sort(events.begin(), events.end());  // a completion before an issue at the same time
    int in_flight = 0, peak = 0;
    for (const auto& e : events) peak = std::max(peak, in_flight += e.second);
    s.depth.push_back(static_cast<uint32_t>(peak));
    if (events.empty()) continue;
    if (s.rounds == 0 || hop_first >= round_done) {
      s.rounds++;
      round_done = hop_last;
    } else {
      if (s.overlap_hop == kNone) {
        s.overlap_hop = h;
        s.overlap_ns = round_done == kNever ? 0 : round_done - hop_first;
      }
      round_done = std::max(round_done, hop_last);
    }
  }
  return s;
}

double Percentile(std::vector<uint64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return static_cast<double>(v[std::clamp<size_t>(rank, 1, v.size()) - 1]);
}

// Two-sample KS statistic of two samples.
double SampleKs(std::vector<uint64_t> a, std::vector<uint64_t> b) {
  if (a.empty() || b.empty()) return a.empty() && b.empty() ? 0.0 : 1.0;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  size_t i = 0, j = 0;
  double d = 0;
  while (i < a.size() && j < b.size()) {
    const uint64_t x = std::min(a[i], b[j]);
    while (i < a.size() && a[i] == x) i++;
    while (j < b.size() && b[j] == x) j++;
    d = std::max(d, std::fabs(static_cast<double>(i) / static_cast<double>(a.size()) -
                              static_cast<double>(j) / static_cast<double>(b.size())));
  }
  return d;
}

double Round6(double v) { return std::round(v * 1e6) / 1e6; }

std::string Us(uint64_t ns) { return fmt::format("{:.1f} us", static_cast<double>(ns) / 1e3); }

// Tallies of the per-query comparison.
struct Tally {
  size_t queries = 0, reads = 0, found = 0, hops = 0;
  size_t hop_count_differs = 0, depth_differs = 0;
  uint64_t rounds_a = 0, rounds_b = 0, depth_a = 0, depth_b = 0;
  std::vector<uint64_t> latency_a, latency_b, latency_paced;
  json missing = json::array(), hop_differences = json::array(), depth_differences = json::array();
};

void CompareOne(size_t number, const MarkedQuery& q, const QueryShape& a, const QueryShape& b,
                Tally* t) {
  t->queries++;
  t->reads += q.reads.size();
  t->found += b.found;
  t->rounds_a += a.rounds;
  t->rounds_b += b.rounds;
  if (a.complete) t->latency_a.push_back(a.latency);
  if (b.complete) t->latency_b.push_back(b.latency);
  const std::string name = fmt::format("query {} (thread {})", number, q.tid);
  if (b.found < q.reads.size() && t->missing.size() < kMaxDifferences) {
    t->missing.push_back(fmt::format("{}: {} of its {} reads not in the replay", name,
                                     q.reads.size() - b.found, q.reads.size()));
  }
  if (a.rounds != b.rounds || !b.complete) {
    t->hop_count_differs++;
    if (t->hop_differences.size() < kMaxDifferences) {
      std::string why = b.overlap_hop != kNone
                            ? fmt::format(": hop {} was issued {} before hop {}'s reads completed",
                                          b.overlap_hop + 1, Us(b.overlap_ns), b.overlap_hop)
                            : !b.complete ? ": reads missing or never completed" : "";
      t->hop_differences.push_back(fmt::format("{}: {} dependent hops in the original, {} in the replay{}",
                                               name, a.rounds, b.rounds, why));
    }
  }
  for (size_t h = 0; h < a.depth.size(); h++) {
    t->hops++;
    const uint32_t da = a.depth[h], db = h < b.depth.size() ? b.depth[h] : 0;
    t->depth_a += da;
    t->depth_b += db;
    if (da == db) continue;
    t->depth_differs++;
    if (t->depth_differences.size() < kMaxDifferences) {
      t->depth_differences.push_back(fmt::format(
          "{} hop {}: {} of its {} reads in flight at once in the original, {} in the replay", name,
          h + 1, da, q.hops[h].size(), db));
    }
  }
}

json LatencyJson(const std::vector<uint64_t>& v) {
  return {{"queries", v.size()}, {"p50", Percentile(v, 50)}, {"p90", Percentile(v, 90)},
          {"max", Percentile(v, 100)}};
}

double Mean(uint64_t sum, size_t n) { return n ? Round6(static_cast<double>(sum) / static_cast<double>(n)) : 0.0; }

// The reads of original thread `tid` flagged in `wanted` on the paced timeline: each issued where
// its call was paced, taking what its replay match took (`match` into `b`), or its own time
// without a match.
std::vector<Read> PacedReads(uint32_t tid, const std::vector<Read>& a, const std::vector<bool>& wanted,
                             const std::vector<size_t>& match, const std::vector<Read>* b,
                             const PacedTimeline& paced) {
  std::vector<Read> out(a.size());
  for (size_t i = 0; i < a.size(); i++) {
    if (!wanted[i]) continue;
    const Read& timed = match[i] != kNone && (*b)[match[i]].done != kNever ? (*b)[match[i]] : a[i];
    const uint64_t issue = paced.Map(tid, a[i].issue);
    const uint64_t done = timed.done == kNever ? kNever : SaturatingAdd(issue, timed.done - timed.issue);
    out[i] = Read{issue, done, a[i].offset, a[i].length};
  }
  return out;
}

}  // namespace

bool SummarySaysNoMarkers(const TraceReader& reader) {
  if (!reader.summary()) return false;
  const json& s = *reader.summary();
  const json* events = s.is_object() && s.contains("events") ? &s["events"] : nullptr;
  if (events == nullptr || !events->is_object()) return false;
  auto it = events->find("intent");
  return it == events->end() || (it->is_number_unsigned() && it->get<uint64_t>() == 0);
}

bool QueryReads::HasQueries() const {
  for (const auto& [tid, t] : data_->threads) {
    if (!QueriesOf(tid, t).empty()) return true;
  }
  return false;
}

std::vector<MeasureSpec> WithQueryMeasures(std::vector<MeasureSpec> base) {
  static const MeasureSpec kQueryMeasures[] = {
      {"query-match", 1.0, true, false, true,
       "share of the reads of the original's marked queries (`query` markers) that the replay "
       "issued in the same thread and order (offset, length): queries or reads left out"},
      {"query-hops-err", 0.0, false, false, true,
       "share of marked queries whose dependent hops differ: hops (`hop`/`rerank` markers) issued "
       "only after every read of the previous hop completed, counted in each trace's own times"},
      {"hop-depth-err", 0.05, false, false, true,
       "share of marked hops whose reads in flight at once (the batch's queue depth) differ"},
      {"query-latency-p50-rel-err", 0.5, false, true, true,
       "relative error of the median per-query latency (a query's first read issued to its last "
       "read completed)"},
      {"query-latency-p90-rel-err", 0.5, false, true, false,
       "relative error of the 90th percentile of per-query latency (reported only unless a "
       "threshold is given)"},
      {"query-latency-ks", 0.5, false, true, false,
       "Kolmogorov-Smirnov distance of per-query latencies (reported only unless a threshold is "
       "given)"},
  };
  base.insert(base.end(), std::begin(kQueryMeasures), std::end(kQueryMeasures));
  return base;
}

QueryComparison CompareQueries(const QueryReads* original, const QueryReads* replay,
                               const std::vector<ThreadSeq>& ta, const std::vector<ThreadSeq>& tb,
                               const std::vector<ThreadPair>& pairs, const PacedTimeline* paced) {
  QueryComparison out;
  if (original == nullptr || replay == nullptr) return out;
  const TraceReads& a = original->data().threads;
  std::vector<MarkedQuery> queries;
  for (const auto& [tid, t] : a) {
    for (MarkedQuery& q : QueriesOf(tid, t)) queries.push_back(std::move(q));
  }
  if (queries.empty()) return out;
  std::stable_sort(queries.begin(), queries.end(),
                   [](const MarkedQuery& x, const MarkedQuery& y) { return x.begin < y.begin; });
  const TraceReads& b = replay->data().threads;

  // Per original thread: which of its reads belong to a query, and their replay matches.
  std::map<uint32_t, std::vector<size_t>> matches;
  std::map<uint32_t, const std::vector<Read>*> replay_reads;
  std::map<uint32_t, std::vector<Read>> paced_reads;
  for (const auto& [tid, t] : a) {
    std::vector<bool> wanted(t.reads.size(), false);
    for (const MarkedQuery& q : queries) {
      if (q.tid != tid) continue;
      for (size_t i : q.reads) wanted[i] = true;
    }
    const std::vector<Read>* rb = nullptr;
    for (const ThreadPair& p : pairs) {
      if (p.a < 0 || p.b < 0 || ta[static_cast<size_t>(p.a)].tid != tid) continue;
      auto it = b.find(tb[static_cast<size_t>(p.b)].tid);
      if (it != b.end()) rb = &it->second.reads;
    }
    replay_reads[tid] = rb;
    matches[tid] = MatchReads(t.reads, wanted, rb);
    if (paced) paced_reads[tid] = PacedReads(tid, t.reads, wanted, matches[tid], rb, *paced);
  }

  Tally tally;
  for (size_t n = 0; n < queries.size(); n++) {
    const MarkedQuery& q = queries[n];
    const std::vector<Read>& ra = a.at(q.tid).reads;
    const std::vector<size_t>& m = matches.at(q.tid);
    const std::vector<Read>* rb = replay_reads.at(q.tid);
    const QueryShape sa = Shape(q, [&](size_t i) { return &ra[i]; });
    const QueryShape sb = Shape(q, [&](size_t i) -> const Read* {
      return m[i] == kNone ? nullptr : &(*rb)[m[i]];
    });
    CompareOne(n + 1, q, sa, sb, &tally);
    if (paced) {
      const std::vector<Read>& rp = paced_reads.at(q.tid);
      const QueryShape sp = Shape(q, [&](size_t i) { return &rp[i]; });
      if (sp.complete) tally.latency_paced.push_back(sp.latency);
    }
  }

  const double share = tally.reads ? static_cast<double>(tally.found) / static_cast<double>(tally.reads) : 1.0;
  const double per_query = static_cast<double>(tally.queries);
  // Latency is judged against the paced original's where there is one.
  const std::vector<uint64_t>& judged_a = paced ? tally.latency_paced : tally.latency_a;
  const double p50a = Percentile(judged_a, 50), p50b = Percentile(tally.latency_b, 50);
  const double p90a = Percentile(judged_a, 90), p90b = Percentile(tally.latency_b, 90);
  out.present = true;
  out.measures = {
      {"query-match", share, tally.reads, tally.found},
      {"query-hops-err", static_cast<double>(tally.hop_count_differs) / per_query,
       Mean(tally.rounds_a, tally.queries), Mean(tally.rounds_b, tally.queries)},
      {"hop-depth-err",
       tally.hops ? static_cast<double>(tally.depth_differs) / static_cast<double>(tally.hops) : 0.0,
       Mean(tally.depth_a, tally.hops), Mean(tally.depth_b, tally.hops)},
      {"query-latency-p50-rel-err", RelativeError(p50a, p50b), p50a, p50b},
      {"query-latency-p90-rel-err", RelativeError(p90a, p90b), p90a, p90b},
      {"query-latency-ks", SampleKs(judged_a, tally.latency_b), nullptr, nullptr},
  };
  for (QueryMeasure& m : out.measures) m.value = Round6(m.value);
  if (paced) {
    out.measures[3].recorded_original = Percentile(tally.latency_a, 50);
    out.measures[4].recorded_original = Percentile(tally.latency_a, 90);
  }
  out.detail = {
      {"queries", tally.queries},
      {"reads", tally.reads},
      {"reads_found", tally.found},
      {"hops", tally.hops},
      {"dependent_hops_per_query", {{"original", Mean(tally.rounds_a, tally.queries)},
                                    {"replay", Mean(tally.rounds_b, tally.queries)}}},
      {"queries_with_other_hops", tally.hop_count_differs},
      {"hops_with_other_depth", tally.depth_differs},
      {"latency_ns", {{"original", LatencyJson(tally.latency_a)}, {"replay", LatencyJson(tally.latency_b)}}},
      {"differences", {{"missing", tally.missing},
                       {"hops", tally.hop_differences},
                       {"depth", tally.depth_differences}}},
  };
  if (paced) out.detail["latency_ns"]["paced_original"] = LatencyJson(tally.latency_paced);
  return out;
}

json QueryCauses(const QueryComparison& q, const json& failed) {
  json causes = json::array();
  if (!q.present || !failed.is_array()) return causes;
  auto has = [&](const char* name) { return std::find(failed.begin(), failed.end(), name) != failed.end(); };
  auto first = [&](const char* kind) {
    const json& v = q.detail["differences"][kind];
    return v.empty() ? std::string() : "; first: " + v[0].get<std::string>();
  };
  const json& d = q.detail;
  if (has("query-match")) {
    causes.push_back({{"cause", "queries not replayed"},
                      {"evidence", fmt::format("{} of the {} reads of {} marked queries are in the replay{}",
                                               d["reads_found"].get<uint64_t>(), d["reads"].get<uint64_t>(),
                                               d["queries"].get<uint64_t>(), first("missing"))},
                      {"hint", "see THREADS (first difference per thread) and the replay's skips "
                               "(iotwin replay --json: skipped)"}});
  }
  if (has("query-hops-err")) {
    causes.push_back({{"cause", "hops not dependent as recorded"},
                      {"evidence", fmt::format("{} of {} queries have other dependent hops (mean {} in "
                                               "the original, {} in the replay){}",
                                               d["queries_with_other_hops"].get<uint64_t>(),
                                               d["queries"].get<uint64_t>(),
                                               d["dependent_hops_per_query"]["original"].get<double>(),
                                               d["dependent_hops_per_query"]["replay"].get<double>(),
                                               first("hops"))},
                      {"hint", "a hop's batch must be issued only after the previous hop's reads "
                               "completed in the replay (docs/workloads.md, vector-search: replaying it)"}});
  }
  if (has("hop-depth-err")) {
    causes.push_back({{"cause", "batches not in flight together"},
                      {"evidence", fmt::format("{} of {} hops had another number of reads in flight at "
                                               "once{}",
                                               d["hops_with_other_depth"].get<uint64_t>(),
                                               d["hops"].get<uint64_t>(), first("depth"))},
                      {"hint", "replay async requests natively (--async native): --async sync "
                               "issues a batch's reads one after another"}});
  }
  if (has("query-latency-p50-rel-err") || has("query-latency-p90-rel-err") || has("query-latency-ks")) {
    const json& l = d["latency_ns"];
    const bool paced = l.contains("paced_original");
    const json& o = paced ? l["paced_original"] : l["original"];
    causes.push_back({{"cause", "per-query latency differs"},
                      {"evidence", fmt::format("per-query latency p50 {} vs {}, p90 {} vs {} ({} vs replay)",
                                               Us(static_cast<uint64_t>(o["p50"].get<double>())),
                                               Us(static_cast<uint64_t>(l["replay"]["p50"].get<double>())),
                                               Us(static_cast<uint64_t>(o["p90"].get<double>())),
                                               Us(static_cast<uint64_t>(l["replay"]["p90"].get<double>())),
                                               paced ? "original paced with the replay's read times" : "original")},
                      {"hint", paced ? "the replay's reads took what they took; the difference is the time "
                                       "between them: see the replay's schedule error (iotwin replay --json: "
                                       "schedule_error_ns)"
                                     : "a query's time is its hops' device time plus the think time between "
                                       "them: compare the devices (latency per op below) and the replay's "
                                       "schedule error (iotwin replay --json: schedule_error_ns)"}});
  }
  return causes;
}

}  // namespace iotwin::analysis
