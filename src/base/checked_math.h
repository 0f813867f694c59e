// Arithmetic on numbers read from traces, which are untrusted: sums and products that either
// saturate at the type's maximum (statistics, where a clamped value is still a fair answer) or
// say that they overflowed (placement of real I/O, where a wrapped value must be refused).
#pragma once

#include <cstdint>
#include <optional>

namespace iotwin {

inline constexpr uint64_t kSectorBytes = 512;

// a + b, or nullopt when it does not fit in 64 bits.
inline std::optional<uint64_t> CheckedAdd(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// a * b, or nullopt when it does not fit in 64 bits.
inline std::optional<uint64_t> CheckedMul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

inline uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? INT64_MAX : INT64_MIN;
}

inline int64_t SaturatingSub(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_sub_overflow(a, b, &r)) return r;
  return b < 0 ? INT64_MAX : INT64_MIN;
}

// |v|, with INT64_MIN (whose magnitude has no int64_t) clamped to INT64_MAX.
inline int64_t SaturatingAbs(int64_t v) {
  if (v == INT64_MIN) return INT64_MAX;
  return v < 0 ? -v : v;
}

// b - a of two unsigned instants as a signed duration, clamped to int64_t's range (a plain cast
// of a difference of more than 2^63 is a wrong sign).
inline int64_t SignedDelta(uint64_t a, uint64_t b) {
  if (b >= a) {
    uint64_t d = b - a;
    return d > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(d);
  }
  uint64_t d = a - b;
  return d > static_cast<uint64_t>(INT64_MAX) ? INT64_MIN : -static_cast<int64_t>(d);
}

// v / d rounded up (d > 0), without the overflow of (v + d - 1) / d.
inline uint64_t DivCeil(uint64_t v, uint64_t d) { return v / d + (v % d != 0); }

// Byte offset of a 512-byte sector, saturated.
inline uint64_t SectorToByteSaturated(uint64_t sector) {
  return SaturatingMul(sector, kSectorBytes);
}

// The last unit of a run of `count` units (at least one) starting at `first`, saturated: never
// before `first`, so [first, last] is never a reversed range.
inline uint64_t LastOfRun(uint64_t first, uint64_t count) {
  return SaturatingAdd(first, count > 0 ? count - 1 : 0);
}

}  // namespace iotwin
