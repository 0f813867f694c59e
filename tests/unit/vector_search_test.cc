// The vector-search scenario's compute side (workloads/vector_index.h): the on-disk layout, the
// determinism of data set and graph, and a beam search that really searches (recall against brute
// force), run from memory through the same node encoding the index file holds.
#include "vector_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "vector_index.h"

namespace iotwin::workload {
namespace {

template <typename T>
T At(const std::vector<uint8_t>& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

IndexHeader SampleHeader() {
  IndexHeader h;
  h.vectors = 1000;
  h.dim = 16;
  h.max_degree = 8;
  h.medoid = 17;
  h.seed = 0x1122334455667788ULL;
  h.pq_bytes = 4;
  h.clusters = 5;
  return h;
}

TEST(VectorLayout, HeaderBytesAreTheDocumentedLittleEndianFields) {
  std::vector<uint8_t> block(kIndexBlock, 0xee);
  EncodeIndexHeader(SampleHeader(), block);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(block.data()), 8), "IOTWVIDX");
  EXPECT_EQ(At<uint32_t>(block, 8), 1u);  // version
  EXPECT_EQ(At<uint32_t>(block, 12), 4096u);
  EXPECT_EQ(At<uint64_t>(block, 16), 1000u);
  EXPECT_EQ(At<uint32_t>(block, 24), 16u);
  EXPECT_EQ(At<uint32_t>(block, 28), 8u);
  EXPECT_EQ(At<uint64_t>(block, 32), 17u);
  EXPECT_EQ(At<uint64_t>(block, 40), 0x1122334455667788ULL);
  EXPECT_EQ(At<uint64_t>(block, 48), 4096u);  // first node
  EXPECT_EQ(At<uint32_t>(block, 56), 4u);
  EXPECT_EQ(At<uint32_t>(block, 60), 5u);
  EXPECT_TRUE(std::all_of(block.begin() + 64, block.end(), [](uint8_t b) { return b == 0; }));

  auto h = DecodeIndexHeader(block);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->vectors, 1000u);
  EXPECT_EQ(h->dim, 16u);
  EXPECT_EQ(h->max_degree, 8u);
  EXPECT_EQ(h->medoid, 17u);
  EXPECT_EQ(h->seed, 0x1122334455667788ULL);
  EXPECT_EQ(h->pq_bytes, 4u);
  EXPECT_EQ(h->clusters, 5u);
  EXPECT_EQ(NodeOffset(0), 4096u);
  EXPECT_EQ(NodeOffset(9), 40960u);
  EXPECT_EQ(IndexFileBytes(1000), 1001u * 4096);
}

TEST(VectorLayout, HeaderDecodeRefusesWhatIsNotAConsistentIndex) {
  std::vector<uint8_t> good(kIndexBlock);
  EncodeIndexHeader(SampleHeader(), good);
  auto corrupt = [&](size_t off, auto value) {
    std::vector<uint8_t> b = good;
    std::memcpy(b.data() + off, &value, sizeof(value));
    return DecodeIndexHeader(b).ok();
  };
  EXPECT_FALSE(corrupt(0, uint8_t{'X'}));        // magic
  EXPECT_FALSE(corrupt(8, uint32_t{2}));         // version
  EXPECT_FALSE(corrupt(12, uint32_t{512}));      // block size
  EXPECT_FALSE(corrupt(16, uint64_t{0}));        // no vectors
  EXPECT_FALSE(corrupt(16, uint64_t{1} << 40));  // ids are 32-bit
  EXPECT_FALSE(corrupt(24, uint32_t{1024}));     // 4 D + 4 + 4 R > 4096
  EXPECT_FALSE(corrupt(28, uint32_t{0}));        // degree 0
  EXPECT_FALSE(corrupt(32, uint64_t{1000}));     // medoid out of range
  EXPECT_FALSE(corrupt(48, uint64_t{8192}));     // nodes elsewhere
  EXPECT_FALSE(DecodeIndexHeader(std::span(good).first(100)).ok());
  EXPECT_TRUE(corrupt(24, uint32_t{16}));
}

