// FDLIST records: descriptors received by recvmsg (SCM_RIGHTS) become opens of the sender's file
// in the receiver, io_uring requests with IOSQE_FIXED_FILE name the descriptor registered in
// their slot, and the reader refuses a list its record cannot hold.
#include <fcntl.h>

#include <gtest/gtest.h>

#include <cstring>

#include "format/records.h"
#include "format/trace_reader.h"
#include "model_test_util.h"
#include "interop_test_util.h"

namespace iotwin::test {
namespace {

using interop::testing::ScratchDir;
using model::Skip;

constexpr uint8_t kUringRead = 22;  // IORING_OP_READ
constexpr uint32_t kFixedFile = 1;  // IOSQE_FIXED_FILE
constexpr uint32_t kRegisterFiles = 2, kUnregisterFiles = 3, kFilesUpdate = 6;

// The ops of thread `tid`.
const std::vector<model::Op>& Ops(const model::TraceModel& m, uint32_t tid) {
  const model::Thread* t = FindThread(m, tid);
  EXPECT_NE(t, nullptr);
  static const std::vector<model::Op> none;
  return t ? t->ops : none;
}

const model::Op* FirstOf(const model::TraceModel& m, uint32_t tid, uint16_t op, int fd) {
  for (const auto& o : Ops(m, tid)) {
    if (o.kind == model::OpKind::kSyscall && o.sc.op == op && o.sc.fd == fd) return &o;
  }
  return nullptr;
}

// Process 100 opens /d/shared (fd 3, its inode as the capture read it) and passes it; process
// 200 receives it as fd 7 (recvmsg on socket 4, after the open), reads it and maps it.
TraceBuilder PassedDescriptor(uint64_t received_ino) {
  TraceBuilder b;
  b.Thread(200, 200);
  auto& open = b.Openat(100, "/d/shared", O_RDWR | O_CREAT | O_TRUNC, 3);
  open.dev = 0x800001;
  const uint64_t ino = open.ino;
  b.Pwrite(100, 3, 0, 8192, 8192);
  auto& recv = b.Syscall(200, IOT_OP_RECVMSG, 1);
  recv.fd = 4;
  b.FdList(IOT_FDL_RECEIVED, {7}, {received_ino == 0 ? ino : received_ino}, 0, 0x800001);
  b.Pread(200, 7, 4096, 4096, 4096);
  b.FdOp(200, IOT_OP_FSTAT, 7);
  return b;
}

TEST(FdList, ReceivedDescriptorIsAnOpenOfTheSendersFile) {
  auto m = BuildModel(PassedDescriptor(0));
  ASSERT_NE(m, nullptr);
  const auto& ops = Ops(*m, 200);
  ASSERT_GE(ops.size(), 3u);
  const model::Op& open = ops[0];
  EXPECT_EQ(open.sc.op, IOT_OP_OPENAT);
  EXPECT_EQ(open.result, 7);
  EXPECT_EQ(open.skip, Skip::kReplayable);
  ASSERT_NE(open.path, model::kNone);
  EXPECT_EQ(m->path(open.path), "/d/shared");
  EXPECT_EQ(open.sc.flags & O_ACCMODE, static_cast<uint32_t>(O_RDWR));
  EXPECT_EQ(open.sc.flags & (O_CREAT | O_TRUNC), 0u) << "the file exists: it was passed";
  const model::Op* read = FirstOf(*m, 200, IOT_OP_PREAD64, 7);
  ASSERT_NE(read, nullptr);
  EXPECT_EQ(read->skip, Skip::kReplayable);
  EXPECT_EQ(read->file, open.file);
  EXPECT_EQ(m->stats().ops_by_kind[IOT_OP_RECVMSG], 1u);
}

TEST(FdList, ReceivedDescriptorOfAnUnknownFileStaysUnreplayable) {
  auto m = BuildModel(PassedDescriptor(987654));
  ASSERT_NE(m, nullptr);
  const model::Op* read = FirstOf(*m, 200, IOT_OP_PREAD64, 7);
  ASSERT_NE(read, nullptr);
  EXPECT_NE(read->skip, Skip::kReplayable);
}

TEST(FdList, WithoutTheListTheReceivedDescriptorIsUnknown) {
  TraceBuilder b;
  b.Openat(100, "/d/shared", O_RDWR, 3);
  auto& recv = b.Syscall(200, IOT_OP_RECVMSG, 1);
  recv.fd = 4;
  b.Pread(200, 7, 0, 4096, 4096);
  auto m = BuildModel(b);
  ASSERT_NE(m, nullptr);
  const model::Op* read = FirstOf(*m, 200, IOT_OP_PREAD64, 7);
  ASSERT_NE(read, nullptr);
  EXPECT_EQ(read->skip, Skip::kUnknownFd);
}

// A ring (fd 5) with two files registered in slots 0 and 1 (fds 3 and 4); requests name slots.
TraceBuilder RegisteredFiles(bool register_files) {
  TraceBuilder b;
  b.Syscall(100, IOT_OP_IO_URING_SETUP, 5).length = 8;
  b.Openat(100, "/d/a", O_RDONLY, 3, 1 << 20);
  b.Openat(100, "/d/b", O_RDONLY, 4, 1 << 20);
  if (register_files) {
    auto& reg = b.Syscall(100, IOT_OP_IO_URING_REGISTER, 0);
    reg.fd = 5;
    reg.mode = kRegisterFiles;
    reg.length = 2;
    b.FdList(IOT_FDL_URING_FILES, {3, 4});
  }
  auto& enter = b.Syscall(100, IOT_OP_IO_URING_ENTER, 2);
  enter.fd = 5;
  b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, kUringRead, 9, 1, 1, 0, 4096).flags =
      kFixedFile;
  b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, kUringRead, 9, 2, 0, 4096, 4096).flags =
      kFixedFile;
  b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE, kUringRead, 9, 1, 1, 0, 4096, 4096);
  b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE, kUringRead, 9, 2, 0, 4096, 4096, 4096);
  return b;
}

