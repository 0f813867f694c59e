#include "replay/fill.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace iotwin::replay {

namespace {
uint64_t Next(uint64_t* s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *s = x;
  return x;
}
void FillRandom(uint8_t* p, size_t len, uint64_t* s) {
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t v = Next(s);
    std::memcpy(p + i, &v, 8);
  }
  if (i < len) {
    uint64_t v = Next(s);
    std::memcpy(p + i, &v, len - i);
  }
}
}  // namespace

void FillPattern(void* buf, size_t len, const FillSpec& fill, uint64_t seed) {
  auto* p = static_cast<uint8_t*>(buf);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
  if (s == 0) s = 1;
  switch (fill.kind) {
    case FillKind::kZero:
      std::memset(p, 0, len);
      break;
    case FillKind::kRandom:
      FillRandom(p, len, &s);
      break;
    case FillKind::kCompressible: {
      const size_t block = 4096;
      size_t random_part = static_cast<size_t>(static_cast<double>(block) / fill.ratio);
      for (size_t off = 0; off < len; off += block) {
        size_t n = std::min(block, len - off);
        size_t r = std::min(random_part, n);
        FillRandom(p + off, r, &s);
        std::memset(p + off + r, 0, n - r);
      }
      break;
    }
  }
}

AlignedBuffer::AlignedBuffer(size_t size) : size_(size) {
  if (size == 0) return;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    size_ = 0;
    return;
  }
  data_ = static_cast<uint8_t*>(p);
}

AlignedBuffer AlignedBuffer::Aliased(uint64_t size, size_t physical) {
  constexpr size_t kPage = 4096;
  size = std::min<uint64_t>(size, kMaxIoBytes);
  physical = std::max(kPage, physical / kPage * kPage);
  if (size <= physical) return AlignedBuffer(static_cast<size_t>(size));
  const size_t slots = static_cast<size_t>((size + physical - 1) / physical);
  const size_t total = slots * physical;
  void* va = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (va == MAP_FAILED) return {};
  AlignedBuffer b;
  b.data_ = static_cast<uint8_t*>(va);
  b.size_ = total;
  b.physical_ = physical;
  int fd = memfd_create("iotwin-replay-buffer", MFD_CLOEXEC);
  if (fd < 0) return {};
  bool ok = ftruncate(fd, static_cast<off_t>(physical)) == 0;
  for (size_t k = 0; ok && k < slots; k++) {
    void* p = mmap(b.data_ + k * physical, physical, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                   fd, 0);
    ok = p != MAP_FAILED;
  }
  close(fd);
  if (!ok) return {};
  return b;
}

AlignedBuffer::~AlignedBuffer() {
  if (data_) munmap(data_, size_);
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      physical_(std::exchange(o.physical_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    if (data_) munmap(data_, size_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    physical_ = std::exchange(o.physical_, 0);
  }
  return *this;
}

}  // namespace iotwin::replay
