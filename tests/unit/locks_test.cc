// File locks and descriptor flags: fcntl record locks (POSIX and open file description),
// F_GETFD/F_SETFD/F_GETFL and flock(2) in the model (replayable, ordered across processes) and in
// the strace importer (the same record fields as the capture, docs/trace-format.md).
#include <fcntl.h>
#include <sys/file.h>

#include <gtest/gtest.h>

#include "format/records.h"
#include "interop/importer.h"
#include "interop_test_util.h"
#include "model/op_fields.h"
#include "model_test_util.h"

namespace iotwin::test {
namespace {

using model::Dep;
using model::FdState;
using model::Skip;

// A recorded fcntl lock request, with its struct flock in the record's fields.
iot_syscall& Lock(TraceBuilder& b, uint32_t tid, int fd, int cmd, int type, int64_t start,
                  int64_t len, int64_t ret, int whence = SEEK_SET) {
  iot_syscall& r = b.Fcntl(tid, fd, cmd, 0, ret);
  r.flags = static_cast<uint32_t>(type);
  r.aux = static_cast<uint64_t>(whence);
  r.offset = static_cast<uint64_t>(start);
  r.length = static_cast<uint64_t>(len);
  return r;
}

iot_syscall& Flock(TraceBuilder& b, uint32_t tid, int fd, int operation, int64_t ret) {
  iot_syscall& r = b.FdOp(tid, IOT_OP_FLOCK, fd, ret);
  r.flags = static_cast<uint32_t>(operation);
  return r;
}

std::vector<Dep> DepsOf(const model::TraceModel& m, uint32_t tid, size_t op) {
  const auto* t = FindThread(m, tid);
  const auto& o = t->ops.at(op);
  return std::vector<Dep>(m.DepsBegin(o), m.DepsBegin(o) + o.dep_count);
}

TEST(ModelLocks, LockCommandsAndFlockAreReplayableOnTheirDescriptor) {
  TraceBuilder b;
  b.Openat(100, "/d/db", O_RDWR, 3, 4096);
  Lock(b, 100, 3, F_SETLK, F_WRLCK, 0, 0, 0);
  Lock(b, 100, 3, F_SETLKW, F_UNLCK, 0, 0, 0);
  Lock(b, 100, 3, F_GETLK, F_RDLCK, 10, 20, 0);
  Lock(b, 100, 3, F_OFD_SETLK, F_RDLCK, 0, 100, 0);
  Lock(b, 100, 3, F_OFD_SETLKW, F_UNLCK, 0, 100, 0);
  Lock(b, 100, 3, F_OFD_GETLK, F_WRLCK, 0, 0, 0);
  Flock(b, 100, 3, LOCK_EX | LOCK_NB, 0);
  Flock(b, 100, 3, LOCK_UN, 0);
  b.Fcntl(100, 3, F_GETFD, 0, 0);
  b.Fcntl(100, 3, F_GETFL, 0, O_RDWR);
  b.Fcntl(100, 3, F_SETLEASE, F_RDLCK, 0);  // a lease break would signal the replay
  Lock(b, 100, 3, F_SETLK, -1, 0, 0, 0);    // struct flock the capture could not read
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto* t = FindThread(*m, 100);
  ASSERT_EQ(t->ops.size(), 13u);
  for (size_t i = 1; i <= 10; i++) {
    EXPECT_EQ(t->ops[i].skip, Skip::kReplayable) << "op " << i << " " << OpName(t->ops[i].sc.op);
    EXPECT_EQ(t->ops[i].fd_state, FdState::kKnown) << "op " << i;
    EXPECT_NE(t->ops[i].file, model::kNone) << "op " << i;
  }
  EXPECT_EQ(t->ops[11].skip, Skip::kUnsupported);
  EXPECT_EQ(t->ops[12].skip, Skip::kUnsupported);
  EXPECT_EQ(model::DataFd(t->ops[7].sc), 3);
  EXPECT_EQ(m->stats().replayable_by_kind[IOT_OP_FLOCK], 2u);
}

TEST(ModelLocks, UnlockInOneProcessOrdersTheNextLockInAnother) {
  // Two processes, each with its own descriptor of the file: nothing but the lock relates
  // them. The second process's lock came after the first one's unlock, and must replay so.
  TraceBuilder b;
  b.Openat(100, "/d/db", O_RDWR, 3, 4096);
  b.Openat(200, "/d/db", O_RDWR, 5, 4096);
  Lock(b, 100, 3, F_SETLK, F_WRLCK, 0, 0, 0);
  Lock(b, 100, 3, F_SETLK, F_UNLCK, 0, 0, 0);
  Lock(b, 200, 5, F_SETLKW, F_WRLCK, 0, 0, 0);
  Flock(b, 200, 5, LOCK_EX, 0);
  Flock(b, 100, 3, LOCK_SH, 0);  // after the other process's flock
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  auto d = DepsOf(*m, 200, 1);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].thread, ThreadIndex(*m, 100));
  EXPECT_EQ(d[0].count, 3u);  // after process 100's unlock (its third op)
  auto f = DepsOf(*m, 100, 3);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].thread, ThreadIndex(*m, 200));
  EXPECT_EQ(f[0].count, 3u);
}

