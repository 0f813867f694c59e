// The structures behind `report`'s speed give the answers of the plain ones they replace: the
// queue-depth sweep over sorted starts and ends (and IntervalTimes, which keeps them sorted as
// requests complete) against a sort of every event, NewestItems against a vector erased at its
// front, and FlatMap with a struct key.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "analysis/flat_map.h"
#include "analysis/newest_items.h"
#include "model/block_requests.h"

namespace iotwin {
namespace {

using model::Interval;
using model::QueueDepth;

// The definition: every start and end as one sort key (time shifted left, a low bit 1 for a
// start, so that ends come first at equal times), sorted, swept.
QueueDepth ReferenceQueueDepth(const std::vector<Interval>& intervals, uint64_t first,
                               uint64_t last) {
  QueueDepth q;
  if (last <= first) return q;
  q.window_ns = last - first;
  std::vector<uint64_t> events;
  for (auto [start, end] : intervals) {
    start = std::max(start, first);
    end = std::min(end, last);
    if (end <= start) continue;
    q.in_flight_ns += end - start;
    events.push_back(((start - first) << 1) | 1);
    events.push_back((end - first) << 1);
  }
  if (events.empty()) return q;
  std::sort(events.begin(), events.end());
  std::vector<uint64_t> ns_at_depth(1, 0);
  uint64_t depth = 0, prev = first;
  for (const uint64_t e : events) {
    const uint64_t ts = first + (e >> 1);
    ns_at_depth[std::min<uint64_t>(depth, ns_at_depth.size() - 1)] += ts - prev;
    prev = ts;
    depth = (e & 1) ? depth + 1 : depth - 1;
    q.max = std::max(q.max, depth);
    if (ns_at_depth.size() <= depth) ns_at_depth.resize(depth + 1, 0);
  }
  ns_at_depth[0] += last - prev;
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

void ExpectSame(const QueueDepth& a, const QueueDepth& b) {
  EXPECT_EQ(a.in_flight_ns, b.in_flight_ns);
  EXPECT_EQ(a.window_ns, b.window_ns);
  EXPECT_EQ(a.max, b.max);
  EXPECT_EQ(a.p99, b.p99);
  EXPECT_EQ(a.average, b.average);
}

// Requests on a coarse clock (many equal times: ends and starts at once), most completing in
// order, some long ones out of order.
std::vector<Interval> RandomRequests(std::mt19937_64& rng, size_t n) {
  std::vector<Interval> v;
  uint64_t t = 1000;
  for (size_t i = 0; i < n; i++) {
    t += rng() % 3;
    const uint64_t len = rng() % 10 == 0 ? rng() % 5000 : rng() % 8;
    v.emplace_back(t, t + len);  // some empty
  }
  // Completion order: by end time, as a trace holds them, with some swaps (a trace out of order).
  std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second < b.second; });
  for (size_t i = 0; i + 1 < v.size(); i += 1 + rng() % 97) std::swap(v[i], v[i + 1]);
  return v;
}

TEST(QueueDepthSweep, SortedStartsAndEndsGiveTheDefinitionsAnswer) {
  std::mt19937_64 rng(7);
  for (size_t n : {0u, 1u, 2u, 5u, 100u, 5000u}) {
    const std::vector<Interval> done = RandomRequests(rng, n);
    model::IntervalTimes times;
    for (auto [s, e] : done) times.Add(s, e);
    uint64_t first = 1000, last = 1000;
    for (auto [s, e] : done) last = std::max(last, e);
    // Open at the end: three requests from within the window.
    std::vector<Interval> open = {{last - 1, last + 5}, {first, last + 5}, {last, last + 5}};
    std::vector<uint64_t> open_starts, open_ends;
    for (auto [s, e] : open)
      if (s < last) {
        open_starts.push_back(s);
        open_ends.push_back(last);
      }
    std::sort(open_starts.begin(), open_starts.end());
    std::vector<uint64_t> s1, s2;
    const QueueDepth got = times.WithSorted(&s1, &s2, [&](const auto& t) {
      return model::QueueDepthOfSorted(t, model::SortedTimes{open_starts, open_ends}, first, last);
    });
    std::vector<Interval> all = done;
    all.insert(all.end(), open.begin(), open.end());
    SCOPED_TRACE(n);
    ExpectSame(got, ReferenceQueueDepth(all, first, last));
    ExpectSame(model::QueueDepthOf(done, open, first, last),
               ReferenceQueueDepth(all, first, last));
  }
}

TEST(QueueDepthSweep, IntervalTimesSortsWhatArrivesFarOutOfOrder) {
  model::IntervalTimes times;
  std::vector<Interval> v;
  for (uint64_t i = 0; i < 300; i++) v.emplace_back(1000 - i * 3, 2000 - i);  // reversed
  for (auto [s, e] : v) times.Add(s, e);
  std::vector<uint64_t> s1, s2;
  times.WithSorted(&s1, &s2, [&](const auto& t) {
    for (size_t i = 1; i < t.starts.size(); i++) EXPECT_LE(t.starts[i - 1], t.starts[i]);
    for (size_t i = 1; i < t.ends.size(); i++) EXPECT_LE(t.ends[i - 1], t.ends[i]);
    ExpectSame(model::QueueDepthOfSorted(t, model::SortedTimes{}, 100, 2000),
               ReferenceQueueDepth(v, 100, 2000));
    return 0;
  });
}

TEST(QueueDepthSweep, ManyBlocksOfTimes) {
  std::mt19937_64 rng(11);
  const std::vector<Interval> done = RandomRequests(rng, 3 * model::TimeList::kBlock + 17);
  model::IntervalTimes times;
  uint64_t last = 0;
  for (auto [s, e] : done) {
    times.Add(s, e);
    last = std::max(last, e);
  }
  std::vector<uint64_t> s1, s2;
  const QueueDepth got = times.WithSorted(&s1, &s2, [&](const auto& t) {
    return model::QueueDepthOfSorted(t, model::SortedTimes{}, 1000, last);
  });
  ExpectSame(got, ReferenceQueueDepth(done, 1000, last));
}

TEST(NewestItems, HoldsWhatAVectorErasedAtItsFrontHolds) {
  std::mt19937_64 rng(3);
  analysis::NewestItems<int, 5> ring;
  std::vector<int> plain;
  for (int i = 0; i < 40; i++) {
    if (rng() % 3 == 0 && !plain.empty()) {
      ring.back() += 100;
      plain.back() += 100;
    } else {
      if (plain.size() >= 5) plain.erase(plain.begin());
      plain.push_back(i);
      ring.push_back(i);
    }
    std::vector<int> newest_first;
    for (auto it = ring.rbegin(); it != ring.rend(); ++it) newest_first.push_back(*it);
    ASSERT_EQ(newest_first, std::vector<int>(plain.rbegin(), plain.rend())) << i;
    ASSERT_EQ(ring.size(), plain.size());
  }
}

TEST(FlatMap, StructKeysWithTheirHash) {
  analysis::FlatMap<int, model::BlockRequestKey, model::BlockRequestKeyHash> m;
  // The same identity on two devices, and as a sector: three requests.
  const model::BlockRequestKey a{1, 42, false}, b{2, 42, false}, c{1, 42, true};
  m.FindOrInsert(a) = 1;
  m.FindOrInsert(b) = 2;
  m.FindOrInsert(c) = 3;
  for (uint64_t i = 0; i < 1000; i++) m.FindOrInsert({7, i, false}) = static_cast<int>(i);
  EXPECT_EQ(*m.Find(a), 1);
  EXPECT_EQ(*m.Find(b), 2);
  EXPECT_EQ(*m.Find(c), 3);
  const size_t slot = m.FindSlot(b);
  ASSERT_NE(slot, m.kNone);
  m.EraseSlot(slot);
  EXPECT_EQ(m.Find(b), nullptr);
  for (uint64_t i = 0; i < 1000; i++) ASSERT_EQ(*m.Find({7, i, false}), static_cast<int>(i));
  EXPECT_EQ(m.size(), 1002u);
}

}  // namespace
}  // namespace iotwin
