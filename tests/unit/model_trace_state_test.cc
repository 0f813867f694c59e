// TraceState: the kernel's descriptor, process, cwd and mapping semantics, one record at a time.
#include "model/trace_state.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "format/records.h"
#include "model/op_fields.h"

namespace iotwin::model {
namespace {

constexpr uint32_t kPid = 100;

iot_syscall Call(uint16_t op, int32_t fd, int64_t ret, uint32_t tgid = kPid) {
  iot_syscall sc{};
  InitRecord(&sc, IOT_REC_SYSCALL);
  sc.op = op;
  sc.tgid = tgid;
  sc.tid = tgid;
  sc.fd = fd;
  sc.fd2 = -1;
  sc.ret = ret;
  return sc;
}

iot_syscall OpenAt(int32_t dirfd, int32_t newfd, uint32_t flags, uint32_t tgid = kPid) {
  iot_syscall sc = Call(IOT_OP_OPENAT, dirfd, newfd, tgid);
  sc.flags = flags;
  sc.ino = 7;
  sc.dev = 1;
  sc.ftype = 8;
  return sc;
}

iot_syscall Rw(uint16_t op, int32_t fd, int64_t ret, uint64_t offset = 0) {
  iot_syscall sc = Call(op, fd, ret);
  sc.length = static_cast<uint64_t>(ret);
  sc.offset = offset;
  return sc;
}

iot_syscall Dup3(int32_t oldfd, int32_t newfd, uint32_t flags) {
  iot_syscall sc = Call(IOT_OP_DUP3, oldfd, newfd);
  sc.fd2 = newfd;
  sc.flags = flags;
  return sc;
}

iot_syscall Fcntl(int32_t fd, int cmd, uint64_t arg, int64_t ret) {
  iot_syscall sc = Call(IOT_OP_FCNTL, fd, ret);
  sc.mode = static_cast<uint32_t>(cmd);
  sc.aux = arg;
  return sc;
}

iot_syscall CloseRange(uint32_t first, uint32_t last, uint32_t flags) {
  iot_syscall sc = Call(IOT_OP_CLOSE_RANGE, static_cast<int32_t>(first), 0);
  sc.fd2 = static_cast<int32_t>(last);
  sc.flags = flags;
  return sc;
}

iot_proc Proc(uint16_t kind, uint32_t tgid, uint32_t child_tgid = 0, uint16_t flags = 0) {
  iot_proc p{};
  InitRecord(&p, IOT_REC_PROC);
  p.kind = kind;
  p.tgid = tgid;
  p.tid = tgid;
  p.child_tgid = child_tgid;
  p.child_tid = child_tgid;
  p.flags = flags;
  return p;
}

class TraceStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    iot_proc attach = Proc(IOT_PROC_ATTACH, kPid);
    s.OnProc(attach, "/home/u");
  }
  TraceState s;
};

TEST_F(TraceStateTest, OpenResolvesAgainstCwdAndKnowsIdentity) {
  SyscallEffect e = s.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDONLY), "data/../f");
  ASSERT_EQ(e.new_fd, 3);
  const OpenFileDescription* d = s.FdDescription(kPid, 3);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->path, "/home/u/f");
  EXPECT_EQ(d->ino, 7u);
  EXPECT_TRUE(d->pos_known);
  EXPECT_EQ(d->pos, 0u);
  EXPECT_EQ(e.created, s.DescriptionOf(kPid, 3));
}

TEST_F(TraceStateTest, DupSharesThePosition) {
  s.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDWR), "/f");
  s.OnSyscall(Call(IOT_OP_DUP, 3, 4));
  s.OnSyscall(Rw(IOT_OP_READ, 3, 100));
  SyscallEffect e = s.OnSyscall(Rw(IOT_OP_WRITE, 4, 50));
  EXPECT_EQ(e.pos, 100u);
  EXPECT_TRUE(e.pos_known);
  EXPECT_EQ(s.FdDescription(kPid, 3)->pos, 150u);
  EXPECT_EQ(s.DescriptionOf(kPid, 3), s.DescriptionOf(kPid, 4));
  // An explicit offset leaves the shared position alone.
  e = s.OnSyscall(Rw(IOT_OP_PREAD64, 4, 10, 4096));
  EXPECT_EQ(e.pos, 4096u);
  EXPECT_EQ(s.FdDescription(kPid, 3)->pos, 150u);
  s.OnSyscall(Call(IOT_OP_LSEEK, 4, 7));
  EXPECT_EQ(s.FdDescription(kPid, 3)->pos, 7u);
}

