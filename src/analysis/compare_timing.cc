#include "analysis/compare_timing.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "analysis/distance.h"
#include "analysis/report_text.h"
#include "base/checked_math.h"
#include "base/gap_floor.h"
#include "base/json_fields.h"

namespace iotwin::analysis {
namespace {

using nlohmann::json;

double Ms(double ns) { return std::round(ns / 1e3) / 1e3; }

uint64_t U(const json& j, const char* key) { return json_fields::GetUint(j, key, 0); }
double Number(const json& j, const char* path, double fallback) {
  return json_fields::GetDouble(j, path, fallback);
}

struct Curves {
  std::vector<WorkPoint> ops, bytes;
};

Curves DataCurves(const CallTimeline& t) {
  Curves c;
  for (const ThreadCalls& th : t.threads()) {
    for (const TimedCall& call : th.calls) {
      if (!call.data) continue;
      double u = t.Normalised(call.ts);
      c.ops.push_back({u, 1.0});
      c.bytes.push_back({u, static_cast<double>(call.bytes)});
    }
  }
  return c;
}

std::vector<WorkPoint> ThreadCurve(const CallTimeline& t, const ThreadCalls& th) {
  std::vector<WorkPoint> v;
  v.reserve(th.calls.size());
  for (const TimedCall& call : th.calls) v.push_back({t.Normalised(call.ts), 1.0});
  return v;
}

// Time in calls and idle time between a thread's consecutive calls, summed over threads.
std::pair<uint64_t, uint64_t> BusyIdle(const CallTimeline& t) {
  uint64_t busy = 0, idle = 0;
  for (const ThreadCalls& th : t.threads()) {
    uint64_t prev_end = 0;
    for (const TimedCall& c : th.calls) {
      if (c.async) continue;
      busy = SaturatingAdd(busy, c.end - c.ts);
      if (prev_end && c.ts > prev_end) idle = SaturatingAdd(idle, c.ts - prev_end);
      prev_end = std::max(prev_end, c.end);
    }
  }
  return {busy, idle};
}

// The stretch of the run (1/n of each trace's window) whose share of the data operations
// differs most between the two traces. n follows the run: about 20 operations per stretch, at
// most 20 stretches.
json MostDiverged(const CallTimeline& a, const CallTimeline& b, const Curves& ca, const Curves& cb) {
  const size_t n = std::clamp<size_t>(ca.ops.size() / 20, 1, 20);
  auto counts = [n](const Curves& c) {
    std::vector<double> ops(n, 0), bytes(n, 0);
    for (size_t i = 0; i < c.ops.size(); i++) {
      size_t w = std::min(n - 1, static_cast<size_t>(c.ops[i].t * static_cast<double>(n)));
      ops[w] += 1;
      bytes[w] += c.bytes[i].weight;
    }
    return std::make_pair(ops, bytes);
  };
  auto [ops_a, bytes_a] = counts(ca);
  auto [ops_b, bytes_b] = counts(cb);
  const double na = std::max<double>(1, static_cast<double>(ca.ops.size()));
  const double nb = std::max<double>(1, static_cast<double>(cb.ops.size()));
  size_t worst = 0;
  double worst_diff = -1;
  for (size_t w = 0; w < n; w++) {
    double d = std::fabs(ops_a[w] / na - ops_b[w] / nb);
    if (d > worst_diff) worst_diff = d, worst = w;
  }
  auto range = [&](const CallTimeline& t) {
    double w = static_cast<double>(t.window_ns()) / static_cast<double>(n);
    return json::array({Ms(w * static_cast<double>(worst)), Ms(w * static_cast<double>(worst + 1))});
  };
  return {{"stretch", worst}, {"stretches", n}, {"share_diff", std::round(worst_diff * 1e6) / 1e6},
          {"original_ms", range(a)}, {"replay_ms", range(b)},
          {"original_ops", ops_a[worst]}, {"replay_ops", ops_b[worst]},
          {"original_bytes", bytes_a[worst]}, {"replay_bytes", bytes_b[worst]}};
}

// A stall: idle time the replay added before a call and did not make up within kStallSpanNs
// of the original's time after it. Per thread pair with the same number of calls, before call
// k the idle time is its issue time minus the previous call's completion (for the first call:
// the later of the window's start and the thread's creation), or minus the end of another
// thread of its process in between (its last call's completion, as both traces have it): a
// thread created late or joining another waited on that thread, not on itself. The extra idle time accumulates into the replay's idle lag. A
// stall at k is the least the lag stays above its value before k over the next kStallSpanNs.
// Calls that took longer do not count (latency measures them), nor does a late call the
// replay catches up on (original pacing on a busy machine), nor jitter beyond its own size.
// A long wait (a sleep, a join) overshoots in proportion to its length: a difference of up to
// 2% of the original's idle time is not counted (22 ms on a 2.15 s join wait of a gaps-paced
// replay), and a larger one only beyond that.
constexpr uint64_t kStallSpanNs = 100'000'000;
constexpr double kIdleTolerance = 0.02;

// One thread pair's idle lag: lag[k] is the replay's extra idle time up to call k, counted
// where the call was also issued that much later after its predecessor than in the original.
struct IdleLag {
  const TimelinePair* pair = nullptr;
  std::vector<const TimedCall*> ca, cb;
  std::vector<double> lag, idle_a, idle_b;
};

// `partner`: each original thread's counterpart in the replay.
using Partners = std::map<std::pair<uint32_t, uint32_t>, const ThreadCalls*>;

IdleLag MeasureIdleLag(const CallTimeline& a, const CallTimeline& b, const TimelinePair& p,
                       const Partners& partner) {
  IdleLag l;
  l.pair = &p;
  for (const TimedCall& c : p.a->calls) if (!c.async) l.ca.push_back(&c);
  for (const TimedCall& c : p.b->calls) if (!c.async) l.cb.push_back(&c);
  if (l.ca.empty() || l.ca.size() != l.cb.size()) return l;
  const size_t n = l.ca.size();
  l.lag.resize(n), l.idle_a.resize(n), l.idle_b.resize(n);
  uint64_t prev_a = std::max(a.first_ns(), p.a->start_ns);
  uint64_t prev_b = std::max(b.first_ns(), p.b->start_ns);
  double sum = 0;
  for (size_t k = 0; k < n; k++) {
    const auto [end_a, other_a] = a.OtherThreadEnd(p.a->tgid, p.a->tid, prev_a, l.ca[k]->ts);
    prev_a = std::max(prev_a, end_a);
    prev_b = std::max(prev_b, b.OtherThreadEnd(p.b->tgid, p.b->tid, prev_b, l.cb[k]->ts).first);
    if (end_a != 0) {
      // The original waited for that thread here; the replay waited for its counterpart, even
      // where the counterpart's last call ended a little after this one began (no call of a
      // join to order them).
      auto it = partner.find({p.a->tgid, other_a});
      if (it != partner.end()) prev_b = std::max(prev_b, it->second->last_end_ns);
    }
    l.idle_a[k] = l.ca[k]->ts > prev_a ? static_cast<double>(l.ca[k]->ts - prev_a) : 0;
    l.idle_b[k] = l.cb[k]->ts > prev_b ? static_cast<double>(l.cb[k]->ts - prev_b) : 0;
    const double extra = l.idle_b[k] - l.idle_a[k], tolerated = l.idle_a[k] * kIdleTolerance;
    const double idle = extra > tolerated ? extra - tolerated : extra < -tolerated ? extra + tolerated : 0;
    // How much later than the original's the replay issued this call after its previous one.
    const double issue = k == 0 ? idle
                                : (static_cast<double>(l.cb[k]->ts) - static_cast<double>(l.cb[k - 1]->ts)) -
                                      (static_cast<double>(l.ca[k]->ts) - static_cast<double>(l.ca[k - 1]->ts));
    // Both must agree: waiting longer for a deadline after a faster call issues on time (idle
    // up, issue not), and a slower call delays the issue without idle time.
    sum += idle > 0 && issue > 0 ? std::min(idle, issue) : idle < 0 && issue < 0 ? std::max(idle, issue) : 0;
    l.lag[k] = sum;
    prev_a = std::max(prev_a, l.ca[k]->end);
    prev_b = std::max(prev_b, l.cb[k]->end);
  }
  return l;
}

// The step of a thread's idle lag around original time `t`: the least lag over its calls
// issued within kStallSpanNs from t, minus the lag at its last call more than kStallSpanNs
// before t (the step may come a little earlier in this thread than in the one it is checked
// against). Nothing when the thread has no call in either span (it is not running at t).
std::optional<double> StepAt(const IdleLag& l, uint64_t t) {
  auto by_ts = [](const TimedCall* c, uint64_t ts) { return c->ts < ts; };
  const uint64_t before = t > kStallSpanNs ? t - kStallSpanNs : 0;
  const size_t ib = static_cast<size_t>(std::lower_bound(l.ca.begin(), l.ca.end(), before, by_ts) - l.ca.begin());
  const size_t i0 = static_cast<size_t>(std::lower_bound(l.ca.begin(), l.ca.end(), t, by_ts) - l.ca.begin());
  if (ib == 0 || i0 == l.ca.size() || l.ca[i0]->ts - t > kStallSpanNs) return std::nullopt;
  double least = l.lag[i0];
  for (size_t j = i0 + 1; j < l.ca.size() && l.ca[j]->ts - t <= kStallSpanNs; j++)
    least = std::min(least, l.lag[j]);
  return least - l.lag[ib - 1];
}

// The largest stall (null when no thread's idle lag steps up by 1 ms or more): a step of a
// thread's idle lag that every other thread running at that moment shows too. The replay as a whole stalling (its engine, the machine) holds every
// thread; one thread waiting on another through a lock or a queue holds only that one.
json Stall(const CallTimeline& a, const CallTimeline& b, const std::vector<TimelinePair>& pairs,
           size_t* aligned) {
  std::vector<IdleLag> lags;
  Partners partner;
  for (const TimelinePair& p : pairs) {
    if (p.a && p.b) partner.emplace(std::make_pair(p.a->tgid, p.a->tid), p.b);
  }
  for (const TimelinePair& p : pairs) {
    if (!p.a || !p.b) continue;
    IdleLag l = MeasureIdleLag(a, b, p, partner);
    if (!l.lag.empty()) lags.push_back(std::move(l));
  }
  *aligned = lags.size();
  struct Candidate {
    double step;
    size_t thread, call;
  };
  std::vector<Candidate> candidates;
  for (size_t t = 0; t < lags.size(); t++) {
    const IdleLag& l = lags[t];
    // Sliding minimum of lag[j] over j in [k, last call within kStallSpanNs of call k].
    std::deque<size_t> window;  // indices ascending, lag descending: the minimum at the back
    for (size_t k = l.lag.size(); k-- > 0;) {
      while (!window.empty() && l.lag[window.front()] >= l.lag[k]) window.pop_front();
      window.push_front(k);
      while (l.ca[window.back()]->ts - l.ca[k]->ts > kStallSpanNs) window.pop_back();
      const double step = l.lag[window.back()] - (k ? l.lag[k - 1] : 0.0);
      if (step > 1e6) candidates.push_back({step, t, k});
    }
  }
  constexpr size_t kMaxCandidates = 4096;
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& x, const Candidate& y) { return x.step > y.step; });
  if (candidates.size() > kMaxCandidates) candidates.resize(kMaxCandidates);
  json worst = nullptr;
  double worst_ns = 0;
  for (const Candidate& c : candidates) {
    if (c.step <= worst_ns) break;  // sorted: no later candidate can beat it
    const IdleLag& l = lags[c.thread];
    const uint64_t t = l.ca[c.call]->ts;
    double held = c.step;
    size_t threads = 1;
    for (size_t u = 0; u < lags.size() && held > worst_ns; u++) {
      if (u == c.thread) continue;
      if (auto s = StepAt(lags[u], t)) held = std::min(held, *s), ++threads;
    }
    if (held <= worst_ns) continue;
    worst_ns = held;
    worst = {{"ms", Ms(held)}, {"threads", threads}, {"original_tid", l.pair->a->tid},
             {"replay_tid", l.pair->b->tid}, {"call", c.call},
             {"original_idle_ms", Ms(l.idle_a[c.call])}, {"replay_idle_ms", Ms(l.idle_b[c.call])},
             {"original_at_ms", Ms(static_cast<double>(t - a.first_ns()))},
             {"replay_at_ms", Ms(static_cast<double>(l.cb[c.call]->ts - b.first_ns()))}};
  }
  return worst;
}

}  // namespace

