// Deterministic random numbers and synthetic data: the same seed gives the same choices and the
// same bytes with any compiler or standard library (no std:: distributions, whose output is
// implementation-defined).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace iotwin::workload {

// SplitMix64 finalizer: a stateless 64-bit mixer (Steele, Lea, Flood 2014).
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// xoshiro256** (Blackman, Vigna), seeded through SplitMix64. `stream` selects an independent
// sequence for the same seed (one per thread or per purpose).
class Rng {
 public:
  explicit Rng(uint64_t seed, uint64_t stream = 0);
  uint64_t Next();
  // Uniform in [0, n), n > 0 (Lemire's multiply-shift with rejection: no modulo bias).
  uint64_t Below(uint64_t n);
  // Uniform in [0, 1) with 53 random bits.
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_[4];
};

// Zipf-like choice over n items: P(rank k) proportional to 1 / (k + 1)^theta. Ranks are mapped to
// items through a seeded permutation so the popular items are not always the first ones.
class ZipfChooser {
 public:
  ZipfChooser(uint64_t n, double theta, uint64_t seed);
  uint64_t Sample(Rng& rng) const;

 private:
  std::vector<double> cdf_;
  std::vector<uint64_t> rank_to_item_;
};

// Synthetic content: byte `offset` of the stream `key` is byte (offset % 8) of
// Mix64(key ^ Mix64(offset / 8)). Any range can be produced or checked independently.
void FillPattern(uint64_t key, uint64_t offset, uint8_t* buf, size_t len);
// Offset within buf of the first byte that differs from the pattern, or -1 if all match.
long long CheckPattern(uint64_t key, uint64_t offset, const uint8_t* buf, size_t len);

}  // namespace iotwin::workload
