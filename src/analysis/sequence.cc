#include "analysis/sequence.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "analysis/flat_map.h"

namespace iotwin::analysis {
namespace {

// Greedy in-order matching that resynchronises within `window` operations: a lower bound on
// the LCS, linear in the input for a fixed window.
size_t WindowedMatch(const uint64_t* a, size_t n, const uint64_t* b, size_t m, size_t window) {
  size_t i = 0, j = 0, matched = 0;
  while (i < n && j < m) {
    if (a[i] == b[j]) {
      ++matched;
      ++i;
      ++j;
      continue;
    }
    bool found = false;
    for (size_t s = 1; s <= window; s++) {
      if (j + s < m && a[i] == b[j + s]) {
        j += s;
        found = true;
        break;
      }
      if (i + s < n && a[i + s] == b[j]) {
        i += s;
        found = true;
        break;
      }
    }
    if (!found) {
      ++i;
      ++j;
    }
  }
  return matched;
}

std::vector<uint64_t> BottomK(const std::vector<uint64_t>& seq, size_t k) {
  std::set<uint64_t> smallest;
  for (uint64_t fp : seq) {
    uint64_t h = MixBits(fp ^ 0x5bd1e995ULL);
    if (smallest.size() < k) {
      smallest.insert(h);
    } else if (h < *smallest.rbegin() && !smallest.count(h)) {
      smallest.erase(std::prev(smallest.end()));
      smallest.insert(h);
    }
  }
  return {smallest.begin(), smallest.end()};
}

double SketchJaccard(const std::vector<uint64_t>& x, const std::vector<uint64_t>& y, size_t k) {
  if (x.empty() && y.empty()) return 1.0;
  // The k smallest of the union, and how many of them both sketches hold.
  size_t i = 0, j = 0, taken = 0, both = 0;
  while (taken < k && (i < x.size() || j < y.size())) {
    if (j >= y.size() || (i < x.size() && x[i] < y[j])) {
      ++i;
    } else if (i >= x.size() || y[j] < x[i]) {
      ++j;
    } else {
      ++both;
      ++i;
      ++j;
    }
    ++taken;
  }
  return taken ? static_cast<double>(both) / static_cast<double>(taken) : 0.0;
}

}  // namespace

LcsResult LongestCommonSubsequence(const std::vector<uint64_t>& av, const std::vector<uint64_t>& bv,
                                   uint64_t max_work, size_t window) {
  LcsResult r;
  size_t n = av.size(), m = bv.size();
  // Common prefix and suffix need no search.
  size_t pre = 0;
  while (pre < n && pre < m && av[pre] == bv[pre]) ++pre;
  r.first_difference = pre;
  size_t suf = 0;
  while (suf < n - pre && suf < m - pre && av[n - 1 - suf] == bv[m - 1 - suf]) ++suf;
  const uint64_t* a = av.data() + pre;
  const uint64_t* b = bv.data() + pre;
  n -= pre + suf;
  m -= pre + suf;
  r.length = pre + suf;
  if (n == 0 || m == 0) return r;

  // Myers: furthest-reaching D-paths; V[k] = furthest x on diagonal k = x - y.
  const uint64_t total = n + m;
  uint64_t max_d = std::max<uint64_t>(64, max_work / (total + 1));
  max_d = std::min<uint64_t>(max_d, total);
  std::vector<int64_t> v(2 * max_d + 3, 0);
  const int64_t off = static_cast<int64_t>(max_d) + 1;
  const int64_t N = static_cast<int64_t>(n), M = static_cast<int64_t>(m);
  for (int64_t d = 0; d <= static_cast<int64_t>(max_d); d++) {
    for (int64_t k = -d; k <= d; k += 2) {
      int64_t x;
      if (k == -d || (k != d && v[k - 1 + off] < v[k + 1 + off])) {
        x = v[k + 1 + off];
      } else {
        x = v[k - 1 + off] + 1;
      }
      int64_t y = x - k;
      while (x < N && y < M && a[x] == b[y]) {
        ++x;
        ++y;
      }
      v[k + off] = x;
      if (x >= N && y >= M) {
        r.length += static_cast<size_t>((N + M - d) / 2);
        return r;
      }
    }
  }
  r.exact = false;
  r.length += WindowedMatch(a, n, b, m, window);
  return r;
}

double SequenceSimilarity(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b, size_t k) {
  return SketchJaccard(BottomK(a, k), BottomK(b, k), k);
}

std::vector<ThreadPair> MapThreads(const std::vector<ThreadSeq>& a,
                                   const std::vector<ThreadSeq>& b,
                                   const std::vector<std::pair<uint32_t, uint32_t>>& known) {
  std::vector<ThreadPair> pairs;
  std::vector<bool> used_a(a.size(), false), used_b(b.size(), false);
  // tid -> the one thread of its side it names; -1 for a reused tid, which names none.
  auto index_by_tid = [](const std::vector<ThreadSeq>& side) {
    std::unordered_map<uint32_t, int> index;
    for (size_t i = 0; i < side.size(); i++) {
      auto [it, fresh] = index.emplace(side[i].tid, static_cast<int>(i));
      if (!fresh) it->second = -1;
    }
    return index;
  };
  const auto index_a = index_by_tid(a), index_b = index_by_tid(b);
  auto only = [](const std::unordered_map<uint32_t, int>& index, uint32_t tid) {
    auto it = index.find(tid);
    return it == index.end() ? -1 : it->second;
  };
  for (const auto& [tid_a, tid_b] : known) {
    const int i = only(index_a, tid_a), j = only(index_b, tid_b);
    if (i < 0 || j < 0 || used_a[static_cast<size_t>(i)] || used_b[static_cast<size_t>(j)]) continue;
    used_a[static_cast<size_t>(i)] = used_b[static_cast<size_t>(j)] = true;
    pairs.push_back({i, j, -1});
  }
  auto same_rank = [](const ThreadSeq& x, const ThreadSeq& y) {
    return x.process_rank == y.process_rank && x.thread_rank == y.thread_rank;
  };
  constexpr size_t kMaxPairsScored = 1u << 16;
  if (a.size() * b.size() <= kMaxPairsScored) {
    constexpr size_t kSketch = 256;
    std::vector<std::vector<uint64_t>> sa, sb;
    for (const auto& t : a) sa.push_back(BottomK(*t.ops, kSketch));
    for (const auto& t : b) sb.push_back(BottomK(*t.ops, kSketch));
    struct Cand {
      double score, sim;
      size_t i, j;
    };
    std::vector<Cand> cands;
    for (size_t i = 0; i < a.size(); i++) {
      for (size_t j = 0; j < b.size(); j++) {
        double sim = SketchJaccard(sa[i], sb[j], kSketch);
        double na = static_cast<double>(a[i].ops->size()), nb = static_cast<double>(b[j].ops->size());
        double length_ratio = std::max(na, nb) > 0 ? std::min(na, nb) / std::max(na, nb) : 1.0;
        // Order of appearance decides between equally similar threads (identical workers).
        double score = sim + 0.05 * length_ratio + (same_rank(a[i], b[j]) ? 0.1 : 0.0);
        cands.push_back({score, sim, i, j});
      }
    }
    std::sort(cands.begin(), cands.end(), [](const Cand& x, const Cand& y) {
      if (x.score != y.score) return x.score > y.score;
      return x.i != y.i ? x.i < y.i : x.j < y.j;
    });
    for (const Cand& c : cands) {
      if (used_a[c.i] || used_b[c.j]) continue;
      // Pair only threads that share something, or that sit at the same place in the order.
      if (c.sim <= 0 && !same_rank(a[c.i], b[c.j])) continue;
      used_a[c.i] = used_b[c.j] = true;
      pairs.push_back({static_cast<int>(c.i), static_cast<int>(c.j), c.sim});
    }
  } else {
    // Too many threads to score every pair: order of appearance only.
    std::map<std::pair<uint32_t, uint32_t>, size_t> by_rank;
    for (size_t j = 0; j < b.size(); j++) by_rank.emplace(std::make_pair(b[j].process_rank, b[j].thread_rank), j);
    for (size_t i = 0; i < a.size(); i++) {
      auto it = by_rank.find({a[i].process_rank, a[i].thread_rank});
      if (it == by_rank.end() || used_b[it->second]) continue;
      used_a[i] = used_b[it->second] = true;
      pairs.push_back({static_cast<int>(i), static_cast<int>(it->second), -1});
    }
  }
  std::sort(pairs.begin(), pairs.end(), [](const ThreadPair& x, const ThreadPair& y) { return x.a < y.a; });
  for (size_t i = 0; i < a.size(); i++)
    if (!used_a[i]) pairs.push_back({static_cast<int>(i), -1, 0});
  for (size_t j = 0; j < b.size(); j++)
    if (!used_b[j]) pairs.push_back({-1, static_cast<int>(j), 0});
  return pairs;
}

}  // namespace iotwin::analysis
