#include "analysis/compare.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "analysis/compare_block.h"
#include "analysis/compare_pass.h"
#include "analysis/distance.h"
#include "analysis/report_text.h"
#include "analysis/sequence.h"
#include "analysis/trace_analysis.h"
#include "analysis/compare_timing.h"
#include "analysis/compare_query.h"
#include "base/checked_math.h"
#include "base/json_fields.h"
#include "format/hosts.h"
#include "format/records.h"
#include "model/trace_model.h"

namespace iotwin::analysis {
namespace {

using nlohmann::json;

uint64_t U(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
}

double Round6(double v) { return std::round(v * 1e6) / 1e6; }

// The calls of a trace that a replay of it would not re-issue (model::Op::skip: descriptors the
// trace never opened such as an inherited stdout, anonymous memory, pseudo file systems, ...),
// with the count per reason, and the timeline of the calls compare judges: the storage calls,
// the ones replay reproduces (or every call with --all-calls).
struct CallScope {
  std::shared_ptr<CallSet> excluded = std::make_shared<CallSet>();
  std::map<std::string, uint64_t> reasons;
  uint64_t calls = 0;
  CallTimeline timeline;
};

CallScope ReplayScope(const model::TraceModel& m, bool storage_calls_only) {
  CallScope scope;
  for (const model::Thread& th : m.threads()) {
    for (const model::Op& op : th.ops) {
      // Judged: what replay re-issues, or with --all-calls every call the data scope keeps.
      const bool judged = op.skip == model::Skip::kReplayable ||
                          (!storage_calls_only && op.skip != model::Skip::kOutOfScope);
      if (op.kind == model::OpKind::kAsyncSubmit) {
        if (!judged) continue;
        TimedCall c{.ts = op.ts, .end = op.end, .bytes = op.result > 0 ? static_cast<uint64_t>(op.result) : 0,
                    .data = AsyncDirection(op.aio.engine, op.aio.opcode) >= 0, .async = true};
        scope.timeline.Add(th.tgid, th.tid, c);
        continue;
      }
      if (op.kind != model::OpKind::kSyscall) continue;
      ++scope.calls;
      if (judged) {
        const bool data = OpIsRead(op.sc.op) || OpIsWrite(op.sc.op);
        TimedCall c{.ts = op.sc.ts, .end = SaturatingAdd(op.sc.ts, op.sc.dur),
                    .bytes = data && op.sc.ret > 0 ? static_cast<uint64_t>(op.sc.ret) : 0, .data = data};
        scope.timeline.Add(th.tgid, th.tid, c);
      }
      if (judged) continue;
      scope.excluded->insert(CallKey(op.sc.tid, op.sc.ts));
      ++scope.reasons[std::string(model::SkipName(op.skip))];
    }
    scope.timeline.SetStart(th.tgid, th.tid, th.start_ts);
  }
  scope.timeline.Finish();
  return scope;
}

json ScopeJson(const CallScope& s) {
  return {{"calls", s.calls}, {"excluded", s.excluded->size()}, {"reasons", s.reasons}};
}

// Ops + bytes per time bucket, aligned on each trace's first data operation and re-binned to a
// common width: at most 200 buckets, and few enough that a bucket holds ~20 operations on
// average, so that microseconds of replay jitter on a short trace do not move whole buckets.
struct AlignedSeries {
  std::vector<uint64_t> ops_a, ops_b, bytes_a, bytes_b;
  uint64_t width_ns = 0;
};

// Which worker thread replayed which recorded thread, as `replay --record` wrote it into the
// replay's header (copy 0: with --amplify the other copies have no counterpart in the original).
// Threads that start microseconds apart can start in the other order in a replay; this pairs
// them as they were replayed.
std::vector<std::pair<uint32_t, uint32_t>> ReplayThreadMap(const json& replay_model) {
  std::vector<std::pair<uint32_t, uint32_t>> known;
  const json* map = json_fields::Array(replay_model, "capture/replay/thread_map");
  if (!map) return known;
  for (const json& row : *map) {
    if (!row.is_object() || json_fields::GetUint(row, "copy", 1) != 0) continue;
    const uint64_t recorded = json_fields::GetUint(row, "recorded_tid", 0);
    const uint64_t worker = json_fields::GetUint(row, "worker_tid", 0);
    if (recorded == 0 || worker == 0 || recorded > UINT32_MAX || worker > UINT32_MAX) continue;
    known.emplace_back(static_cast<uint32_t>(recorded), static_cast<uint32_t>(worker));
  }
  return known;
}

// Data ops and bytes of the calls (system calls and async requests) on storage, both
// directions: what compare judges. The report's totals also count bytes moved through file
// mappings (mmap_ops, mmap_bytes), which depend on the page cache of the moment (fault-around
// maps only cached pages).
uint64_t CallOps(const json& totals) {
  uint64_t n = 0;
  for (const char* dir : {"read", "write"})
    n += U(totals[dir], "syscall_ops") + U(totals[dir], "async_ops");
  return n;
}
uint64_t CallBytes(const json& totals) {
  uint64_t n = 0;
  for (const char* dir : {"read", "write"})
    n += U(totals[dir], "syscall_bytes") + U(totals[dir], "async_bytes");
  return n;
}

AlignedSeries AlignSeries(const Analyzer& a, const json& ma, const Analyzer& b, const json& mb) {
  const TimeSeries& sa = a.series();
  const TimeSeries& sb = b.series();
  uint64_t w = std::max(sa.width_ns(), sb.width_ns());
  auto lead = [](const json& m, const TimeSeries& s) {
    uint64_t first = U(m["totals"], "data_first_ts_ns"), start = U(m["totals"], "start_ns");
    return first > start ? (first - start) / s.width_ns() * s.width_ns() : 0;
  };
  uint64_t lead_a = lead(ma, sa), lead_b = lead(mb, sb);
  uint64_t span_a = sa.used_buckets() * sa.width_ns() - lead_a;
  uint64_t span_b = sb.used_buckets() * sb.width_ns() - lead_b;
  const uint64_t ops = CallOps(ma["totals"]);
  const uint64_t max_buckets = std::clamp<uint64_t>(ops / 20, 4, 200);
  while (std::max(span_a, span_b) / w > max_buckets) w *= 2;
  size_t buckets = static_cast<size_t>(std::max(span_a, span_b) / w + 1);
  auto take = [&](const TimeSeries& s, uint64_t lead_ns, size_t s1, size_t s2) {
    std::vector<uint64_t> out(buckets, 0);
    for (size_t i = 0; i < s.used_buckets(); i++) {
      uint64_t t = i * s.width_ns();
      if (t < lead_ns) continue;
      size_t o = static_cast<size_t>((t - lead_ns) / w);
      if (o < buckets) out[o] += s.at(s1, i) + s.at(s2, i);
    }
    return out;
  };
  AlignedSeries r;
  r.width_ns = w;
  r.ops_a = take(sa, lead_a, Analyzer::kAppReadOps, Analyzer::kAppWriteOps);
  r.ops_b = take(sb, lead_b, Analyzer::kAppReadOps, Analyzer::kAppWriteOps);
  r.bytes_a = take(sa, lead_a, Analyzer::kAppReadBytes, Analyzer::kAppWriteBytes);
  r.bytes_b = take(sb, lead_b, Analyzer::kAppReadBytes, Analyzer::kAppWriteBytes);
  return r;
}

LogLinearHistogram MergedLatency(const Analyzer& a, int dir) {
  LogLinearHistogram h;
  for (uint16_t op = 0; op <= IOT_OP_MAX; op++) {
    if (dir == 0 ? !OpIsRead(op) : !OpIsWrite(op)) continue;
    if (const LogLinearHistogram* l = a.op_latency(op)) h.Merge(*l);
  }
  return h;
}

// Latency of each operation kind in both traces (count, p50, p99), most frequent first.
json LatencyByOp(const Analyzer& a, const Analyzer& b) {
  std::vector<std::pair<uint64_t, json>> rows;
  auto side = [](const LogLinearHistogram* h) {
    return h && h->total() ? json{{"count", h->total()}, {"p50", h->Percentile(50)}, {"p99", h->Percentile(99)}}
                           : json{{"count", 0}, {"p50", nullptr}, {"p99", nullptr}};
  };
  for (uint16_t op = 0; op <= IOT_OP_MAX; op++) {
    const LogLinearHistogram* la = a.op_latency(op);
    const LogLinearHistogram* lb = b.op_latency(op);
    uint64_t n = std::max(la ? la->total() : 0, lb ? lb->total() : 0);
    if (n == 0) continue;
    rows.emplace_back(n, json{{"op", std::string(OpName(op))}, {"original", side(la)}, {"replay", side(lb)}});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  json out = json::array();
  for (auto& [n, row] : rows) out.push_back(std::move(row));
  return out;
}

json Side(const std::string& path, const json& m) {
  json s = {{"path", path},
            {"records", m["totals"]["records"]},
            {"span_ns", m["totals"]["span_ns"]},
            {"syscalls", m["totals"]["syscalls"]},
            {"complete", m["capture"]["complete"]}};
  if (const json* replay = json_fields::Find(m, "capture/replay")) s["replay"] = *replay;
  if (const json* damage = json_fields::Find(m, "trace/damage")) s["damage"] = *damage;
  return s;
}

// Sequence match per thread pair: compare's "threads" and the seq-match share.
struct SequenceMatch {
  std::vector<ThreadSeq> ta, tb;
  std::vector<ThreadPair> pairs;
  double share = 1.0;
  json threads;
};

SequenceMatch MatchSequences(const Analyzer& a, const Analyzer& b, const json& mb, size_t top) {
  SequenceMatch m;
  std::vector<ThreadSeq>& ta = m.ta;
  std::vector<ThreadSeq>& tb = m.tb;
  auto seq_a = a.Sequences(), seq_b = b.Sequences();
  for (const auto& s : seq_a) ta.push_back({s.tid, s.tgid, s.process_rank, s.thread_rank, s.ops});
  for (const auto& s : seq_b) tb.push_back({s.tid, s.tgid, s.process_rank, s.thread_rank, s.ops});
  m.pairs = MapThreads(ta, tb, ReplayThreadMap(mb));
  const auto& pairs = m.pairs;
  uint64_t matched = 0, denominator = 0;
  bool exact = true;
  json threads = json::array();
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> by_host;  // merged traces: matched, compared
  for (const ThreadPair& p : pairs) {
    size_t na = p.a >= 0 ? ta[static_cast<size_t>(p.a)].ops->size() : 0;
    size_t nb = p.b >= 0 ? tb[static_cast<size_t>(p.b)].ops->size() : 0;
    LcsResult lcs;
    if (p.a >= 0 && p.b >= 0) {
      lcs = LongestCommonSubsequence(*ta[static_cast<size_t>(p.a)].ops, *tb[static_cast<size_t>(p.b)].ops);
      exact = exact && lcs.exact;
    }
    matched += lcs.length;
    denominator += std::max(na, nb);
    const ThreadSeq& side = p.a >= 0 ? ta[static_cast<size_t>(p.a)] : tb[static_cast<size_t>(p.b)];
    std::pair<uint64_t, uint64_t>& host = by_host[HostOfPid(side.tgid)];
    host.first += lcs.length;
    host.second += std::max(na, nb);
    double share = std::max(na, nb) ? static_cast<double>(lcs.length) / static_cast<double>(std::max(na, nb)) : 1.0;
    json row = {{"original_tid", p.a >= 0 ? json(ta[static_cast<size_t>(p.a)].tid) : json(nullptr)},
                {"original_tgid", p.a >= 0 ? json(ta[static_cast<size_t>(p.a)].tgid) : json(nullptr)},
                {"replay_tid", p.b >= 0 ? json(tb[static_cast<size_t>(p.b)].tid) : json(nullptr)},
                {"replay_tgid", p.b >= 0 ? json(tb[static_cast<size_t>(p.b)].tgid) : json(nullptr)},
                {"original_ops", na},
                {"replay_ops", nb},
                {"matched", lcs.length},
                {"share", Round6(share)},
                {"exact", lcs.exact}};
    bool identical = p.a >= 0 && p.b >= 0 && na == nb && lcs.length == na;
    row["first_difference"] = identical ? json(nullptr) : json(lcs.first_difference);
    threads.push_back(row);
  }
  double seq_match = denominator ? static_cast<double>(matched) / static_cast<double>(denominator) : 1.0;
  std::stable_sort(threads.begin(), threads.end(), [](const json& x, const json& y) {
    return x["share"].get<double>() < y["share"].get<double>();
  });
  json thread_rows = json::array();
  for (size_t i = 0; i < threads.size() && (top == 0 || i < top); i++)
    thread_rows.push_back(threads[i]);
  m.threads = {{"original", ta.size()}, {"replay", tb.size()}, {"pairs", pairs.size()},
               {"matched_ops", matched}, {"compared_ops", denominator},
               {"exact", exact}, {"sequences_truncated", a.sequences_truncated() || b.sequences_truncated()},
               {"rows", thread_rows}};
  if (!by_host.empty() && by_host.rbegin()->first != 0) {
    // A merged trace (format/hosts.h): the sequence match of each host's threads.
    json hosts = json::array();
    for (const auto& [host, n] : by_host) {
      const double share =
          n.second ? static_cast<double>(n.first) / static_cast<double>(n.second) : 1.0;
      hosts.push_back({{"host", host}, {"matched_ops", n.first}, {"compared_ops", n.second},
                       {"share", Round6(share)}});
    }
    m.threads["hosts"] = std::move(hosts);
  }
  m.share = seq_match;
  return m;
}

// Judges every computed measure against its threshold: out's "measures", "failed", "verdict".
void Judge(const std::map<std::string, json>& values, const CompareOptions& options,
           bool timing_judged, bool block_judged, const std::string& pace, bool strace_original,
           json* out) {
  json measures = json::array();
  json failed = json::array();
  for (const MeasureSpec& spec : Measures()) {
    auto it = values.find(spec.name);
    if (it == values.end()) continue;  // not computable for these traces (e.g. no block layer)
    std::optional<double> threshold;
    if (spec.enabled) threshold = spec.default_threshold;
    if (auto o = options.thresholds.find(spec.name); o != options.thresholds.end()) threshold = o->second;
    bool judged = threshold.has_value() &&
                  (!spec.timing || (timing_judged && ((PaceJudges(pace, spec.name) &&
                                                       !(strace_original && spec.name == std::string("iat-ks"))) ||
                                                      options.thresholds.count(spec.name)))) &&
                  (!spec.block || block_judged || options.thresholds.count(spec.name));
    double v = it->second["value"].get<double>();
    bool pass = !threshold || (spec.at_least ? v >= *threshold - 1e-12 : v <= *threshold + 1e-12);
    json m = it->second;
    m["name"] = spec.name;
    m["kind"] = spec.timing ? "timing" : "structural";
    m["threshold"] = threshold ? json(*threshold) : json(nullptr);
    m["condition"] = spec.at_least ? ">=" : "<=";
    m["judged"] = judged;
    m["pass"] = pass;
    if (judged && !pass) failed.push_back(spec.name);
    measures.push_back(m);
  }
  (*out)["measures"] = measures;
  (*out)["failed"] = failed;
  (*out)["verdict"] = failed.empty() ? "pass" : "fail";
}

// The evidence behind a FAIL: likely causes with hints, the stretch of the run that diverged
// most, the largest stall, and per-operation latency in both traces.
template <typename Line>
void RenderWhy(const json& r, const Line& line) {
  line("");
  line("  WHY");
  bool first = true;
  for (const json& c : r.value("causes", json::array())) {
    line(fmt::format("    {} {}: {}", first ? "likely cause:" : "also:       ", c["cause"].get<std::string>(),
                     c["evidence"].get<std::string>()));
    line(fmt::format("                  -> {}", c["hint"].get<std::string>()));
    first = false;
  }
  const json* t = json_fields::Object(r, "timing");
  if (!t) return;
  if (const json* d = json_fields::Object(*t, "most_diverged")) {
    auto ms = [](const json& v) { return fmt::format("{:.3f}-{:.3f} ms", v[0].get<double>(), v[1].get<double>()); };
    line(fmt::format("    most diverged stretch ({} of {}): original {} {} data ops, replay {} {} data ops",
                     U(*d, "stretch") + 1, U(*d, "stretches"), ms((*d)["original_ms"]),
                     FormatCount(static_cast<uint64_t>((*d)["original_ops"].get<double>())),
                     ms((*d)["replay_ms"]),
                     FormatCount(static_cast<uint64_t>((*d)["replay_ops"].get<double>()))));
  }
  if (const json* s = json_fields::Object(*t, "stall")) {
    line(fmt::format("    largest stall: {:.3f} ms idle before call #{} of thread {} (original {:.3f} "
                     "ms idle at +{:.3f} ms, replay {:.3f} ms at +{:.3f} ms)",
                     (*s)["ms"].get<double>(), U(*s, "call"), U(*s, "original_tid"),
                     (*s)["original_idle_ms"].get<double>(), (*s)["original_at_ms"].get<double>(),
                     (*s)["replay_idle_ms"].get<double>(), (*s)["replay_at_ms"].get<double>()));
  }
  const json* lat = json_fields::Array(*t, "latency_ns");
  if (!lat || lat->empty()) return;
  line(fmt::format("    {:<16} {:>16} {:>21} {:>21}", "latency", "calls", "p50 orig / replay", "p99 orig / replay"));
  auto q = [](const json& v) { return v.is_null() ? std::string("-") : FormatDuration(v.get<double>()); };
  size_t shown = 0;
  for (const json& row : *lat) {
    if (++shown > 8) break;
    const json& o = row["original"];
    const json& p = row["replay"];
    line(fmt::format("    {:<16} {:>16} {:>21} {:>21}", row["op"].get<std::string>(),
                     FormatCount(U(o, "count")) + " / " + FormatCount(U(p, "count")),
                     q(o["p50"]) + " / " + q(p["p50"]), q(o["p99"]) + " / " + q(p["p99"])));
  }
}

}  // namespace

const std::vector<MeasureSpec>& Measures() {
  static const std::vector<MeasureSpec> kMeasures = WithQueryMeasures({
      {"seq-match", 1.0, true, false, true,
       "share of operations identical in order and arguments (op, offset, length, flags, whence)"},
      {"op-count-rel-err", 0.01, false, false, true,
       "largest relative error of the count of any operation kind"},
      {"bytes-rel-err", 0.01, false, false, true, "relative error of bytes read + written"},
      {"size-ks", 0.05, false, false, true, "Kolmogorov-Smirnov distance of request sizes (worst of read/write)"},
      {"size-js", 0.05, false, false, true, "Jensen-Shannon distance of request sizes (worst of read/write)"},
      {"offset-ks", 0.05, false, false, true, "Kolmogorov-Smirnov distance of request offsets"},
      {"offset-js", 0.05, false, false, true, "Jensen-Shannon distance of request offsets"},
      {"block-requests-rel-err", 0.10, false, false, true,
       "relative error of block requests issued (when both traces have the block layer)", true},
      {"block-bytes-rel-err", 0.10, false, false, true, "relative error of block bytes", true},
      {"block-size-ks", 0.10, false, false, true, "Kolmogorov-Smirnov distance of block request sizes",
       true},
      {"block-read-share-diff", 0.05, false, false, true,
       "absolute difference of the share of block requests that are reads", true},
      {"iops-rel-err", 0.05, false, true, true,
       "relative error of overall IOPS (data ops / active window: first to last judged call)"},
      {"throughput-rel-err", 0.05, false, true, true, "relative error of overall bytes/s (same window)"},
      {"idle-rel-err", 0.10, false, true, true,
       "relative error of the idle time between each thread's consecutive judged calls, summed "
       "over threads: the think time gaps pacing keeps (gaps replays only)"},
      {"iops-series-err", 0.05, false, true, true,
       "area between the normalised cumulative data-op curves over normalised time (each trace's "
       "active window; the mean shift of the work, as a share of the run)"},
      {"throughput-series-err", 0.05, false, true, true, "the same for bytes"},
      {"thread-series-err", 0.05, false, true, true,
       "the same per thread pair (all judged calls, over the run's window), weighted by calls: "
       "threads whose work moved to another point of the run (order between threads changed)"},
      {"stall-ms", 15, false, true, true,
       "largest stall (ms): idle time the replay added before a call, had not made up 100 ms "
       "(original time) later, and every thread running then shows (thread pairs with equal call "
       "counts; slower calls and waits on other threads' creation or end do not count)"},
      {"iat-ks", 0.10, false, true, true,
       "Kolmogorov-Smirnov distance of per-thread inter-arrival times of system calls (times "
       "under --iat-resolution-us counted as that: the replay's resolution)"},
      {"latency-ks", 0.25, false, true, false,
       "Kolmogorov-Smirnov distance of data-op latencies (worst of read/write; depends on the "
       "target storage, reported only unless a threshold is given)"},
  });
  return kMeasures;
}

Status ParseThreshold(const std::string& spec, CompareOptions* options) {
  size_t eq = spec.find('=');
  if (eq == std::string::npos) return Status::Invalid("--threshold {}: expected NAME=VALUE", spec);
  std::string name = spec.substr(0, eq), value = spec.substr(eq + 1);
  bool known = std::any_of(Measures().begin(), Measures().end(),
                           [&](const MeasureSpec& m) { return name == m.name; }) ||
               IsBlockStreamMeasure(name);
  if (!known) {
    std::string names;
    for (const auto& m : Measures()) names += std::string(names.empty() ? "" : ", ") + m.name;
    return Status::Invalid("--threshold {}: unknown measure '{}' (known: {})", spec, name, names);
  }
  if (value == "off" || value == "none") {
    options->thresholds[name] = std::nullopt;
    return Status::Ok();
  }
  char* end = nullptr;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(v))
    return Status::Invalid("--threshold {}: '{}' is not a number (or 'off')", spec, value);
  options->thresholds[name] = v;
  return Status::Ok();
}

namespace {

// Every measure's value, with the original's and the replay's figures: name -> {value, original,
// replay}.
using Values = std::map<std::string, json>;

void Put(Values* values, const char* name, double value, json orig = nullptr, json repl = nullptr) {
  (*values)[name] = {{"value", Round6(value)}, {"original", std::move(orig)}, {"replay", std::move(repl)}};
}

// Request sizes and offsets per direction: the worst KS and JS distances as measures, and the
// per-direction detail.
json CompareDistributions(const Analyzer& a, const Analyzer& b, Values* values) {
  double size_ks = 0, size_js = 0, off_ks = 0, off_js = 0;
  json dist = json::object();
  for (int dir = 0; dir < 2; dir++) {
    const double sk = KsDistance(a.request_sizes(dir), b.request_sizes(dir));
    const double sj = JsDistance(a.request_sizes(dir), b.request_sizes(dir));
    const double ok = KsDistance(a.offsets(dir), b.offsets(dir));
    const double oj = JsDistance(a.offsets(dir), b.offsets(dir));
    size_ks = std::max(size_ks, sk);
    size_js = std::max(size_js, sj);
    off_ks = std::max(off_ks, ok);
    off_js = std::max(off_js, oj);
    dist[dir == 0 ? "read" : "write"] = {
        {"size_ks", Round6(sk)}, {"size_js", Round6(sj)}, {"offset_ks", Round6(ok)},
        {"offset_js", Round6(oj)},
        {"size_p50", {a.request_sizes(dir).Percentile(50), b.request_sizes(dir).Percentile(50)}},
        {"size_p99", {a.request_sizes(dir).Percentile(99), b.request_sizes(dir).Percentile(99)}}};
  }
  Put(values, "size-ks", size_ks);
  Put(values, "size-js", size_js);
  Put(values, "offset-ks", off_ks);
  Put(values, "offset-js", off_js);
  return dist;
}

// The block streams of both traces (null when either has none): requests, bytes, sizes and the
// read share as measures.
json CompareBlock(const Analyzer& a, const json& ma, const Analyzer& b, const json& mb,
                  Values* values) {
  if (!ma["block"].is_object() || !mb["block"].is_object()) return nullptr;
  const json& ba = ma["block"];
  const json& bb = mb["block"];
  uint64_t req_a = U(ba, "requests"), req_b = U(bb, "requests");
  uint64_t by_a = U(ba["read"], "bytes") + U(ba["write"], "bytes");
  uint64_t by_b = U(bb["read"], "bytes") + U(bb["write"], "bytes");
  double share_a = ba["mix"]["read_ops_share"].get<double>();
  double share_b = bb["mix"]["read_ops_share"].get<double>();
  double ks = std::max(KsDistance(a.block_sizes(0), b.block_sizes(0)),
                       KsDistance(a.block_sizes(1), b.block_sizes(1)));
  Put(values, "block-requests-rel-err",
      RelativeError(static_cast<double>(req_a), static_cast<double>(req_b)), req_a, req_b);
  Put(values, "block-bytes-rel-err",
      RelativeError(static_cast<double>(by_a), static_cast<double>(by_b)), by_a, by_b);
  Put(values, "block-size-ks", ks);
  Put(values, "block-read-share-diff", std::fabs(share_a - share_b), share_a, share_b);
  return {{"original", {{"requests", req_a}, {"bytes", by_a}, {"read_share", share_a},
                        {"read", ba["read"].value("dominant", json(nullptr))},
                        {"write", ba["write"].value("dominant", json(nullptr))}}},
          {"replay", {{"requests", req_b}, {"bytes", by_b}, {"read_share", share_b},
                      {"read", bb["read"].value("dominant", json(nullptr))},
                      {"write", bb["write"].value("dominant", json(nullptr))}}}};
}

// The curve, stall and idle-time measures of replay `b` against original `a` over the thread
// pairs the sequence match found; returns their detail (compare's "timing").
// The timelines' threads paired as the sequence match paired them.
std::vector<TimelinePair> TimelinePairs(const CallTimeline& a, const CallTimeline& b,
                                        const SequenceMatch& seq) {
  std::vector<TimelinePair> timeline_pairs;
  for (const ThreadPair& p : seq.pairs) {
    TimelinePair tp;
    if (p.a >= 0) tp.a = a.Find(seq.ta[static_cast<size_t>(p.a)].tgid, seq.ta[static_cast<size_t>(p.a)].tid);
    if (p.b >= 0) tp.b = b.Find(seq.tb[static_cast<size_t>(p.b)].tgid, seq.tb[static_cast<size_t>(p.b)].tid);
    timeline_pairs.push_back(tp);
  }
  return timeline_pairs;
}

json CurvesStallsIdle(const CallTimeline& a, const CallTimeline& b, const SequenceMatch& seq,
                      const std::string& pace, Values* values) {
  TimingMeasures tm = MeasureTiming(a, b, TimelinePairs(a, b, seq), pace == "gaps");
  Put(values, "iops-series-err", tm.iops_series_err);
  Put(values, "throughput-series-err", tm.throughput_series_err);
  Put(values, "thread-series-err", tm.thread_series_err);
  if (tm.stall_measured) Put(values, "stall-ms", tm.stall_ms);
  if (pace == "gaps") {
    const json& idle = tm.detail["idle_ns"];
    Put(values, "idle-rel-err",
        RelativeError(idle["original"].get<double>(), idle["replay"].get<double>()),
        idle["original"], idle["replay"]);
  }
  return tm.detail;
}

// compare's timing measures (rates, curves, stalls, idle time, inter-arrival times) of replay `b`
// against the original's timeline as the replay's pace issues it: at the replay's speed and, for
// a replay paced original or gaps, with the replay's call durations (PaceOnReplayTarget). Writes
// out's "speed", "paced", "timing" and "timeseries"; returns the paced timeline of a paced replay.
std::optional<PacedTimeline> CompareTiming(const CallScope& scope_a, const CallScope& scope_b,
                                           const SequenceMatch& seq, const Analyzer& a,
                                           const Analyzer& b, const json& ma, const json& mb,
                                           const std::string& pace, const CompareOptions& options,
                                           Values* values, json* out) {
  const double speed = ReplaySpeed(mb);
  std::optional<PacedTimeline> scaled, paced;
  if (speed != 1.0) {
    scaled = PaceOnReplayTarget(scope_a.timeline, CallTimeline(), {}, pace, speed);
    (*out)["speed"] = speed;
  }
  if (pace == "original" || pace == "gaps") {
    paced = PaceOnReplayTarget(scope_a.timeline, scope_b.timeline,
                               TimelinePairs(scope_a.timeline, scope_b.timeline, seq), pace, speed);
  }
  const CallTimeline& recorded = scaled ? scaled->timeline : scope_a.timeline;
  const CallTimeline& judged = paced ? paced->timeline : recorded;
  const CallTimeline& replayed = scope_b.timeline;
  auto rate = [](uint64_t v, uint64_t span) {
    return span ? static_cast<double>(v) * 1e9 / static_cast<double>(span) : 0.0;
  };
  auto put_rate = [&](const char* name, uint64_t amount_a, uint64_t amount_b) {
    const double ra = rate(amount_a, judged.window_ns()), rb = rate(amount_b, replayed.window_ns());
    Put(values, name, RelativeError(ra, rb), Round6(ra), Round6(rb));
    if (paced) (*values)[name]["recorded_original"] = Round6(rate(amount_a, recorded.window_ns()));
  };
  put_rate("iops-rel-err", CallOps(ma["totals"]), CallOps(mb["totals"]));
  put_rate("throughput-rel-err", CallBytes(ma["totals"]), CallBytes(mb["totals"]));
  if (paced) (*out)["paced"] = PacedSummary(recorded, *paced, replayed, pace, ma, mb);
  (*out)["timing"] = CurvesStallsIdle(judged, replayed, seq, pace, values);
  (*out)["timing"]["latency_ns"] = LatencyByOp(a, b);
  AlignedSeries s = AlignSeries(a, ma, b, mb);
  (*out)["timeseries"] = {{"bucket_ns", s.width_ns}, {"original_ops", s.ops_a}, {"replay_ops", s.ops_b},
                          {"original_bytes", s.bytes_a}, {"replay_bytes", s.bytes_b}};
  // At another speed both sides' inter-arrival times come from the timelines compare judges.
  const LogLinearHistogram iat_a = scaled ? InterArrival(recorded) : a.inter_arrival();
  const LogLinearHistogram iat_b = scaled ? InterArrival(replayed) : b.inter_arrival();
  if (paced) {
    const PacedArrivals arrivals = PacedInterArrival(*paced, replayed);
    Put(values, "iat-ks", KsDistanceFrom(arrivals.original, arrivals.replay, options.iat_resolution_ns),
        iat_a.Percentile(50), iat_b.Percentile(50));
    (*values)["iat-ks"]["paced_original_p50"] = arrivals.original.Percentile(50);
    (*values)["iat-ks"]["paced_calls"] = paced->paced_calls;
    (*values)["iat-ks"]["calls"] = paced->calls;
  } else {
    Put(values, "iat-ks", KsDistanceFrom(iat_a, iat_b, options.iat_resolution_ns),
        iat_a.Percentile(50), iat_b.Percentile(50));
  }
  return paced;
}

Result<std::unique_ptr<TraceReader>> OpenTrace(const std::string& path, const CompareOptions& options) {
  TraceReaderOptions ro;
  ro.salvage = options.salvage;
  return TraceReader::Open(path, ro);
}

// One side of the comparison from its one pass: the calls judged (from the model), the measures
// (the Analyzer over the same records) and, where asked, the reads of the per-query measures.
struct ComparedSide {
  CallScope scope;
  TraceAnalysis analysis;
  std::optional<QueryReads> queries;
};

Result<ComparedSide> ReadSide(const std::string& path, std::unique_ptr<TraceReader> reader,
                              const CompareOptions& options, bool query_reads, bool query_markers) {
  TracePassOptions po;
  po.model.compute_dependencies = false;
  po.model.scope = options.files;
  if (!options.host.empty()) {
    Result<std::vector<uint32_t>> host = ResolveHostNames(reader->meta(), {options.host});
    if (!host.ok()) return host.status().WithContext(path);
    po.model.host = host->at(0);
  }
  po.query_reads = query_reads;
  po.query_markers = query_markers;
  po.progress = options.progress;
  IOTWIN_ASSIGN_OR_RETURN(TracePass pass, ReadTraceOnce(path, std::move(reader), po));
  ComparedSide side;
  side.scope = ReplayScope(*pass.model, options.storage_calls_only);
  pass.model.reset();  // the judged calls are all compare needs of it
  TraceAnalysisOptions ao;
  ao.analyzer.collect_sequences = true;
  ao.analyzer.collect_distributions = true;
  ao.analyzer.max_sequence_ops = options.max_sequence_ops;
  ao.analyzer.top = 0;
  if (options.storage_calls_only || !options.files.IsAll())
    ao.analyzer.filter.excluded_calls = side.scope.excluded;
  if (!options.host.empty()) ao.analyzer.filter.host_names = {options.host};
  side.analysis = AnalyzeRecords(pass, ao);
  side.queries = std::move(pass.queries);
  return side;
}

}  // namespace

Result<json> CompareTraces(const std::string& original, const std::string& replay,
                           const CompareOptions& options) {
  std::unique_ptr<TraceReader> replay_reader;
  IOTWIN_ASSIGN_OR_RETURN(const bool device_level,
                          WantsBlockStreamCompare(replay, options, &replay_reader));
  if (device_level) {
    if (!options.host.empty()) {
      return Status::Invalid("--host judges the system calls of merged traces; a device-level "
                             "replay's block stream has no hosts");
    }
    return CompareBlockStreams(original, replay, options, std::move(replay_reader));
  }
  // Each trace is read once, the original first: its markers say whether the replay's reads are
  // wanted for the per-query measures.
  IOTWIN_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> original_reader, OpenTrace(original, options));
  const bool markers = !SummarySaysNoMarkers(*original_reader);
  IOTWIN_ASSIGN_OR_RETURN(ComparedSide side_a,
                          ReadSide(original, std::move(original_reader), options, markers, true));
  const bool queries_marked = side_a.queries && side_a.queries->HasQueries();
  if (!replay_reader) {
    IOTWIN_ASSIGN_OR_RETURN(replay_reader, OpenTrace(replay, options));
  }
  IOTWIN_ASSIGN_OR_RETURN(ComparedSide side_b, ReadSide(replay, std::move(replay_reader), options,
                                                         queries_marked, false));
  const CallScope& scope_a = side_a.scope;
  const CallScope& scope_b = side_b.scope;
  const Analyzer& a = *side_a.analysis.analyzer;
  const Analyzer& b = *side_b.analysis.analyzer;
  const json& ma = side_a.analysis.model;
  const json& mb = side_b.analysis.model;