TEST_F(TraceStateTest, CopiesMoveThePositionsOfTheirImplicitSides) {
  s.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDONLY), "/in");
  s.OnSyscall(OpenAt(kAtFdcwd, 4, O_WRONLY), "/out");
  // sendfile(out_fd = 4, in_fd = 3, NULL, 100): fd = out_fd, fd2 = in_fd.
  iot_syscall sf = Call(IOT_OP_SENDFILE, 4, 100);
  sf.fd2 = 3;
  sf.offset = kNoOffset;
  SyscallEffect e = s.OnSyscall(sf);
  EXPECT_EQ(e.desc, s.DescriptionOf(kPid, 3));  // the descriptor read from
  EXPECT_EQ(s.FdDescription(kPid, 3)->pos, 100u);
  EXPECT_EQ(s.FdDescription(kPid, 4)->pos, 100u);
  // With an input offset, only the output moves.
  sf.offset = 0;
  s.OnSyscall(sf);
  EXPECT_EQ(s.FdDescription(kPid, 3)->pos, 100u);
  EXPECT_EQ(s.FdDescription(kPid, 4)->pos, 200u);
  // copy_file_range(fd_in = 3, NULL, fd_out = 4, &off_out, 10): the input moves.
  iot_syscall cfr = Call(IOT_OP_COPY_FILE_RANGE, 3, 10);
  cfr.fd2 = 4;
  cfr.offset = kNoOffset;
  cfr.aux = 0;
  s.OnSyscall(cfr);
  EXPECT_EQ(s.FdDescription(kPid, 3)->pos, 110u);
  EXPECT_EQ(s.FdDescription(kPid, 4)->pos, 200u);
}

// A descriptor open before the trace (its position unknown) learns it from a read that records
// the position it used, not from a preadv2 at the current position, which records none.
TEST_F(TraceStateTest, UnknownPositionIsLearntFromARecordedOne) {
  const DescriptionId id = s.NewDescription(O_RDONLY, "/old");
  ASSERT_TRUE(s.Bind(kPid, 5, id, false));
  iot_syscall pv = Rw(IOT_OP_PREADV2, 5, 10, kNoOffset);
  SyscallEffect e = s.OnSyscall(pv);
  EXPECT_FALSE(e.pos_known);
  EXPECT_FALSE(s.FdDescription(kPid, 5)->pos_known);
  e = s.OnSyscall(Rw(IOT_OP_READ, 5, 10, 700));  // the capture recorded position 700
  EXPECT_FALSE(e.pos_known);
  EXPECT_EQ(e.pos, 700u);
  e = s.OnSyscall(Rw(IOT_OP_READ, 5, 10, 0));
  EXPECT_TRUE(e.pos_known);
  EXPECT_EQ(e.pos, 710u);
}

TEST_F(TraceStateTest, AppendWritesLandAtTheEnd) {
  s.OnSyscall(OpenAt(kAtFdcwd, 3, O_WRONLY | O_APPEND), "/log");
  iot_syscall w = Rw(IOT_OP_WRITE, 3, 10);
  w.fsize = 1010;
  SyscallEffect e = s.OnSyscall(w);
  EXPECT_EQ(e.pos, 1000u);
  EXPECT_EQ(s.FdDescription(kPid, 3)->pos, 1010u);
}

