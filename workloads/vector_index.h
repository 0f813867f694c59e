// The compute side of the vector-search scenario, with no I/O: the seeded data set, the product
// quantiser, the Vamana-style graph, the on-disk index layout (encode/decode) and the beam search
// (which reads nodes through a callback, so tests can run it from memory). docs/workloads.md
// "vector-search" describes the layout byte by byte.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/status.h"

namespace iotwin::workload {

// ---------------------------------------------------------------------------------------------
// On-disk layout: a 4 KiB header block, then node i in the 4 KiB block at kIndexBlock * (i + 1).

inline constexpr size_t kIndexBlock = 4096;
inline constexpr char kIndexMagic[8] = {'I', 'O', 'T', 'W', 'V', 'I', 'D', 'X'};
inline constexpr uint32_t kIndexVersion = 1;

struct IndexHeader {
  uint64_t vectors = 0;     // N
  uint32_t dim = 0;         // D, float32 coordinates per vector
  uint32_t max_degree = 0;  // R, neighbour slots per node
  uint64_t medoid = 0;      // the search's entry node
  uint64_t seed = 0;        // the seed the data set was generated from
  uint32_t pq_bytes = 0;    // bytes per in-memory PQ code (not stored in the index)
  uint32_t clusters = 0;    // clusters of the generated data set
};

// Bytes of one node's content: D floats, the neighbour count, R neighbour ids.
inline uint64_t NodeContentBytes(uint64_t dim, uint64_t max_degree) {
  return 4 * dim + 4 + 4 * max_degree;
}
inline uint64_t NodeOffset(uint64_t node) { return kIndexBlock * (node + 1); }
inline uint64_t IndexFileBytes(uint64_t vectors) { return kIndexBlock * (vectors + 1); }

// Writes the header into a kIndexBlock-byte block (zero padded).
void EncodeIndexHeader(const IndexHeader& h, std::span<uint8_t> block);
// Checks magic, version, block size and that the numbers describe a node that fits a block.
Result<IndexHeader> DecodeIndexHeader(std::span<const uint8_t> block);
// Writes one node (vector, neighbour count, ids, zero padding) into a kIndexBlock-byte block.
void EncodeNode(std::span<const float> vec, std::span<const uint32_t> neighbours,
                std::span<uint8_t> block);
// Reads one node of an index described by `h`; refuses a count over R or an id >= N.
Status DecodeNode(std::span<const uint8_t> block, const IndexHeader& h, std::span<float> vec,
                  std::vector<uint32_t>& neighbours);

// ---------------------------------------------------------------------------------------------
// Data set: clustered float32 vectors, deterministic from the seed.

struct DataShape {
  uint64_t vectors = 0;
  uint32_t dim = 0;
  uint32_t clusters = 0;
  uint64_t queries = 0;
};

struct Dataset {
  uint32_t dim = 0;
  std::vector<float> base;     // vectors x dim, row-major
  std::vector<float> queries;  // queries x dim
  uint64_t vectors() const { return dim == 0 ? 0 : base.size() / dim; }
  uint64_t query_count() const { return dim == 0 ? 0 : queries.size() / dim; }
  const float* vec(uint64_t i) const { return base.data() + i * dim; }
  const float* query(uint64_t q) const { return queries.data() + q * dim; }
};

// Cluster centres uniform in [-1, 1)^D; each point a centre (picked uniformly) plus noise of
// standard deviation 0.25 per coordinate (sum of four uniforms: no libm, the same on any host).
// Queries are drawn the same way from another stream, so they are near, not in, the data set.
Dataset GenerateDataset(const DataShape& shape, uint64_t seed);

float SquaredL2(const float* a, const float* b, uint32_t dim);

// The k nearest points of `query` by exact distance (ties: lower id first).
std::vector<uint32_t> BruteForceNearest(const Dataset& d, const float* query, uint32_t k);

// ---------------------------------------------------------------------------------------------
// Product quantisation: M sub-spaces of D/M dimensions, 256 centroids each (k-means), one byte
// per sub-space per vector.

class ProductQuantizer {
 public:
  static constexpr uint32_t kCentroids = 256;
  // Trains on up to `train_max` points of `d` (a seeded sample) with `iterations` of k-means.
  static ProductQuantizer Train(const Dataset& d, uint32_t pq_bytes, uint64_t seed,
                                uint64_t train_max = 8192, int iterations = 4);
  uint32_t bytes() const { return m_; }
  // Codes of every point of `d`, bytes() per point.
  std::vector<uint8_t> EncodeAll(const Dataset& d) const;
  // Per query: table[m * 256 + c] = squared distance of sub-vector m to centroid c.
  void DistanceTable(const float* query, std::vector<float>& table) const;
  static float Distance(const std::vector<float>& table, const uint8_t* code, uint32_t m);

