#include "vector_index.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "rng.h"

namespace iotwin::workload {

static_assert(std::endian::native == std::endian::little,
              "the index layout is little-endian and written with memcpy");

namespace {

template <typename T>
void Put(std::span<uint8_t> block, size_t at, T v) {
  std::memcpy(block.data() + at, &v, sizeof(T));
}
template <typename T>
T Get(std::span<const uint8_t> block, size_t at) {
  T v;
  std::memcpy(&v, block.data() + at, sizeof(T));
  return v;
}

// Header field offsets (docs/workloads.md, "Index layout").
constexpr size_t kHdrVersion = 8, kHdrBlock = 12, kHdrVectors = 16, kHdrDim = 24, kHdrDegree = 28,
                 kHdrMedoid = 32, kHdrSeed = 40, kHdrFirstNode = 48, kHdrPqBytes = 56,
                 kHdrClusters = 60;

// Approximately standard normal: the sum of four uniforms, centred and scaled (no libm).
float ApproxNormal(Rng& rng) {
  const double s = rng.Unit() + rng.Unit() + rng.Unit() + rng.Unit();
  return static_cast<float>((s - 2.0) * 1.7320508075688772);
}

}  // namespace

void EncodeIndexHeader(const IndexHeader& h, std::span<uint8_t> block) {
  std::fill(block.begin(), block.begin() + kIndexBlock, uint8_t{0});
  std::memcpy(block.data(), kIndexMagic, sizeof(kIndexMagic));
  Put<uint32_t>(block, kHdrVersion, kIndexVersion);
  Put<uint32_t>(block, kHdrBlock, static_cast<uint32_t>(kIndexBlock));
  Put<uint64_t>(block, kHdrVectors, h.vectors);
  Put<uint32_t>(block, kHdrDim, h.dim);
  Put<uint32_t>(block, kHdrDegree, h.max_degree);
  Put<uint64_t>(block, kHdrMedoid, h.medoid);
  Put<uint64_t>(block, kHdrSeed, h.seed);
  Put<uint64_t>(block, kHdrFirstNode, NodeOffset(0));
  Put<uint32_t>(block, kHdrPqBytes, h.pq_bytes);
  Put<uint32_t>(block, kHdrClusters, h.clusters);
}

Result<IndexHeader> DecodeIndexHeader(std::span<const uint8_t> block) {
  if (block.size() < kIndexBlock) return Status::Corrupt("index header: {} bytes", block.size());
  if (std::memcmp(block.data(), kIndexMagic, sizeof(kIndexMagic)) != 0) {
    return Status::Corrupt("index header: bad magic (not an iotwin vector index)");
  }
  const uint32_t version = Get<uint32_t>(block, kHdrVersion);
  if (version != kIndexVersion) return Status::Corrupt("index header: version {}", version);
  const uint32_t bs = Get<uint32_t>(block, kHdrBlock);
  const uint64_t first = Get<uint64_t>(block, kHdrFirstNode);
  if (bs != kIndexBlock || first != NodeOffset(0)) {
    return Status::Corrupt("index header: block size {} / first node at {}", bs, first);
  }
  IndexHeader h;
  h.vectors = Get<uint64_t>(block, kHdrVectors);
  h.dim = Get<uint32_t>(block, kHdrDim);
  h.max_degree = Get<uint32_t>(block, kHdrDegree);
  h.medoid = Get<uint64_t>(block, kHdrMedoid);
  h.seed = Get<uint64_t>(block, kHdrSeed);
  h.pq_bytes = Get<uint32_t>(block, kHdrPqBytes);
  h.clusters = Get<uint32_t>(block, kHdrClusters);
  if (h.vectors == 0 || h.vectors > std::numeric_limits<uint32_t>::max() || h.dim == 0 ||
      h.max_degree == 0 || NodeContentBytes(h.dim, h.max_degree) > kIndexBlock ||
      h.medoid >= h.vectors) {
    return Status::Corrupt("index header: {} vectors of dimension {}, degree {}, medoid {}",
                           h.vectors, h.dim, h.max_degree, h.medoid);
  }
  return h;
}

void EncodeNode(std::span<const float> vec, std::span<const uint32_t> neighbours,
                std::span<uint8_t> block) {
  std::fill(block.begin(), block.begin() + kIndexBlock, uint8_t{0});
  std::memcpy(block.data(), vec.data(), vec.size_bytes());
  Put<uint32_t>(block, vec.size_bytes(), static_cast<uint32_t>(neighbours.size()));
  std::memcpy(block.data() + vec.size_bytes() + 4, neighbours.data(), neighbours.size_bytes());
}

Status DecodeNode(std::span<const uint8_t> block, const IndexHeader& h, std::span<float> vec,
                  std::vector<uint32_t>& neighbours) {
  if (block.size() < kIndexBlock || vec.size() != h.dim) {
    return Status::Internal("DecodeNode: block of {} bytes, vector of {}", block.size(),
                            vec.size());
  }
  const size_t vec_bytes = 4 * size_t{h.dim};
  std::memcpy(vec.data(), block.data(), vec_bytes);
  const uint32_t count = Get<uint32_t>(block, vec_bytes);
  if (count > h.max_degree) {
    return Status::Corrupt("index node: {} neighbours, at most {}", count, h.max_degree);
  }
  neighbours.resize(count);
  std::memcpy(neighbours.data(), block.data() + vec_bytes + 4, 4 * size_t{count});
  for (uint32_t id : neighbours) {
    if (id >= h.vectors) return Status::Corrupt("index node: neighbour {} of {}", id, h.vectors);
  }
  return Status::Ok();
}

Dataset GenerateDataset(const DataShape& s, uint64_t seed) {
  Dataset d;
  d.dim = s.dim;
  const uint32_t clusters = std::max<uint32_t>(1, s.clusters);
  // Each cluster: a centre and a low-rank spread (latent dimensions mapped into D), plus a little
  // isotropic noise; real embeddings likewise have a far lower intrinsic dimension than D.
  const uint32_t latent = std::min<uint32_t>(s.dim, 12);
  Rng shape_rng(seed, 0x76656331ULL);
  std::vector<float> centres(size_t{clusters} * s.dim);
  for (float& c : centres) c = static_cast<float>(shape_rng.Unit() * 2.0 - 1.0);
  std::vector<float> spread(size_t{clusters} * latent * s.dim);
  for (float& p : spread) p = static_cast<float>((shape_rng.Unit() * 2.0 - 1.0) * 0.5);
  auto draw = [&](Rng& rng, std::vector<float>& out, uint64_t count) {
    out.resize(count * s.dim);
    std::vector<float> z(latent);
    for (uint64_t i = 0; i < count; i++) {
      const uint64_t c = rng.Below(clusters);
      for (float& v : z) v = ApproxNormal(rng) * 0.5f;
      float* x = out.data() + i * s.dim;
      const float* centre = centres.data() + c * s.dim;
      const float* p = spread.data() + c * latent * s.dim;
      for (uint32_t j = 0; j < s.dim; j++) x[j] = centre[j] + 0.05f * ApproxNormal(rng);
      for (uint32_t l = 0; l < latent; l++) {
        for (uint32_t j = 0; j < s.dim; j++) x[j] += z[l] * p[size_t{l} * s.dim + j];
      }
    }
  };
  Rng base_rng(seed, 0x76656332ULL), query_rng(seed, 0x76656333ULL);
  draw(base_rng, d.base, s.vectors);
  draw(query_rng, d.queries, s.queries);
  return d;
}

float SquaredL2(const float* a, const float* b, uint32_t dim) {
  // Eight independent sums, so the compiler can use vector registers without -ffast-math.
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  uint32_t j = 0;
  for (; j + 8 <= dim; j += 8) {
    for (int k = 0; k < 8; k++) {
      const float t = a[j + k] - b[j + k];
      acc[k] += t * t;
    }
  }
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; j < dim; j++) s += (a[j] - b[j]) * (a[j] - b[j]);
  return s;
}

