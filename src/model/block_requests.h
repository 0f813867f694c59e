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
#include <array>
#include <cstddef>
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

// Hashes a request's identity (for the tables that hold one entry per request in flight).
struct BlockRequestKeyHash {
  size_t operator()(const BlockRequestKey& k) const {
    // splitmix64's finaliser of the identity and of the device with the kind of identity.
    auto mix = [](uint64_t x) {
      x ^= x >> 30;
      x *= 0xbf58476d1ce4e5b9ULL;
      x ^= x >> 27;
      x *= 0x94d049bb133111ebULL;
      return x ^ (x >> 31);
    };
    return mix(k.id ^ mix((uint64_t{k.dev} << 1) | (k.by_sector ? 1 : 0)));
  }
};

// What the rule remembers of a request in flight.
enum class BlockRequestState : uint8_t { kIssued, kRequeued };

// The rule for record `r` of a request, on the state its reader keeps for it (`state`: null
// when the request is not tracked: never issued in the trace, completed, or forgotten). The
// reader starts tracking a request (kIssued) at kFirstIssue and stops at kComplete; a reader
// that keeps its own entry per request in flight follows the rule with this, without a second
// table.
inline BlockStep StepOfRequest(const iot_block& r, BlockRequestState* state) {
  switch (r.phase) {
    case IOT_BLK_ISSUE: {
      if (!state) return BlockStep::kFirstIssue;
      const bool requeued = *state == BlockRequestState::kRequeued;
      *state = BlockRequestState::kIssued;
      // Issued again without a requeue in between: a completion was lost (or the identity was
      // reused): a new request.
      return requeued ? BlockStep::kReissue : BlockStep::kFirstIssue;
    }
    case IOT_BLK_REQUEUE:
      // A requeue of a request issued before the trace began: its next issue is the first one
      // the trace holds, and counts.
      if (state) *state = BlockRequestState::kRequeued;
      return BlockStep::kRequeue;
    case IOT_BLK_COMPLETE:
      return EndsBlockRequest(r) ? BlockStep::kComplete : BlockStep::kPartial;
    default:
      return BlockStep::kOther;
  }
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
    auto it = state_.find(key);
    const BlockStep step = StepOfRequest(r, it != state_.end() ? &it->second : nullptr);
    if (step == BlockStep::kFirstIssue && it == state_.end()) {
      if (state_.size() >= kMaxTracked) state_.clear();
      state_.emplace(key, BlockRequestState::kIssued);
    } else if (step == BlockStep::kComplete && it != state_.end()) {
      state_.erase(it);
    }
    return step;
  }

  // Requests issued and not completed yet.
  size_t in_flight() const { return state_.size(); }

 private:
  std::unordered_map<BlockRequestKey, BlockRequestState, BlockRequestKeyHash> state_;
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

// A set of intervals as the queue-depth sweep reads them: their starts and their ends, each
// list ascending. Every interval lies within the window and is not empty (start < end).
struct SortedTimes {
  std::span<const uint64_t> starts, ends;
};

// Reads a list of times once, in order (the sweep's only access to a list).
class SpanCursor {
 public:
  explicit SpanCursor(std::span<const uint64_t> times)
      : at_(times.data()), end_(times.data() + times.size()) {}
  bool done() const { return at_ == end_; }
  uint64_t value() const { return *at_; }
  void next() { ++at_; }

 private:
  const uint64_t* at_;
  const uint64_t* end_;
};
inline SpanCursor CursorOf(std::span<const uint64_t> times) { return SpanCursor(times); }

// A list of times kept small: each time as its difference from the one before (zigzag, so that
// a list out of order costs no more), varint-coded, in blocks of kBlock bytes that never move.
// Its newest kTail times are kept whole, where IntervalTimes places a new time. A block
// request's start and end cost about 6 bytes here rather than 16: the memory a long trace's
// times take is most of the page faults of a report, and a fault costs as much as thousands
// of records.
class TimeList {
 public:
  static constexpr size_t kBlock = size_t{1} << 14;  // bytes per block
  // Whole times kept at the end: at least kKeptWhole once the list is longer (flushed from
  // kTail down to kKeptWhole at a time).
  static constexpr size_t kTail = 128;
  static constexpr size_t kKeptWhole = 96;

