// strace importer: golden tests on hand-written logs (tests/data/interop/strace_*.log, ff.*).
#include <fcntl.h>
#include <xxhash.h>

#include <gtest/gtest.h>

#include "format/records.h"
#include "interop/importer.h"
#include "interop/strace_text.h"
#include "interop/symbols.h"
#include "interop_test_util.h"

namespace iotwin::interop {
namespace {

using testing::DataPath;
using testing::ImportOutcome;

uint64_t PathHash(std::string_view p) { return XXH3_64bits(p.data(), p.size()); }

constexpr uint64_t kT0 = 1700000000ull * 1000000000ull;

TEST(StraceText, ScannerHandlesQuotesDecorationsAndNesting) {
  std::string_view line =
      R"(openat(AT_FDCWD</a,b>, "x\"),y", O_RDONLY) = 3</p (q)> <0.1>)";
  size_t close = strace::FindClose(line, line.find('('));
  ASSERT_NE(close, std::string_view::npos);
  EXPECT_EQ(line.substr(close, 5), ") = 3");
  auto args = strace::SplitTopLevel(line.substr(7, close - 7));
  ASSERT_EQ(args.size(), 3u);
  EXPECT_EQ(args[0], "AT_FDCWD</a,b>");
  EXPECT_EQ(*strace::Unquote(args[1]), "x\"),y");
  EXPECT_EQ(args[2], "O_RDONLY");
  // A socket decoration holds "->" inside brackets.
  auto parts = strace::SplitTopLevel("5<TCP:[1.2.3.4:5->6.7.8.9:10]>, 3");
  ASSERT_EQ(parts.size(), 2u);
  auto fd = strace::ParseFd(parts[0]);
  EXPECT_EQ(*fd.number, 5);
  EXPECT_EQ(fd.target, "TCP:[1.2.3.4:5->6.7.8.9:10]");
  EXPECT_EQ(fd.ftype, 12);
}

TEST(StraceText, DecorationsAndEscapes) {
  auto dev = strace::ParseFd("3</dev/nvme0n1<block 259:0>>");
  EXPECT_EQ(*dev.number, 3);
  EXPECT_EQ(dev.target, "/dev/nvme0n1");
  EXPECT_EQ(dev.ftype, 6);
  auto esc = strace::ParseFd(R"(4</tmp/a\74b\76 c (deleted)>)");
  EXPECT_EQ(esc.target, "/tmp/a<b> c");
  EXPECT_TRUE(esc.deleted);
  auto cwd = strace::ParseFd("AT_FDCWD</home/u>");
  EXPECT_EQ(*cwd.number, -100);
  EXPECT_EQ(cwd.target, "/home/u");
  bool truncated = false;
  EXPECT_EQ(*strace::Unquote(R"("\x41\102\n\t\\"...)", &truncated), "AB\n\t\\");
  EXPECT_TRUE(truncated);
  EXPECT_FALSE(strace::Unquote("NULL").has_value());
  EXPECT_EQ(strace::FieldValue("{flags=O_RDONLY|O_CLOEXEC, mode=0, resolve=RESOLVE_NO_SYMLINKS}",
                               "resolve"),
            "RESOLVE_NO_SYMLINKS");
}

TEST(Symbols, FlagsAndErrnos) {
  EXPECT_EQ(*FlagsValue("O_WRONLY|O_CREAT|O_TRUNC|O_APPEND"),
            uint64_t{O_WRONLY | O_CREAT | O_TRUNC | O_APPEND});
  EXPECT_EQ(*FlagsValue("O_RDWR|0x100000"), uint64_t{O_RDWR | 0x100000});
  EXPECT_EQ(*FlagsValue("0640"), 0640u);
  EXPECT_EQ(*FlagsValue("O_RDONLY"), 0u);
  int unknown = 0;
  EXPECT_EQ(*FlagsValue("O_RDWR|O_BOGUS", &unknown), uint64_t{O_RDWR});
  EXPECT_EQ(unknown, 1);
  EXPECT_FALSE(FlagsValue("O_BOGUS").has_value());
  EXPECT_EQ(*ErrnoValue("ENOENT"), 2);
  EXPECT_EQ(*ErrnoValue("ERESTARTSYS"), 512);
  EXPECT_EQ(*SignalValue("SIGKILL"), 9);
}

