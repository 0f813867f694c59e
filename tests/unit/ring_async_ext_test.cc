// The capture's consumer turns a vectored async request's wire record (IOT_WIRE_ASYNC_EXT) into
// its ASYNC_IO record followed by its IOVEC record (same tid and ts), and counts a record whose
// tail does not hold the lengths it claims as malformed instead of reading past it.
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

namespace iotwin::capture {
namespace {

std::vector<uint8_t> Wire(const std::vector<uint64_t>& lens, uint16_t captured_claim) {
  iot_wire_async_ext ext;
  memset(&ext, 0, sizeof ext);
  ext.a.engine = IOT_AIO_ENGINE_URING;
  ext.a.phase = IOT_AIO_SUBMIT;
  ext.a.opcode = 2;  // IORING_OP_WRITEV
  ext.a.ts = 5000;
  ext.a.tid = ext.a.tgid = 42;
  ext.a.length = 12288;
  ext.a.iov_count = 70;
  ext.a.aflags = IOT_AIOF_BYTES;
  ext.iov_captured = captured_claim;
  std::vector<uint8_t> out(sizeof ext + lens.size() * 8);
  ext.a.hdr.type = IOT_WIRE_ASYNC_EXT;
  ext.a.hdr.size = static_cast<uint16_t>(out.size());
  memcpy(out.data(), &ext, sizeof ext);
  memcpy(out.data() + sizeof ext, lens.data(), lens.size() * 8);
  return out;
}

TEST(RingAsyncExt, BecomesTheRequestAndItsIovecRecord) {
  const std::string path = std::filesystem::temp_directory_path() /
                           ("iotwin-async-ext-" + std::to_string(getpid()) + ".iotwin");
  struct Cleanup {
    std::string p;
    ~Cleanup() { std::filesystem::remove(p); }
  } cleanup{path};
  auto w = TraceWriter::Create(path, nlohmann::json::object());
  ASSERT_TRUE(w.ok());
  RingConsumer consumer(w.value().get());
  const std::vector<uint64_t> lens = {4096, 8192};
  std::vector<uint8_t> good = Wire(lens, 2);
  ASSERT_TRUE(consumer.Handle(good.data(), good.size()).ok());
  std::vector<uint8_t> bad = Wire(lens, 3);  // claims a third length it does not carry
  ASSERT_TRUE(consumer.Handle(bad.data(), bad.size()).ok());
  std::vector<uint8_t> over = Wire(lens, IOT_IOVEC_MAX + 1);
  ASSERT_TRUE(consumer.Handle(over.data(), over.size()).ok());
  EXPECT_EQ(consumer.counts().malformed, 2u);
  ASSERT_TRUE(w.value()->Finish(nlohmann::json::object()).ok());

  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok());
  std::vector<uint16_t> types;
  for (;;) {
    auto n = r.value()->Next();
    ASSERT_TRUE(n.ok());
    const iot_rec_hdr* h = n.value();
    if (!h) break;
    types.push_back(h->type);
    if (h->type == IOT_REC_ASYNC_IO) {
      const auto& a = As<iot_async_io>(h);
      EXPECT_EQ(h->size, sizeof(iot_async_io));
      EXPECT_EQ(a.length, 12288u);
      EXPECT_EQ(a.iov_count, 70u);
      EXPECT_EQ(a.aflags, IOT_AIOF_BYTES);
    } else if (h->type == IOT_REC_IOVEC) {
      const auto& v = As<iot_iovec>(h);
      EXPECT_EQ(v.tid, 42u);
      EXPECT_EQ(v.ts, 5000u);
      EXPECT_EQ(v.count, 70u);
      ASSERT_EQ(v.captured, 2u);
      uint64_t got[2];
      memcpy(got, reinterpret_cast<const uint8_t*>(h) + sizeof(iot_iovec), sizeof got);
      EXPECT_EQ(got[0], 4096u);
      EXPECT_EQ(got[1], 8192u);
    }
  }
  EXPECT_EQ(types, (std::vector<uint16_t>{IOT_REC_ASYNC_IO, IOT_REC_IOVEC}));
}

}  // namespace
}  // namespace iotwin::capture