  size_t size() const { return packed_ + tail_size_; }
  bool empty() const { return size() == 0; }
  void push_back(uint64_t t) {
    if (tail_size_ == kTail) Pack();
    tail_[tail_size_++] = t;
  }
  // The newest times, whole and writable (oldest first): all of them while the list holds at
  // most kKeptWhole, else at least kKeptWhole.
  std::span<uint64_t> Tail() { return {tail_.data(), tail_size_}; }
  void AppendTo(std::vector<uint64_t>* out) const {
    for (Cursor c(*this); !c.done(); c.next()) out->push_back(c.value());
  }
  // Time i, decoded from the list's start (O(i): for checks; the sweep reads with a Cursor).
  uint64_t operator[](size_t i) const {
    Cursor c(*this);
    for (size_t k = 0; k < i && !c.done(); k++) c.next();
    return c.value();
  }

  // Reads the list in order.
  class Cursor {
   public:
    explicit Cursor(const TimeList& list) : list_(&list), packed_left_(list.packed_) { Load(); }
    bool done() const { return done_; }
    uint64_t value() const { return value_; }
    void next() { Load(); }

   private:
    void Load() {
      if (packed_left_ > 0) {
        if (at_ == end_) NextBlock();
        uint64_t zigzag = *at_++;
        if (zigzag >= 0x80) zigzag = DecodeRest(zigzag);
        value_ += (zigzag >> 1) ^ (0 - (zigzag & 1));  // wraps as the encoding did
        --packed_left_;
      } else if (tail_at_ < list_->tail_size_) {
        value_ = list_->tail_[tail_at_++];
      } else {
        done_ = true;
      }
    }
    void NextBlock() {
      at_ = list_->blocks_[block_].data();
      end_ = at_ + list_->block_used_[block_];
      ++block_;
    }
    // The varint's bytes after its first (`first`, which has its continuation bit).
    uint64_t DecodeRest(uint64_t first) {
      uint64_t zigzag = first & 0x7f;
      for (int shift = 7;; shift += 7) {
        const uint8_t b = *at_++;
        zigzag |= static_cast<uint64_t>(b & 0x7f) << shift;
        if (!(b & 0x80)) return zigzag;
      }
    }
    const TimeList* list_;
    size_t packed_left_, block_ = 0, tail_at_ = 0;
    const uint8_t* at_ = nullptr;
    const uint8_t* end_ = nullptr;
    uint64_t value_ = 0;
    bool done_ = false;
  };

 private:
  // Codes the oldest whole times, keeping kKeptWhole.
  void Pack() {
    const size_t n = tail_size_ - kKeptWhole;
    uint8_t* out = blocks_.empty() ? nullptr : blocks_.back().data() + block_used_.back();
    for (size_t i = 0; i < n; i++) {
      if (!out || out + 10 > blocks_.back().data() + kBlock) {  // a varint takes at most 10
        if (out) block_used_.back() = static_cast<uint32_t>(out - blocks_.back().data());
        blocks_.emplace_back(kBlock);
        block_used_.push_back(0);
        out = blocks_.back().data();
      }
      const uint64_t diff = tail_[i] - last_packed_;
      uint64_t zigzag = (diff << 1) ^ (0 - (diff >> 63));
      last_packed_ = tail_[i];
      for (; zigzag >= 0x80; zigzag >>= 7) *out++ = static_cast<uint8_t>(zigzag | 0x80);
      *out++ = static_cast<uint8_t>(zigzag);
    }
    block_used_.back() = static_cast<uint32_t>(out - blocks_.back().data());
    std::copy(tail_.begin() + static_cast<std::ptrdiff_t>(n),
              tail_.begin() + static_cast<std::ptrdiff_t>(tail_size_), tail_.begin());
    tail_size_ = kKeptWhole;
    packed_ += n;
  }

