#include "model/initial_residency.h"

#include <algorithm>

namespace iotwin::model {

void ResidencyEvidence::Add(uint32_t dev, uint64_t ino, uint64_t ts, Kind kind, uint64_t first,
                            uint64_t pages) {
  if (pages == 0) return;
  pages = std::min(pages, UINT64_MAX - first);
  if (pages == 0) return;
  events_[{dev, ino}].push_back({ts, first, pages, kind});
}

namespace {

// Disjoint ranges of pages already decided, start -> end.
class DecidedPages {
 public:
  // Calls `undecided(a, b)` for each part of [first, end) not decided yet, then decides it all.
  template <typename Fn>
  void Decide(uint64_t first, uint64_t end, Fn&& undecided) {
    uint64_t cur = first;
    auto it = ranges_.upper_bound(first);
    if (it != ranges_.begin()) {
      auto prev = std::prev(it);
      if (prev->second > cur) cur = prev->second;
    }
    while (cur < end) {
      const uint64_t next = it == ranges_.end() ? UINT64_MAX : it->first;
      const uint64_t gap_end = std::min(end, next);
      if (cur < gap_end) undecided(cur, gap_end);
      if (it == ranges_.end() || it->first >= end) break;
      cur = std::max(cur, it->second);
      ++it;
    }
    Insert(first, end);
  }

 private:
  void Insert(uint64_t first, uint64_t end) {
    auto it = ranges_.upper_bound(first);
    if (it != ranges_.begin()) {
      auto prev = std::prev(it);
      if (prev->second >= first) {
        first = prev->first;
        end = std::max(end, prev->second);
        it = ranges_.erase(prev);
      }
    }
    while (it != ranges_.end() && it->first <= end) {
      end = std::max(end, it->second);
      it = ranges_.erase(it);
    }
    ranges_.emplace(first, end);
  }

  std::map<uint64_t, uint64_t> ranges_;
};

}  // namespace

std::vector<PageExtent> ResidencyEvidence::ResidentAtStart(uint32_t dev, uint64_t ino) const {
  std::vector<PageExtent> out;
  auto found = events_.find({dev, ino});
  if (found == events_.end()) return out;
  std::vector<Event> events = found->second;
  // At one instant, the kernel's insertions and removals come before the use that needed them.
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    if (a.ts != b.ts) return a.ts < b.ts;
    return a.kind < b.kind;
  });
  DecidedPages decided;
  for (const Event& e : events) {
    const bool resident = e.kind == Kind::kRemoved || e.kind == Kind::kUsed;
    decided.Decide(e.first, e.first + e.pages, [&](uint64_t a, uint64_t b) {
      if (!resident) return;
      if (!out.empty() && out.back().first + out.back().pages == a) out.back().pages += b - a;
      else out.push_back({a, b - a});
    });
  }
  std::sort(out.begin(), out.end(),
            [](const PageExtent& a, const PageExtent& b) { return a.first < b.first; });
  std::vector<PageExtent> merged;
  for (const PageExtent& x : out) {
    if (!merged.empty() && merged.back().first + merged.back().pages >= x.first) {
      merged.back().pages = std::max(merged.back().first + merged.back().pages, x.first + x.pages) -
                            merged.back().first;
    } else {
      merged.push_back(x);
    }
  }
  return merged;
}

}  // namespace iotwin::model
