// The op-facts table (format/op_info.h): a row per op, names that round-trip, safe lookups of
// untrusted codes, and async opcodes classified by the kernel's own constants.
#include "format/op_info.h"

#include <gtest/gtest.h>
#include <linux/aio_abi.h>
#include <linux/io_uring.h>

#include <set>
#include <string>

#include "format/records.h"

namespace iotwin {
namespace {

TEST(OpInfo, EveryOpHasANamedRowThatRoundTrips) {
  std::set<std::string_view> seen;
  for (uint16_t op = 1; op <= IOT_OP_MAX; op++) {
    const OpInfo& i = GetOpInfo(op);
    SCOPED_TRACE(op);
    EXPECT_FALSE(i.name.empty());
    EXPECT_NE(i.name, "unknown");
    EXPECT_NE(i.family, OpFamily::kUnknown) << i.name;
    EXPECT_EQ(OpName(op), i.name);
    EXPECT_EQ(OpFromName(i.name), op) << i.name;
    EXPECT_TRUE(seen.insert(i.name).second) << "name used twice: " << i.name;
  }
  EXPECT_EQ(OpName(IOT_OP_UNKNOWN), "unknown");
}

TEST(OpInfo, NamesAreTheSystemCallNames) {
  // The names are part of the CLI and report output (docs/trace-format.md lists them).
  EXPECT_EQ(OpName(IOT_OP_OPEN), "open");
  EXPECT_EQ(OpName(IOT_OP_PREAD64), "pread64");
  EXPECT_EQ(OpName(IOT_OP_SENDFILE), "sendfile");
  EXPECT_EQ(OpName(IOT_OP_COPY_FILE_RANGE), "copy_file_range");
  EXPECT_EQ(OpName(IOT_OP_IO_URING_REGISTER), "io_uring_register");
  EXPECT_EQ(OpName(IOT_OP_IO_PGETEVENTS), "io_pgetevents");
  EXPECT_EQ(OpName(IOT_OP_FLOCK), "flock");
}

TEST(OpInfo, OutOfRangeCodesAreUnknown) {
  for (uint32_t op : {uint32_t{IOT_OP_MAX} + 1, 1000u, 0xffffu}) {
    const OpInfo& i = GetOpInfo(static_cast<uint16_t>(op));
    EXPECT_EQ(i.name, "unknown");
    EXPECT_EQ(i.family, OpFamily::kUnknown);
    EXPECT_EQ(i.replay, OpReplay::kNotReplayed);
    EXPECT_EQ(OpName(static_cast<uint16_t>(op)), "unknown");
  }
  EXPECT_FALSE(OpFromName("unknown").has_value());
  EXPECT_FALSE(OpFromName("").has_value());
}

TEST(OpInfo, CopiesReadOneDescriptorAndWriteTheOther) {
  // sendfile(out_fd, in_fd, ...) keeps the system call's order: fd = out_fd, fd2 = in_fd.
  const OpInfo& sf = GetOpInfo(IOT_OP_SENDFILE);
  EXPECT_EQ(sf.direction, OpDirection::kCopy);
  EXPECT_EQ(sf.fd, FdRole::kWriteTo);
  EXPECT_EQ(sf.fd2, FdRole::kReadFrom);
  EXPECT_EQ(sf.offset, FieldUse::kInOffset);
  EXPECT_EQ(sf.result, OpResult::kByteCount);
  EXPECT_EQ(sf.replay, OpReplay::kReissued);
  for (uint16_t op : {IOT_OP_COPY_FILE_RANGE, IOT_OP_SPLICE}) {
    const OpInfo& i = GetOpInfo(op);
    EXPECT_EQ(i.fd, FdRole::kReadFrom) << i.name;
    EXPECT_EQ(i.fd2, FdRole::kWriteTo) << i.name;
    EXPECT_EQ(i.aux, FieldUse::kOutOffset) << i.name;
  }
}

TEST(OpInfo, ReadsAndWritesAgreeWithTheClassification) {
  for (uint16_t op = 0; op <= IOT_OP_MAX; op++) {
    const OpInfo& i = GetOpInfo(op);
    EXPECT_EQ(OpIsRead(op), i.direction == OpDirection::kRead) << i.name;
    EXPECT_EQ(OpIsWrite(op), i.direction == OpDirection::kWrite) << i.name;
    if (i.vectored) {
      EXPECT_EQ(i.length, FieldUse::kIovecTotal) << i.name;
      EXPECT_EQ(i.aux, FieldUse::kIovcnt) << i.name;
    }
    // A descriptor an op reads from or writes to implies a direction, and the reverse.
    bool moves = i.fd == FdRole::kReadFrom || i.fd == FdRole::kWriteTo ||
                 i.fd2 == FdRole::kReadFrom || i.fd2 == FdRole::kWriteTo;
    EXPECT_EQ(moves, i.direction != OpDirection::kNone) << i.name;
  }
  EXPECT_TRUE(OpHasExplicitOffset(IOT_OP_PREADV2));
  EXPECT_FALSE(OpHasExplicitOffset(IOT_OP_READ));
  EXPECT_FALSE(OpHasExplicitOffset(IOT_OP_LSEEK));
}

TEST(OpInfo, AsyncSetupCallsAreLeftToTheAsyncEngine) {
  for (uint16_t op : {IOT_OP_IO_SETUP, IOT_OP_IO_SUBMIT, IOT_OP_IO_GETEVENTS, IOT_OP_IO_DESTROY,
                      IOT_OP_IO_PGETEVENTS, IOT_OP_IO_URING_SETUP, IOT_OP_IO_URING_ENTER,
                      IOT_OP_IO_URING_REGISTER}) {
    EXPECT_EQ(GetOpInfo(op).replay, OpReplay::kAsyncEngine) << OpName(op);
  }
}

TEST(AsyncOp, UringOpcodesFollowTheKernelConstants) {
  struct Case {
    unsigned opcode;
    AsyncKind kind;
    std::string_view name;
    bool vectored, fixed;
  };
  const Case cases[] = {
      {IORING_OP_NOP, AsyncKind::kOther, "NOP", false, false},
      {IORING_OP_READV, AsyncKind::kRead, "READV", true, false},
      {IORING_OP_WRITEV, AsyncKind::kWrite, "WRITEV", true, false},
      {IORING_OP_FSYNC, AsyncKind::kFsync, "FSYNC", false, false},
      {IORING_OP_READ_FIXED, AsyncKind::kRead, "READ_FIXED", false, true},
      {IORING_OP_WRITE_FIXED, AsyncKind::kWrite, "WRITE_FIXED", false, true},
      {IORING_OP_READ, AsyncKind::kRead, "READ", false, false},
      {IORING_OP_WRITE, AsyncKind::kWrite, "WRITE", false, false},
      {IORING_OP_SYNC_FILE_RANGE, AsyncKind::kOther, "SYNC_FILE_RANGE", false, false},
      {IORING_OP_SPLICE, AsyncKind::kOther, "SPLICE", false, false},
      {IORING_OP_LINKAT, AsyncKind::kOther, "LINKAT", false, false},
  };
  for (const Case& c : cases) {
    AsyncOpInfo i = AsyncOp(IOT_AIO_ENGINE_URING, static_cast<uint8_t>(c.opcode));
    EXPECT_EQ(i.kind, c.kind) << c.name;
    EXPECT_EQ(i.name, c.name);
    EXPECT_EQ(i.vectored, c.vectored) << c.name;
    EXPECT_EQ(i.fixed, c.fixed) << c.name;
    EXPECT_EQ(i.nop, c.opcode == IORING_OP_NOP) << c.name;
  }
}

TEST(AsyncOp, LibaioOpcodesFollowTheKernelConstants) {
  struct Case {
    unsigned opcode;
    AsyncKind kind;
    std::string_view name;
    bool vectored, datasync;
  };
  const Case cases[] = {
      {IOCB_CMD_PREAD, AsyncKind::kRead, "PREAD", false, false},
      {IOCB_CMD_PWRITE, AsyncKind::kWrite, "PWRITE", false, false},
      {IOCB_CMD_FSYNC, AsyncKind::kFsync, "FSYNC", false, false},
      {IOCB_CMD_FDSYNC, AsyncKind::kFsync, "FDSYNC", false, true},
      {IOCB_CMD_POLL, AsyncKind::kOther, "POLL", false, false},
      {IOCB_CMD_NOOP, AsyncKind::kOther, "NOOP", false, false},
      {IOCB_CMD_PREADV, AsyncKind::kRead, "PREADV", true, false},
      {IOCB_CMD_PWRITEV, AsyncKind::kWrite, "PWRITEV", true, false},
  };
  for (const Case& c : cases) {
    AsyncOpInfo i = AsyncOp(IOT_AIO_ENGINE_LIBAIO, static_cast<uint8_t>(c.opcode));
    EXPECT_EQ(i.kind, c.kind) << c.name;
    EXPECT_EQ(i.name, c.name);
    EXPECT_EQ(i.vectored, c.vectored) << c.name;
    EXPECT_EQ(i.datasync, c.datasync) << c.name;
    EXPECT_FALSE(i.fixed) << c.name;
  }
}

TEST(AsyncOp, UnknownEnginesAndOpcodesAreOther) {
  for (unsigned op = 0; op < 256; op++) {
    AsyncOpInfo none = AsyncOp(0, static_cast<uint8_t>(op));
    EXPECT_EQ(none.kind, AsyncKind::kOther);
    EXPECT_TRUE(none.name.empty());
    AsyncOpInfo bad = AsyncOp(7, static_cast<uint8_t>(op));
    EXPECT_EQ(bad.kind, AsyncKind::kOther);
  }
  EXPECT_EQ(AsyncOp(IOT_AIO_ENGINE_LIBAIO, 4).kind, AsyncKind::kOther);  // the retired PREADX
  EXPECT_TRUE(AsyncOp(IOT_AIO_ENGINE_LIBAIO, 200).name.empty());
  EXPECT_TRUE(AsyncOp(IOT_AIO_ENGINE_URING, 255).name.empty());
  EXPECT_EQ(AsyncOp(IOT_AIO_ENGINE_URING, 255).kind, AsyncKind::kOther);
}

}  // namespace
}  // namespace iotwin