 private:
  uint32_t dim_ = 0;
  uint32_t m_ = 0;
  uint32_t sub_ = 0;              // dimensions per sub-space
  std::vector<float> centroids_;  // [m][256][sub]
};

// ---------------------------------------------------------------------------------------------
// Graph: each node at most R out-neighbours, built by Vamana-style incremental insertion.

struct GraphParams {
  uint32_t max_degree = 32;  // R
  uint32_t build_list = 64;  // L during construction
  float alpha = 1.2f;        // RobustPrune's distance factor
};

struct Graph {
  uint32_t medoid = 0;
  std::vector<std::vector<uint32_t>> neighbours;
};

// Deterministic: the insertion order is a seeded permutation, with the medoid (the point nearest
// the mean) first.
Graph BuildGraph(const Dataset& d, const GraphParams& p, uint64_t seed);

// ---------------------------------------------------------------------------------------------
// Beam search over the on-disk graph.

struct SearchParams {
  uint32_t beam = 4;          // W: nodes read per round
  uint32_t search_list = 64;  // L: candidates kept, ranked by PQ distance
  uint32_t k = 10;            // results
  uint32_t rerank = 0;        // extra reads of the best unread candidates, for exact distances
};

// One node read by a search, in issue order.
struct SearchRead {
  uint32_t node = 0;
  uint32_t hop = 0;       // the round that read it (the rerank round is after the last hop)
  int64_t producer = -1;  // index (in the query's reads) of the read whose neighbour list
                          // brought this node in; -1 for the entry node
  bool rerank = false;
};

struct SearchResult {
  std::vector<uint32_t> nearest;  // up to k ids, nearest first (exact distance)
  std::vector<SearchRead> reads;
  uint32_t hops = 0;  // rounds of graph reads (not counting the rerank round)
};

// A decoded node: what a batch read returns for each requested node.
struct NodeData {
  std::vector<float> vec;
  std::vector<uint32_t> neighbours;
};

// Reads `nodes` as one batch and fills out[i] for nodes[i]. `hop` and `rerank` say which round.
using ReadNodes = std::function<Status(std::span<const uint32_t> nodes, uint32_t hop, bool rerank,
                                       std::span<NodeData> out)>;

// DiskANN's BeamSearch: the candidate list holds the L best nodes seen, by PQ distance; each
// round reads the (up to) W best unread candidates as one batch, adds their neighbours, and stops
// when every candidate in the list has been read. Results are ranked by the exact distances of
// the vectors read (DiskANN's full-precision re-ranking; the vectors come with the nodes).
class BeamSearcher {
 public:
  BeamSearcher(const IndexHeader& h, const ProductQuantizer& pq, std::span<const uint8_t> codes,
               const SearchParams& p);
  Result<SearchResult> Search(const float* query, const ReadNodes& read);

 private:
  struct Candidate {
    float dist;
    uint32_t id;
    int64_t producer;
    bool read;
  };
  void Offer(uint32_t id, int64_t producer);
  Status ReadRound(const float* query, const ReadNodes& read, std::span<const uint32_t> ids,
                   std::span<const int64_t> producers, uint32_t hop, bool rerank,
                   SearchResult& out);

  IndexHeader h_;
  const ProductQuantizer& pq_;
  std::span<const uint8_t> codes_;
  SearchParams p_;
  std::vector<float> table_;
  std::vector<Candidate> list_;       // sorted by (dist, id), at most L
  std::vector<uint32_t> seen_epoch_;  // per node: the query epoch that last saw it
  uint32_t epoch_ = 0;
  std::vector<std::pair<float, uint32_t>> exact_;  // exact distances of the nodes read
  std::vector<NodeData> batch_;
};

// Fraction of `truth` found in `found`.
double RecallAt(std::span<const uint32_t> found, std::span<const uint32_t> truth);

}  // namespace iotwin::workload