std::vector<uint32_t> BruteForceNearest(const Dataset& d, const float* query, uint32_t k) {
  std::vector<std::pair<float, uint32_t>> all(d.vectors());
  for (uint64_t i = 0; i < d.vectors(); i++) {
    all[i] = {SquaredL2(query, d.vec(i), d.dim), static_cast<uint32_t>(i)};
  }
  const size_t n = std::min<size_t>(k, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<ptrdiff_t>(n), all.end());
  std::vector<uint32_t> out;
  for (size_t i = 0; i < n; i++) out.push_back(all[i].second);
  return out;
}

double RecallAt(std::span<const uint32_t> found, std::span<const uint32_t> truth) {
  if (truth.empty()) return 1.0;
  size_t hit = 0;
  for (uint32_t t : truth) hit += std::find(found.begin(), found.end(), t) != found.end();
  return static_cast<double>(hit) / static_cast<double>(truth.size());
}

ProductQuantizer ProductQuantizer::Train(const Dataset& d, uint32_t pq_bytes, uint64_t seed,
                                         uint64_t train_max, int iterations) {
  ProductQuantizer pq;
  pq.dim_ = d.dim;
  pq.m_ = pq_bytes;
  pq.sub_ = pq_bytes == 0 ? 0 : d.dim / pq_bytes;
  pq.centroids_.assign(size_t{pq.m_} * kCentroids * pq.sub_, 0.0f);
  const uint64_t n = d.vectors();
  if (n == 0 || pq.sub_ == 0) return pq;
  std::vector<uint64_t> sample(std::min(n, train_max));
  Rng rng(seed, 0x70717472ULL);
  for (uint64_t& s : sample) s = rng.Below(n);
  const size_t k = std::min<size_t>(kCentroids, sample.size());
  const uint32_t sub = pq.sub_;
  std::vector<uint32_t> assign(sample.size());
  std::vector<double> sums(k * sub);
  std::vector<uint64_t> counts(k);
  for (uint32_t m = 0; m < pq.m_; m++) {
    float* cent = pq.centroids_.data() + size_t{m} * kCentroids * sub;
    auto point = [&](size_t i) { return d.vec(sample[i]) + size_t{m} * sub; };
    for (size_t c = 0; c < k; c++) std::memcpy(cent + c * sub, point(c), sub * sizeof(float));
    for (int it = 0; it < iterations; it++) {
      std::fill(sums.begin(), sums.end(), 0.0);
      std::fill(counts.begin(), counts.end(), 0);
      for (size_t i = 0; i < sample.size(); i++) {
        uint32_t best = 0;
        float best_d = std::numeric_limits<float>::max();
        for (size_t c = 0; c < k; c++) {
          const float dist = SquaredL2(point(i), cent + c * sub, sub);
          if (dist < best_d) best_d = dist, best = static_cast<uint32_t>(c);
        }
        assign[i] = best;
        counts[best]++;
        for (uint32_t j = 0; j < sub; j++) sums[best * sub + j] += point(i)[j];
      }
      for (size_t c = 0; c < k; c++) {
        if (counts[c] == 0) continue;  // an empty cluster keeps its centroid
        for (uint32_t j = 0; j < sub; j++) {
          cent[c * sub + j] =
              static_cast<float>(sums[c * sub + j] / static_cast<double>(counts[c]));
        }
      }
    }
    // Fewer training points than centroids: repeat the trained ones (codes never use the rest).
    for (size_t c = k; c < kCentroids; c++) {
      std::memcpy(cent + c * sub, cent + (c % k) * sub, sub * sizeof(float));
    }
  }
  return pq;
}