const iot_syscall* FindCall(const std::vector<iot_syscall>& calls, uint16_t op, size_t nth = 0) {
  for (const auto& c : calls) {
    if (c.op == op && nth-- == 0) return &c;
  }
  return nullptr;
}

TEST(StraceImport, ThreadsUnfinishedResumedDecorationsErrors) {
  ImportOutcome out;
  testing::ImportInto(&out, ImportFormat::kStrace, {DataPath("strace_threads.log")});
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  const MemorySink& s = out.sink;
  auto calls = s.Of<iot_syscall>(IOT_REC_SYSCALL);
  auto procs = s.Of<iot_proc>(IOT_REC_PROC);

  // openat, read, pread64, read, openat (failed), openat, write, write, lseek, readv, fsync, close
  ASSERT_EQ(calls.size(), 12u);
  const iot_syscall* open = FindCall(calls, IOT_OP_OPENAT, 0);
  ASSERT_NE(open, nullptr);
  EXPECT_EQ(open->ts, kT0 + 400000);
  EXPECT_EQ(open->dur, 10000u);
  EXPECT_EQ(open->tgid, 100u);
  EXPECT_EQ(open->tid, 100u);
  EXPECT_EQ(open->fd, AT_FDCWD);
  EXPECT_EQ(open->flags, uint32_t{O_RDONLY | O_CLOEXEC});
  EXPECT_EQ(open->ret, 3);
  EXPECT_EQ(s.String(open->path_id), "data/shard,0.bin");
  EXPECT_EQ(open->ino, PathHash("/work/data/shard,0.bin"));

  // The thread's read started before clone3 returned and resumed after: stitched, tgid of the
  // process (the clone was a pending CLONE_THREAD), start from the unfinished line, -T duration.
  const iot_syscall* r1 = FindCall(calls, IOT_OP_READ, 0);
  ASSERT_NE(r1, nullptr);
  EXPECT_EQ(r1->tid, 101u);
  EXPECT_EQ(r1->tgid, 100u);
  EXPECT_EQ(r1->ts, kT0 + 550000);
  EXPECT_EQ(r1->dur, 150000u);
  EXPECT_EQ(r1->ret, 4096);
  EXPECT_EQ(r1->length, 4096u);
  EXPECT_EQ(r1->offset, 0u);
  EXPECT_EQ(r1->ino, open->ino);

  const iot_syscall* pr = FindCall(calls, IOT_OP_PREAD64);
  ASSERT_NE(pr, nullptr);
  EXPECT_EQ(pr->offset, 1048576u);
  EXPECT_EQ(pr->length, 131072u);

  // File position: 4096 after the first read; the pread does not move it.
  const iot_syscall* r2 = FindCall(calls, IOT_OP_READ, 1);
  ASSERT_NE(r2, nullptr);
  EXPECT_EQ(r2->offset, 4096u);
  EXPECT_EQ(r2->ret, 1000);

  const iot_syscall* missing = FindCall(calls, IOT_OP_OPENAT, 1);
  ASSERT_NE(missing, nullptr);
  EXPECT_EQ(missing->ret, -ENOENT);
  EXPECT_EQ(s.String(missing->path_id), "/work/missing");
  EXPECT_TRUE(missing->sflags & IOT_SCF_NO_FILE);

  const iot_syscall* out_open = FindCall(calls, IOT_OP_OPENAT, 2);
  ASSERT_NE(out_open, nullptr);
  EXPECT_EQ(s.String(out_open->path_id), "/work/out<x>.log");  // octal escapes decoded
  EXPECT_EQ(out_open->flags, uint32_t{O_WRONLY | O_CREAT | O_TRUNC | O_APPEND});
  EXPECT_EQ(out_open->mode, 0640u);
  EXPECT_EQ(out_open->ret, 4);

  // fd 1 was open before the trace: an FD_SNAPSHOT names it (-yy char device decoration).
  auto snaps = s.Of<iot_fd_snapshot>(IOT_REC_FD_SNAPSHOT);
  ASSERT_EQ(snaps.size(), 1u);
  EXPECT_EQ(snaps[0].fd, 1);
  EXPECT_EQ(snaps[0].tgid, 100u);
  EXPECT_EQ(s.String(snaps[0].path_id), "/dev/pts/0");
  EXPECT_EQ(snaps[0].ftype, 2);

  const iot_syscall* seek = FindCall(calls, IOT_OP_LSEEK);
  ASSERT_NE(seek, nullptr);
  EXPECT_EQ(seek->offset, 8192u);
  EXPECT_EQ(seek->aux, uint64_t{SEEK_SET});
  const iot_syscall* rv = FindCall(calls, IOT_OP_READV);
  ASSERT_NE(rv, nullptr);
  EXPECT_EQ(rv->offset, 8192u);  // from the lseek
  EXPECT_EQ(rv->length, 12288u);
  EXPECT_EQ(rv->aux, 2u);
  auto iov = s.Of<iot_iovec>(IOT_REC_IOVEC);
  ASSERT_EQ(iov.size(), 1u);
  EXPECT_EQ(iov[0].count, 2);
  EXPECT_EQ(iov[0].captured, 2);
  EXPECT_EQ(iov[0].ts, rv->ts);

  const iot_syscall* fs = FindCall(calls, IOT_OP_FSYNC);
  ASSERT_NE(fs, nullptr);
  EXPECT_EQ(fs->ts, kT0 + 1500000);
  EXPECT_EQ(fs->dur, 1000000u);
  EXPECT_EQ(fs->fd, 4);

  // Processes: exec, cwd (from AT_FDCWD</work>), thread, exit killed, exit group dead.
  ASSERT_EQ(procs.size(), 5u);
  EXPECT_EQ(procs[0].kind, IOT_PROC_EXEC);
  EXPECT_EQ(s.String(procs[0].path_id), "/usr/bin/trainer");
  EXPECT_STREQ(procs[0].comm, "trainer");
  EXPECT_EQ(procs[1].kind, IOT_PROC_CWD);
  EXPECT_EQ(s.String(procs[1].path_id), "/work");
  EXPECT_EQ(procs[2].kind, IOT_PROC_THREAD);
  EXPECT_EQ(procs[2].child_tid, 101u);
  EXPECT_EQ(procs[2].child_tgid, 100u);
  EXPECT_TRUE(procs[2].clone_flags & CLONE_THREAD);
  EXPECT_EQ(procs[3].kind, IOT_PROC_EXIT);
  EXPECT_EQ(procs[3].tid, 101u);
  EXPECT_EQ(procs[3].exit_code, 9);
  EXPECT_EQ(procs[3].flags, IOT_PROCF_KILLED);
  EXPECT_EQ(procs[4].kind, IOT_PROC_EXIT);
  EXPECT_EQ(procs[4].tid, 100u);
  EXPECT_EQ(procs[4].exit_code, 0);
  EXPECT_EQ(procs[4].flags, IOT_PROCF_GROUP_DEAD);

  // Nothing dropped silently: the bad line is counted with its position, the rest classified.
  EXPECT_EQ(out.stats.unknown_lines, 1u);
  ASSERT_EQ(out.stats.unknown_examples.size(), 1u);
  EXPECT_EQ(out.stats.unknown_examples[0].line, 20u);
  EXPECT_EQ(out.stats.skipped.at("recvfrom"), 1u);
  EXPECT_EQ(out.stats.skipped.at("futex"), 1u);
  EXPECT_EQ(out.stats.skipped.at("exit_group"), 1u);
  EXPECT_EQ(out.stats.counters.at("signals"), 1u);
  EXPECT_EQ(out.stats.counters.at("unfinished_at_exit"), 1u);
  EXPECT_EQ(out.stats.lines, 24u);
  EXPECT_EQ(out.sink.clock()["clock"], "realtime");
  EXPECT_EQ(out.sink.clock()["anchor"]["realtime_ns"], kT0 + 100000);
}

