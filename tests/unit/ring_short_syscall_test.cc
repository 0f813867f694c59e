// The short ring form of a system call (abi/syscall_wire.h): the consumer writes the same
// IOT_REC_SYSCALL record the kernel would have sent whole.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "capture/ring_consumer.h"
#include "capture_wire.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "format/trace_writer.h"
#include "syscall_wire.h"

namespace iotwin::capture {
namespace {

class ShortSyscallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("iotwin-short-" + std::to_string(getpid()) + ".iotwin");
    auto w = TraceWriter::Create(path_, nlohmann::json::object());
    ASSERT_TRUE(w.ok());
    writer_ = std::move(w).value();
    consumer_ = std::make_unique<RingConsumer>(writer_.get());
  }
  void TearDown() override { std::filesystem::remove(path_); }

  std::vector<iot_syscall> Records() {
    EXPECT_TRUE(writer_->Finish(nlohmann::json::object()).ok());
    auto r = TraceReader::Open(path_);
    EXPECT_TRUE(r.ok());
    std::vector<iot_syscall> out;
    for (;;) {
      auto n = r.value()->Next();
      EXPECT_TRUE(n.ok());
      if (!n.ok() || !n.value()) break;
      if (n.value()->type == IOT_REC_SYSCALL) out.push_back(As<iot_syscall>(n.value()));
    }
    return out;
  }

  std::string path_;
  std::unique_ptr<TraceWriter> writer_;
  std::unique_ptr<RingConsumer> consumer_;
};

// What the kernel's iot_sc_emit_short sends for a full record with default fields.
iot_wire_syscall_short ShortOf(const iot_syscall& sc) {
  iot_wire_syscall_short w;
  memset(&w, 0, sizeof w);
  w.hdr.type = IOT_WIRE_SYSCALL_SHORT;
  w.hdr.size = sizeof w;
  w.op = sc.op;
  w.cpu = sc.cpu;
  w.ts = sc.ts;
  w.tgid = sc.tgid;
  w.tid = sc.tid;
  w.dur = static_cast<uint32_t>(sc.dur);
  w.fd = sc.fd;
  w.ret = static_cast<int32_t>(sc.ret);
  w.length = static_cast<uint32_t>(sc.length);
  w.offset = sc.offset;
  w.ino = sc.ino;
  w.fsize = sc.fsize;
  w.dev = sc.dev;
  w.ftype = sc.ftype;
  w.sflags = sc.sflags;
  return w;
}

TEST_F(ShortSyscallTest, ExpandsToTheFullRecordByteForByte) {
  iot_syscall full;
  memset(&full, 0, sizeof full);
  InitRecord(&full, IOT_REC_SYSCALL);
  full.op = IOT_OP_PREAD64;
  full.cpu = 3;
  full.ts = 123456789012345ull;
  full.dur = 0xfffffffful;
  full.tgid = 41;
  full.tid = 42;
  full.ret = -5;  // -EIO: the sign survives the 32-bit field
  full.fd = 9;
  full.fd2 = -1;
  full.offset = 1ull << 40;
  full.length = 0xffffffffu;
  full.ino = 0x123456789abcull;
  full.fsize = 1ull << 36;
  full.dev = (8u << 20) | 1;
  full.ftype = 8;
  full.sflags = IOT_SCF_NO_FILE;
  iot_wire_syscall_short w = ShortOf(full);
  ASSERT_TRUE(consumer_->Handle(reinterpret_cast<const uint8_t*>(&w), sizeof w).ok());
  std::vector<iot_syscall> recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(memcmp(&recs[0], &full, sizeof full), 0);
  EXPECT_EQ(recs[0].ret, -5);
  EXPECT_EQ(consumer_->counts().records[IOT_REC_SYSCALL], 1u);
  EXPECT_EQ(consumer_->counts().malformed, 0u);
}

TEST_F(ShortSyscallTest, ShorterThanItsStructIsMalformedAndWritesNothing) {
  iot_syscall full;
  memset(&full, 0, sizeof full);
  InitRecord(&full, IOT_REC_SYSCALL);
  full.op = IOT_OP_READ;
  full.fd2 = -1;
  iot_wire_syscall_short w = ShortOf(full);
  w.hdr.size = sizeof w - 8;
  ASSERT_TRUE(consumer_->Handle(reinterpret_cast<const uint8_t*>(&w), sizeof w - 8).ok());
  EXPECT_EQ(consumer_->counts().malformed, 1u);
  EXPECT_TRUE(Records().empty());
}

TEST(ShortSyscallWire, IsSmallerThanTheRecordAndADistinctType) {
  static_assert(sizeof(iot_wire_syscall_short) == 72, "the short form's layout is fixed");
  static_assert(sizeof(iot_wire_syscall_short) % 8 == 0, "ring records stay 8-aligned");
  EXPECT_LT(sizeof(iot_wire_syscall_short), sizeof(iot_syscall));
  for (uint16_t t : {IOT_WIRE_SYSCALL_EXT, IOT_WIRE_EXEC, IOT_WIRE_INTENT}) {
    EXPECT_NE(t, IOT_WIRE_SYSCALL_SHORT);
  }
  EXPECT_GT(IOT_WIRE_SYSCALL_SHORT, IOT_REC_MAX);
}

}  // namespace
}  // namespace iotwin::capture
