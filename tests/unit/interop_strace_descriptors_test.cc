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

// The offset recorded for each write, in order.
std::vector<uint64_t> WriteOffsets(std::string_view text, ImportOutcome* out) {
  testing::ImportText(out, ImportFormat::kStrace, text);
  EXPECT_TRUE(out->status.ok()) << out->status.ToString();
  std::vector<uint64_t> offsets;
  for (const iot_syscall& sc : out->sink.Of<iot_syscall>(IOT_REC_SYSCALL)) {
    if (sc.op == IOT_OP_WRITE) offsets.push_back(sc.offset);
  }
  return offsets;
}

// fcntl(F_SETFL, O_APPEND) makes later writes land at the end of the file, which strace does not
// show: their positions are unknown (offset 0, counted), not the old position moving on. Clearing
// O_APPEND leaves the position where the appends put it (still unknown) until lseek sets it.
TEST(StraceImportDescriptors, SetflAppendMakesWritePositionsUnknown) {
  ImportOutcome out;
  auto offsets = WriteOffsets(
      "100 openat(AT_FDCWD, \"/data/log\", O_WRONLY|O_CREAT, 0644) = 3\n"
      "100 lseek(3, 100, SEEK_SET) = 100\n"
      "100 write(3, \"hello\", 5) = 5\n"
      "100 fcntl(3, F_SETFL, O_WRONLY|O_APPEND) = 0\n"
      "100 write(3, \"ab\", 2) = 2\n"
      "100 write(3, \"cd\", 2) = 2\n"
      "100 fcntl(3, F_SETFL, O_WRONLY) = 0\n"
      "100 write(3, \"x\", 1) = 1\n"
      "100 lseek(3, 50, SEEK_SET) = 50\n"
      "100 write(3, \"y\", 1) = 1\n",
      &out);
  EXPECT_EQ(offsets, (std::vector<uint64_t>{100, 0, 0, 0, 50}));
  EXPECT_EQ(Counter(out, "io_at_unknown_position"), 3u);
}

// A file the log shows made empty (O_TRUNC for writing, or O_CREAT|O_EXCL) has the size the
// importer's own writes and ftruncates give it: O_APPEND writes land at that end (wherever lseek
// put the position), their records carry the size after them. What it does not follow (here a
// rename) makes the size, and the appends' positions, unknown again.
TEST(StraceImportDescriptors, AppendToFileMadeEmptyLandsAtItsKnownEnd) {
  ImportOutcome out;
  auto offsets = WriteOffsets(
      "100 openat(AT_FDCWD, \"/data/log\", O_WRONLY|O_CREAT|O_TRUNC, 0644) = 3\n"
      "100 write(3, \"hello\", 5) = 5\n"
      "100 pwrite64(3, \"abc\", 3, 20) = 3\n"
      "100 fcntl(3, F_SETFL, O_WRONLY|O_APPEND) = 0\n"
      "100 lseek(3, 0, SEEK_SET) = 0\n"
      "100 write(3, \"ab\", 2) = 2\n"
      "100 openat(AT_FDCWD, \"/data/new\", O_WRONLY|O_CREAT|O_EXCL|O_APPEND, 0644) = 4\n"
      "100 write(4, \"xyz\", 3) = 3\n"
      "100 write(4, \"xyz\", 3) = 3\n"
      "100 ftruncate(3, 10) = 0\n"
      "100 write(3, \"cd\", 2) = 2\n"
      "100 rename(\"/data/x\", \"/data/y\") = 0\n"
      "100 write(3, \"cd\", 2) = 2\n",
      &out);
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 23, 0, 3, 10, 0}));
  std::vector<uint64_t> sizes;
  for (const iot_syscall& sc : out.sink.Of<iot_syscall>(IOT_REC_SYSCALL)) {
    if (sc.op == IOT_OP_WRITE) sizes.push_back(sc.fsize);
  }
  EXPECT_EQ(sizes, (std::vector<uint64_t>{0, 25, 3, 6, 12, 0}));
  EXPECT_EQ(Counter(out, "io_at_unknown_position"), 1u);
}

// A descriptor opened O_APPEND reads from its position (0 after the open) until a write sends it
// to the end of the file.
TEST(StraceImportDescriptors, AppendDescriptorReadsAtItsPositionUntilAWrite) {
  ImportOutcome out;
  auto offsets = ReadOffsets(
      "100 openat(AT_FDCWD, \"/data/log\", O_RDWR|O_APPEND) = 3\n"
      "100 read(3, \"abcde\", 5) = 5\n"
      "100 read(3, \"abcde\", 5) = 5\n"
      "100 write(3, \"x\", 1) = 1\n"
      "100 read(3, \"\", 5) = 0\n",
      &out);
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 5, 0}));
  EXPECT_EQ(Counter(out, "io_at_unknown_position"), 2u);  // the write and the read after it
}

// A NULL offset pointer of copy_file_range and sendfile is recorded as kNoOffset (UINT64_MAX, as
// the capture records it), not 0: the copy moves the descriptor's position, a later read
// continues there.
TEST(StraceImportDescriptors, CopyWithNullOffsetsMovesPositions) {
  ImportOutcome out;
  auto offsets = ReadOffsets(
      "100 openat(AT_FDCWD, \"/data/in\", O_RDONLY) = 3\n"
      "100 openat(AT_FDCWD, \"/data/out\", O_WRONLY) = 4\n"
      "100 copy_file_range(3, NULL, 4, NULL, 10, 0) = 10\n"
      "100 sendfile(4, 3, NULL, 7) = 7\n"
      "100 sendfile(4, 3, [0 => 4], 2) = 2\n"
      "100 read(3, \"abcde\", 5) = 5\n",
      &out);
  EXPECT_EQ(offsets, (std::vector<uint64_t>{17}));
  std::vector<std::pair<uint64_t, uint64_t>> copy_offsets;
  for (const iot_syscall& sc : out.sink.Of<iot_syscall>(IOT_REC_SYSCALL)) {
    if (sc.op == IOT_OP_COPY_FILE_RANGE) copy_offsets.emplace_back(sc.offset, sc.aux);
    if (sc.op == IOT_OP_SENDFILE) copy_offsets.emplace_back(sc.offset, 0);
  }
  EXPECT_EQ(copy_offsets, (std::vector<std::pair<uint64_t, uint64_t>>{
                              {UINT64_MAX, UINT64_MAX}, {UINT64_MAX, 0}, {0, 0}}));
}

}  // namespace
}  // namespace iotwin::interop
