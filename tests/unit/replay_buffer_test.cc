// Replay buffers: a long call's buffer repeats a bounded set of pages, so memory follows the
// host's choice, not the length a trace claims.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>

#include "asan_check.h"
#include "replay/fill.h"

namespace iotwin::replay {
namespace {

// Proportional set size of this process (kB): shared pages mapped N times count 1/N each.
uint64_t PssKb() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string key;
  uint64_t value = 0;
  while (in >> key) {
    if (key == "Pss:") {
      in >> value;
      return value;
    }
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

TEST(AlignedBufferTest, AliasedBufferUsesOnlyItsShare) {
  constexpr size_t kPhysical = size_t{16} << 20;
  const uint64_t before = PssKb();
  AlignedBuffer b = AlignedBuffer::Aliased(uint64_t{1} << 30, kPhysical);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_GE(b.size(), size_t{1} << 30);
  EXPECT_EQ(b.physical_size(), kPhysical);
  // Every byte of the 1 GiB is writable and readable; the same pages repeat.
  std::memset(b.data(), 0x5a, b.size());
  b.data()[0] = 1;
  EXPECT_EQ(b.data()[kPhysical], 1);
  EXPECT_EQ(b.data()[b.size() - 1], 0x5a);
  const uint64_t grown = PssKb() - before;
#if !defined(IOTWIN_TEST_ASAN)
  EXPECT_LT(grown, 64u * 1024) << "kB of memory for a 1 GiB buffer";
#else
  (void)grown;
#endif
}

TEST(AlignedBufferTest, ShortBuffersAreOrdinaryAndLongOnesAreCut) {
  AlignedBuffer small = AlignedBuffer::Aliased(8192, size_t{1} << 20);
  ASSERT_NE(small.data(), nullptr);
  EXPECT_EQ(small.size(), 8192u);
  EXPECT_EQ(small.physical_size(), 8192u);
  AlignedBuffer huge = AlignedBuffer::Aliased(UINT64_MAX, size_t{1} << 20);  // a claimed length
  ASSERT_NE(huge.data(), nullptr);
  EXPECT_GE(huge.size(), kMaxIoBytes);
  EXPECT_LT(huge.size(), kMaxIoBytes + (size_t{1} << 20));
}

}  // namespace
}  // namespace iotwin::replay
