// Descriptor tables: open/dup*/fcntl/close/close_range, fork inheritance, exec close-on-exec,
// threads sharing a table, path resolution through cwd and dirfds.
#include <fcntl.h>
#include <linux/close_range.h>

#include <gtest/gtest.h>

#include "model/path.h"
#include "model_test_util.h"

namespace iotwin::test {
namespace {

using model::FdState;
using model::Op;
using model::Skip;

const std::string& OpPath(const model::TraceModel& m, const Op& op) {
  static const std::string kNoPath = "<none>";
  return op.path == model::kNone ? kNoPath : m.path(op.path);
}

TEST(ModelFd, OpenDupCloseTrackFiles) {
  TraceBuilder b;
  b.Openat(100, "/d/a", O_RDONLY, 3, 8192);
  b.Dup(100, 3, 4);
  b.Close(100, 3);
  b.Read(100, 4, 4096, 4096);  // through the dup
  b.Read(100, 3, 4096, -EBADF);  // closed
  b.Read(100, 7, 10, 10);        // never opened (a pipe, say)
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto* t = FindThread(*m, 100);
  ASSERT_TRUE(t);
  ASSERT_EQ(t->ops.size(), 6u);
  EXPECT_EQ(t->ops[3].fd_state, FdState::kKnown);
  EXPECT_EQ(OpPath(*m, t->ops[3]), "/d/a");
  EXPECT_EQ(t->ops[3].skip, Skip::kReplayable);
  EXPECT_EQ(t->ops[4].fd_state, FdState::kUnknown);
  EXPECT_EQ(t->ops[4].skip, Skip::kUnknownFd);
  EXPECT_EQ(t->ops[5].skip, Skip::kUnknownFd);
  EXPECT_EQ(m->stats().unknown_fds, 2u);  // fd 3 after close, fd 7
  EXPECT_EQ(m->processes()[0].max_fd, 4);
}

TEST(ModelFd, Dup2ReplacesTarget) {
  TraceBuilder b;
  b.Openat(100, "/d/a", O_RDONLY, 3, 100);
  b.Openat(100, "/d/b", O_RDONLY, 4, 100);
  b.Dup2(100, 3, 4, 4);
  b.Read(100, 4, 10, 10);
  b.Dup2(100, 9, 3, 3);  // unknown old fd: 3 becomes unknown too
  b.Read(100, 3, 10, 10);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto* t = FindThread(*m, 100);
  EXPECT_EQ(OpPath(*m, t->ops[3]), "/d/a");
  EXPECT_EQ(t->ops[2].fd2_state, FdState::kKnown);  // dup2 replaced a known descriptor
  EXPECT_EQ(t->ops[4].skip, Skip::kUnknownFd);
  EXPECT_EQ(t->ops[5].skip, Skip::kUnknownFd);
}

TEST(ModelFd, CloseRangeClosesKnownDescriptorsInRange) {
  TraceBuilder b;
  b.Openat(100, "/d/a", O_RDONLY, 3);
  b.Openat(100, "/d/b", O_RDONLY, 4);
  b.Openat(100, "/d/c", O_RDONLY, 5);
  b.Openat(100, "/d/e", O_RDONLY, 9);
  b.CloseRange(100, 4, 5);
  b.Read(100, 3, 1, 1);
  b.Read(100, 4, 1, 1);
  b.Read(100, 9, 1, 1);
  b.CloseRange(100, 3, ~0u);
  b.Read(100, 9, 1, 1);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto* t = FindThread(*m, 100);
  const Op& cr = t->ops[4];
  ASSERT_EQ(cr.extra_count, 2u);
  EXPECT_EQ(m->ExtraBegin(cr)[0], 4u);
  EXPECT_EQ(m->ExtraBegin(cr)[1], 5u);
  EXPECT_EQ(t->ops[5].skip, Skip::kReplayable);
  EXPECT_EQ(t->ops[6].skip, Skip::kUnknownFd);
  EXPECT_EQ(t->ops[7].skip, Skip::kReplayable);
  EXPECT_EQ(t->ops[8].extra_count, 2u);  // 3 and 9
  EXPECT_EQ(t->ops[9].skip, Skip::kUnknownFd);
}

// Thread 101's open got number 3 and is stamped before thread 100's close (or close_range) that
// freed 3, which began while the open was in progress: the model takes the open just after the
// close, so thread 100's read stamped in between stays on the old file.
TEST(ModelFd, AnOpenStampedBeforeTheCloseThatFreedItsNumberFollowsIt) {
  for (const char* closer : {"close", "close_range", "close_range_cloexec"}) {
    SCOPED_TRACE(closer);
    TraceBuilder b;
    b.Thread(100, 101);
    b.Openat(100, "/d/old", O_RDONLY, 3, 4096);
    const uint64_t t0 = b.now() + 1'000'000;
    b.SetTime(t0);
    b.Openat(101, "/d/new", O_RDONLY, 3, 4096).dur = 50'000;
    b.SetTime(t0 + 10'000);
    b.Read(100, 3, 10, 10);
    b.SetTime(t0 + 20'000);
    const std::string c = closer;
    if (c == "close") b.Close(100, 3);
    if (c == "close_range") b.CloseRange(100, 2, 5);
    if (c == "close_range_cloexec") b.CloseRange(100, 2, 5, CLOSE_RANGE_CLOEXEC);
    b.SetTime(t0 + 100'000);
    b.Read(101, 3, 10, 10);
    auto m = BuildModel(b);
    ASSERT_TRUE(m);
    auto read_of = [&](uint32_t tid) -> const Op* {
      const auto* t = FindThread(*m, tid);
      if (!t) return nullptr;
      for (const Op& op : t->ops)
        if (op.kind == model::OpKind::kSyscall && op.sc.op == IOT_OP_READ) return &op;
      return nullptr;
    };
    const Op* old_read = read_of(100);
    const Op* new_read = read_of(101);
    ASSERT_TRUE(old_read && new_read);
    if (c == "close_range_cloexec") {
      // Marking close-on-exec frees nothing: the open is not moved, and the table's 3 is the
      // new file from the open on.
      EXPECT_EQ(OpPath(*m, *old_read), "/d/new");
    } else {
      EXPECT_EQ(OpPath(*m, *old_read), "/d/old");
    }
    EXPECT_EQ(OpPath(*m, *new_read), "/d/new");
    EXPECT_EQ(new_read->skip, Skip::kReplayable);
  }
}

TEST(ModelFd, ExecDropsCloexecOnly) {
  TraceBuilder b;
  b.Openat(100, "/d/keep", O_RDONLY, 3);
  b.Openat(100, "/d/drop", O_RDONLY | O_CLOEXEC, 4);
  b.Openat(100, "/d/set", O_RDONLY, 5);
  b.Fcntl(100, 5, F_SETFD, FD_CLOEXEC, 0);
  b.Fcntl(100, 3, F_DUPFD_CLOEXEC, 10, 10);
  b.Openat(100, "/d/cr", O_RDONLY, 6);
  b.CloseRange(100, 6, 6, CLOSE_RANGE_CLOEXEC);
  b.Exec(100, "/bin/next");
  b.Read(100, 3, 1, 1);
  b.Read(100, 4, 1, 1);
  b.Read(100, 5, 1, 1);
  b.Read(100, 10, 1, 1);
  b.Read(100, 6, 1, 1);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto* t = FindThread(*m, 100);
  const Op& exec = t->ops[7];
  ASSERT_EQ(exec.kind, model::OpKind::kExec);
  std::vector<uint64_t> closed(m->ExtraBegin(exec), m->ExtraBegin(exec) + exec.extra_count);
  EXPECT_EQ(closed, (std::vector<uint64_t>{4, 5, 6, 10}));
  EXPECT_EQ(t->ops[8].skip, Skip::kReplayable);
  EXPECT_EQ(t->ops[9].skip, Skip::kUnknownFd);
  EXPECT_EQ(t->ops[10].skip, Skip::kUnknownFd);
  EXPECT_EQ(t->ops[11].skip, Skip::kUnknownFd);
  EXPECT_EQ(t->ops[12].skip, Skip::kUnknownFd);
}

TEST(ModelFd, ForkCopiesTableAndThreadsShareIt) {
  TraceBuilder b;
  b.Openat(100, "/d/a", O_RDONLY, 3, 4096);
  b.Fork(100, 200);
  b.Read(200, 3, 10, 10);  // inherited
  b.Close(200, 3);
  b.Read(100, 3, 10, 10);  // the parent's copy is still open
  b.NewThread(100, 101);
  b.Read(101, 3, 10, 10);  // threads share the parent's table
  b.Close(101, 3);
  b.Read(100, 3, 10, -EBADF);
  b.Read(200, 3, 10, -EBADF);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->processes().size(), 2u);
  EXPECT_EQ(m->processes()[1].parent, 0u);
  const auto* parent = FindThread(*m, 100);
  const auto* child = FindThread(*m, 200);
  const auto* thr = FindThread(*m, 101);
  ASSERT_TRUE(parent && child && thr);
  EXPECT_EQ(parent->ops[1].kind, model::OpKind::kFork);
  EXPECT_EQ(child->ops[0].skip, Skip::kReplayable);
  EXPECT_EQ(OpPath(*m, child->ops[0]), "/d/a");
  EXPECT_EQ(parent->ops[2].skip, Skip::kReplayable);
  EXPECT_EQ(thr->ops[0].skip, Skip::kReplayable);
  EXPECT_EQ(parent->ops.back().skip, Skip::kUnknownFd);
  EXPECT_EQ(child->ops.back().skip, Skip::kUnknownFd);
  // The child's first op waits for the fork point of its parent.
  ASSERT_GE(child->ops[0].dep_count, 1u);
  const auto* d = m->DepsBegin(child->ops[0]);
  EXPECT_EQ(d[0].thread, ThreadIndex(*m, 100));
  EXPECT_EQ(d[0].count, 2u);  // open + fork marker
  EXPECT_EQ(child->creator, ThreadIndex(*m, 100));
}

TEST(ModelFd, RelativePathsUseCwdAndDirfds) {
  TraceBuilder b;
  b.Cwd(100, "/home/u");
  b.Openat(100, "data/../x.bin", O_RDONLY, 3);
  b.PathOp(100, IOT_OP_CHDIR, "sub", 0);
  b.Openat(100, "./y", O_RDONLY, 4);
  b.Openat(100, "/srv", O_RDONLY | O_DIRECTORY, 5);
  b.Openat(100, "z/w", O_RDONLY, 6, 0, /*dirfd=*/5);
  b.FdOp(100, IOT_OP_FCHDIR, 5);
  b.Openat(100, "q", O_RDONLY, 7);
  b.Openat(100, "q", O_RDONLY, 8, 0, /*dirfd=*/42);  // unknown dirfd
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const auto* t = FindThread(*m, 100);
  EXPECT_EQ(OpPath(*m, t->ops[0]), "/home/u/x.bin");
  EXPECT_EQ(OpPath(*m, t->ops[1]), "/home/u/sub");
  EXPECT_EQ(OpPath(*m, t->ops[2]), "/home/u/sub/y");
  EXPECT_EQ(OpPath(*m, t->ops[4]), "/srv/z/w");
  EXPECT_EQ(OpPath(*m, t->ops[6]), "/srv/q");
  EXPECT_EQ(t->ops[7].skip, Skip::kUnknownPath);
}

TEST(ModelFd, RelativePathWithoutCwdIsUnknown) {
  TraceBuilder b;
  b.Openat(100, "rel/p", O_RDONLY, 3);
  b.Read(100, 3, 10, 10);
  auto m = BuildModel(b);
  const auto* t = FindThread(*m, 100);
  EXPECT_EQ(t->ops[0].skip, Skip::kUnknownPath);
  EXPECT_EQ(t->ops[1].skip, Skip::kUnknownPath);  // descriptor known, file name not
  EXPECT_EQ(t->ops[1].fd_state, FdState::kKnown);
}

TEST(ModelFd, PseudoFilesAreSkippedNotUnknown) {
  TraceBuilder b;
  b.Openat(100, "/proc/self/status", O_RDONLY, 3);
  b.Read(100, 3, 100, 100);
  b.Openat(100, "/dev/shm/seg", O_RDWR | O_CREAT, 4);
  b.Write(100, 4, 100, 100);
  auto m = BuildModel(b);
  const auto* t = FindThread(*m, 100);
  EXPECT_EQ(t->ops[0].skip, model::Skip::kPseudoFs);
  EXPECT_EQ(t->ops[1].skip, model::Skip::kPseudoFs);
  EXPECT_EQ(t->ops[1].fd_state, FdState::kKnown);
  EXPECT_EQ(t->ops[3].skip, model::Skip::kReplayable);
  EXPECT_EQ(FindFile(*m, "/proc/self/status"), nullptr);
}

TEST(ModelFd, FilePositionFollowsReadsWritesAndSeeks) {
  TraceBuilder b;
  b.Openat(100, "/d/a", O_RDWR, 3, 100000);
  b.Read(100, 3, 4096, 4096);
  b.Read(100, 3, 4096, 4096);
  b.Lseek(100, 3, 50000, SEEK_SET, 50000);
  b.Read(100, 3, 1000, 1000);
  b.Dup(100, 3, 4);
  b.Read(100, 4, 10, 10);  // shares the position
  auto m = BuildModel(b);
  const auto* t = FindThread(*m, 100);
  EXPECT_EQ(t->ops[1].pos, 0u);
  EXPECT_EQ(t->ops[2].pos, 4096u);
  EXPECT_EQ(t->ops[4].pos, 50000u);
  EXPECT_EQ(t->ops[6].pos, 51000u);
}

TEST(ModelFd, IovecLayoutAttached) {
  TraceBuilder b;
  b.Openat(100, "/d/a", O_RDONLY, 3, 1 << 20);
  b.Vectored(100, IOT_OP_PREADV2, 3, 8192, {512, 4096, 100}, 4708, /*RWF_HIPRI*/ 1);
  auto m = BuildModel(b);
  const auto* t = FindThread(*m, 100);
  const Op& op = t->ops[1];
  ASSERT_EQ(op.extra_count, 3u);
  EXPECT_EQ(m->ExtraBegin(op)[0], 512u);
  EXPECT_EQ(m->ExtraBegin(op)[1], 4096u);
  EXPECT_EQ(m->ExtraBegin(op)[2], 100u);
  EXPECT_EQ(op.pos, 8192u);
  EXPECT_EQ(m->stats().orphan_iovecs, 0u);
}

TEST(ModelFd, ThreadIdReuseStartsANewThread) {
  TraceBuilder b;
  b.NewThread(100, 101);
  b.Read(101, 9, 1, 1);
  b.Exit(101, false);
  b.NewThread(100, 101);
  b.Read(101, 9, 1, 1);
  auto m = BuildModel(b);
  int count = 0;
  for (const auto& t : m->threads()) count += t.tid == 101;
  EXPECT_EQ(count, 2);
}

}  // namespace
}  // namespace iotwin::test