TEST(StraceImport, StrictModeNamesLineAndOffset) {
  ImportOutcome out;
  ImportOptions o;
  o.strict = true;
  testing::ImportInto(&out, ImportFormat::kStrace, {DataPath("strace_threads.log")}, o);
  ASSERT_FALSE(out.status.ok());
  EXPECT_NE(out.status.message().find("strace_threads.log:20 (byte "), std::string::npos)
      << out.status.message();
}

TEST(StraceImport, StderrStyleWithoutPrefixesAndMidnight) {
  ImportOutcome out;
  testing::ImportInto(&out, ImportFormat::kStrace, {DataPath("strace_stderr.log")});
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  auto calls = out.sink.Of<iot_syscall>(IOT_REC_SYSCALL);
  auto procs = out.sink.Of<iot_proc>(IOT_REC_PROC);
  // Lines printed while the first task was alone carry no pid: it is learned from its first
  // prefixed line ("[pid 4242] <... clone resumed>") and patched into the held records.
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].op, IOT_OP_OPENAT);
  EXPECT_EQ(calls[0].tgid, 4242u);
  EXPECT_EQ(calls[0].tid, 4242u);
  EXPECT_EQ(calls[0].ts, (23 * 3600 + 59 * 60 + 59) * 1000000000ull + 999200000);
  // The child (a fork, not a thread) reads the inherited descriptor.
  EXPECT_EQ(calls[1].op, IOT_OP_READ);
  EXPECT_EQ(calls[1].tgid, 4243u);
  EXPECT_EQ(calls[1].tid, 4243u);
  EXPECT_EQ(calls[1].ts, 86400000000000ull + 100000);  // after midnight: next day
  // After the child exited, unprefixed lines are the parent's again.
  EXPECT_EQ(calls[2].op, IOT_OP_PREAD64);
  EXPECT_EQ(calls[2].tid, 4242u);
  EXPECT_EQ(calls[2].ts, 86400000000000ull + 500000);
  ASSERT_GE(procs.size(), 3u);
  EXPECT_EQ(procs[0].kind, IOT_PROC_EXEC);
  EXPECT_EQ(procs[0].tgid, 4242u);
  const iot_proc* fork = nullptr;
  for (const auto& p : procs) {
    if (p.kind == IOT_PROC_FORK) fork = &p;
  }
  ASSERT_NE(fork, nullptr);
  EXPECT_EQ(fork->tgid, 4242u);
  EXPECT_EQ(fork->child_tgid, 4243u);
  EXPECT_EQ(out.stats.unknown_lines, 0u);
  EXPECT_EQ(out.stats.counters.at("placeholder_pid_resolved"), 1u);
  EXPECT_EQ(out.sink.clock()["clock"], "time_of_day");
}