TEST_F(TraceStateTest, ExecClosesCloexecDescriptorsButKeepsTheirDups) {
  s.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDONLY | O_CLOEXEC), "/a");
  s.OnSyscall(Call(IOT_OP_DUP, 3, 4));             // dup clears close-on-exec
  s.OnSyscall(Dup3(4, 5, O_CLOEXEC));              // dup3 O_CLOEXEC sets it
  s.OnSyscall(Fcntl(4, F_DUPFD_CLOEXEC, 10, 10));  // so does F_DUPFD_CLOEXEC
  s.OnSyscall(Fcntl(4, F_DUPFD, 20, 20));          // F_DUPFD clears it
  s.OnProc(Proc(IOT_PROC_EXEC, kPid));
  EXPECT_EQ(s.Fd(kPid, 3), nullptr);
  EXPECT_NE(s.Fd(kPid, 4), nullptr);
  EXPECT_EQ(s.Fd(kPid, 5), nullptr);
  EXPECT_EQ(s.Fd(kPid, 10), nullptr);
  ASSERT_NE(s.Fd(kPid, 20), nullptr);
  EXPECT_EQ(s.FdDescription(kPid, 20)->path, "/a");
}

TEST_F(TraceStateTest, FcntlSetfdChangesOneDescriptorOnly) {
  s.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDONLY), "/a");
  s.OnSyscall(Call(IOT_OP_DUP, 3, 4));
  s.OnSyscall(Fcntl(3, F_SETFD, FD_CLOEXEC, 0));
  EXPECT_TRUE(s.Fd(kPid, 3)->cloexec);
  EXPECT_FALSE(s.Fd(kPid, 4)->cloexec);
  s.OnProc(Proc(IOT_PROC_EXEC, kPid));
  EXPECT_EQ(s.Fd(kPid, 3), nullptr);
  EXPECT_NE(s.Fd(kPid, 4), nullptr);
}

TEST_F(TraceStateTest, CloseRangeClosesOrMarksCloexec) {
  for (int fd = 3; fd <= 6; fd++) s.OnSyscall(OpenAt(kAtFdcwd, fd, O_RDONLY), "/f");
  s.OnSyscall(OpenAt(kAtFdcwd, 5000, O_RDONLY), "/g");
  s.OnSyscall(CloseRange(4, 5, 0));
  EXPECT_NE(s.Fd(kPid, 3), nullptr);
  EXPECT_EQ(s.Fd(kPid, 4), nullptr);
  EXPECT_EQ(s.Fd(kPid, 5), nullptr);
  EXPECT_NE(s.Fd(kPid, 6), nullptr);
  s.OnSyscall(CloseRange(6, UINT32_MAX, CLOSE_RANGE_CLOEXEC));
  EXPECT_TRUE(s.Fd(kPid, 6)->cloexec);
  EXPECT_TRUE(s.Fd(kPid, 5000)->cloexec);
  EXPECT_FALSE(s.Fd(kPid, 3)->cloexec);
  s.OnProc(Proc(IOT_PROC_EXEC, kPid));
  EXPECT_EQ(s.Fd(kPid, 6), nullptr);
  EXPECT_EQ(s.Fd(kPid, 5000), nullptr);
  EXPECT_EQ(s.descriptor_count(), 1u);
}

TEST_F(TraceStateTest, ForkSharesDescriptionsAndCopiesTheTable) {
  s.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDWR), "/f");
  s.OnProc(Proc(IOT_PROC_FORK, kPid, 200));
  EXPECT_EQ(s.DescriptionOf(200, 3), s.DescriptionOf(kPid, 3));
  EXPECT_EQ(s.Cwd(200), "/home/u");
  iot_syscall r = Rw(IOT_OP_READ, 3, 64);
  r.tgid = r.tid = 200;
  s.OnSyscall(r);
  EXPECT_EQ(s.FdDescription(kPid, 3)->pos, 64u);  // shared position
  // The tables are copies: the child's close leaves the parent's descriptor.
  iot_syscall c = Call(IOT_OP_CLOSE, 3, 0, 200);
  s.OnSyscall(c);
  EXPECT_EQ(s.Fd(200, 3), nullptr);
  EXPECT_NE(s.Fd(kPid, 3), nullptr);
  // The last thread's exit drops the process.
  s.OnProc(Proc(IOT_PROC_EXIT, 200));
  EXPECT_FALSE(s.HasProcess(200));
}

