// The block layer's requests: one rule for every reader of block records (the analyzer behind
// `report`, the correlator behind `layers`, the trace model behind `compare` and `replay`, the
// Chrome and fio exports). Header-only: the correlator does not link the model library.
//
// A request is issued (D, block_rq_issue) when its driver takes it. The driver may give it back
// (R, block_rq_requeue: its queue or another resource was full, or the device asked for a
// retry); the block layer then issues the same request again, under the same identity, and it
// completes once (C). The rule:
//  - a requeued request is one request: it, its bytes and its size count at its first issue; an
//    issue after a requeue (kReissue) adds nothing;
//  - its device time (D2C) runs from its last issue to its completion: btt pairs a completion
//    with the issue it follows, and the time the request spent given back is the block layer's;
//  - it stays in flight (queue depth, iostat's aqu-sz) from its start to its completion, requeued
//    or not, as the kernel accounts it: /proc/diskstats' weighted time in queue (field 11) adds,
//    at completion, the time since the request started, which a requeue does not reset. Its
//    device depth (requests the driver holds, btt's active queue depth) leaves out the time
//    between a requeue and the issue after it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/checked_math.h"
#include "format/records.h"

namespace iotwin::model {

// What a block record means for its request under the rule above.
enum class BlockStep : uint8_t {
  kOther,       // a phase that neither issues, gives back nor completes a request
  kFirstIssue,  // a request issued for the first time: count it and its bytes
  kReissue,     // the same request issued again after a requeue: count nothing
  kRequeue,     // the driver gave the request back: no longer on the device
  kPartial,     // a completion of part of its bytes; the rest completes later
  kComplete,    // its (last) completion
};

// A completion record ends its request unless it completed only part of the bytes left
// (`aux`: the bytes the request had left before it; 0 where the source does not say).
inline bool EndsBlockRequest(const iot_block& r) { return r.bytes >= r.aux; }

// The identity of a block record's request on its device: the request's own identity where the
// record has one, else its start sector (older captures, imported traces).
struct BlockRequestKey {
  uint32_t dev = 0;
  uint64_t id = 0;
  bool by_sector = false;
  bool operator==(const BlockRequestKey&) const = default;
};

inline BlockRequestKey KeyOfBlockRecord(const iot_block& r) {
  if (r.rq_id != 0) return {r.dev, r.rq_id, false};
  return {r.dev, r.sector, true};
}

// Follows each request from issue to completion and says what each record means. Memory: one
// entry per request in flight (issued, not completed); a trace that loses completions cannot
// grow it past kMaxTracked (the oldest state is then forgotten, and a re-issue of a forgotten
// request counts as a first issue).
class BlockRequestRule {
 public:
  static constexpr size_t kMaxTracked = size_t{1} << 20;

  BlockStep Step(const iot_block& r) {
    const BlockRequestKey key = KeyOfBlockRecord(r);
    switch (r.phase) {
      case IOT_BLK_ISSUE: {
        if (auto it = state_.find(key); it != state_.end()) {
          const bool requeued = it->second == State::kRequeued;
          it->second = State::kIssued;
          // Issued again without a requeue in between: a completion was lost (or the identity
          // was reused): a new request.
          return requeued ? BlockStep::kReissue : BlockStep::kFirstIssue;
        }
        if (state_.size() >= kMaxTracked) state_.clear();
        state_.emplace(key, State::kIssued);
        return BlockStep::kFirstIssue;
      }
      case IOT_BLK_REQUEUE:
        // A requeue of a request issued before the trace began: its next issue is the first
        // one the trace holds, and counts.
        if (auto it = state_.find(key); it != state_.end()) it->second = State::kRequeued;
        return BlockStep::kRequeue;
      case IOT_BLK_COMPLETE:
        if (!EndsBlockRequest(r)) return BlockStep::kPartial;
        state_.erase(key);
        return BlockStep::kComplete;
      default:
        return BlockStep::kOther;
    }
  }

  // Requests issued and not completed yet.
  size_t in_flight() const { return state_.size(); }

 private:
  enum class State : uint8_t { kIssued, kRequeued };
  struct Hash {
    size_t operator()(const BlockRequestKey& k) const {
      return std::hash<uint64_t>()(k.id ^ (uint64_t{k.dev} << 40) ^ (k.by_sector ? 1ull << 63 : 0));
    }
  };
  std::unordered_map<BlockRequestKey, State, Hash> state_;
};

// Queue depth over a window, time-weighted as iostat's aqu-sz: the sum of the requests' times in
// flight divided by the window. Intervals are [start, end) in ns; those reaching past the
// window count up to its end.
struct QueueDepth {
  double average = 0;      // time-weighted mean of requests in flight
  uint64_t p99 = 0;        // depth the queue was at or below 99% of the window
  uint64_t max = 0;        // most requests in flight at once
  uint64_t in_flight_ns = 0;  // sum of the intervals (diskstats' weighted time in queue)
  uint64_t window_ns = 0;
};

using Interval = std::pair<uint64_t, uint64_t>;

// The intervals of `done` and of `open` together (two lists: the caller's stored intervals are
// read, not copied).
inline QueueDepth QueueDepthOf(std::span<const Interval> done, std::span<const Interval> open,
                               uint64_t window_first, uint64_t window_last) {
  QueueDepth q;
  if (window_last <= window_first) return q;
  q.window_ns = window_last - window_first;
  // One word per event: its time from the window's start, shifted left, and a low bit that is
  // 1 for a start; the sort then puts ends first at equal times (a slot freed and taken at once
  // is not a deeper queue). A window past 2^63 ns (untrusted trace) loses its last bit of time.
  const uint64_t shift = q.window_ns >> 63 ? 1 : 0;
  std::vector<uint64_t> events;
  events.reserve((done.size() + open.size()) * 2);
  for (std::span<const Interval> intervals : {done, open}) {
    for (auto [start, end] : intervals) {
      start = std::max(start, window_first);
      end = std::min(end, window_last);
      if (end <= start) continue;
      q.in_flight_ns = SaturatingAdd(q.in_flight_ns, end - start);  // traces are untrusted
      events.push_back((((start - window_first) >> shift) << 1) | 1);
      events.push_back(((end - window_first) >> shift) << 1);
    }
  }
  if (events.empty()) return q;
  std::sort(events.begin(), events.end());
  std::vector<uint64_t> ns_at_depth(1, 0);
  uint64_t depth = 0, prev = window_first;
  for (const uint64_t event : events) {
    const uint64_t ts = window_first + ((event >> 1) << shift);
    ns_at_depth[std::min<uint64_t>(depth, ns_at_depth.size() - 1)] += ts - prev;
    prev = ts;
    depth = (event & 1) ? depth + 1 : (depth > 0 ? depth - 1 : 0);
    q.max = std::max(q.max, depth);
    if (ns_at_depth.size() <= depth && depth < (uint64_t{1} << 20)) ns_at_depth.resize(depth + 1, 0);
  }
  ns_at_depth[0] += window_last - prev;
  q.average = static_cast<double>(q.in_flight_ns) / static_cast<double>(q.window_ns);
  const long double want = static_cast<long double>(q.window_ns) * 0.99L;
  long double seen = 0;
  for (size_t d = 0; d < ns_at_depth.size(); d++) {
    seen += static_cast<long double>(ns_at_depth[d]);
    if (seen >= want) {
      q.p99 = d;
      break;
    }
  }
  return q;
}

inline QueueDepth QueueDepthOf(std::span<const Interval> intervals, uint64_t window_first,
                               uint64_t window_last) {
  return QueueDepthOf(intervals, {}, window_first, window_last);
}

}  // namespace iotwin::model
