// compare's time base and time measures: the workload's active window in each trace, the
// distance between normalised cumulative work curves (whole run and per thread), stalls, and
// the evidence a FAIL is explained with (docs/report.md, "Time base" and "Why a FAIL").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/histogram.h"

namespace iotwin::analysis {

// One judged call: a call a replay re-issues (or, with --all-calls, any system call), or an
// async request.
struct TimedCall {
  uint64_t ts = 0;     // issue (enter) time
  uint64_t end = 0;    // completion, >= ts
  uint64_t bytes = 0;  // bytes moved by a data operation that succeeded, else 0
  bool data = false;   // a read or a write (system call or async request)
  bool async = false;  // an async request (not a call of its thread's sequence)
};

struct ThreadCalls {
  uint32_t tgid = 0, tid = 0;
  uint64_t start_ns = 0;         // creation (0: unknown)
  uint64_t last_end_ns = 0;      // completion of its last call (not async), set by Finish
  std::vector<TimedCall> calls;  // in issue order
};

// A trace's judged calls per thread, and its active window: first to last judged call issued.
// The window is the time base of every rate and curve, so that what lies outside the workload's
// calls (process start-up and exit, a replay's preparation and teardown) never counts.
class CallTimeline {
 public:
  void Add(uint32_t tgid, uint32_t tid, const TimedCall& call);
  // When thread (tgid, tid) was created, if it has calls.
  void SetStart(uint32_t tgid, uint32_t tid, uint64_t start_ns);
  // The latest end (completion of its last call) of another thread of process `tgid` in
  // (after, upto], and that thread's tid; {0, 0} when none.
  std::pair<uint64_t, uint32_t> OtherThreadEnd(uint32_t tgid, uint32_t tid, uint64_t after,
                                               uint64_t upto) const;
  // Sorts each thread's calls by issue time and fixes the window. Call once, after the last Add.
  void Finish();

  const std::vector<ThreadCalls>& threads() const { return threads_; }
  const ThreadCalls* Find(uint32_t tgid, uint32_t tid) const;
  uint64_t first_ns() const { return first_; }
  uint64_t last_ns() const { return last_; }
  uint64_t window_ns() const { return last_ > first_ ? last_ - first_ : 0; }
  uint64_t calls() const { return calls_; }
  // Where `ts` lies in the window, in [0, 1] (0 for an empty window).
  double Normalised(uint64_t ts) const;

 private:
  std::vector<ThreadCalls> threads_;
  std::map<std::pair<uint32_t, uint32_t>, size_t> index_;
  std::map<uint32_t, std::vector<std::pair<uint64_t, uint32_t>>> ends_;  // tgid -> (end, tid)
  uint64_t first_ = UINT64_MAX, last_ = 0, calls_ = 0;
};

// Threads of the two traces that correspond (compare's thread mapping), by (tgid, tid).
struct TimelinePair {
  const ThreadCalls* a = nullptr;
  const ThreadCalls* b = nullptr;
};

struct TimingMeasures {
  double iops_series_err = 0;        // curve distance of data operations
  double throughput_series_err = 0;  // curve distance of bytes
  double thread_series_err = 0;      // per thread pair, weighted by its calls
  bool stall_measured = false;       // some thread pair has equal call counts
  double stall_ms = 0;               // largest extra idle time before one call
  nlohmann::json detail;             // window, most diverged stretch, stall, busy/idle, worst thread
};

// The time measures of replay `b` against original `a`. `think_time_clock` (gaps replays): the
// curves put each call at its issue time less its thread's time in earlier calls, the clock gaps
// pacing keeps; stalls, busy and idle time are measured on the traces' own clocks.
TimingMeasures MeasureTiming(const CallTimeline& a, const CallTimeline& b,
                             const std::vector<TimelinePair>& pairs, bool think_time_clock = false);

// The speed a replay ran at (its header's replay.speed), 1 for a trace that is not a replay, a
// fast replay or a speed that is not a positive finite number.
double ReplaySpeed(const nlohmann::json& replay_model);
// The original's calls as a replay paced `pace` ("original" or "gaps") at `speed` issues them on
// the replay's target: each call of a thread paired with a replay thread of the same call count
// takes what its counterpart took in the replay (the target's time, which pacing does not
// control); the other threads keep their recorded durations. A thread's calls are sequential, so
// a call that runs longer delays the next: pace original issues each call at its recorded time
// from the run's first call divided by `speed`, or when the thread's previous call returned if
// that is later plus the thread's gap floor (base/gap_floor.h: the cost of a call's return and
// entry, at most 2 us, and never more than the recorded gap), which the replayer pays as the
// program did: a late call goes as soon as it can, and a target slower than the recorded spacing
// leaves no think time; pace gaps issues it the recorded idle gap, divided by `speed`, after the previous
// call returned. A thread's first call is at its recorded time from the run's first call. An
// async request keeps its offset from the thread's call that carried it (the latest call issued
// at or before it). Waits on other threads (a join, a lock) are not re-paced. Every judged timing
// measure of a paced replay is taken against this timeline: what stays is the replay's own part
// (waking late, adding or losing think time, catching up wrongly). Without a replay (`b` empty,
// no pairs) it is the recorded timeline at `speed`.
struct PacedTimeline {
  CallTimeline timeline;
  uint64_t paced_calls = 0;  // calls (not async) that took their replay counterpart's duration
  uint64_t calls = 0;        // every call (not async) of the original
  // Where recorded time `ts` of thread `tid` lies on the paced timeline: moved as the latest call
  // of the thread issued at or before it was moved (the schedule at `speed` before its first).
  uint64_t Map(uint32_t tid, uint64_t ts) const;