void CallTimeline::Add(uint32_t tgid, uint32_t tid, const TimedCall& call) {
  auto [it, fresh] = index_.try_emplace({tgid, tid}, threads_.size());
  if (fresh) threads_.push_back({tgid, tid, {}});
  TimedCall c = call;
  c.end = std::max(c.end, c.ts);
  threads_[it->second].calls.push_back(c);
  first_ = std::min(first_, c.ts);
  last_ = std::max(last_, c.ts);
  ++calls_;
}

void CallTimeline::SetStart(uint32_t tgid, uint32_t tid, uint64_t start_ns) {
  auto it = index_.find({tgid, tid});
  if (it != index_.end()) threads_[it->second].start_ns = start_ns;
}

std::pair<uint64_t, uint32_t> CallTimeline::OtherThreadEnd(uint32_t tgid, uint32_t tid,
                                                           uint64_t after, uint64_t upto) const {
  auto it = ends_.find(tgid);
  if (it == ends_.end()) return {0, 0};
  const auto& v = it->second;
  for (auto e = std::upper_bound(v.begin(), v.end(), std::make_pair(upto, UINT32_MAX)); e != v.begin();) {
    --e;
    if (e->first <= after) break;
    if (e->second != tid) return *e;
  }
  return {0, 0};
}

