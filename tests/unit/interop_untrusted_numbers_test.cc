// Importers and exporters read untrusted numbers: results past the descriptor range, positions
// and offsets near 2^64, timestamps at the end of the clock, engines no capture writes. None of
// them may wrap into a plausible value or be named as something they are not.
#include <fcntl.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "format/op_info.h"
#include "format/records.h"
#include "interop/exporters.h"
#include "interop_test_util.h"
#include "trace_builder.h"

namespace iotwin::interop {
namespace {

using testing::ImportOutcome;
using testing::ReadFile;
using testing::ScratchDir;

constexpr uint32_t kPid = 10;

uint64_t Counter(const ImportOutcome& out, const std::string& name) {
  auto it = out.stats.counters.find(name);
  return it == out.stats.counters.end() ? 0 : it->second;
}

std::vector<uint64_t> ReadOffsets(const ImportOutcome& out) {
  std::vector<uint64_t> offsets;
  for (const iot_syscall& sc : out.sink.Of<iot_syscall>(IOT_REC_SYSCALL)) {
    if (sc.op == IOT_OP_READ) offsets.push_back(sc.offset);
  }
  return offsets;
}

// A file position never passes 2^63 - 1 (loff_t): reads that would carry it past are an
// inconsistent log, and the position is unknown from there rather than wrapped to a small value.
TEST(StraceImportUntrusted, PositionPastTheLargestOffsetBecomesUnknown) {
  ImportOutcome out;
  testing::ImportText(&out, ImportFormat::kStrace,
                      "100 openat(AT_FDCWD, \"/data/a\", O_RDONLY) = 3\n"
                      "100 lseek(3, 9223372036854775807, SEEK_SET) = 9223372036854775807\n"
                      "100 read(3, \"\"..., 9223372036854775807) = 9223372036854775807\n"
                      "100 read(3, \"\"..., 9223372036854775807) = 9223372036854775807\n"
                      "100 read(3, \"abcde\", 5) = 5\n");
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(ReadOffsets(out), (std::vector<uint64_t>{INT64_MAX, 0, 0}));
  EXPECT_EQ(Counter(out, "io_at_unknown_position"), 2u);
}

// A result past the descriptor range is no descriptor: it must not land on a number that is open
// (4294967299 is 3 modulo 2^32) and take over that descriptor's position.
TEST(StraceImportUntrusted, ResultPastTheDescriptorRangeBindsNothing) {
  ImportOutcome out;
  testing::ImportText(&out, ImportFormat::kStrace,
                      "100 openat(AT_FDCWD, \"/data/a\", O_RDONLY) = 3\n"
                      "100 lseek(3, 100, SEEK_SET) = 100\n"
                      "100 openat(AT_FDCWD, \"/data/b\", O_RDONLY) = 4294967299\n"
                      "100 read(3, \"abcde\", 5) = 5\n"
                      "100 dup(3) = 4294967300\n"
                      "100 openat(AT_FDCWD, \"/data/c\", O_RDONLY) = 4\n"
                      "100 lseek(4, 50, SEEK_SET) = 50\n"
                      "100 dup(3) = 4294967300\n"
                      "100 read(4, \"abcde\", 5) = 5\n");
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(ReadOffsets(out), (std::vector<uint64_t>{100, 50}));
}

// strace prints descriptors as int: an argument past that range names no descriptor, and is not
// cut onto one (4294967299 is 3 modulo 2^32) with a snapshot claiming 3 was open before.
TEST(StraceImportUntrusted, DescriptorArgumentPastTheRangeNamesNone) {
  ImportOutcome out;
  testing::ImportText(&out, ImportFormat::kStrace,
                      "100 read(4294967299</data/x>, \"abc\", 3) = 3\n");
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_TRUE(out.sink.Of<iot_fd_snapshot>(IOT_REC_FD_SNAPSHOT).empty());
  const auto calls = out.sink.Of<iot_syscall>(IOT_REC_SYSCALL);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].fd, -1);
  EXPECT_EQ(Counter(out, "descriptor_out_of_range"), 1u);
}

// close releases the descriptor even when it reports EINTR (the kernel frees the number first),
// as every other reader of traces has it: the position of the old file is not used afterwards.
TEST(StraceImportUntrusted, FailedCloseReleasesTheNumber) {
  ImportOutcome out;
  testing::ImportText(&out, ImportFormat::kStrace,
                      "100 openat(AT_FDCWD, \"/data/a\", O_RDONLY) = 3\n"
                      "100 lseek(3, 100, SEEK_SET) = 100\n"
                      "100 close(3) = -1 EINTR (Interrupted system call)\n"
                      "100 read(3, \"abcde\", 5) = 5\n"
                      "100 openat(AT_FDCWD, \"/data/b\", O_RDONLY) = 4\n"
                      "100 lseek(4, 50, SEEK_SET) = 50\n"
                      "100 close(4) = -1 EBADF (Bad file descriptor)\n"
                      "100 read(4, \"abcde\", 5) = 5\n");
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(ReadOffsets(out), (std::vector<uint64_t>{0, 50}));
  EXPECT_EQ(Counter(out, "io_at_unknown_position"), 1u);
}

