// The Vamana-style graph construction and DiskANN's beam search (vector_index.h).
#include <algorithm>
#include <limits>

#include "rng.h"
#include "vector_index.h"

namespace iotwin::workload {
namespace {

using Scored = std::pair<float, uint32_t>;  // (distance, id), ordered by distance then id

// Greedy search over the graph built so far with exact distances (Vamana's GreedySearch):
// returns every node it expanded and the final candidate list, sorted by distance to `x`.
class BuildSearch {
 public:
  BuildSearch(const Dataset& d, const Graph& g, uint32_t list_size)
      : d_(d), g_(g), list_size_(list_size), seen_(d.vectors(), 0) {}

  std::vector<Scored> Run(const float* x, uint32_t exclude) {
    if (++epoch_ == 0) {
      std::fill(seen_.begin(), seen_.end(), 0);
      epoch_ = 1;
    }
    list_.clear();
    std::vector<Scored> pool;
    Offer(x, g_.medoid);
    for (size_t i = 0; i < list_.size();) {
      if (list_[i].expanded) {
        i++;
        continue;
      }
      list_[i].expanded = true;
      const uint32_t id = list_[i].id;
      pool.push_back({list_[i].dist, id});
      for (uint32_t n : g_.neighbours[id]) Offer(x, n);
      i = 0;  // new candidates may sit before i
    }
    for (const Entry& e : list_) {
      if (!e.expanded) pool.push_back({e.dist, e.id});
    }
    std::sort(pool.begin(), pool.end());
    pool.erase(std::remove_if(pool.begin(), pool.end(),
                              [&](const Scored& s) { return s.second == exclude; }),
               pool.end());
    return pool;
  }

 private:
  struct Entry {
    float dist;
    uint32_t id;
    bool expanded;
  };
  void Offer(const float* x, uint32_t id) {
    if (seen_[id] == epoch_) return;
    seen_[id] = epoch_;
    const float dist = SquaredL2(x, d_.vec(id), d_.dim);
    auto at = std::lower_bound(list_.begin(), list_.end(), Scored{dist, id},
                               [](const Entry& e, const Scored& s) {
                                 return Scored{e.dist, e.id} < s;
                               });
    if (list_.size() >= list_size_ && at == list_.end()) return;
    list_.insert(at, Entry{dist, id, false});
    if (list_.size() > list_size_) list_.pop_back();
  }