void CallTimeline::Finish() {
  for (ThreadCalls& th : threads_) {
    std::stable_sort(th.calls.begin(), th.calls.end(),
                     [](const TimedCall& x, const TimedCall& y) { return x.ts < y.ts; });
    uint64_t end = 0;
    for (const TimedCall& c : th.calls)
      if (!c.async) end = std::max(end, c.end);
    th.last_end_ns = end;
    if (end) ends_[th.tgid].emplace_back(end, th.tid);
  }
  for (auto& [tgid, v] : ends_) std::sort(v.begin(), v.end());
  if (calls_ == 0) first_ = last_ = 0;
}

const ThreadCalls* CallTimeline::Find(uint32_t tgid, uint32_t tid) const {
  auto it = index_.find({tgid, tid});
  return it == index_.end() ? nullptr : &threads_[it->second];
}

double CallTimeline::Normalised(uint64_t ts) const {
  if (window_ns() == 0 || ts <= first_) return 0;
  return std::min(1.0, static_cast<double>(ts - first_) / static_cast<double>(window_ns()));
}

namespace {

// The curve distances (whole run and per thread pair) of `m`; the worst thread pair.
json MeasureSeries(const CallTimeline& a, const CallTimeline& b,
                   const std::vector<TimelinePair>& pairs, TimingMeasures* m) {
  Curves ca = DataCurves(a), cb = DataCurves(b);
  m->iops_series_err = CurveDistance(ca.ops, cb.ops);
  m->throughput_series_err = CurveDistance(ca.bytes, cb.bytes);
  double weighted = 0, weight = 0, worst = -1;
  json worst_thread = nullptr;
  for (const TimelinePair& p : pairs) {
    if (!p.a || !p.b) continue;  // an unpaired thread is a structural difference (seq-match)
    double d = CurveDistance(ThreadCurve(a, *p.a), ThreadCurve(b, *p.b));
    double w = static_cast<double>(std::max(p.a->calls.size(), p.b->calls.size()));
    weighted += d * w;
    weight += w;
    if (d > worst) {
      worst = d;
      worst_thread = {{"original_tid", p.a->tid}, {"replay_tid", p.b->tid},
                      {"calls", p.a->calls.size()}, {"distance", std::round(d * 1e6) / 1e6}};
    }
  }
  m->thread_series_err = weight > 0 ? weighted / weight : 0;
  return worst_thread;
}

// gaps pacing's clock: each call's issue time less the time its thread spent in its earlier
// calls, so that calls taking longer on the replay's target move no later call.
CallTimeline ThinkTimeClock(const CallTimeline& t) {
  CallTimeline out;
  for (const ThreadCalls& th : t.threads()) {
    uint64_t in_calls = 0, prev_end = 0;
    for (const TimedCall& c : th.calls) {
      TimedCall moved = c;
      moved.ts = c.ts > in_calls ? c.ts - in_calls : 0;
      moved.end = moved.ts;
      out.Add(th.tgid, th.tid, moved);
      if (c.async) continue;
      // Only the part of a call after the previous one's end: calls of a thread never overlap,
      // but a trace's clock may say so.
      const uint64_t from = std::max(c.ts, prev_end);
      if (c.end > from) in_calls = SaturatingAdd(in_calls, c.end - from);
      prev_end = std::max(prev_end, c.end);
    }
  }
  out.Finish();
  return out;
}

}  // namespace