  std::vector<std::vector<uint8_t>> blocks_;  // each kBlock bytes
  std::vector<uint32_t> block_used_;          // the bytes each block holds
  size_t packed_ = 0;  // times in blocks_
  uint64_t last_packed_ = 0;
  std::array<uint64_t, kTail> tail_{};
  size_t tail_size_ = 0;
};
inline TimeList::Cursor CursorOf(const TimeList& times) { return TimeList::Cursor(times); }

// Two ascending lists of times read as one, in the order of their sort keys (`key` of a time),
// ties from `a` first. Each head's key is computed once, when the head is read.
template <typename CursorA, typename CursorB, typename Key>
class MergedCursor {
 public:
  MergedCursor(CursorA a, CursorB b, const Key& key) : a_(a), b_(b), key_(key) {
    key_a_ = HeadKey(a_);
    key_b_ = HeadKey(b_);
    Pick();
  }
  bool done() const { return done_; }
  uint64_t key() const { return key_next_; }
  uint64_t value() const { return from_a_ ? a_.value() : b_.value(); }
  void next() {
    if (from_a_) {
      a_.next();
      key_a_ = HeadKey(a_);
    } else {
      b_.next();
      key_b_ = HeadKey(b_);
    }
    Pick();
  }

 private:
  // A key past every time where a list is done.
  uint64_t HeadKey(const auto& c) const { return c.done() ? UINT64_MAX : key_(c.value()); }
  void Pick() {
    done_ = a_.done() && b_.done();
    from_a_ = !a_.done() && (b_.done() || key_a_ <= key_b_);
    key_next_ = from_a_ ? key_a_ : key_b_;
  }
  CursorA a_;
  CursorB b_;
  const Key& key_;
  uint64_t key_a_ = 0, key_b_ = 0, key_next_ = 0;
  bool from_a_ = false, done_ = false;
};