TEST(VectorLayout, NodeIsVectorThenCountThenIdsThenZeros) {
  const IndexHeader h = SampleHeader();
  std::vector<float> vec(h.dim);
  for (uint32_t i = 0; i < h.dim; i++) vec[i] = 0.5f * static_cast<float>(i) - 3.0f;
  const std::vector<uint32_t> ids = {5, 999, 0};
  std::vector<uint8_t> block(kIndexBlock, 0xee);
  EncodeNode(vec, ids, block);
  EXPECT_EQ(std::memcmp(block.data(), vec.data(), 4 * h.dim), 0);
  EXPECT_EQ(At<uint32_t>(block, 64), 3u);
  EXPECT_EQ(At<uint32_t>(block, 68), 5u);
  EXPECT_EQ(At<uint32_t>(block, 72), 999u);
  EXPECT_EQ(At<uint32_t>(block, 76), 0u);
  EXPECT_TRUE(std::all_of(block.begin() + 80, block.end(), [](uint8_t b) { return b == 0; }));

  std::vector<float> out(h.dim);
  std::vector<uint32_t> nbrs;
  ASSERT_TRUE(DecodeNode(block, h, out, nbrs).ok());
  EXPECT_EQ(out, vec);
  EXPECT_EQ(nbrs, ids);

  std::vector<uint8_t> bad = block;
  const uint32_t too_many = h.max_degree + 1;
  std::memcpy(bad.data() + 64, &too_many, 4);
  EXPECT_FALSE(DecodeNode(bad, h, out, nbrs).ok());
  bad = block;
  const uint32_t out_of_range = 1000;
  std::memcpy(bad.data() + 72, &out_of_range, 4);
  EXPECT_FALSE(DecodeNode(bad, h, out, nbrs).ok());
}

DataShape TinyShape() { return DataShape{1000, 16, 6, 40}; }

TEST(VectorData, SameSeedSameDataSetAndGraphOtherSeedOtherData) {
  const Dataset a = GenerateDataset(TinyShape(), 7);
  const Dataset b = GenerateDataset(TinyShape(), 7);
  const Dataset c = GenerateDataset(TinyShape(), 8);
  ASSERT_EQ(a.vectors(), 1000u);
  ASSERT_EQ(a.query_count(), 40u);
  EXPECT_EQ(a.base, b.base);
  EXPECT_EQ(a.queries, b.queries);
  EXPECT_NE(a.base, c.base);
  EXPECT_NE(a.queries, a.base);  // queries come from their own stream

  const GraphParams p{8, 24, 1.2f};
  const Graph g1 = BuildGraph(a, p, 7);
  const Graph g2 = BuildGraph(b, p, 7);
  EXPECT_EQ(g1.medoid, g2.medoid);
  EXPECT_EQ(g1.neighbours, g2.neighbours);
  for (size_t i = 0; i < g1.neighbours.size(); i++) {
    const auto& n = g1.neighbours[i];
    EXPECT_LE(n.size(), p.max_degree) << i;
    EXPECT_FALSE(n.empty()) << i;
    EXPECT_EQ(std::set<uint32_t>(n.begin(), n.end()).size(), n.size()) << "duplicate at " << i;
    EXPECT_EQ(std::count(n.begin(), n.end(), static_cast<uint32_t>(i)), 0) << "self loop " << i;
  }
}

// An index kept in memory as the blocks the file would hold.
struct MemoryIndex {
  IndexHeader h;
  std::vector<std::vector<uint8_t>> blocks;
  size_t batches = 0;

  MemoryIndex(const Dataset& d, const Graph& g) {
    h.vectors = d.vectors();
    h.dim = d.dim;
    h.max_degree = 8;
    h.medoid = g.medoid;
    for (uint64_t i = 0; i < d.vectors(); i++) {
      blocks.emplace_back(kIndexBlock);
      EncodeNode(std::span(d.vec(i), d.dim), g.neighbours[i], blocks.back());
    }
  }
  ReadNodes Reader(uint32_t beam) {
    return [this, beam](std::span<const uint32_t> nodes, uint32_t, bool,
                        std::span<NodeData> out) -> Status {
      batches++;
      if (nodes.size() > beam) return Status::Internal("batch of {}", nodes.size());
      for (size_t i = 0; i < nodes.size(); i++) {
        out[i].vec.resize(h.dim);
        IOTWIN_RETURN_IF_ERROR(DecodeNode(blocks[nodes[i]], h, out[i].vec, out[i].neighbours));
      }
      return Status::Ok();
    };
  }
};