// A fork whose child reuses the tid of a thread that died unseen: the old process loses that
// thread, and the child's own exit drops only the child.
TEST_F(TraceStateTest, ForkIntoAReusedTid) {
  iot_proc thread = Proc(IOT_PROC_THREAD, kPid);
  thread.child_tid = 300;
  s.OnProc(thread);  // kPid: threads 100 and 300
  s.OnProc(Proc(IOT_PROC_FORK, kPid, 300));  // tid 300 is now process 300's
  EXPECT_EQ(s.TgidOf(300), 300u);
  s.OnProc(Proc(IOT_PROC_EXIT, 300));
  EXPECT_FALSE(s.HasProcess(300));
  EXPECT_TRUE(s.HasProcess(kPid));
  s.OnProc(Proc(IOT_PROC_EXIT, kPid));  // 100 was kPid's last thread
  EXPECT_FALSE(s.HasProcess(kPid));
}

TEST_F(TraceStateTest, ChdirAndFchdirResolution) {
  iot_syscall cd = Call(IOT_OP_CHDIR, kAtFdcwd, 0);
  s.OnSyscall(cd, "src/./lib");
  EXPECT_EQ(s.Cwd(kPid), "/home/u/src/lib");
  s.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDONLY | O_DIRECTORY), "/etc");
  s.OnSyscall(OpenAt(3, 4, O_RDONLY), "passwd");  // dirfd-relative
  EXPECT_EQ(s.FdDescription(kPid, 4)->path, "/etc/passwd");
  s.OnSyscall(Call(IOT_OP_FCHDIR, 3, 0));
  EXPECT_EQ(s.Cwd(kPid), "/etc");
  EXPECT_EQ(s.Resolve(kPid, kAtFdcwd, "../x").value(), "/x");
  EXPECT_EQ(s.Resolve(kPid, 3, "").value(), "/etc");  // AT_EMPTY_PATH: the dirfd itself
  EXPECT_FALSE(s.Resolve(kPid, 99, "y").has_value());
  EXPECT_FALSE(s.Resolve(999, kAtFdcwd, "y").has_value());
  // A failed chdir changes nothing.
  iot_syscall bad = Call(IOT_OP_CHDIR, kAtFdcwd, -ENOENT);
  s.OnSyscall(bad, "/nowhere");
  EXPECT_EQ(s.Cwd(kPid), "/etc");
}

TEST_F(TraceStateTest, RenamedDirectoryMovesPathsAndCwdsBelowIt) {
  s.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDONLY | O_DIRECTORY), "/data/run");
  s.OnSyscall(OpenAt(3, 4, O_RDONLY), "a/f");
  s.OnSyscall(OpenAt(kAtFdcwd, 5, O_RDONLY), "/data/runner/g");  // not below /data/run
  s.OnSyscall(Call(IOT_OP_FCHDIR, 3, 0));
  s.RenamePaths("/data/run", "/data/old");
  EXPECT_EQ(s.FdDescription(kPid, 3)->path, "/data/old");
  EXPECT_EQ(s.FdDescription(kPid, 4)->path, "/data/old/a/f");
  EXPECT_EQ(s.FdDescription(kPid, 5)->path, "/data/runner/g");
  EXPECT_EQ(s.Cwd(kPid), "/data/old");
  EXPECT_EQ(s.Resolve(kPid, 3, "b").value(), "/data/old/b");
}