std::vector<const model::Op*> Submits(const model::TraceModel& m, uint32_t tid) {
  std::vector<const model::Op*> out;
  for (const auto& o : Ops(m, tid)) {
    if (o.kind == model::OpKind::kAsyncSubmit) out.push_back(&o);
  }
  return out;
}

TEST(FdList, FixedFileRequestsNameTheRegisteredDescriptor) {
  auto m = BuildModel(RegisteredFiles(true));
  ASSERT_NE(m, nullptr);
  auto subs = Submits(*m, 100);
  ASSERT_EQ(subs.size(), 2u);
  EXPECT_EQ(subs[0]->skip, Skip::kReplayable);
  EXPECT_EQ(subs[0]->aio.fd, 4);  // slot 1
  EXPECT_EQ(subs[0]->aio.flags & kFixedFile, 0u);
  EXPECT_EQ(m->path(m->files()[subs[0]->file].path), "/d/b");
  EXPECT_EQ(subs[1]->skip, Skip::kReplayable);
  EXPECT_EQ(subs[1]->aio.fd, 3);  // slot 0
  EXPECT_EQ(m->path(m->files()[subs[1]->file].path), "/d/a");
}

TEST(FdList, FixedFileRequestsWithoutTheTableAreSkipped) {
  auto m = BuildModel(RegisteredFiles(false));
  ASSERT_NE(m, nullptr);
  for (const model::Op* s : Submits(*m, 100)) EXPECT_EQ(s->skip, Skip::kUnknownFd);
}

