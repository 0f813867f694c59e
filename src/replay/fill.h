// Synthetic payload: traces hold no data, so written bytes come from a pattern.
#pragma once

#include <cstddef>
#include <cstdint>

#include "replay/options.h"

namespace iotwin::replay {

// Fills `len` bytes: zero; random (xorshift from `seed`); compressible:R (each 4 KiB block is
// 1/R random bytes followed by zeros, so it compresses about R:1).
void FillPattern(void* buf, size_t len, const FillSpec& fill, uint64_t seed);

// The most one read or write moves (MAX_RW_COUNT in include/linux/fs.h: INT_MAX rounded down to a
// page); the kernel cuts longer requests to it.
inline constexpr uint64_t kMaxIoBytes = 0x7ffff000;

// An anonymous, page-aligned buffer (suitable for O_DIRECT), unmapped on destruction.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size);
  // Takes over the mapping of `size` bytes at `data` (unmapped on destruction), whose distinct
  // bytes are `physical` (PayloadPool::View).
  AlignedBuffer(uint8_t* data, size_t size, size_t physical)
      : data_(data), size_(size), physical_(physical) {}
  // A buffer of `size` bytes (at most kMaxIoBytes) whose memory is at most `physical` bytes:
  // past that, the same pages of one memfd are mapped again and again. A replay never needs
  // the payload (traces hold none), so one call can move what the trace says while memory grows
  // with what the host chose, not with what the trace claims. Empty on failure.
  static AlignedBuffer Aliased(uint64_t size, size_t physical);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& o) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Distinct bytes (what a fill pattern needs to cover): size() unless aliased.
  size_t physical_size() const { return physical_ ? physical_ : size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t physical_ = 0;
};

}  // namespace iotwin::replay