  std::map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> moved;  // tid -> (recorded, paced) issue
  uint64_t first_ns = 0;
  double speed = 1.0;
};
PacedTimeline PaceOnReplayTarget(const CallTimeline& a, const CallTimeline& b,
                                 const std::vector<TimelinePair>& pairs, std::string_view pace,
                                 double speed);
// Per-thread inter-arrival times (issue to issue) of the calls of `t`, async requests left out.
LogLinearHistogram InterArrival(const CallTimeline& t);

// Inter-arrival times judged by iat-ks for a paced replay: the replay's own against those of the
// original paced on the replay's target (PaceOnReplayTarget). Without that, a device-bound
// thread (dependent reads, each waiting for the previous) is judged on the target's latency,
// which iat-ks does not measure (latency-ks does).
struct PacedArrivals {
  LogLinearHistogram original;  // the paced original's
  LogLinearHistogram replay;
};
PacedArrivals PacedInterArrival(const PacedTimeline& paced, const CallTimeline& b);

// Whether compare judges timing measure `measure` for a replay paced `pace` ("" for a trace that
// is not a replay). Gaps pacing keeps each thread's idle time between calls (its think time) and
// lets every call take what it takes on the replay's target, so a run's length there is that
// think time plus the replay's own call times: against the original paced on the replay's target
// the overall rates (data ops and bytes over the window) add up the same idle time that
// idle-rel-err judges, and are reported only. Original pacing keeps issue times, whose rates are
// judged.
bool PaceJudges(std::string_view pace, std::string_view measure);
// Whether the original is an strace import (its header's tool). strace stops the program twice
// per call (ptrace), so its recorded gaps carry tens of microseconds of the tracer's own cost
// per call; a replay that falls behind its schedule (a slower call) catches up at its own pace,
// without that cost, so inter-arrival times differ for a reason the replay cannot remove:
// iat-ks is reported, not judged, for such an original.
bool IsStraceImport(const nlohmann::json& original_model);
inline constexpr const char* kStraceIatNote =
    "reported, not judged: the original is an strace import, whose gaps between calls carry "
    "strace's own cost per call (two ptrace stops), which a replay catching up after a slower "
    "call does not pay";

// compare's text line for a gaps replay's timing: what is judged and why.
inline constexpr const char* kGapsJudgement =
    "judged (pace gaps: idle time between calls, curves on the think-time clock; iops and "
    "throughput add up the same idle time: reported, not judged)";

// compare's "paced": the calls paced and the window, time in calls and idle time of the recorded
// original (at the replay's speed), the paced one and the replay; "target": why the replay's own
// window is off the recorded one when its calls' time explains it (the device, the cache state),
// worded as LikelyCauses words it, so that a replay that passes against the paced original still
// shows that, and why, its target ran slower or faster.
nlohmann::json PacedSummary(const CallTimeline& recorded, const PacedTimeline& paced,
                            const CallTimeline& b, std::string_view pace,
                            const nlohmann::json& ma, const nlohmann::json& mb);

// Likely causes of a FAIL, strongest first: [{cause, evidence, hint}]. `result` is compare's
// output so far (measures judged, "failed"); `ma`/`mb` the two report models.
nlohmann::json LikelyCauses(const nlohmann::json& result, const nlohmann::json& ma,
                            const nlohmann::json& mb);

}  // namespace iotwin::analysis
