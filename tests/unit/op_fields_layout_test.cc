// Each op has one record layout (docs/trace-format.md); the accessors read it whatever the
// values. A guess between two layouts by value misread legitimate records: an mremap of a low
// mapping to 4 GiB or more looked like the other layout and swapped address and length.
#include <gtest/gtest.h>

#include "model/op_fields.h"

namespace iotwin::model {
namespace {

iot_syscall Record(uint16_t op) {
  iot_syscall sc{};
  sc.op = op;
  sc.fd = -1;
  sc.fd2 = -1;
  return sc;
}

TEST(OpFieldsLayout, MremapToFourGibFromALowAddressKeepsItsFields) {
  iot_syscall sc = Record(IOT_OP_MREMAP);
  sc.offset = 0x10000;         // old address (mmap_min_addr is 64 KiB)
  sc.length = 4096;            // old length
  sc.aux = uint64_t{5} << 30;  // new length: 5 GiB
  EXPECT_EQ(MemAddr(sc), 0x10000u);
  EXPECT_EQ(MemLength(sc), 4096u);
  EXPECT_EQ(MremapNewLength(sc), uint64_t{5} << 30);
}

TEST(OpFieldsLayout, MemoryOpsReadAddressFromOffsetAndAdviceFromAux) {
  iot_syscall sc = Record(IOT_OP_MADVISE);
  sc.offset = 0x7f0000000000;
  sc.length = 8192;
  sc.aux = 2;   // MADV_SEQUENTIAL
  sc.mode = 9;  // not the advice
  EXPECT_EQ(MemAddr(sc), 0x7f0000000000u);
  EXPECT_EQ(MemLength(sc), 8192u);
  EXPECT_EQ(MadviseAdvice(sc), 2);
  sc.op = IOT_OP_MUNMAP;
  sc.offset = 0;  // munmap(NULL, ...): the address is 0, not whatever aux holds
  sc.aux = 0x7f0000001000;
  EXPECT_EQ(MemAddr(sc), 0u);
}

TEST(OpFieldsLayout, FallocateTruncateAndCloseRangeReadTheirOwnFields) {
  iot_syscall fa = Record(IOT_OP_FALLOCATE);
  fa.mode = 0;  // plain allocation
  fa.aux = 3;   // not the mode
  EXPECT_EQ(FallocateMode(fa), 0u);
  iot_syscall tr = Record(IOT_OP_FTRUNCATE);
  tr.length = 0;  // truncate to empty
  tr.offset = 4096;
  EXPECT_EQ(TruncateLength(tr), 0u);
  iot_syscall cr = Record(IOT_OP_CLOSE_RANGE);
  cr.fd = 3;
  cr.fd2 = 7;
  cr.aux = 100;
  EXPECT_EQ(CloseRangeFirst(cr), 3u);
  EXPECT_EQ(CloseRangeLast(cr), 7u);
  cr.fd2 = -1;  // ~0U
  EXPECT_EQ(CloseRangeLast(cr), ~0u);
}

TEST(OpFieldsLayout, DirfdIsTheFieldTheOpTableNames) {
  iot_syscall sc = Record(IOT_OP_OPENAT);
  sc.fd = -1;  // a bad dirfd stays a bad dirfd
  sc.fd2 = 5;
  EXPECT_EQ(PathDirFd(sc), -1);
  sc = Record(IOT_OP_SYMLINKAT);
  sc.fd2 = 6;
  EXPECT_EQ(PathDirFd(sc), kAtFdcwd);  // the target is never resolved
  EXPECT_EQ(Path2DirFd(sc), 6);
  sc = Record(IOT_OP_RENAMEAT2);
  sc.fd = 4;
  sc.fd2 = 8;
  EXPECT_EQ(PathDirFd(sc), 4);
  EXPECT_EQ(Path2DirFd(sc), 8);
  sc = Record(IOT_OP_STAT);
  sc.fd = -100;
  EXPECT_EQ(PathDirFd(sc), kAtFdcwd);
}

}  // namespace
}  // namespace iotwin::model