TimingMeasures MeasureTiming(const CallTimeline& a, const CallTimeline& b,
                             const std::vector<TimelinePair>& pairs, bool think_time_clock) {
  TimingMeasures m;
  Curves ca = DataCurves(a), cb = DataCurves(b);
  json worst_thread = nullptr;
  if (think_time_clock) {
    const CallTimeline ta = ThinkTimeClock(a), tb = ThinkTimeClock(b);
    std::vector<TimelinePair> think_pairs;
    for (const TimelinePair& p : pairs)
      think_pairs.push_back({p.a ? ta.Find(p.a->tgid, p.a->tid) : nullptr,
                             p.b ? tb.Find(p.b->tgid, p.b->tid) : nullptr});
    worst_thread = MeasureSeries(ta, tb, think_pairs, &m);
  } else {
    worst_thread = MeasureSeries(a, b, pairs, &m);
  }

  size_t aligned = 0;
  json stall = Stall(a, b, pairs, &aligned);
  m.stall_measured = aligned > 0;
  m.stall_ms = stall.is_null() ? 0 : stall["ms"].get<double>();

  auto [busy_a, idle_a] = BusyIdle(a);
  auto [busy_b, idle_b] = BusyIdle(b);
  auto window = [](const CallTimeline& t) {
    return json{{"first_ns", t.first_ns()}, {"last_ns", t.last_ns()}, {"ns", t.window_ns()},
                {"calls", t.calls()}};
  };
  m.detail = {{"window", {{"original", window(a)}, {"replay", window(b)}}},
              {"busy_ns", {{"original", busy_a}, {"replay", busy_b}}},
              {"idle_ns", {{"original", idle_a}, {"replay", idle_b}}},
              {"most_diverged", MostDiverged(a, b, ca, cb)},
              {"stall", stall},
              {"stall_threads", aligned},
              {"worst_thread", worst_thread}};
  if (think_time_clock) m.detail["series_clock"] = "think time";
  return m;
}