TEST(FdList, UpdatesUnregistrationAndClosedDescriptorsChangeTheTable) {
  TraceBuilder b;
  b.Syscall(100, IOT_OP_IO_URING_SETUP, 5).length = 8;
  b.Openat(100, "/d/a", O_RDONLY, 3, 1 << 20);
  b.Openat(100, "/d/b", O_RDONLY, 4, 1 << 20);
  auto& reg = b.Syscall(100, IOT_OP_IO_URING_REGISTER, 0);
  reg.fd = 5;
  reg.mode = kRegisterFiles;
  b.FdList(IOT_FDL_URING_FILES, {3, -1});
  auto& upd = b.Syscall(100, IOT_OP_IO_URING_REGISTER, 1);  // slot 1 <- fd 4, slot 0 kept
  upd.fd = 5;
  upd.mode = kFilesUpdate;
  b.FdList(IOT_FDL_URING_FILES, {-2, 4}, {}, 0);
  auto submit = [&](uint64_t req, int slot) {
    b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, kUringRead, 9, req, slot, 0, 4096).flags =
        kFixedFile;
    b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE, kUringRead, 9, req, slot, 0, 4096, 4096);
  };
  submit(1, 0);  // fd 3
  submit(2, 1);  // fd 4
  b.Close(100, 3);
  submit(3, 0);  // registered, but its descriptor is gone: the replay has nothing to submit on
  auto& unreg = b.Syscall(100, IOT_OP_IO_URING_REGISTER, 0);
  unreg.fd = 5;
  unreg.mode = kUnregisterFiles;
  submit(4, 1);
  auto m = BuildModel(b);
  ASSERT_NE(m, nullptr);
  auto subs = Submits(*m, 100);
  ASSERT_EQ(subs.size(), 4u);
  EXPECT_EQ(subs[0]->aio.fd, 3);
  EXPECT_EQ(subs[0]->skip, Skip::kReplayable);
  EXPECT_EQ(subs[1]->aio.fd, 4);
  EXPECT_EQ(subs[1]->skip, Skip::kReplayable);
  EXPECT_EQ(subs[2]->skip, Skip::kUnknownFd);
  EXPECT_EQ(subs[3]->skip, Skip::kUnknownFd);
}

// A trace whose FDLIST record claims more entries than it holds: the reader names the byte.
TEST(FdList, ReaderRefusesAListItsRecordCannotHold) {
  ScratchDir dir;
  for (uint32_t claimed : {2u, 1025u}) {
    TraceBuilder b;
    auto& reg = b.Syscall(100, IOT_OP_IO_URING_REGISTER, 0);
    reg.fd = 5;
    reg.mode = kRegisterFiles;
    b.FdList(IOT_FDL_URING_FILES, {3});
    auto& l = const_cast<iot_fdlist&>(
        *reinterpret_cast<const iot_fdlist*>(b.records().back().data()));
    l.captured = claimed;
    l.count = claimed;
    const std::string path = dir / ("bad" + std::to_string(claimed) + ".iotwin");
    ASSERT_TRUE(b.WriteFile(path).ok());
    auto r = TraceReader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    Status st = Status::Ok();
    for (;;) {
      auto rec = (*r)->Next();
      if (!rec.ok()) {
        st = rec.status();
        break;
      }
      if (*rec == nullptr) break;
    }
    EXPECT_FALSE(st.ok()) << claimed;
    EXPECT_NE(st.ToString().find("fdlist record claims"), std::string::npos) << st.ToString();
    EXPECT_NE(st.ToString().find("byte"), std::string::npos) << st.ToString();
  }
}

TEST(FdList, ListsRoundTripThroughTheWriter) {
  ScratchDir dir;
  TraceBuilder b = PassedDescriptor(0);
  const std::string path = dir / "ok.iotwin";
  ASSERT_TRUE(b.WriteFile(path).ok());
  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->format_minor(), 3u);
  size_t lists = 0;
  for (;;) {
    auto rec = (*r)->Next();
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    if (*rec == nullptr) break;
    if ((*rec)->type != IOT_REC_FDLIST) continue;
    lists++;
    const auto& l = As<iot_fdlist>(*rec);
    EXPECT_EQ(l.kind, IOT_FDL_RECEIVED);
    ASSERT_EQ(l.captured, 1u);
    iot_fdlist_entry e;
    std::memcpy(&e, reinterpret_cast<const uint8_t*>(*rec) + sizeof(iot_fdlist), sizeof e);
    EXPECT_EQ(e.fd, 7);
    EXPECT_EQ(e.eflags, IOT_FDLE_IDENT);
  }
  EXPECT_EQ(lists, 1u);
}

}  // namespace
}  // namespace iotwin::test
