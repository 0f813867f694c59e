#include "model/ordering.h"

#include <algorithm>

namespace iotwin::model {

void DependencyTracker::Begin(uint32_t thread, uint32_t index, uint64_t start, uint64_t end) {
  cur_ = Access{thread, index, end};
  cur_start_ = start;
  pending_.clear();
}

namespace {
// Descriptor numbers, names and file sizes: ordered by the kernel whatever the timing
// (ordering.h).
bool Timed(uint64_t resource) {
  const auto tag = static_cast<ResourceTag>(resource >> 56);
  return tag != ResourceTag::kFd && tag != ResourceTag::kPath && tag != ResourceTag::kSize;
}
}  // namespace

void DependencyTracker::Need(const Access& a, bool timed) {
  if (a.thread == kNone || a.thread == cur_.thread) return;
  // Overlapping in time: concurrent in the original, left free. A descriptor edge holds whatever
  // the timing, except to an op that never completed (a thread that died in it): waiting for
  // its completion could block forever.
  if ((timed || a.end == UINT64_MAX) && a.end > cur_start_) return;
  Need(a.thread, a.index);
}

void DependencyTracker::Need(uint32_t thread, uint32_t index) {
  if (thread == cur_.thread) return;
  for (auto& d : pending_) {
    if (d.thread == thread) {
      d.count = std::max(d.count, index + 1);
      return;
    }
  }
  pending_.push_back(Dep{thread, index + 1});
}

void DependencyTracker::Read(uint64_t resource) {
  ResourceState& r = resources_[resource];
  const bool timed = Timed(resource);
  Need(r.last_write, timed);
  for (auto& a : r.readers) {
    if (a.thread == cur_.thread) {
      a = cur_;
      return;
    }
  }
  r.readers.push_back(cur_);
}

void DependencyTracker::Write(uint64_t resource) {
  ResourceState& r = resources_[resource];
  const bool timed = Timed(resource);
  Need(r.last_write, timed);
  for (const auto& a : r.readers) Need(a, timed);
  r.readers.clear();
  r.last_write = cur_;
}

void DependencyTracker::ReadRange(uint64_t file, uint64_t begin, uint64_t end) {
  if (end <= begin) return;
  auto& segs = ranges_[file];
  auto it = segs.upper_bound(begin);
  if (it != segs.begin()) --it;
  for (; it != segs.end() && it->first < end; ++it) {
    if (it->second.end > begin) Need(it->second.writer, true);
  }
}

void DependencyTracker::WriteRange(uint64_t file, uint64_t begin, uint64_t end) {
  if (end <= begin) return;
  auto& segs = ranges_[file];
  auto it = segs.upper_bound(begin);
  if (it != segs.begin()) --it;
  std::vector<std::pair<uint64_t, Segment>> keep;  // pieces of overlapped segments outside [b,e)
  while (it != segs.end() && it->first < end) {
    if (it->second.end <= begin) {
      ++it;
      continue;
    }
    Need(it->second.writer, true);
    if (it->first < begin) keep.push_back({it->first, Segment{begin, it->second.writer}});
    if (it->second.end > end) keep.push_back({end, Segment{it->second.end, it->second.writer}});
    it = segs.erase(it);
  }
  for (auto& k : keep) segs.emplace(k.first, k.second);
  segs.emplace(begin, Segment{end, cur_});
}

void DependencyTracker::UseInOrder(uint64_t resource) {
  auto& uses = in_order_[resource];
  ThreadUses* mine = nullptr;
  for (auto& u : uses) {
    if (u.latest.thread == cur_.thread) {
      mine = &u;
      continue;
    }
    // A thread's calls do not overlap: when its latest use overlapped this op, the one before
    // it had completed before the latest started, hence before this op.
    if (u.latest.end <= cur_start_) Need(u.latest, true);
    else Need(u.previous, true);
  }
  if (mine == nullptr) {
    uses.push_back(ThreadUses{});
    mine = &uses.back();
  }
  mine->previous = mine->latest;
  mine->latest = cur_;
}

void DependencyTracker::After(uint32_t thread, uint32_t index) { Need(thread, index); }

uint32_t DependencyTracker::End(std::vector<Dep>* out) {
  auto& waited = waited_[cur_.thread];
  uint32_t n = 0;
  for (const auto& d : pending_) {
    uint32_t& w = waited[d.thread];
    if (d.count <= w) continue;
    w = d.count;
    out->push_back(d);
    n++;
  }
  pending_.clear();
  return n;
}

}  // namespace iotwin::model