TEST(ModelLocks, WaitThatOverlappedTheUnlockIsLeftFree) {
  // Process 200 asked while 100 held the lock and got it once 100 unlocked: the two calls
  // overlapped in time, so 100's unlock must not wait for 200's lock (that would deadlock).
  TraceBuilder b;
  b.Openat(100, "/d/db", O_RDWR, 3, 4096);
  b.Openat(200, "/d/db", O_RDWR, 5, 4096);
  Lock(b, 100, 3, F_SETLK, F_WRLCK, 0, 0, 0);
  iot_syscall& wait = Lock(b, 200, 5, F_SETLKW, F_WRLCK, 0, 0, 0);
  wait.dur = 10 * b.step;  // returned after the unlock below
  Lock(b, 100, 3, F_SETLK, F_UNLCK, 0, 0, 0);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  auto w = DepsOf(*m, 200, 1);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].thread, ThreadIndex(*m, 100));
  EXPECT_EQ(w[0].count, 2u);  // after 100's lock
  EXPECT_TRUE(DepsOf(*m, 100, 2).empty());
}

TEST(ModelLocks, UnlockWaitsForARefusedAttemptBeforeAnOverlappingWait) {
  // 200 is refused (EAGAIN) while 100 holds the lock, then waits (F_SETLKW) and gets it once
  // 100 unlocks. The unlock must follow the refused attempt, though the last lock op before the
  // unlock is the wait, which overlapped it: replayed first, the unlock lets the attempt succeed.
  TraceBuilder b;
  b.Openat(100, "/d/db", O_RDWR, 3, 4096);
  b.Openat(200, "/d/db", O_RDWR, 5, 4096);
  Lock(b, 100, 3, F_SETLK, F_WRLCK, 0, 100, 0);
  Lock(b, 200, 5, F_SETLK, F_RDLCK, 50, 10, -EAGAIN);
  iot_syscall& wait = Lock(b, 200, 5, F_SETLKW, F_WRLCK, 0, 0, 0);
  wait.dur = 10 * b.step;  // returned after the unlock below
  Lock(b, 100, 3, F_SETLKW, F_UNLCK, 0, 100, 0);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  auto u = DepsOf(*m, 100, 2);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].thread, ThreadIndex(*m, 200));
  EXPECT_EQ(u[0].count, 2u);  // after 200's refused attempt, not its wait (the third op)
}

TEST(ModelLocks, SetfdClearsAndSetsCloseOnExec) {
  TraceBuilder b;
  b.Openat(100, "/d/a", O_RDONLY | O_CLOEXEC, 3);
  b.Openat(100, "/d/b", O_RDONLY, 4);
  b.Fcntl(100, 3, F_SETFD, 0, 0);           // clears
  b.Fcntl(100, 4, F_SETFD, FD_CLOEXEC, 0);  // sets
  b.Exec(100, "/bin/next");
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto* t = FindThread(*m, 100);
  const model::Op& exec = t->ops[4];
  ASSERT_EQ(exec.kind, model::OpKind::kExec);
  std::vector<uint64_t> closed(m->ExtraBegin(exec), m->ExtraBegin(exec) + exec.extra_count);
  EXPECT_EQ(closed, (std::vector<uint64_t>{4}));
}

// ---- strace import ----

using interop::ImportFormat;
using interop::testing::ImportOutcome;
using interop::testing::ImportText;

