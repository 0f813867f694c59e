// Synthetic payload: traces hold no data, so written bytes come from a pattern.
#pragma once

#include <cstddef>
#include <cstdint>

#include "replay/options.h"

namespace iotwin::replay {

// Fills `len` bytes: zero; random (xorshift from `seed`); compressible:R (each 4 KiB block is
// 1/R random bytes followed by zeros, so it compresses about R:1).
void FillPattern(void* buf, size_t len, const FillSpec& fill, uint64_t seed);

// An anonymous, page-aligned buffer (suitable for O_DIRECT), unmapped on destruction.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& o) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace iotwin::replay