  json out = json::object();
  out["original"] = Side(original, ma);
  out["replay"] = Side(replay, mb);
  out["scope"] = options.storage_calls_only
                     ? json{{"calls", "storage"},
                            {"original", ScopeJson(scope_a)},
                            {"replay", ScopeJson(scope_b)}}
                     : json{{"calls", "all"}};
  if (!options.host.empty()) out["scope"]["host"] = options.host;
  if (!options.files.IsAll()) {
    out["scope"]["files"] = options.files.Describe();
    out["scope"]["original"] = ScopeJson(scope_a);
    out["scope"]["replay"] = ScopeJson(scope_b);
  }

  // Pacing: timing is judged for replays paced "original" or "gaps", and for non-replays.
  const std::string pace = json_fields::GetString(mb, "capture/replay/pace");
  bool timing_judged = pace.empty() || pace == "original" || pace == "gaps";
  out["pace"] = pace.empty() ? json(nullptr) : json(pace);
  out["timing_judged"] = timing_judged;
  // The block stream follows from the calls only when they bypass the page cache; buffered I/O
  // reaches the device through the cache state and write-back timing of the moment. A direct-I/O
  // workload still has a few buffered reads (the dynamic loader reading libraries): judged when
  // at least 99% of the bytes moved (by system calls and async requests) were O_DIRECT.
  uint64_t moved_a = CallBytes(ma["totals"]);
  // In 128 bits: byte totals from a trace can be near 2^64.
  const unsigned __int128 direct_a = U(ma["totals"], "direct_bytes");
  bool block_judged = moved_a > 0 && direct_a * 100 >= static_cast<unsigned __int128>(moved_a) * 99;
  out["block_judged"] = block_judged;