TEST_F(TraceStateTest, MappingLookupsSplitAndMove) {
  s.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDONLY), "/lib.so");
  iot_syscall mm = Call(IOT_OP_MMAP, 3, 0x10000);
  mm.length = 0x3000;
  mm.offset = 0x1000;
  mm.flags = MAP_PRIVATE;
  s.OnSyscall(mm);
  s.OnSyscall(Call(IOT_OP_CLOSE, 3, 0));
  // The mapping keeps the description alive.
  FileMapping* m = s.MappingAt(kPid, 0x11234);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(s.Description(m->desc)->path, "/lib.so");
  m->user = 7;  // the consumer's id travels with the pieces and the move
  EXPECT_EQ(s.MappingAt(kPid, 0x13000), nullptr);
  EXPECT_EQ(s.MappingAt(kPid, 0xffff), nullptr);
  // munmap of the middle page leaves two pieces with their file offsets.
  iot_syscall un = Call(IOT_OP_MUNMAP, -1, 0);
  un.offset = 0x11000;
  un.length = 0x1000;
  s.OnSyscall(un);
  EXPECT_EQ(s.MappingAt(kPid, 0x11000), nullptr);
  ASSERT_NE(s.MappingAt(kPid, 0x12000), nullptr);
  EXPECT_EQ(s.MappingAt(kPid, 0x12000)->file_offset, 0x3000u);
  EXPECT_EQ(s.mapping_count(), 2u);
  // mremap moves the last piece.
  iot_syscall mr = Call(IOT_OP_MREMAP, -1, 0x40000);
  mr.offset = 0x12000;
  mr.length = 0x1000;
  mr.aux = 0x2000;
  s.OnSyscall(mr);
  EXPECT_EQ(s.MappingAt(kPid, 0x12000), nullptr);
  ASSERT_NE(s.MappingAt(kPid, 0x41000), nullptr);
  EXPECT_EQ(s.MappingAt(kPid, 0x41000)->file_offset, 0x3000u);
  EXPECT_EQ(s.MappingAt(kPid, 0x41000)->user, 7u);
  EXPECT_EQ(s.MappingAt(kPid, 0x10000)->user, 7u);
  // exec drops the mappings, and with them the last reference to the description.
  s.OnProc(Proc(IOT_PROC_EXEC, kPid));
  EXPECT_EQ(s.MappingAt(kPid, 0x10000), nullptr);
  s.OnSyscall(Call(IOT_OP_FSYNC, -1, -EBADF));  // the next record
  EXPECT_EQ(s.description_count(), 0u);
}

TEST_F(TraceStateTest, GoneDescriptionIsReadableUntilTheNextRecordThenReused) {
  SyscallEffect open = s.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDONLY), "/a");
  SyscallEffect closed = s.OnSyscall(Call(IOT_OP_CLOSE, 3, 0));
  EXPECT_EQ(closed.desc, open.created);
  EXPECT_EQ(s.Description(closed.desc)->path, "/a");
  EXPECT_EQ(s.Description(closed.desc)->refs, 0u);
  s.Description(closed.desc)->user = 42;
  SyscallEffect again = s.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDONLY), "/b");
  EXPECT_EQ(again.created, open.created);  // ids are reused: bounded memory
  EXPECT_EQ(s.Description(again.created)->user, 0u);
  EXPECT_EQ(s.description_count(), 1u);
}

TEST_F(TraceStateTest, HostileDescriptorNumbers) {
  s.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDONLY), "/a");
  // Negative and huge numbers are never stored and never index anything.
  s.OnSyscall(Call(IOT_OP_DUP, 3, INT_MIN));
  s.OnSyscall(Dup3(3, INT_MIN, 0));
  s.OnSyscall(Call(IOT_OP_CLOSE, INT_MIN, 0));
  s.OnSyscall(Rw(IOT_OP_READ, INT_MIN, 5));
  s.OnSyscall(Fcntl(INT_MIN, F_SETFD, FD_CLOEXEC, 0));
  s.OnSyscall(Call(IOT_OP_DUP, 3, int64_t{1} << 40));  // beyond int32
  s.OnSyscall(Call(IOT_OP_DUP, 3, INT_MAX));
  EXPECT_NE(s.Fd(kPid, INT_MAX), nullptr);
  EXPECT_EQ(s.Fd(kPid, INT_MIN), nullptr);
  EXPECT_EQ(s.Fd(kPid, -1), nullptr);
  EXPECT_EQ(s.descriptor_count(), 2u);
  // close_range over the whole space visits the two descriptors, not 2^32 numbers.
  s.OnSyscall(CloseRange(0, UINT32_MAX, 0));
  EXPECT_EQ(s.descriptor_count(), 0u);
  s.OnSyscall(CloseRange(UINT32_MAX, 0, 0));  // first > last: nothing
  iot_fd_snapshot snap{};
  InitRecord(&snap, IOT_REC_FD_SNAPSHOT);
  snap.tgid = kPid;
  snap.fd = INT_MIN;
  s.OnFdSnapshot(snap, "/a");
  EXPECT_EQ(s.descriptor_count(), 0u);
  EXPECT_EQ(s.drops().bad_fds, 1u);
}

