// The strace importer's descriptor tables (model::TraceState): which descriptors exec,
// close_range and fcntl leave open decides whether a later call's file position is known.
#include <gtest/gtest.h>

#include "format/records.h"
#include "interop_test_util.h"

namespace iotwin::interop {
namespace {

using testing::ImportOutcome;

// The offset recorded for each read, in order.
std::vector<uint64_t> ReadOffsets(std::string_view text, ImportOutcome* out) {
  testing::ImportText(out, ImportFormat::kStrace, text);
  EXPECT_TRUE(out->status.ok()) << out->status.ToString();
  std::vector<uint64_t> offsets;
  for (const iot_syscall& sc : out->sink.Of<iot_syscall>(IOT_REC_SYSCALL)) {
    if (sc.op == IOT_OP_READ) offsets.push_back(sc.offset);
  }
  return offsets;
}

uint64_t Counter(const ImportOutcome& out, const std::string& name) {
  auto it = out.stats.counters.find(name);
  return it == out.stats.counters.end() ? 0 : it->second;
}

// A dup of an O_CLOEXEC descriptor does not inherit close-on-exec: it survives exec, and with
// it the position its lseek set.
TEST(StraceImportDescriptors, ExecKeepsDupOfCloexecDescriptor) {
  ImportOutcome out;
  auto offsets = ReadOffsets(
      "100 openat(AT_FDCWD, \"/data/a\", O_RDONLY|O_CLOEXEC) = 3\n"
      "100 dup(3) = 4\n"
      "100 execve(\"/bin/x\", [\"x\"], 0x7ffd /* 0 vars */) = 0\n"
      "100 lseek(4, 10, SEEK_SET) = 10\n"
      "100 read(4, \"abcde\", 5) = 5\n",
      &out);
  EXPECT_EQ(offsets, (std::vector<uint64_t>{10}));
  EXPECT_EQ(Counter(out, "io_at_unknown_position"), 0u);
}

// F_SETFD FD_CLOEXEC on one descriptor: exec closes it, not its dup.
TEST(StraceImportDescriptors, FcntlSetfdIsPerDescriptor) {
  ImportOutcome out;
  auto offsets = ReadOffsets(
      "100 openat(AT_FDCWD, \"/data/a\", O_RDONLY) = 3\n"
      "100 dup(3) = 4\n"
      "100 fcntl(3, F_SETFD, FD_CLOEXEC) = 0\n"
      "100 execve(\"/bin/x\", [\"x\"], 0x7ffd /* 0 vars */) = 0\n"
      "100 read(4, \"abcde\", 5) = 5\n"
      "100 read(3, \"abcde\", 5) = 5\n",
      &out);
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 0}));
  EXPECT_EQ(Counter(out, "io_at_unknown_position"), 1u);  // fd 3 went with exec
}

// close_range with CLOSE_RANGE_CLOEXEC closes nothing until exec.
TEST(StraceImportDescriptors, CloseRangeCloexecClosesAtExec) {
  ImportOutcome out;
  auto offsets = ReadOffsets(
      "100 openat(AT_FDCWD, \"/data/a\", O_RDONLY) = 3\n"
      "100 read(3, \"abcde\", 5) = 5\n"
      "100 close_range(3, 4294967295, CLOSE_RANGE_CLOEXEC) = 0\n"
      "100 read(3, \"abcde\", 5) = 5\n"
      "100 execve(\"/bin/x\", [\"x\"], 0x7ffd /* 0 vars */) = 0\n"
      "100 read(3, \"abcde\", 5) = 5\n",
      &out);
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 5, 0}));
  EXPECT_EQ(Counter(out, "io_at_unknown_position"), 1u);
}

}  // namespace
}  // namespace iotwin::interop