// Queue depth of the intervals of `a` and of `b` together (the caller's stored intervals and
// those still open, read where they are). Sweeps the starts and ends in time order, ends first
// at equal times (a slot freed and taken at once is not a deeper queue).
// `a` and `b`: SortedTimes, or any two ascending lists `starts` and `ends` that CursorOf reads.
template <typename TimesA, typename TimesB>
QueueDepth QueueDepthOfSorted(const TimesA& a, const TimesB& b, uint64_t window_first,
                              uint64_t window_last) {
  QueueDepth q;
  if (window_last <= window_first) return q;
  q.window_ns = window_last - window_first;
  if (a.starts.empty() && b.starts.empty()) return q;
  // Times from the window's start; a window past 2^63 ns (untrusted trace) loses its last bit
  // of time, as a sort key of the time shifted left and a start bit would.
  const uint64_t shift = q.window_ns >> 63 ? 1 : 0;
  auto key = [&](uint64_t t) { return (t - window_first) >> shift; };
  // The sum of the intervals (saturating: traces are untrusted): of the ends less the starts.
  std::array<unsigned __int128, 2> sums{};  // of the starts, of the ends
  std::vector<uint64_t> ns_at_depth(1, 0);
  uint64_t depth = 0, prev = window_first;
  MergedCursor starts(CursorOf(a.starts), CursorOf(b.starts), key);
  MergedCursor ends(CursorOf(a.ends), CursorOf(b.ends), key);
  while (!starts.done() || !ends.done()) {
    const bool is_end = !ends.done() && (starts.done() || ends.key() <= starts.key());
    auto& list = is_end ? ends : starts;
    const uint64_t ts = window_first + (list.key() << shift);
    ns_at_depth[std::min<uint64_t>(depth, ns_at_depth.size() - 1)] += ts - prev;
    prev = ts;
    sums[is_end ? 1 : 0] += list.value();
    list.next();
    if (is_end) {
      depth = depth > 0 ? depth - 1 : 0;
    } else {
      ++depth;
      q.max = std::max(q.max, depth);
      if (ns_at_depth.size() <= depth && depth < (uint64_t{1} << 20))
        ns_at_depth.resize(depth + 1, 0);
    }
  }
  const unsigned __int128 in_flight = sums[1] - sums[0];
  q.in_flight_ns = in_flight > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(in_flight);
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

// The times of a set of intervals kept as the queue-depth sweep reads them (ascending starts
// and ends). Requests end in the order the trace holds them and start shortly before: each
// time is placed by a short walk from the back of its list; a list that needs a longer walk
// (a trace out of time order) is sorted when read.
class IntervalTimes {
 public:
  // Adds [start, end); an empty interval (start >= end) holds no time and is left out.
  void Add(uint64_t start, uint64_t end) {
    if (start >= end) return;
    Place(&starts_, start, &starts_sorted_);
    Place(&ends_, end, &ends_sorted_);
  }
  bool empty() const { return starts_.empty(); }
  size_t size() const { return starts_.size(); }

  // Returns f(times), `times` having ascending `starts` and `ends` (the lists themselves, or
  // sorted copies in the scratch vectors where one is out of order).
  template <typename F>
  auto WithSorted(std::vector<uint64_t>* scratch_starts, std::vector<uint64_t>* scratch_ends,
                  F&& f) const {
    if (starts_sorted_ && ends_sorted_) return f(Lists{starts_, ends_});
    SortedCopy(starts_, scratch_starts);
    SortedCopy(ends_, scratch_ends);
    return f(SortedTimes{*scratch_starts, *scratch_ends});
  }

 private:
  // The walk stays within the whole times at the list's end (and the one before the walk's
  // last step, which tells whether the list is still in order).
  static constexpr size_t kMaxWalk = 64;
  static_assert(TimeList::kKeptWhole >= kMaxWalk + 2);
  struct Lists {
    const TimeList& starts;
    const TimeList& ends;
  };

  static void SortedCopy(const TimeList& list, std::vector<uint64_t>* out) {
    out->clear();
    list.AppendTo(out);
    std::sort(out->begin(), out->end());
  }

  static void Place(TimeList* list, uint64_t t, bool* sorted) {
    list->push_back(t);
    if (!*sorted) return;
    const std::span<uint64_t> v = list->Tail();
    size_t i = v.size() - 1;
    if (i == 0 || v[i - 1] <= t) return;  // in order already (nearly every time)
    const size_t stop = i > kMaxWalk ? i - kMaxWalk : 0;
    for (; i > stop && v[i - 1] > t; --i) v[i] = v[i - 1];
    v[i] = t;
    if (i > 0 && v[i - 1] > t) *sorted = false;
  }

  TimeList starts_, ends_;
  bool starts_sorted_ = true, ends_sorted_ = true;
};

// The intervals of `done` and of `open` together (two lists: the caller's stored intervals are
// read, not copied). Intervals reaching past the window count up to its end.
inline QueueDepth QueueDepthOf(std::span<const Interval> done, std::span<const Interval> open,
                               uint64_t window_first, uint64_t window_last) {
  if (window_last <= window_first) return {};
  std::vector<uint64_t> starts, ends;
  starts.reserve(done.size() + open.size());
  ends.reserve(done.size() + open.size());
  for (std::span<const Interval> intervals : {done, open}) {
    for (auto [start, end] : intervals) {
      start = std::max(start, window_first);
      end = std::min(end, window_last);
      if (end <= start) continue;
      starts.push_back(start);
      ends.push_back(end);
    }
  }
  std::sort(starts.begin(), starts.end());
  std::sort(ends.begin(), ends.end());
  return QueueDepthOfSorted(SortedTimes{starts, ends}, SortedTimes{}, window_first, window_last);
}

inline QueueDepth QueueDepthOf(std::span<const Interval> intervals, uint64_t window_first,
                               uint64_t window_last) {
  return QueueDepthOf(intervals, {}, window_first, window_last);
}

}  // namespace iotwin::model
