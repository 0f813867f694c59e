// An io_uring ring set up by one thread and used by others (MariaDB: the main thread calls
// io_uring_setup, query and I/O threads submit, a thread of its own reaps): the ring's context
// keeps the recorded setup size and its setup call, so the replay sets the ring up where and as
// the original did (io_uring_setup with the recorded entries: the same call, seq-match).
#include <fcntl.h>

#include <gtest/gtest.h>

#include "model_test_util.h"

namespace iotwin::test {
namespace {

constexpr uint8_t kRead = 22;  // IORING_OP_READ

void SetUpOnMainSubmitOnWorker(TraceBuilder& b) {
  b.Syscall(100, IOT_OP_IO_URING_SETUP, 5).length = 2048;  // entries
  b.Openat(100, "/d/ibdata1", O_RDONLY | O_DIRECT, 3, 1 << 20);
  b.NewThread(100, 101);
  b.Async(101, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, kRead, 9, 1, 3, 0, 4096);
  auto& enter = b.Syscall(101, IOT_OP_IO_URING_ENTER, 1);
  enter.fd = 5;
  enter.aux = 1;  // to_submit
  b.Async(101, IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE, kRead, 9, 1, 3, 0, 4096, 4096);
}

TEST(ModelUringSetup, ARingSetUpByAnotherThreadKeepsItsSetupSizeAndCall) {
  TraceBuilder b;
  SetUpOnMainSubmitOnWorker(b);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->async_contexts().size(), 1u);
  EXPECT_EQ(m->async_contexts()[0].setup_size, 2048u);
  const model::Thread* main_thread = FindThread(*m, 100);
  ASSERT_NE(main_thread, nullptr);
  bool setup_linked = false;
  for (const auto& op : main_thread->ops) {
    if (op.kind == model::OpKind::kSyscall && op.sc.op == IOT_OP_IO_URING_SETUP) {
      setup_linked = op.async_ctx == 0;
    }
  }
  EXPECT_TRUE(setup_linked);
}

TEST(ModelUringSetup, AnotherProcesssSetupIsNotTaken) {
  TraceBuilder b;
  b.Syscall(200, IOT_OP_IO_URING_SETUP, 5).length = 64;  // another process's ring
  SetUpOnMainSubmitOnWorker(b);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->async_contexts().size(), 1u);
  EXPECT_EQ(m->async_contexts()[0].setup_size, 2048u);
}

}  // namespace
}  // namespace iotwin::test