TEST(StraceLocks, FcntlLocksFlagsAndFlockLines) {
  ImportOutcome o;
  ImportText(&o, ImportFormat::kStrace,
             "45 1700000000.000001 openat(AT_FDCWD, \"/db/LOCK\", O_RDWR|O_CREAT, 0644) = "
             "3</db/LOCK>\n"
             "45 1700000000.000002 fcntl(3</db/LOCK>, F_SETLK, {l_type=F_WRLCK, "
             "l_whence=SEEK_SET, l_start=0, l_len=0}) = 0\n"
             "45 1700000000.000003 fcntl(3</db/LOCK>, F_OFD_SETLKW, {l_type=F_RDLCK, "
             "l_whence=SEEK_END, l_start=-5, l_len=10}) = 0\n"
             "45 1700000000.000004 fcntl(3</db/LOCK>, F_GETLK, {l_type=F_UNLCK, "
             "l_whence=SEEK_SET, l_start=100, l_len=4, l_pid=0}) = 0\n"
             "45 1700000000.000005 fcntl(3</db/LOCK>, F_SETLK, {l_type=F_UNLCK, "
             "l_whence=SEEK_CUR, l_start=7, l_len=0}) = -1 EAGAIN (Resource temporarily "
             "unavailable)\n"
             "45 1700000000.000006 fcntl(3</db/LOCK>, F_GETFD) = 0x1 (flags FD_CLOEXEC)\n"
             "45 1700000000.000007 fcntl(3</db/LOCK>, F_SETFD, FD_CLOEXEC) = 0\n"
             "45 1700000000.000008 fcntl(3</db/LOCK>, F_GETFL) = 0x8002 (flags "
             "O_RDWR|O_LARGEFILE)\n"
             "45 1700000000.000009 flock(3</db/LOCK>, LOCK_EX|LOCK_NB) = 0\n"
             "45 1700000000.000010 flock(3, LOCK_UN) = 0\n"
             "45 1700000000.000011 fcntl(3</db/LOCK>, F_OFD_SETLK, 0x7ffd0000) = -1 EFAULT (Bad "
             "address)\n");
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  auto sc = o.sink.Of<iot_syscall>(IOT_REC_SYSCALL);
  ASSERT_EQ(sc.size(), 11u);
  for (size_t i = 1; i < sc.size(); i++) {
    EXPECT_EQ(sc[i].fd, 3) << i;
    if (i != 9) {
      EXPECT_EQ(sc[i].ino, sc[0].ino) << i << ": the file behind the descriptor";
    }
  }
  EXPECT_TRUE(sc[9].sflags & IOT_SCF_NO_FILE);  // no -y decoration on that line
  auto lock = [&](size_t i, int cmd, int type, int whence, int64_t start, int64_t len, int64_t ret) {
    SCOPED_TRACE(i);
    EXPECT_EQ(sc[i].op, IOT_OP_FCNTL);
    EXPECT_EQ(model::FcntlCmd(sc[i]), cmd);
    EXPECT_EQ(model::LockType(sc[i]), type);
    EXPECT_EQ(model::LockWhence(sc[i]), whence);
    EXPECT_EQ(model::LockStart(sc[i]), start);
    EXPECT_EQ(model::LockLength(sc[i]), len);
    EXPECT_EQ(sc[i].ret, ret);
  };
  lock(1, F_SETLK, F_WRLCK, SEEK_SET, 0, 0, 0);
  lock(2, F_OFD_SETLKW, F_RDLCK, SEEK_END, -5, 10, 0);
  // F_GETLK as strace prints it, after the call: F_UNLCK (no conflict) is no request.
  lock(3, F_GETLK, F_WRLCK, SEEK_SET, 100, 4, 0);
  lock(4, F_SETLK, F_UNLCK, SEEK_CUR, 7, 0, -EAGAIN);
  EXPECT_EQ(model::FcntlCmd(sc[5]), F_GETFD);
  EXPECT_EQ(sc[5].ret, 1);
  EXPECT_EQ(model::FcntlCmd(sc[6]), F_SETFD);
  EXPECT_EQ(model::FcntlArg(sc[6]), uint64_t{FD_CLOEXEC});
  EXPECT_EQ(model::FcntlCmd(sc[7]), F_GETFL);
  EXPECT_EQ(sc[7].ret, 0x8002);
  EXPECT_EQ(sc[8].op, IOT_OP_FLOCK);
  EXPECT_EQ(model::FlockOperation(sc[8]), LOCK_EX | LOCK_NB);
  EXPECT_EQ(sc[9].op, IOT_OP_FLOCK);
  EXPECT_EQ(model::FlockOperation(sc[9]), LOCK_UN);
  EXPECT_EQ(model::LockType(sc[10]), -1);  // unreadable struct: unknown, not a read lock
  EXPECT_EQ(o.stats.counters.at("lock_request_unknown"), 1u);
  EXPECT_EQ(o.stats.counters.at("lock_query_type_assumed"), 1u);
}

TEST(StraceLocks, ApproximateLengthIsFlagged) {
  ImportOutcome o;
  ImportText(&o, ImportFormat::kStrace,
             "45 1700000000.000001 writev(45</f>, [...], 2) = 8192\n"
             "45 1700000000.000002 preadv(45</f>, [...], 1, 0) = -1 EIO (Input/output error)\n"
             "45 1700000000.000003 readv(45</f>, [{iov_base=\"\"..., iov_len=4096}], 1) = 10\n");
  ASSERT_TRUE(o.status.ok()) << o.status.ToString();
  auto sc = o.sink.Of<iot_syscall>(IOT_REC_SYSCALL);
  ASSERT_EQ(sc.size(), 3u);
  EXPECT_TRUE(sc[0].sflags & IOT_SCF_APPROX_LENGTH);   // from the result
  EXPECT_TRUE(sc[1].sflags & IOT_SCF_APPROX_LENGTH);   // unknown
  EXPECT_FALSE(sc[2].sflags & IOT_SCF_APPROX_LENGTH);  // every length shown
}

}  // namespace
}  // namespace iotwin::test