  const Dataset& d_;
  const Graph& g_;
  uint32_t list_size_;
  std::vector<uint32_t> seen_;
  uint32_t epoch_ = 0;
  std::vector<Entry> list_;
};

// Vamana's RobustPrune: takes candidates nearest first, dropping any that an already chosen
// neighbour covers (alpha * d(chosen, c) <= d(p, c)), until R are chosen.
std::vector<uint32_t> RobustPrune(const Dataset& d, const std::vector<Scored>& sorted, float alpha,
                                  uint32_t max_degree) {
  std::vector<uint32_t> out;
  for (const auto& [dist, c] : sorted) {
    if (out.size() >= max_degree) break;
    bool covered = false;
    for (uint32_t r : out) {
      if (alpha * SquaredL2(d.vec(r), d.vec(c), d.dim) <= dist) {
        covered = true;
        break;
      }
    }
    if (!covered) out.push_back(c);
  }
  return out;
}

std::vector<Scored> ScoreNeighbours(const Dataset& d, uint32_t p,
                                    const std::vector<uint32_t>& ids) {
  std::vector<Scored> s;
  s.reserve(ids.size());
  for (uint32_t id : ids) {
    if (id != p) s.push_back({SquaredL2(d.vec(p), d.vec(id), d.dim), id});
  }
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

uint32_t Medoid(const Dataset& d) {
  std::vector<double> mean(d.dim, 0.0);
  for (uint64_t i = 0; i < d.vectors(); i++) {
    for (uint32_t j = 0; j < d.dim; j++) mean[j] += d.vec(i)[j];
  }
  std::vector<float> m(d.dim);
  for (uint32_t j = 0; j < d.dim; j++) {
    m[j] = static_cast<float>(mean[j] / static_cast<double>(d.vectors()));
  }
  uint32_t best = 0;
  float best_d = std::numeric_limits<float>::max();
  for (uint64_t i = 0; i < d.vectors(); i++) {
    const float dist = SquaredL2(m.data(), d.vec(i), d.dim);
    if (dist < best_d) {
      best_d = dist;
      best = static_cast<uint32_t>(i);
    }
  }
  return best;
}

}  // namespace

Graph BuildGraph(const Dataset& d, const GraphParams& p, uint64_t seed) {
  Graph g;
  const uint64_t n = d.vectors();
  g.neighbours.resize(n);
  if (n == 0) return g;
  g.medoid = Medoid(d);
  std::vector<uint32_t> order(n);
  for (uint64_t i = 0; i < n; i++) order[i] = static_cast<uint32_t>(i);
  Rng rng(seed, 0x6772617068ULL);
  for (uint64_t i = n - 1; i > 0; i--) std::swap(order[i], order[rng.Below(i + 1)]);
  std::swap(*std::find(order.begin(), order.end(), g.medoid), order[0]);
  // A node may hold up to 1.3 R neighbours between prunes (DiskANN's slack), so that reverse
  // edges do not force a prune each time.
  const size_t slack = std::max<size_t>(p.max_degree + 1, p.max_degree * 13 / 10);
  BuildSearch search(d, g, std::max(p.build_list, p.max_degree));
  for (uint64_t i = 1; i < n; i++) {
    const uint32_t x = order[i];
    g.neighbours[x] = RobustPrune(d, search.Run(d.vec(x), x), p.alpha, p.max_degree);
    for (uint32_t y : g.neighbours[x]) {
      std::vector<uint32_t>& ny = g.neighbours[y];
      ny.push_back(x);
      if (ny.size() > slack) ny = RobustPrune(d, ScoreNeighbours(d, y, ny), p.alpha, p.max_degree);
    }
  }
  for (uint64_t i = 0; i < n; i++) {
    std::vector<uint32_t>& ni = g.neighbours[i];
    if (ni.size() > p.max_degree) {
      ni = RobustPrune(d, ScoreNeighbours(d, static_cast<uint32_t>(i), ni), p.alpha, p.max_degree);
    }
  }
  return g;
}

BeamSearcher::BeamSearcher(const IndexHeader& h, const ProductQuantizer& pq,
                           std::span<const uint8_t> codes, const SearchParams& p)
    : h_(h), pq_(pq), codes_(codes), p_(p), seen_epoch_(h.vectors, 0) {}

void BeamSearcher::Offer(uint32_t id, int64_t producer) {
  if (seen_epoch_[id] == epoch_) return;
  seen_epoch_[id] = epoch_;
  const float dist =
      ProductQuantizer::Distance(table_, codes_.data() + size_t{id} * pq_.bytes(), pq_.bytes());
  auto at = std::lower_bound(list_.begin(), list_.end(), std::pair{dist, id},
                             [](const Candidate& c, const std::pair<float, uint32_t>& s) {
                               return std::pair{c.dist, c.id} < s;
                             });
  if (list_.size() >= p_.search_list && at == list_.end()) return;
  list_.insert(at, Candidate{dist, id, producer, false});
  if (list_.size() > p_.search_list) list_.pop_back();
}

Status BeamSearcher::ReadRound(const float* query, const ReadNodes& read,
                               std::span<const uint32_t> ids, std::span<const int64_t> producers,
                               uint32_t hop, bool rerank, SearchResult& out) {
  batch_.resize(ids.size());
  IOTWIN_RETURN_IF_ERROR(read(ids, hop, rerank, std::span(batch_.data(), ids.size())));
  const size_t base = out.reads.size();
  for (size_t i = 0; i < ids.size(); i++) {
    out.reads.push_back(SearchRead{ids[i], hop, producers[i], rerank});
  }
  for (size_t i = 0; i < ids.size(); i++) {
    const NodeData& nd = batch_[i];
    if (nd.vec.size() != h_.dim) return Status::Internal("node {}: no vector read", ids[i]);
    exact_.push_back({SquaredL2(query, nd.vec.data(), h_.dim), ids[i]});
    if (rerank) continue;
    for (uint32_t n : nd.neighbours) {
      if (n >= h_.vectors) return Status::Corrupt("node {}: neighbour {} out of range", ids[i], n);
      Offer(n, static_cast<int64_t>(base + i));
    }
  }
  return Status::Ok();
}

Result<SearchResult> BeamSearcher::Search(const float* query, const ReadNodes& read) {
  if (++epoch_ == 0) {
    std::fill(seen_epoch_.begin(), seen_epoch_.end(), 0);
    epoch_ = 1;
  }
  pq_.DistanceTable(query, table_);
  list_.clear();
  exact_.clear();
  SearchResult out;
  Offer(static_cast<uint32_t>(h_.medoid), -1);
  std::vector<uint32_t> ids;
  std::vector<int64_t> producers;
  for (uint32_t hop = 0;; hop++) {
    ids.clear();
    producers.clear();
    for (Candidate& c : list_) {
      if (ids.size() >= p_.beam) break;
      if (c.read) continue;
      c.read = true;
      ids.push_back(c.id);
      producers.push_back(c.producer);
    }
    if (ids.empty()) {
      out.hops = hop;
      break;
    }
    IOTWIN_RETURN_IF_ERROR(ReadRound(query, read, ids, producers, hop, false, out));
  }
  if (p_.rerank > 0) {
    // Re-ranking reads: the best candidates by PQ distance, read again in batches of W; each
    // depends on its own earlier read (the node it re-reads).
    exact_.clear();
    std::vector<uint32_t> best;
    std::vector<int64_t> earlier;
    for (size_t i = 0; i < list_.size() && best.size() < p_.rerank; i++) {
      best.push_back(list_[i].id);
      int64_t at = -1;
      for (size_t r = 0; r < out.reads.size(); r++) {
        if (out.reads[r].node == list_[i].id) at = static_cast<int64_t>(r);
      }
      earlier.push_back(at);
    }
    for (size_t i = 0; i < best.size(); i += p_.beam) {
      const size_t n = std::min<size_t>(p_.beam, best.size() - i);
      IOTWIN_RETURN_IF_ERROR(ReadRound(query, read, std::span(best).subspan(i, n),
                                       std::span(earlier).subspan(i, n),
                                       static_cast<uint32_t>(out.hops + i / p_.beam), true, out));
    }
  }
  std::sort(exact_.begin(), exact_.end());
  for (size_t i = 0; i < exact_.size() && out.nearest.size() < p_.k; i++) {
    out.nearest.push_back(exact_[i].second);
  }
  return out;
}

}  // namespace iotwin::workload