TEST_F(TraceStateTest, CloseRangeFromPastInt32MaxClosesNothing) {
  // No descriptor has a number past INT32_MAX: a range that starts there names none of them.
  s.Bind(kPid, 151552, s.NewDescription(O_RDONLY, "/high"), false);
  s.Bind(kPid, 2000, s.NewDescription(O_RDONLY, "/mid"), false);
  s.CloseRange(kPid, UINT32_MAX, UINT32_MAX, false);
  s.CloseRange(kPid, 0x80000000u, UINT32_MAX, false);
  std::vector<uint64_t> acted_on;
  s.CloseRange(kPid, 0x80000000u, UINT32_MAX, true, &acted_on);
  EXPECT_TRUE(acted_on.empty());
  ASSERT_NE(s.Fd(kPid, 151552), nullptr);
  ASSERT_NE(s.Fd(kPid, 2000), nullptr);
  EXPECT_FALSE(s.Fd(kPid, 151552)->cloexec);
  EXPECT_FALSE(s.Fd(kPid, 2000)->cloexec);
  EXPECT_EQ(s.descriptor_count(), 2u);
  s.Bind(kPid, 5, s.NewDescription(O_RDONLY, "/low"), false);
  s.CloseRange(kPid, 5, 151552, true, &acted_on);
  EXPECT_EQ(acted_on, (std::vector<uint64_t>{5, 2000, 151552}));
  EXPECT_TRUE(s.Fd(kPid, 151552)->cloexec);
}

// A table costs what it holds: a process whose only descriptor is 1023, forked 10,000 times,
// allocates a few dense slots per process, not one per number below 1023.
TEST_F(TraceStateTest, DescriptorTableMemoryFollowsTheDescriptorsHeld) {
  s.OnSyscall(OpenAt(kAtFdcwd, 1023, O_RDONLY), "/a");
  constexpr uint32_t kForks = 10000;
  for (uint32_t i = 0; i < kForks; i++) s.OnProc(Proc(IOT_PROC_FORK, kPid, 1000 + i));
  ASSERT_EQ(s.process_count(), kForks + 1);
  EXPECT_EQ(s.descriptor_count(), kForks + 1);
  EXPECT_EQ(s.DescriptionOf(1000 + kForks - 1, 1023), s.DescriptionOf(kPid, 1023));
  EXPECT_LE(s.dense_descriptor_slots(), 64 * s.process_count());
}

