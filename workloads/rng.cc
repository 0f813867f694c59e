#include "rng.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace iotwin::workload {

namespace {
uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
uint64_t PatternWord(uint64_t key, uint64_t word_index) { return Mix64(key ^ Mix64(word_index)); }
}  // namespace

Rng::Rng(uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ Mix64(stream + 0x632be59bd9b4e019ULL);
  for (auto& s : s_) {
    x += 0x9e3779b97f4a7c15ULL;
    s = Mix64(x);
  }
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

uint64_t Rng::Below(uint64_t n) {
  unsigned __int128 m = static_cast<unsigned __int128>(Next()) * n;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < n) {
    const uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(Next()) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

ZipfChooser::ZipfChooser(uint64_t n, double theta, uint64_t seed) {
  cdf_.resize(n);
  double sum = 0;
  for (uint64_t k = 0; k < n; k++) {
    sum += 1.0 / std::pow(static_cast<double>(k + 1), theta);
    cdf_[k] = sum;
  }
  for (auto& c : cdf_) c /= sum;
  if (n > 0) cdf_[n - 1] = 1.0;
  // Fisher-Yates with our own generator, so the permutation is portable.
  rank_to_item_.resize(n);
  for (uint64_t i = 0; i < n; i++) rank_to_item_[i] = i;
  Rng rng(seed, 0x5a1f);
  for (uint64_t i = n; i > 1; i--) std::swap(rank_to_item_[i - 1], rank_to_item_[rng.Below(i)]);
}

uint64_t ZipfChooser::Sample(Rng& rng) const {
  const double u = rng.Unit();
  const auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
  const uint64_t rank = std::min<uint64_t>(it - cdf_.begin(), cdf_.size() - 1);
  return rank_to_item_[rank];
}

void FillPattern(uint64_t key, uint64_t offset, uint8_t* buf, size_t len) {
  size_t i = 0;
  // Leading bytes up to an 8-byte boundary of the stream.
  while (i < len && (offset + i) % 8 != 0) {
    const uint64_t o = offset + i;
    buf[i++] = static_cast<uint8_t>(PatternWord(key, o / 8) >> (8 * (o % 8)));
  }
  for (; i + 8 <= len; i += 8) {
    const uint64_t w = PatternWord(key, (offset + i) / 8);
    std::memcpy(buf + i, &w, 8);  // little-endian hosts: byte k of w is byte k of the word
  }
  for (; i < len; i++) {
    const uint64_t o = offset + i;
    buf[i] = static_cast<uint8_t>(PatternWord(key, o / 8) >> (8 * (o % 8)));
  }
}

long long CheckPattern(uint64_t key, uint64_t offset, const uint8_t* buf, size_t len) {
  uint8_t expect[4096];
  for (size_t done = 0; done < len;) {
    const size_t n = std::min(sizeof expect, len - done);
    FillPattern(key, offset + done, expect, n);
    if (std::memcmp(expect, buf + done, n) != 0) {
      for (size_t k = 0; k < n; k++) {
        if (expect[k] != buf[done + k]) return static_cast<long long>(done + k);
      }
    }
    done += n;
  }
  return -1;
}

}  // namespace iotwin::workload