TEST(StraceImport, SetTidAddressResolvesTheFirstTask) {
  ImportOutcome out;
  testing::ImportText(&out, ImportFormat::kStrace,
                      "1700000000.000001 openat(AT_FDCWD, \"/x\", O_RDONLY) = 3 <0.000001>\n"
                      "1700000000.000002 set_tid_address(0x7f00) = 777 <0.000001>\n"
                      "1700000000.000003 close(3) = 0 <0.000001>\n");
  ASSERT_TRUE(out.status.ok());
  auto calls = out.sink.Of<iot_syscall>(IOT_REC_SYSCALL);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].tid, 777u);
  EXPECT_EQ(calls[1].tid, 777u);
}

TEST(StraceImport, FfFilesMergedByTime) {
  ImportOutcome out;
  testing::ImportInto(&out, ImportFormat::kStrace, {DataPath("ff.1000"), DataPath("ff.1001")});
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  auto calls = out.sink.Of<iot_syscall>(IOT_REC_SYSCALL);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].op, IOT_OP_OPENAT);
  EXPECT_EQ(calls[1].op, IOT_OP_PWRITE64);  // ts 20 µs: between the two lines of ff.1000
  EXPECT_EQ(calls[1].tid, 1001u);
  EXPECT_EQ(calls[1].tgid, 1000u);  // CLONE_THREAD in the parent's clone
  EXPECT_EQ(calls[1].offset, 100u);
  EXPECT_EQ(calls[2].op, IOT_OP_WRITE);
  EXPECT_EQ(calls[2].tid, 1000u);
  auto procs = out.sink.Of<iot_proc>(IOT_REC_PROC);
  ASSERT_EQ(procs.size(), 3u);
  EXPECT_EQ(procs[1].kind, IOT_PROC_EXIT);
  EXPECT_EQ(procs[1].tid, 1001u);
  EXPECT_EQ(procs[1].flags, 0);
  EXPECT_EQ(procs[2].tid, 1000u);
  EXPECT_EQ(procs[2].flags, IOT_PROCF_GROUP_DEAD);
}