// Numbers held apart from the dense part join it when it grows past them: visits and
// close_range still go in ascending order and nothing is lost.
TEST_F(TraceStateTest, DescriptorsStayInOrderWhenTheDenseTableGrowsPastThem) {
  s.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDONLY), "/a");
  std::vector<int32_t> expected = {3};
  for (int32_t fd : {1000, 500, 2000}) {
    s.OnSyscall(Dup3(3, fd, 0));
    expected.push_back(fd);
  }
  for (int32_t fd = 4; fd < 300; fd++) {
    s.OnSyscall(Dup3(3, fd, O_CLOEXEC));
    expected.push_back(fd);
  }
  s.OnSyscall(Dup3(3, 550, 0));  // past 500, with ~300 open: dense
  expected.push_back(550);
  std::sort(expected.begin(), expected.end());
  std::vector<int32_t> seen;
  s.ForEachFd(kPid, [&](int32_t fd, const Descriptor&) { seen.push_back(fd); });
  EXPECT_EQ(seen, expected);
  for (int32_t fd : expected) EXPECT_NE(s.Fd(kPid, fd), nullptr) << fd;
  EXPECT_EQ(s.descriptor_count(), expected.size());
  // The forked copy holds the same numbers in the same order.
  s.OnProc(Proc(IOT_PROC_FORK, kPid, 200));
  std::vector<int32_t> child;
  s.ForEachFd(200, [&](int32_t fd, const Descriptor&) { child.push_back(fd); });
  EXPECT_EQ(child, expected);
  std::vector<uint64_t> acted_on;
  s.CloseRange(kPid, 200, 1500, /*cloexec_only=*/false, &acted_on);
  std::vector<uint64_t> in_range;
  for (int32_t fd : expected) {
    if (fd >= 200 && fd <= 1500) in_range.push_back(static_cast<uint64_t>(fd));
  }
  EXPECT_EQ(acted_on, in_range);
  EXPECT_EQ(s.Fd(kPid, 500), nullptr);
  EXPECT_EQ(s.Fd(kPid, 550), nullptr);
  EXPECT_NE(s.Fd(kPid, 2000), nullptr);
  EXPECT_NE(s.Fd(kPid, 199), nullptr);
  EXPECT_EQ(s.descriptor_count(), expected.size() - in_range.size() + child.size());
}

TEST_F(TraceStateTest, HostileMappingNumbers) {
  s.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDONLY), "/f");
  const DescriptionId f = s.DescriptionOf(kPid, 3);
  // A range whose end would pass 2^64 ends at 2^64 - 1; lookups near the top do not wrap.
  ASSERT_NE(s.Map(kPid, UINT64_MAX - 4095, UINT64_MAX, 0, PROT_READ, MAP_SHARED, f), nullptr);
  ASSERT_NE(s.MappingAt(kPid, UINT64_MAX - 1), nullptr);
  EXPECT_EQ(s.MappingAt(kPid, UINT64_MAX - 1)->end, UINT64_MAX);
  EXPECT_EQ(s.MappingAt(kPid, 0), nullptr);
  ASSERT_NE(s.Map(kPid, 0x10000, 4096, UINT64_MAX - 10, PROT_READ, MAP_SHARED, f), nullptr);
  // munmap with a length that wraps the address space: everything from the address up goes.
  iot_syscall unmap = Call(IOT_OP_MUNMAP, -1, 0);
  unmap.offset = 0x20000;
  unmap.length = UINT64_MAX;
  s.OnSyscall(unmap);
  EXPECT_EQ(s.MappingAt(kPid, UINT64_MAX - 1), nullptr);
  ASSERT_NE(s.MappingAt(kPid, 0x10000), nullptr);
  // Splitting a mapping whose file offset is near 2^64 saturates the tail's offset.
  s.Unmap(kPid, 0x10000, 0x10800);
  ASSERT_NE(s.MappingAt(kPid, 0x10800), nullptr);
  EXPECT_EQ(s.MappingAt(kPid, 0x10800)->file_offset, UINT64_MAX);
  // mremap from an address no mapping holds, to a huge length: nothing is made.
  iot_syscall remap = Call(IOT_OP_MREMAP, -1, 0x50000);
  remap.offset = UINT64_MAX - 10;
  remap.length = UINT64_MAX;
  remap.aux = UINT64_MAX;
  s.OnSyscall(remap);
  EXPECT_EQ(s.MappingAt(kPid, 0x50000), nullptr);
  // mmap of descriptor INT_MIN maps nothing; a huge length is page-rounded without wrapping.
  iot_syscall mm = Call(IOT_OP_MMAP, INT_MIN, 0x60000);
  mm.length = UINT64_MAX;
  s.OnSyscall(mm);
  EXPECT_EQ(s.MappingAt(kPid, 0x60000), nullptr);
  mm.fd = 3;
  s.OnSyscall(mm);
  ASSERT_NE(s.MappingAt(kPid, 0x60000), nullptr);
  EXPECT_EQ(s.MappingAt(kPid, 0x60000)->end, UINT64_MAX);
  EXPECT_EQ(s.mapping_count(), 2u);
  s.OnProc(Proc(IOT_PROC_EXIT, kPid, 0, IOT_PROCF_GROUP_DEAD));
  EXPECT_EQ(s.mapping_count(), 0u);
  EXPECT_EQ(s.description_count(), 1u);  // until the next record
  s.NextRecord();
  EXPECT_EQ(s.description_count(), 0u);
}