double ReplaySpeed(const json& replay_model) {
  const std::string pace = json_fields::GetString(replay_model, "capture/replay/pace");
  const double speed = json_fields::GetDouble(replay_model, "capture/replay/speed", 1.0);
  if (pace.empty() || pace == "fast" || !std::isfinite(speed) || !(speed > 0)) return 1.0;
  return speed;
}

namespace {

// `base` plus `ns` of recorded time divided by `speed`; saturating.
uint64_t Scaled(uint64_t base, uint64_t ns, double speed) {
  const double v = static_cast<double>(base) + static_cast<double>(ns) / speed;
  return v < 18446744073709551616.0 ? static_cast<uint64_t>(v) : UINT64_MAX;  // 2^64
}

std::vector<const TimedCall*> SyncCalls(const ThreadCalls& th) {
  std::vector<const TimedCall*> out;
  for (const TimedCall& c : th.calls)
    if (!c.async) out.push_back(&c);
  return out;
}

// The gap floor of thread `th` (base/gap_floor.h): from the gaps between its consecutive calls
// (not async) that do not overlap.
uint64_t RecordedGapFloor(const ThreadCalls& th) {
  std::vector<uint64_t> gaps;
  const TimedCall* prev = nullptr;
  for (const TimedCall& c : th.calls) {
    if (c.async) continue;
    if (prev && c.ts >= prev->end) gaps.push_back(c.ts - prev->end);
    prev = &c;
  }
  return GapFloor(gaps);
}

// Thread `th` of the original paced `gaps` or original; each call (not async) takes the duration
// of `replay`'s call of the same rank when given (same count), else its own.
void PaceThread(const ThreadCalls& th, const std::vector<const TimedCall*>* replay, bool gaps,
                PacedTimeline* out) {
  auto from_first = [&](uint64_t ts) {
    return Scaled(out->first_ns, ts > out->first_ns ? ts - out->first_ns : 0, out->speed);
  };
  std::vector<std::pair<uint64_t, uint64_t>>& moved = out->moved[th.tid];
  bool have_prev = false;
  uint64_t prev_end = 0, prev_done = 0;  // the previous call's recorded and paced completion
  const uint64_t gap_floor = gaps ? 0 : RecordedGapFloor(th);
  size_t k = 0;
  for (const TimedCall& c : th.calls) {
    TimedCall m = c;
    if (c.async) {
      // With the call that carried it (its offset into that call kept), else on the schedule.
      m.ts = moved.empty() ? from_first(c.ts) : SaturatingAdd(moved.back().second, c.ts - moved.back().first);
      m.end = SaturatingAdd(m.ts, c.end - c.ts);
      out->timeline.Add(th.tgid, th.tid, m);
      continue;
    }
    const TimedCall& timed = replay ? *(*replay)[k] : c;
    // A call the trace shows entered before its predecessor returned (clock skew between CPUs,
    // or a forged trace) keeps that overlap from the predecessor's paced return, so that a trace
    // paced on its own durations is itself.
    const bool overlaps = have_prev && c.ts < prev_end;
    const uint64_t overlap = overlaps ? Scaled(0, prev_end - c.ts, out->speed) : 0;
    const uint64_t overlapped = prev_done > overlap ? prev_done - overlap : 0;
    if (gaps && have_prev) {
      m.ts = overlaps ? overlapped : Scaled(prev_done, c.ts - prev_end, out->speed);
    } else if (have_prev) {
      // Never before the thread's previous call returned plus the cost of getting from one call
      // to the next (the floor, or the recorded gap if shorter): a late call goes then.
      const uint64_t earliest =
          overlaps ? overlapped : SaturatingAdd(prev_done, std::min(c.ts - prev_end, gap_floor));
      m.ts = std::max(from_first(c.ts), earliest);
    } else {
      m.ts = from_first(c.ts);
    }
    m.end = SaturatingAdd(m.ts, timed.end - timed.ts);
    out->timeline.Add(th.tgid, th.tid, m);
    moved.emplace_back(c.ts, m.ts);
    // The call that returned last is the one the next waits for (a trace's clock may show a
    // thread's calls overlapping).
    if (!have_prev || c.end >= prev_end) prev_end = c.end, prev_done = m.end;
    have_prev = true;
    k++;
  }
  if (th.start_ns) out->timeline.SetStart(th.tgid, th.tid, from_first(th.start_ns));
}

}  // namespace