TEST(StraceImport, OldResumedSpacingAndErestart) {
  ImportOutcome out;
  testing::ImportText(&out, ImportFormat::kStrace,
                      "5 1700000000.000001 read(3, <unfinished ...>\n"
                      "6 1700000000.000002 write(4, \"x\", 1) = 1\n"
                      "5 1700000000.000003 <... read resumed> \"abc\", 10) = 3\n"
                      "5 1700000000.000004 read(3, \"\", 10) = ? ERESTARTSYS (To be restarted if "
                      "SA_RESTART is set) <0.000010>\n"
                      "5 1700000000.000005 <... nothing resumed>) = 0\n");
  ASSERT_TRUE(out.status.ok());
  auto calls = out.sink.Of<iot_syscall>(IOT_REC_SYSCALL);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[1].op, IOT_OP_READ);
  EXPECT_EQ(calls[1].ret, 3);
  EXPECT_EQ(calls[1].length, 10u);
  EXPECT_EQ(calls[1].dur, 2000u);  // no -T: return minus start
  EXPECT_EQ(calls[2].ret, -512);
  EXPECT_EQ(out.stats.counters.at("resumed_without_start"), 1u);
  EXPECT_EQ(out.sink.clock()["clock"], "realtime");
}

TEST(StraceImport, DetectsFormat) {
  std::string log = testing::ReadFile(DataPath("strace_threads.log"));
  EXPECT_EQ(DetectFormat(log), ImportFormat::kStrace);
  EXPECT_EQ(DetectFormat(testing::ReadFile(DataPath("strace_stderr.log"))), ImportFormat::kStrace);
  EXPECT_EQ(DetectFormat(testing::ReadFile(DataPath("ftrace_block.txt"))), ImportFormat::kFtraceBlock);
  EXPECT_EQ(DetectFormat(testing::ReadFile(DataPath("blkparse.txt"))), ImportFormat::kBlkparse);
  EXPECT_EQ(DetectFormat(testing::ReadFile(DataPath("cheops.csv"))), ImportFormat::kBpftraceCsv);
  EXPECT_EQ(DetectFormat(testing::ReadFile(DataPath("fio_v2.iolog"))), ImportFormat::kFioIolog);
  EXPECT_EQ(DetectFormat(testing::ReadFile(DataPath("fio_v3.iolog"))), ImportFormat::kFioIolog);
  EXPECT_FALSE(DetectFormat("hello\nworld\n").has_value());
}

TEST(StraceImport, RunImportWritesTraceWithFooterSummary) {
  testing::ScratchDir dir;
  ImportRequest req;
  req.inputs = {DataPath("strace_threads.log")};
  req.output = dir / "t.iotwin";
  auto r = RunImport(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, ImportFormat::kStrace);
  auto t = testing::ReadTrace(req.output);
  EXPECT_EQ(t.meta["import"]["format"], "strace");
  EXPECT_EQ(t.meta["host"]["clock"], "realtime");
  ASSERT_TRUE(t.summary.has_value());
  EXPECT_EQ((*t.summary)["import"]["unknown_lines"], 1);
  EXPECT_EQ((*t.summary)["events"]["syscall"], 12);
  EXPECT_EQ(t.Of<iot_syscall>(IOT_REC_SYSCALL).size(), 12u);
  EXPECT_EQ(access((dir / "t.iotwin.partial").c_str(), F_OK), -1);
}

TEST(StraceImport, FailedImportLeavesNoOutput) {
  testing::ScratchDir dir;
  ImportRequest req;
  req.format = ImportFormat::kStrace;
  req.inputs = {DataPath("strace_threads.log")};
  req.output = dir / "t.iotwin";
  req.options.strict = true;
  auto r = RunImport(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(access(req.output.c_str(), F_OK), -1);
  EXPECT_EQ(access((req.output + ".partial").c_str(), F_OK), -1);
}

}  // namespace
}  // namespace iotwin::interop