TEST(TraceStateLimits, TablesStopAtTheirCapsAndCountDrops) {
  TraceStateOptions o;
  o.limits.descriptors = 4;
  o.limits.processes = 2;
  TraceState s(o);
  for (int fd = 0; fd < 10; fd++) s.OnSyscall(OpenAt(kAtFdcwd, fd, O_RDONLY), "/f");
  EXPECT_EQ(s.descriptor_count(), 4u);
  EXPECT_EQ(s.drops().descriptors, 6u);
  s.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDONLY, 2), "/f");
  s.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDONLY, 3), "/f");
  EXPECT_EQ(s.process_count(), 2u);
  EXPECT_GE(s.drops().processes, 1u);
  // Unbound descriptions are reused: memory follows what is open, not what was opened.
  for (int i = 0; i < 1000; i++) s.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDONLY), "/f");
  EXPECT_LE(s.description_count(), 6u);
}

TEST(TraceStateArch, ODirectFollowsTheTracedMachine) {
  TraceState x86;
  x86.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDONLY | 040000), "/f");
  EXPECT_TRUE(x86.FdDescription(kPid, 3)->direct);
  TraceState arm;
  arm.SetArch("aarch64");
  arm.OnSyscall(OpenAt(kAtFdcwd, 3, O_RDONLY | 040000), "/f");  // O_DIRECTORY on arm64
  arm.OnSyscall(OpenAt(kAtFdcwd, 4, O_RDONLY | 0200000), "/f");
  EXPECT_FALSE(arm.FdDescription(kPid, 3)->direct);
  EXPECT_TRUE(arm.FdDescription(kPid, 3)->directory);
  EXPECT_TRUE(arm.FdDescription(kPid, 4)->direct);
  EXPECT_FALSE(arm.FdDescription(kPid, 4)->directory);
  // F_SETFL toggles the architecture's bit.
  arm.OnSyscall(Fcntl(4, F_SETFL, O_APPEND, 0));
  EXPECT_FALSE(arm.FdDescription(kPid, 4)->direct);
  EXPECT_TRUE(arm.FdDescription(kPid, 4)->append);
  EXPECT_EQ(arm.FdDescription(kPid, 4)->access, O_RDONLY);
}

TEST(TraceStateAsync, ContextsAndRings) {
  TraceState s;
  iot_syscall setup = Call(IOT_OP_IO_SETUP, -1, 0);
  setup.length = 128;
  setup.aux = 0x7f0000;
  s.OnSyscall(setup);
  ASSERT_NE(s.AsyncContext(0x7f0000), nullptr);
  EXPECT_EQ(s.AsyncContext(0x7f0000)->entries, 128u);
  iot_syscall destroy = Call(IOT_OP_IO_DESTROY, -1, 0);
  destroy.aux = 0x7f0000;
  s.OnSyscall(destroy);
  EXPECT_EQ(s.AsyncContext(0x7f0000), nullptr);
  // A context goes with its process, even when its id was set up twice.
  s.OnSyscall(setup);
  s.OnSyscall(setup);
  s.RenameProcess(kPid, 300);
  ASSERT_NE(s.AsyncContext(0x7f0000), nullptr);
  EXPECT_EQ(s.AsyncContext(0x7f0000)->tgid, 300u);
  s.DropProcess(300);
  EXPECT_EQ(s.AsyncContext(0x7f0000), nullptr);
  SyscallEffect ring = s.OnSyscall(Call(IOT_OP_IO_URING_SETUP, -1, 5));
  ASSERT_EQ(ring.new_fd, 5);
  EXPECT_TRUE(s.FdDescription(kPid, 5)->ring);
  EXPECT_TRUE(s.Fd(kPid, 5)->cloexec);
}

}  // namespace
}  // namespace iotwin::model