  Values values;
  auto put = [&](const char* name, double value, json orig = nullptr, json repl = nullptr) {
    Put(&values, name, value, std::move(orig), std::move(repl));
  };

  // ---- sequence match per thread
  SequenceMatch seq = MatchSequences(a, b, mb, options.top);
  put("seq-match", seq.share, json(U(ma["totals"], "syscalls")), json(U(mb["totals"], "syscalls")));
  out["threads"] = seq.threads;

  // ---- operation counts
  std::map<std::string, std::pair<uint64_t, uint64_t>> counts;
  for (const auto& o : ma["ops"]) counts[o["op"].get<std::string>()].first = o["count"].get<uint64_t>();
  for (const auto& o : mb["ops"]) counts[o["op"].get<std::string>()].second = o["count"].get<uint64_t>();
  json ops = json::array();
  double worst_count = 0;
  for (const auto& [op, c] : counts) {
    double err = RelativeError(static_cast<double>(c.first), static_cast<double>(c.second));
    worst_count = std::max(worst_count, err);
    ops.push_back({{"op", op}, {"original", c.first}, {"replay", c.second},
                   {"diff", static_cast<int64_t>(c.second) - static_cast<int64_t>(c.first)},
                   {"rel_err", Round6(err)}});
  }
  out["ops"] = ops;
  put("op-count-rel-err", worst_count);