uint64_t PacedTimeline::Map(uint32_t tid, uint64_t ts) const {
  auto it = moved.find(tid);
  if (it != moved.end()) {
    const auto& v = it->second;
    auto at = std::upper_bound(v.begin(), v.end(), std::make_pair(ts, UINT64_MAX));
    if (at != v.begin()) {
      --at;
      return SaturatingAdd(at->second, ts - at->first);
    }
  }
  return Scaled(first_ns, ts > first_ns ? ts - first_ns : 0, speed);
}

PacedTimeline PaceOnReplayTarget(const CallTimeline& a, const CallTimeline& b,
                                 const std::vector<TimelinePair>& pairs, std::string_view pace,
                                 double speed) {
  PacedTimeline out;
  out.first_ns = a.first_ns();
  out.speed = std::isfinite(speed) && speed > 0 ? speed : 1.0;
  std::map<const ThreadCalls*, std::vector<const TimedCall*>> counterpart;
  for (const TimelinePair& p : pairs) {
    if (!p.a || !p.b || b.Find(p.b->tgid, p.b->tid) != p.b) continue;
    std::vector<const TimedCall*> cb = SyncCalls(*p.b);
    if (!cb.empty() && cb.size() == SyncCalls(*p.a).size()) counterpart.emplace(p.a, std::move(cb));
  }
  for (const ThreadCalls& th : a.threads()) {
    auto it = counterpart.find(&th);
    const std::vector<const TimedCall*>* replay = it == counterpart.end() ? nullptr : &it->second;
    PaceThread(th, replay, pace == "gaps", &out);
    const uint64_t n = SyncCalls(th).size();
    out.calls += n;
    if (replay) out.paced_calls += n;
  }
  for (auto& [tid, v] : out.moved) std::sort(v.begin(), v.end());  // threads sharing a tid
  out.timeline.Finish();
  return out;
}

LogLinearHistogram InterArrival(const CallTimeline& t) {
  LogLinearHistogram h;
  for (const ThreadCalls& th : t.threads()) {
    uint64_t prev = 0;
    bool any = false;
    for (const TimedCall& c : th.calls) {
      if (c.async) continue;
      if (any) h.Add(c.ts - prev);  // calls are sorted by issue time (Finish)
      prev = c.ts, any = true;
    }
  }
  return h;
}

PacedArrivals PacedInterArrival(const PacedTimeline& paced, const CallTimeline& b) {
  return {InterArrival(paced.timeline), InterArrival(b)};
}

bool IsStraceImport(const json& original_model) {
  return json_fields::GetString(original_model, "capture/tool").rfind("iotwin import (strace)", 0) == 0;
}

bool PaceJudges(std::string_view pace, std::string_view measure) {
  if (pace == "gaps") return measure != "iops-rel-err" && measure != "throughput-rel-err";
  return measure != "idle-rel-err";
}

