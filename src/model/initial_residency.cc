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

std::vector<PageExtent> PagesToWarm(const std::vector<PageExtent>& known,
                                    const std::vector<PageExtent>& absent, uint64_t count,
                                    uint64_t total, uint64_t window) {
  std::map<uint64_t, uint64_t> taken;  // start -> end
  DecidedPages seen;                   // what was taken, or passed over once the budget ran out
  uint64_t have = 0;
  // Takes the pages of [first, end) not taken yet, within the budget unless `always`.
  auto take = [&](uint64_t first, uint64_t end, bool always) {
    seen.Decide(first, end, [&](uint64_t a, uint64_t b) {
      if (!always) {
        if (have >= count) return;
        b = std::min(b, a + (count - have));
      }
      taken[a] = b;
      have += b - a;
    });
  };
  for (const PageExtent& x : known) take(x.first, x.first + x.pages, true);
  for (const PageExtent& x : absent) seen.Decide(x.first, x.first + x.pages, [](uint64_t, uint64_t) {});
  for (const PageExtent& x : known) {
    if (window == 0 || x.first >= total) continue;
    const uint64_t end = std::min(total, x.first + x.pages);
    const uint64_t lo = x.first / window * window;
    // end rounded up to the window, never past `total` (nor wrapping).
    const uint64_t rem = end % window;
    const uint64_t hi = rem == 0 || total - end < window - rem ? total : end + (window - rem);
    take(lo, hi, false);
  }
  take(0, total, false);
  std::vector<PageExtent> out;
  for (const auto& [a, b] : taken) {
    if (!out.empty() && out.back().first + out.back().pages == a) out.back().pages += b - a;
    else out.push_back({a, b - a});
  }
  return out;
}

namespace {

// Sorted and merged.
std::vector<PageExtent> Merged(std::vector<PageExtent> v) {
  std::sort(v.begin(), v.end(),
            [](const PageExtent& a, const PageExtent& b) { return a.first < b.first; });
  std::vector<PageExtent> merged;
  for (const PageExtent& x : v) {
    if (!merged.empty() && merged.back().first + merged.back().pages >= x.first) {
      merged.back().pages = std::max(merged.back().first + merged.back().pages, x.first + x.pages) -
                            merged.back().first;
    } else {
      merged.push_back(x);
    }
  }
  return merged;
}

}  // namespace

ResidencyEvidence::AtStart ResidencyEvidence::Decide(uint32_t dev, uint64_t ino) const {
  AtStart out;
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
    std::vector<PageExtent>& to = resident ? out.resident : out.absent;
    decided.Decide(e.first, e.first + e.pages, [&](uint64_t a, uint64_t b) {
      if (!to.empty() && to.back().first + to.back().pages == a) to.back().pages += b - a;
      else to.push_back({a, b - a});
    });
  }
  out.resident = Merged(std::move(out.resident));
  out.absent = Merged(std::move(out.absent));
  return out;
}

}  // namespace iotwin::model