  const json& tA = ma["totals"];
  const json& tB = mb["totals"];
  uint64_t bytes_a = CallBytes(tA);
  uint64_t bytes_b = CallBytes(tB);
  put("bytes-rel-err", RelativeError(static_cast<double>(bytes_a), static_cast<double>(bytes_b)),
      bytes_a, bytes_b);

  // ---- distributions
  json dist = CompareDistributions(a, b, &values);

  // ---- block streams
  out["block"] = CompareBlock(a, ma, b, mb, &values);

  // ---- timing, over each trace's active window (first to last judged call issued)
  const std::optional<PacedTimeline> paced = CompareTiming(scope_a, scope_b, seq, a, b, ma, mb, pace, options, &values, &out);
  double lat_ks = 0;
  for (int dir = 0; dir < 2; dir++)
    lat_ks = std::max(lat_ks, KsDistance(MergedLatency(a, dir), MergedLatency(b, dir)));
  put("latency-ks", lat_ks);
  out["distributions"] = dist;

  // ---- per-query latency, dependent hops and batch depth, where the original marks queries
  const QueryComparison queries =
      CompareQueries(queries_marked ? &*side_a.queries : nullptr,
                     side_b.queries ? &*side_b.queries : nullptr, seq.ta, seq.tb, seq.pairs,
                     paced ? &*paced : nullptr);
  for (const QueryMeasure& m : queries.measures) {
    put(m.name, m.value, m.original, m.replay);
    if (!m.recorded_original.is_null()) values[m.name]["recorded_original"] = m.recorded_original;
  }
  if (queries.present) out["queries"] = queries.detail;