namespace {

// Whether the two runs read from different cache states: block read bytes or the read hit ratio
// differ.
struct CacheCompare {
  bool differs = false;
  std::string evidence;
};
CacheCompare CompareCacheState(const json& ma, const json& mb) {
  const uint64_t blk_a = json_fields::GetUint(ma, "amplification/block_read_bytes", 0);
  const uint64_t blk_b = json_fields::GetUint(mb, "amplification/block_read_bytes", 0);
  const bool have_block = json_fields::Find(ma, "amplification/block_read_bytes") && json_fields::Find(mb, "amplification/block_read_bytes");
  const double hit_a = Number(ma, "memory/read_hit_ratio", -1), hit_b = Number(mb, "memory/read_hit_ratio", -1);
  const double blk_err = RelativeError(static_cast<double>(blk_a), static_cast<double>(blk_b));
  CacheCompare c;
  c.differs = (have_block && blk_err > 0.10 && std::max(blk_a, blk_b) >= (1u << 20)) ||
              (hit_a >= 0 && hit_b >= 0 && std::fabs(hit_a - hit_b) > 0.05);
  c.evidence = fmt::format(
      "block read bytes {} vs {}{}", FormatBytes(static_cast<double>(blk_a)),
      FormatBytes(static_cast<double>(blk_b)),
      hit_a >= 0 && hit_b >= 0 ? fmt::format(", read hit ratio {} vs {}", FormatPercent(hit_a), FormatPercent(hit_b))
                               : std::string());
  return c;
}
constexpr const char* kCacheHint = "cache state differs: see the page-cache hit ratio (report: memory "
                                   "read_hit_ratio) and block read bytes (report: amplification)";

// "window +X, time in calls +Y, idle between calls -Z": replay minus original.
std::string TimeSplit(double window, double busy, double idle) {
  return fmt::format("window {}{}, time in calls {}{}, idle between calls {}{}", window < 0 ? "-" : "+",
                     FormatDuration(std::fabs(window)), busy < 0 ? "-" : "+", FormatDuration(std::fabs(busy)),
                     idle < 0 ? "-" : "+", FormatDuration(std::fabs(idle)));
}

// Why the replay's calls took longer (busy > 0) or shorter than the original's: the cache state,
// the device (block D2C), or either when neither trace has the block layer. `split`: TimeSplit.
json CallTimeCauses(double busy, const std::string& split, const json& ma, const json& mb) {
  json causes = json::array();
  auto add = [&](std::string cause, std::string evidence, std::string hint) {
    causes.push_back({{"cause", std::move(cause)}, {"evidence", std::move(evidence)},
                      {"hint", std::move(hint)}});
  };
  const CacheCompare cache = CompareCacheState(ma, mb);
  const double d2c_a = Number(ma, "block/latency_ns/D2C/p50", -1), d2c_b = Number(mb, "block/latency_ns/D2C/p50", -1);
  const char* faster_or_slower = busy > 0 ? "slower" : "faster";
  if (cache.differs) add(fmt::format("cache state differs (calls {})", faster_or_slower), cache.evidence + "; " + split, kCacheHint);
  if (d2c_a > 0 && d2c_b > 0) {
    const bool device = busy > 0 ? d2c_b > d2c_a * 1.2 : d2c_b * 1.2 < d2c_a;
    add(device ? fmt::format("device {}", faster_or_slower)
               : fmt::format("calls {} (the device's own time does not explain it)", faster_or_slower),
        fmt::format("block D2C p50 {} vs {}; {}", FormatDuration(d2c_a), FormatDuration(d2c_b), split),
        "device slower: see block D2C (report --json: block.latency_ns.D2C)");
  } else if (!cache.differs) {
    add(fmt::format("calls {} (device or cache state)", faster_or_slower), split,
        "record both with the block layer to tell: block D2C (device) and block read bytes "
        "(cache state)");
  }
  return causes;
}

// Time in calls and idle time, summed over threads, and the window: replay minus original.
struct TimeDelta {
  double window = 0, busy = 0, idle = 0;
};
TimeDelta Delta(const CallTimeline& a, const CallTimeline& b) {
  const auto [busy_a, idle_a] = BusyIdle(a);
  const auto [busy_b, idle_b] = BusyIdle(b);
  auto d = [](uint64_t x, uint64_t y) { return static_cast<double>(y) - static_cast<double>(x); };
  return {d(a.window_ns(), b.window_ns()), d(busy_a, busy_b), d(idle_a, idle_b)};
}

}  // namespace

json PacedSummary(const CallTimeline& recorded, const PacedTimeline& paced, const CallTimeline& b,
                  std::string_view pace, const json& ma, const json& mb) {
  auto three = [&](auto get) {
    return json{{"recorded", get(recorded)}, {"paced", get(paced.timeline)}, {"replay", get(b)}};
  };
  json out = {{"pace", pace},
              {"calls", paced.calls},
              {"paced_calls", paced.paced_calls},
              {"window_ns", three([](const CallTimeline& t) { return t.window_ns(); })},
              {"busy_ns", three([](const CallTimeline& t) { return BusyIdle(t).first; })},
              {"idle_ns", three([](const CallTimeline& t) { return BusyIdle(t).second; })},
              {"target", json::array()}};
  // The target's own share of the difference: shown when the replay's window is off the
  // recorded one by more than iops-rel-err's default and its calls' time explains most of it.
  const TimeDelta d = Delta(recorded, b);
  const double window = static_cast<double>(recorded.window_ns());
  if (window > 0 && std::fabs(d.window) > 0.05 * window && std::fabs(d.busy) > std::fabs(d.idle))
    out["target"] = CallTimeCauses(d.busy, TimeSplit(d.window, d.busy, d.idle), ma, mb);
  return out;
}