// mmap2 counts its offset in 4096-byte units: a count whose bytes pass 2^64 saturates instead of
// wrapping to a small offset (2^52 + 1 units would wrap to 4096).
TEST(StraceImportUntrusted, Mmap2OffsetPastTwoToTheSixtyFourSaturates) {
  ImportOutcome out;
  testing::ImportText(&out, ImportFormat::kStrace,
                      "100 openat(AT_FDCWD, \"/data/a\", O_RDONLY) = 3\n"
                      "100 mmap2(NULL, 4096, PROT_READ, MAP_SHARED, 3, 0x10000000000001) = "
                      "0x7f0000000000\n");
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  std::vector<uint64_t> offsets;
  for (const iot_syscall& sc : out.sink.Of<iot_syscall>(IOT_REC_SYSCALL)) {
    if (sc.op == IOT_OP_MMAP) offsets.push_back(sc.offset);
  }
  EXPECT_EQ(offsets, (std::vector<uint64_t>{UINT64_MAX}));
  EXPECT_EQ(Counter(out, "offset_out_of_range"), 1u);
}

// strace -f prints a child's first calls before its parent's clone() returns: the descriptors the
// child opened then are kept when the clone's result arrives, and the parent's are inherited.
TEST(StraceImportUntrusted, ChildCallsBeforeTheCloneResultKeepTheirDescriptors) {
  ImportOutcome out;
  testing::ImportText(&out, ImportFormat::kStrace,
                      "100 openat(AT_FDCWD, \"/data/p\", O_RDONLY) = 5\n"
                      "100 lseek(5, 7, SEEK_SET) = 7\n"
                      "100 clone(child_stack=NULL, flags=SIGCHLD <unfinished ...>\n"
                      "201 openat(AT_FDCWD, \"/data/a\", O_RDONLY) = 3\n"
                      "201 lseek(3, 100, SEEK_SET) = 100\n"
                      "100 <... clone resumed>) = 201\n"
                      "201 read(3, \"abcde\", 5) = 5\n"
                      "201 read(5, \"abcde\", 5) = 5\n");
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(ReadOffsets(out), (std::vector<uint64_t>{100, 7}));
  EXPECT_EQ(Counter(out, "io_at_unknown_position"), 0u);
}

// close_range's bounds as strace prints them: a -y decorated first descriptor ("3</data/a>") and
// an unsigned maximum printed as int (-1). Descriptors below the range stay open.
TEST(StraceImportUntrusted, CloseRangeBoundsAsPrinted) {
  ImportOutcome out;
  testing::ImportText(&out, ImportFormat::kStrace,
                      "100 openat(AT_FDCWD, \"/data/z\", O_RDONLY) = 0\n"
                      "100 lseek(0, 9, SEEK_SET) = 9\n"
                      "100 openat(AT_FDCWD, \"/data/a\", O_RDONLY) = 3\n"
                      "100 close_range(3</data/a>, -1, 0) = 0\n"
                      "100 read(0, \"abcde\", 5) = 5\n"
                      "100 read(3, \"abcde\", 5) = 5\n");
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(ReadOffsets(out), (std::vector<uint64_t>{9, 0}));
  EXPECT_EQ(Counter(out, "io_at_unknown_position"), 1u);
  for (const iot_syscall& sc : out.sink.Of<iot_syscall>(IOT_REC_SYSCALL)) {
    if (sc.op != IOT_OP_CLOSE_RANGE) continue;
    EXPECT_EQ(sc.fd, 3);
    EXPECT_EQ(static_cast<uint32_t>(sc.fd2), UINT32_MAX);
  }
}

// A process that exited leaves nothing behind: a later process with its number (pid reuse, or a
// log that goes on after the exit) gets its cwd recorded again, since readers dropped the old one.
TEST(StraceImportUntrusted, ExitedProcessLeavesNoCwd) {
  ImportOutcome out;
  testing::ImportText(&out, ImportFormat::kStrace,
                      "500 openat(AT_FDCWD</x>, \"a\", O_RDONLY) = 3\n"
                      "500 +++ exited with 0 +++\n"
                      "500 openat(AT_FDCWD</x>, \"b\", O_RDONLY) = 3\n");
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  size_t cwds = 0;
  for (const iot_proc& p : out.sink.Of<iot_proc>(IOT_REC_PROC)) cwds += p.kind == IOT_PROC_CWD;
  EXPECT_EQ(cwds, 2u);
}