  const bool strace_original = IsStraceImport(ma) && !IsStraceImport(mb);
  if (strace_original) out["iat_note"] = kStraceIatNote;
  Judge(values, options, timing_judged, block_judged, pace, strace_original, &out);
  out["causes"] = out["failed"].empty() ? json::array() : LikelyCauses(out, ma, mb);
  for (json& c : QueryCauses(queries, out["failed"])) out["causes"].push_back(std::move(c));
  return out;
}

std::string RenderMeasuresTable(const json& measures) {
  std::string out = fmt::format("  {:<24} {:>14} {:>14} {:>10} {:>12}  {}\n", "measure", "original",
                                "replay", "value", "threshold", "result");
  auto num = [](const json& v) -> std::string {
    if (v.is_null()) return "";
    if (v.is_number_integer() || v.is_number_unsigned()) return FormatCount(v.get<uint64_t>());
    double d = v.get<double>();
    return std::fabs(d) >= 1e5 ? fmt::format("{:.4g}", d) : fmt::format("{:.4f}", d);
  };
  for (const json& m : measures) {
    std::string threshold = m["threshold"].is_null()
                                ? "-"
                                : fmt::format("{} {:.4g}", m["condition"].get<std::string>(),
                                              m["threshold"].get<double>());
    bool judged = m["judged"].get<bool>(), pass = m["pass"].get<bool>();
    std::string result = judged                           ? (pass ? "ok" : "FAIL")
                         : m.value("device_answer", false) ? "device's answer"
                         : m["threshold"].is_null()       ? "info"
                         : pass                     ? "not judged"
                                                    : "not judged, over";
    out += fmt::format("  {:<24} {:>14} {:>14} {:>10.4f} {:>12}  {}\n", m["name"].get<std::string>(),
                       num(m["original"]), num(m["replay"]), m["value"].get<double>(), threshold,
                       result);
  }
  return out;
}