json LikelyCauses(const json& result, const json& ma, const json& mb) {
  std::map<std::string, bool> failed_kind;  // "structural"/"timing"/"block" -> failed
  std::map<std::string, bool> failed;
  for (const json& m : result["measures"]) {
    if (!m.value("judged", false) || m.value("pass", true)) continue;
    std::string name = m["name"].get<std::string>();
    failed[name] = true;
    failed_kind[name.rfind("block-", 0) == 0 ? "block" : m["kind"].get<std::string>()] = true;
  }
  json causes = json::array();
  auto add = [&](std::string cause, std::string evidence, std::string hint) {
    causes.push_back({{"cause", std::move(cause)}, {"evidence", std::move(evidence)},
                      {"hint", std::move(hint)}});
  };
  if (failed_kind["structural"]) {
    add("the replay did not issue the same calls",
        fmt::format("{} of {} operations matched in order",
                    FormatCount(U(result["threads"], "matched_ops")),
                    FormatCount(U(result["threads"], "compared_ops"))),
        "see THREADS (first difference per thread) and the replay's mismatches (iotwin replay "
        "--json: mismatches)");
  }
  const CacheCompare cache = CompareCacheState(ma, mb);
  if (!failed_kind["timing"]) {
    if (failed_kind["block"] || cache.differs) add("cache state differs", cache.evidence, kCacheHint);
    return causes;
  }
  const json& t = result["timing"];
  const double busy = Number(t, "busy_ns/replay", 0) - Number(t, "busy_ns/original", 0);
  const double idle = Number(t, "idle_ns/replay", 0) - Number(t, "idle_ns/original", 0);
  const double window = Number(t, "window/replay/ns", 0) - Number(t, "window/original/ns", 0);
  const std::string split = TimeSplit(window, busy, idle);
  const bool replay = result["pace"].is_string();
  const char* schedule_hint = "replay overhead: see the replay's schedule error (iotwin replay "
                              "--json: schedule_error_ns)";
  if (failed["stall-ms"]) {
    const json& s = t["stall"];
    add(replay ? "the replay stalled" : "the program stalled (descheduled, or waiting)",
        s.is_object() ? fmt::format("{} ms of idle time not made up, from call #{} of thread {} "
                                    "(original +{} ms, replay +{} ms), shown by the {} threads running then",
                                    s["ms"].get<double>(), U(s, "call"), U(s, "replay_tid"),
                                    s["original_at_ms"].get<double>(), s["replay_at_ms"].get<double>(),
                                    U(s, "threads"))
                      : std::string("idle time not made up"),
        schedule_hint);
  }
  // Threads out of place while the run as a whole keeps its shape: their order changed. With
  // the whole shape off too, that comes first.
  auto thread_order = [&] {
    if (!failed["thread-series-err"]) return;
    const json& w = t["worst_thread"];
    add("threads' work happens at other points of the run (their order changed)",
        w.is_object() ? fmt::format("thread {} (replay {}) lies {} of the run away",
                                    U(w, "original_tid"), U(w, "replay_tid"),
                                    FormatPercent(w["distance"].get<double>()))
                      : std::string("per-thread curves differ"),
        "see THREADS and the replay's dependency waits (iotwin replay --json)");
  };
  const bool shape = failed["iops-series-err"] || failed["throughput-series-err"];
  if (!shape) thread_order();
  // Rates and shape: where did the time go, into calls or between them?
  const bool rates = failed["iops-rel-err"] || failed["throughput-rel-err"] ||
                     failed["iops-series-err"] || failed["throughput-series-err"] ||
                     failed["iat-ks"] || failed["idle-rel-err"];
  // A gaps replay is judged on its idle time and think-time curves, a paced replay against the
  // original with the replay's call durations: the calls' own time explains a failure only where
  // it was not re-paced (thread pairs whose call counts differ, a replay that is not paced).
  const bool calls_dominate =
      result["pace"] != "gaps" && std::fabs(busy) > std::fabs(idle);
  if (rates && calls_dominate) {
    for (json& c : CallTimeCauses(busy, split, ma, mb)) causes.push_back(std::move(c));
  }
  if (rates && !calls_dominate) {
    add(replay ? "replay overhead or pacing (idle time between calls differs)"
               : "the program's own time between calls differs (CPU speed or load, think time)",
        split, schedule_hint);
  }
  if (shape) thread_order();
  if (causes.empty())
    add("the replay's pace differs", split, "see the replay's schedule error (iotwin replay --json: schedule_error_ns)");
  return causes;
}

}  // namespace iotwin::analysis