// A thread number the kernel reuses after its thread exited names a live thread again: the
// process is not dead while it runs.
TEST(StraceImportUntrusted, ReusedThreadNumberIsAlive) {
  ImportOutcome out;
  testing::ImportText(&out, ImportFormat::kStrace,
                      "100 clone(child_stack=NULL, flags=CLONE_VM|CLONE_THREAD|CLONE_SIGHAND) = 101\n"
                      "101 read(0, \"\", 1) = 0\n"
                      "101 +++ exited with 0 +++\n"
                      "100 clone(child_stack=NULL, flags=CLONE_VM|CLONE_THREAD|CLONE_SIGHAND) = 101\n"
                      "101 read(0, \"\", 1) = 0\n"
                      "100 +++ exited with 0 +++\n"
                      "101 +++ exited with 0 +++\n");
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  std::vector<std::pair<uint32_t, bool>> exits;  // (tid, group dead)
  for (const iot_proc& p : out.sink.Of<iot_proc>(IOT_REC_PROC)) {
    if (p.kind == IOT_PROC_EXIT) exits.emplace_back(p.tid, (p.flags & IOT_PROCF_GROUP_DEAD) != 0);
  }
  EXPECT_EQ(exits, (std::vector<std::pair<uint32_t, bool>>{{101, false}, {100, false}, {101, true}}));
}

struct FioRun {
  FioExportResult result;
};

FioRun RunFio(const test::TraceBuilder& b, bool faults) {
  ScratchDir dir;
  FioRun run;
  EXPECT_TRUE(b.WriteFile(dir / "t.iotwin").ok());
  FioExportOptions o;
  o.dir = dir / "fio";
  o.faults = faults;
  auto r = ExportFio(dir / "t.iotwin", o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (r.ok()) run.result = *r;
  return run;
}

// A major fault's page index times the page size past 2^64 is skipped as past the largest
// offset, not wrapped to a read near the start of the file.
TEST(FioExportUntrusted, FaultPastTheLargestOffsetIsSkipped) {
  test::TraceBuilder b;
  iot_syscall& open = b.Openat(kPid, "/data/a", O_RDONLY, 3);
  open.dev = 8;
  const uint64_t ino = open.ino;
  b.Read(kPid, 3, 4096, 4096);
  iot_page_fault& f = b.Fault(kPid, 0x7f0000000000, false, (uint64_t{1} << 52) + 1, ino);
  f.dev = 8;
  f.flags |= IOT_PFF_MAJOR;
  f.nr_pages = 1;
  FioRun run = RunFio(b, true);
  EXPECT_EQ(run.result.reads, 1u);
  EXPECT_EQ(run.result.skipped["request ending past the largest file offset (2^63 - 1)"], 1u);
}

nlohmann::json RunChrome(const test::TraceBuilder& b, ChromeExportResult* res) {
  ScratchDir dir;
  EXPECT_TRUE(b.WriteFile(dir / "t.iotwin").ok());
  auto r = ExportChrome(dir / "t.iotwin", dir / "t.json");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (r.ok()) *res = *r;
  return nlohmann::json::parse(ReadFile(dir / "t.json"));
}

// A call whose end passes the end of the clock ends there: the next call of the thread, which
// starts inside it, is clipped instead of overlapping it.
TEST(ChromeExportUntrusted, SliceEndingPastTheClockEndsThere) {
  test::TraceBuilder b;
  b.SetTime(UINT64_MAX - 1000);
  b.dur = 5000;
  b.Syscall(kPid, IOT_OP_SYNC, 0);
  b.SetTime(UINT64_MAX - 500);
  b.dur = 10;
  b.Syscall(kPid, IOT_OP_SYNC, 0);
  ChromeExportResult res;
  RunChrome(b, &res);
  EXPECT_EQ(res.slices, 2u);
  EXPECT_EQ(res.clipped, 1u);
}

std::vector<std::string> ChromeAsyncEngines(const nlohmann::json& doc) {
  std::vector<std::string> engines;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("ph", "") == "b") engines.push_back(e["args"].value("engine", ""));
  }
  return engines;
}

// An engine no capture writes is named as unknown, not as libaio.
TEST(ChromeExportUntrusted, UnknownEngineIsNamedUnknown) {
  test::TraceBuilder b;
  b.Async(kPid, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, 22, 1, 1, 3, 0, 4096);
  b.Async(kPid, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_SUBMIT, 0, 2, 2, 3, 0, 4096);
  b.Async(kPid, 9, IOT_AIO_SUBMIT, 0, 3, 3, 3, 0, 4096);
  ChromeExportResult res;
  EXPECT_EQ(ChromeAsyncEngines(RunChrome(b, &res)),
            (std::vector<std::string>{"io_uring", "libaio", "unknown"}));
}

TEST(AsyncEngineName, NamesTheTwoEnginesAndNothingElse) {
  EXPECT_EQ(AsyncEngineName(IOT_AIO_ENGINE_URING), "io_uring");
  EXPECT_EQ(AsyncEngineName(IOT_AIO_ENGINE_LIBAIO), "libaio");
  EXPECT_EQ(AsyncEngineName(0), "unknown");
  EXPECT_EQ(AsyncEngineName(255), "unknown");
}

}  // namespace
}  // namespace iotwin::interop