std::string RenderVerdictLine(const json& r) {
  if (r["verdict"] == "pass") return "VERDICT: PASS (every judged measure is within its threshold)";
  std::string names;
  for (const json& f : r["failed"]) names += (names.empty() ? "" : ", ") + f.get<std::string>();
  return "VERDICT: FAIL (" + names + ")";
}

namespace {

// The first lines: the two traces, pacing, what is judged, scope and window.
std::string RenderCompareHead(const json& r) {
  std::string out;
  auto line = [&](const std::string& s) {
    out += s;
    out += '\n';
  };
  auto side = [](const json& s) {
    std::string t = fmt::format("{}  ({} records, {} system calls, span {}{})", s["path"].get<std::string>(),
                                FormatCount(U(s, "records")), FormatCount(U(s, "syscalls")),
                                FormatDuration(static_cast<double>(U(s, "span_ns"))),
                                s["complete"].get<bool>() ? "" : ", INCOMPLETE");
    if (json_fields::Object(s, "replay"))
      t += fmt::format("\n            replay of {}, pace {}{}",
                       json_fields::GetString(s, "replay/source", "?"),
                       json_fields::GetString(s, "replay/pace", "?"),
                       json_fields::GetDouble(s, "replay/speed", 1.0) != 1.0
                           ? fmt::format(", speed {:g}", json_fields::GetDouble(s, "replay/speed", 1.0))
                           : std::string());
    return t;
  };
  line("iotwin compare");
  line("  original  " + side(r["original"]));
  line("  replay    " + side(r["replay"]));
  if (r.value("speed", 1.0) != 1.0)
    line(fmt::format("  speed     {:g}: the original's timeline is scaled by 1/{:g} (pace {}) before "
                     "it is compared", r["speed"].get<double>(), r["speed"].get<double>(),
                     r["pace"].get<std::string>()));
  if (r.contains("iat_note")) line("  iat-ks    " + r["iat_note"].get<std::string>());
  line(fmt::format("  timing    {}", !r["timing_judged"].get<bool>()
                                         ? "reported, not judged (pace " + r["pace"].get<std::string>() + ")"
                                     : r["pace"] == "gaps" ? std::string(kGapsJudgement)
                                                           : std::string("judged")));
  if (const json* p = json_fields::Object(r, "paced")) {
    auto window = [&](const char* which) {
      return FormatDuration(json_fields::GetDouble(*p, std::string("window_ns/") + which, 0));
    };
    line(fmt::format("  paced     judged against the original's calls as pace {} issues them taking the "
                     "replay's call durations ({} of {} calls); window recorded {}, paced {}, replay {}",
                     json_fields::GetString(*p, "pace"), FormatCount(U(*p, "paced_calls")),
                     FormatCount(U(*p, "calls")), window("recorded"), window("paced"), window("replay")));
    for (const json& c : (*p)["target"])
      line(fmt::format("  target    {}: {}", c["cause"].get<std::string>(), c["evidence"].get<std::string>()));
  }
  if (r["block"].is_object())
    line(fmt::format("  block     {}", r.value("block_judged", false)
                                          ? "judged (>= 99% of the original's bytes are O_DIRECT)"
                                          : "reported, not judged (buffered I/O: the device sees "
                                            "the page cache and write-back, not the calls)"));
  const json& scope = r["scope"];
  if (scope.value("calls", "") == "storage") {
    auto excluded = [](const json& s) {
      std::string why;
      for (const auto& [reason, n] : s["reasons"].items())
        why += fmt::format("{}{} {}", why.empty() ? "" : ", ", n.get<uint64_t>(), reason);
      return fmt::format("{} of {}{}", FormatCount(U(s, "excluded")), FormatCount(U(s, "calls")),
                         why.empty() ? "" : " (" + why + ")");
    };
    line("  scope     storage calls; left out as not re-issued by replay: original " +
         excluded(scope["original"]) + ", replay " + excluded(scope["replay"]));
  } else {
    line("  scope     every system call");
  }
  if (scope.contains("files"))
    line("  files     " + scope.value("files", "") + " (their calls are left out, out_of_scope)");
  if (scope.contains("host"))
    line("  host      " + scope.value("host", "") + " only, in both traces (the other hosts' "
         "records are left out)");
  if (const json* w = json_fields::Find(r, "timing/window")) {
    line(fmt::format("  window    original{} {}, replay {}: first to last judged call issued (the time "
                     "base of rates and curves)",
                     r.contains("paced") ? " (paced)" : "", FormatDuration(static_cast<double>(U((*w)["original"], "ns"))),
                     FormatDuration(static_cast<double>(U((*w)["replay"], "ns")))));
  }
  return out;
}

// The calls per op and per thread, and the block summary.
std::string RenderCompareCalls(const json& r) {
  std::string out;
  auto line = [&](const std::string& s) {
    out += s;
    out += '\n';
  };
  line(fmt::format("  {:<20} {:>12} {:>12} {:>10}", "operation", "original", "replay", "diff"));
  for (const json& o : r["ops"]) {
    int64_t diff = o["diff"].get<int64_t>();
    line(fmt::format("  {:<20} {:>12} {:>12} {:>10}", o["op"].get<std::string>(),
                     FormatCount(U(o, "original")), FormatCount(U(o, "replay")),
                     diff == 0 ? std::string("=") : fmt::format("{:+d}", diff)));
  }
  const json& t = r["threads"];
  line("");
  line(fmt::format("  THREADS: {} original, {} replay; {} of {} operations matched in order{}",
                   U(t, "original"), U(t, "replay"), FormatCount(U(t, "matched_ops")),
                   FormatCount(U(t, "compared_ops")),
                   t["exact"].get<bool>() ? "" : " (lower bound: sequences very different)"));
  if (t["sequences_truncated"].get<bool>()) line("  (sequences truncated at --max-sequence-ops)");
  if (const json* hosts = json_fields::Array(t, "hosts")) {
    std::string per_host;
    for (const json& h : *hosts) {
      per_host += fmt::format("{}host {} {:.1f}%", per_host.empty() ? "" : ", ", U(h, "host"),
                              json_fields::GetDouble(h, "share", 0) * 100);
    }
    line("  per host (seq-match): " + per_host);
  }
  line(fmt::format("  {:>10} {:>10} {:>12} {:>12} {:>12} {:>8}  {}", "orig tid", "replay tid",
                   "orig ops", "replay ops", "matched", "share", "first difference"));
  for (const json& row : t["rows"]) {
    auto id = [](const json& v) { return v.is_null() ? std::string("-") : std::to_string(v.get<uint64_t>()); };
    line(fmt::format("  {:>10} {:>10} {:>12} {:>12} {:>12} {:>8}  {}", id(row["original_tid"]),
                     id(row["replay_tid"]), FormatCount(U(row, "original_ops")),
                     FormatCount(U(row, "replay_ops")), FormatCount(U(row, "matched")),
                     FormatPercent(row["share"].get<double>()),
                     row["first_difference"].is_null() ? std::string("identical")
                                                       : "op #" + std::to_string(row["first_difference"].get<uint64_t>())));
  }
  if (r["block"].is_object()) {
    const json& bo = r["block"]["original"];
    const json& br = r["block"]["replay"];
    line("");
    line(fmt::format("  BLOCK      requests {} vs {}, bytes {} vs {}, reads {} vs {}",
                     FormatCount(U(bo, "requests")), FormatCount(U(br, "requests")),
                     FormatBytes(static_cast<double>(U(bo, "bytes"))),
                     FormatBytes(static_cast<double>(U(br, "bytes"))),
                     FormatPercent(bo["read_share"].get<double>()),
                     FormatPercent(br["read_share"].get<double>())));
  }
  return out;
}

}  // namespace

std::string RenderCompareText(const json& r) {
  if (IsBlockStreamResult(r)) return RenderBlockStreamText(r);
  std::string out;
  auto line = [&](const std::string& s) {
    out += s;
    out += '\n';
  };
  out += RenderCompareHead(r);
  line("");
  out += RenderMeasuresTable(r["measures"]);
  line("");
  out += RenderCompareCalls(r);
  if (r["verdict"] != "pass") RenderWhy(r, line);
  line("");
  line(RenderVerdictLine(r));
  return out;
}

}  // namespace iotwin::analysis