TEST(VectorSearch, BeamSearchFindsTheNearestAndLogsWhereEachReadCameFrom) {
  const Dataset d = GenerateDataset(TinyShape(), 3);
  const Graph g = BuildGraph(d, GraphParams{8, 24, 1.2f}, 3);
  const ProductQuantizer pq = ProductQuantizer::Train(d, 4, 3);
  const std::vector<uint8_t> codes = pq.EncodeAll(d);
  MemoryIndex index(d, g);
  BeamSearcher searcher(index.h, pq, codes, SearchParams{4, 32, 10, 0});
  double recall = 0;
  for (uint64_t q = 0; q < d.query_count(); q++) {
    auto r = searcher.Search(d.query(q), index.Reader(4));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->nearest.size(), 10u);
    recall += RecallAt(r->nearest, BruteForceNearest(d, d.query(q), 10));
    // Hop 0 reads the entry node alone; every later read came from the neighbour list of a read
    // of an earlier hop, and no node is read twice.
    ASSERT_FALSE(r->reads.empty());
    EXPECT_EQ(r->reads[0].node, g.medoid);
    EXPECT_EQ(r->reads[0].producer, -1);
    std::set<uint32_t> nodes;
    std::vector<size_t> per_hop(r->hops, 0);
    for (size_t i = 0; i < r->reads.size(); i++) {
      const SearchRead& s = r->reads[i];
      EXPECT_TRUE(nodes.insert(s.node).second) << "node " << s.node << " read twice";
      ASSERT_LT(s.hop, r->hops);
      per_hop[s.hop]++;
      if (i == 0) continue;
      ASSERT_GE(s.producer, 0);
      ASSERT_LT(static_cast<size_t>(s.producer), i);
      const SearchRead& from = r->reads[static_cast<size_t>(s.producer)];
      EXPECT_LT(from.hop, s.hop);
      const auto& nb = g.neighbours[from.node];
      EXPECT_NE(std::find(nb.begin(), nb.end(), s.node), nb.end());
    }
    for (size_t n : per_hop) {
      EXPECT_GE(n, 1u);
      EXPECT_LE(n, 4u);
    }
  }
  recall /= static_cast<double>(d.query_count());
  // Random picks would find 10 of 1000 points: recall 0.01.
  EXPECT_GE(recall, 0.9);
  std::cout << "[ recall ] " << recall << " over " << d.query_count() << " queries, "
            << index.batches << " batches\n";
}

TEST(VectorSearch, RerankReadsTheBestCandidatesAgainAfterTheLastHop) {
  const Dataset d = GenerateDataset(TinyShape(), 5);
  const Graph g = BuildGraph(d, GraphParams{8, 24, 1.2f}, 5);
  const ProductQuantizer pq = ProductQuantizer::Train(d, 4, 5);
  const std::vector<uint8_t> codes = pq.EncodeAll(d);
  MemoryIndex index(d, g);
  BeamSearcher searcher(index.h, pq, codes, SearchParams{4, 32, 10, 12});
  auto r = searcher.Search(d.query(0), index.Reader(4));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<const SearchRead*> rerank;
  for (const SearchRead& s : r->reads) {
    if (s.rerank) rerank.push_back(&s);
  }
  ASSERT_EQ(rerank.size(), 12u);
  for (const SearchRead* s : rerank) {
    EXPECT_GE(s->hop, r->hops);
    ASSERT_GE(s->producer, 0);
    EXPECT_EQ(r->reads[static_cast<size_t>(s->producer)].node, s->node);
  }
  EXPECT_EQ(r->nearest.size(), 10u);
}

TEST(VectorOptionsTest, ValidationAndSmallPreset) {
  VectorOptions o;
  EXPECT_TRUE(ValidateVector(o).ok());
  VectorOptions big = o;
  big.dim = 1000;  // 4000 + 4 + 128 bytes: over a block
  EXPECT_FALSE(ValidateVector(big).ok());
  VectorOptions pq = o;
  pq.pq_bytes = 48;  // does not divide 128
  EXPECT_FALSE(ValidateVector(pq).ok());
  VectorOptions list = o;
  list.search_list = 8;  // fewer candidates than results
  EXPECT_FALSE(ValidateVector(list).ok());

  VectorOptions s;
  ApplyVectorSmallPreset(s, [](std::string_view name) { return name == "beam" || name == "dim"; });
  EXPECT_EQ(s.vectors, 2000u);
  EXPECT_EQ(s.queries, 16u);
  EXPECT_EQ(s.dim, 128u);  // given: kept
  EXPECT_TRUE(ValidateVector(s).ok());
}

}  // namespace
}  // namespace iotwin::workload
