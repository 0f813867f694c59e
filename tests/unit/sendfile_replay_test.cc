// sendfile(out_fd, in_fd, *offset, count) is recorded as fd = out_fd, fd2 = in_fd (the system
// call's order, docs/trace-format.md). The model must read the source from fd2 and the
// destination from fd, keep the call replayable, and the sync back end must issue
// sendfile(out, in, ...) with the descriptors in that order.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "model/op_fields.h"
#include "model_test_util.h"
#include "replay/backend.h"
#include "temp_dir.h"

namespace iotwin::test {
namespace {

using model::FdState;
using model::Skip;

iot_syscall& Sendfile(TraceBuilder& b, uint32_t tid, int out_fd, int in_fd, uint64_t offset,
                      uint64_t count, int64_t ret) {
  iot_syscall& r = b.Syscall(tid, IOT_OP_SENDFILE, ret);
  r.fd = out_fd;
  r.fd2 = in_fd;
  r.offset = offset;
  r.length = count;
  return r;
}

TEST(SendfileFields, SourceIsFd2AndDestinationIsFd) {
  iot_syscall sc{};
  sc.op = IOT_OP_SENDFILE;
  sc.fd = 4;   // out_fd
  sc.fd2 = 3;  // in_fd
  EXPECT_TRUE(model::OpHasDataFd(sc));
  EXPECT_EQ(model::DataFd(sc), 3);
  EXPECT_EQ(model::SecondFd(sc), 4);
  // copy_file_range is (fd_in, fd_out): the source is fd.
  sc.op = IOT_OP_COPY_FILE_RANGE;
  EXPECT_EQ(model::DataFd(sc), 4);
  EXPECT_EQ(model::SecondFd(sc), 3);
}

TEST(SendfileModel, SendfileStaysReplayableWithTheRightDescriptors) {
  TraceBuilder b;
  b.Openat(100, "/d/src", O_RDONLY, 3, 8192);
  b.Openat(100, "/d/dst", O_WRONLY | O_CREAT, 4, 0);
  Sendfile(b, 100, 4, 3, model::kNoOffset, 4096, 4096);
  Sendfile(b, 100, 9, 3, 0, 4096, 4096);  // to a descriptor the trace never opened (a socket)
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  const model::Thread* t = FindThread(*m, 100);
  ASSERT_TRUE(t);
  ASSERT_EQ(t->ops.size(), 4u);
  const model::Op& to_file = t->ops[2];
  EXPECT_EQ(to_file.skip, Skip::kReplayable);
  EXPECT_EQ(to_file.fd_state, FdState::kKnown);
  EXPECT_EQ(to_file.fd2_state, FdState::kKnown);
  ASSERT_NE(to_file.file, model::kNone);
  ASSERT_NE(m->files()[to_file.file].path, model::kNone);
  EXPECT_EQ(m->path(m->files()[to_file.file].path), "/d/src");  // the file read from
  // An unknown destination is still a read of a known file: replay sends it to a sink.
  const model::Op& to_socket = t->ops[3];
  EXPECT_EQ(to_socket.skip, Skip::kReplayable);
  EXPECT_EQ(to_socket.fd2_state, FdState::kUnknown);
}

TEST(SendfileBackend, SyncBackendIssuesSendfileOutThenIn) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string src = dir / "src", dst = dir / "dst";
  int in = open(src.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  int out = open(dst.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(in, 0);
  ASSERT_GE(out, 0);
  const std::string data = "sendfile moves these bytes";
  ASSERT_EQ(pwrite(in, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));

  model::Op op;
  op.kind = model::OpKind::kSyscall;
  op.sc.op = IOT_OP_SENDFILE;
  op.sc.fd = 40;   // recorded out_fd
  op.sc.fd2 = 30;  // recorded in_fd
  op.sc.offset = 0;
  op.sc.length = data.size();
  replay::LiveArgs a;
  a.op = &op;
  a.fd = in;    // the live DataFd: the source
  a.fd2 = out;  // the live SecondFd: the destination
  auto backend = replay::MakeSyncBackend();
  EXPECT_EQ(backend->Execute(a), static_cast<int64_t>(data.size()));

  std::string got(data.size(), '\0');
  EXPECT_EQ(pread(out, got.data(), got.size(), 0), static_cast<ssize_t>(data.size()));
  EXPECT_EQ(got, data);
  struct stat st;
  ASSERT_EQ(fstat(in, &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(data.size()));  // the source is not written
  close(in);
  close(out);
}

}  // namespace
}  // namespace iotwin::test