std::vector<uint8_t> ProductQuantizer::EncodeAll(const Dataset& d) const {
  std::vector<uint8_t> codes(d.vectors() * m_);
  if (sub_ == 0) return codes;
  for (uint64_t i = 0; i < d.vectors(); i++) {
    for (uint32_t m = 0; m < m_; m++) {
      const float* x = d.vec(i) + size_t{m} * sub_;
      const float* cent = centroids_.data() + size_t{m} * kCentroids * sub_;
      uint32_t best = 0;
      float best_d = std::numeric_limits<float>::max();
      for (uint32_t c = 0; c < kCentroids; c++) {
        const float dist = SquaredL2(x, cent + size_t{c} * sub_, sub_);
        if (dist < best_d) best_d = dist, best = c;
      }
      codes[i * m_ + m] = static_cast<uint8_t>(best);
    }
  }
  return codes;
}

void ProductQuantizer::DistanceTable(const float* query, std::vector<float>& table) const {
  table.resize(size_t{m_} * kCentroids);
  for (uint32_t m = 0; m < m_; m++) {
    const float* cent = centroids_.data() + size_t{m} * kCentroids * sub_;
    for (uint32_t c = 0; c < kCentroids; c++) {
      table[size_t{m} * kCentroids + c] =
          SquaredL2(query + size_t{m} * sub_, cent + size_t{c} * sub_, sub_);
    }
  }
}

float ProductQuantizer::Distance(const std::vector<float>& table, const uint8_t* code, uint32_t m) {
  float s = 0;
  for (uint32_t i = 0; i < m; i++) s += table[size_t{i} * kCentroids + code[i]];
  return s;
}

}  // namespace iotwin::workload
