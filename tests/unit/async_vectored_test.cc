// Vectored async requests (io_uring READV/WRITEV, libaio PREADV/PWRITEV) in the model and the
// analyzer: a request's bytes are the sum of its iovec lengths and its shape is the IOVEC record
// after it; traces of older writers, whose records (88 bytes) carry the iovec count in `length`,
// take the completion's result as the request's bytes.
#include <fcntl.h>
#include <linux/aio_abi.h>

#include <gtest/gtest.h>

#include "analysis/analyzer.h"
#include "format/op_info.h"
#include "model_test_util.h"

namespace iotwin::test {
namespace {

constexpr uint8_t kReadv = 1, kWritev = 2;  // IORING_OP_READV, IORING_OP_WRITEV
constexpr uint16_t kOlderAsyncSize = 88;    // ASYNC_IO before ring_flags..aflags

std::vector<uint64_t> Lens(const model::TraceModel& m, const model::Op& op) {
  return std::vector<uint64_t>(m.ExtraBegin(op), m.ExtraBegin(op) + op.extra_count);
}

std::vector<const model::Op*> Submits(const model::TraceModel& m, uint32_t tid) {
  std::vector<const model::Op*> out;
  const model::Thread* t = FindThread(m, tid);
  if (t == nullptr) return out;
  for (const auto& op : t->ops) {
    if (op.kind == model::OpKind::kAsyncSubmit) out.push_back(&op);
  }
  return out;
}

TEST(AsyncVectored, RequestsKeepTheirBytesAndShape) {
  TraceBuilder b;
  b.Openat(100, "/v/data", O_RDWR | O_DIRECT, 3, 1 << 20);
  b.AsyncVectored(100, IOT_AIO_ENGINE_URING, kWritev, 0xabc, 1, 3, 0, {4096, 8192, 4096});
  std::vector<uint64_t> many(80, 4096);  // more than the IOVEC record keeps
  b.AsyncVectored(100, IOT_AIO_ENGINE_URING, kReadv, 0xabc, 2, 3, 16384, many);
  b.AsyncVectored(100, IOT_AIO_ENGINE_LIBAIO, IOCB_CMD_PWRITEV, 0x7000, 3, 3, 1 << 20,
                  {4096, 4096});
  b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE, kWritev, 0xabc, 1, 3, 0, 0, 16384);
  b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE, kReadv, 0xabc, 2, 3, 0, 0, 80 * 4096);
  b.Async(100, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_COMPLETE, IOCB_CMD_PWRITEV, 0x7000, 3, 3, 0, 0,
          8192);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  auto s = Submits(*m, 100);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0]->aio.length, 16384u);
  EXPECT_EQ(Lens(*m, *s[0]), (std::vector<uint64_t>{4096, 8192, 4096}));
  // 64 lengths recorded, the other 16 share what is left of the total.
  EXPECT_EQ(s[1]->aio.length, 80u * 4096);
  EXPECT_EQ(Lens(*m, *s[1]), many);
  EXPECT_EQ(s[2]->aio.length, 8192u);
  EXPECT_EQ(Lens(*m, *s[2]), (std::vector<uint64_t>{4096, 4096}));
  EXPECT_EQ(m->stats().orphan_iovecs, 0u);
}

TEST(AsyncVectored, OlderTracesTakeTheResultAsTheBytes) {
  TraceBuilder b;
  b.Openat(100, "/v/data", O_RDWR | O_DIRECT, 3, 1 << 20);
  // An older writer's WRITEV of 3 iovecs: length 3 (the count), no IOVEC record.
  iot_async_io& w = b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, kWritev, 0xabc, 1, 3, 0, 3);
  w.aflags = 0;
  b.ShortenLast(kOlderAsyncSize);
  b.Advance(1000);
  b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE, kWritev, 0xabc, 1, 3, 0, 0, 12288);
  b.ShortenLast(kOlderAsyncSize);
  // Its non-vectored requests said their bytes already.
  iot_async_io& r = b.Async(100, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, 22, 0xabc, 2, 3, 0, 4096);
  r.aflags = 0;
  b.ShortenLast(kOlderAsyncSize);
  auto m = BuildModel(b);
  ASSERT_TRUE(m);
  auto s = Submits(*m, 100);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0]->aio.length, 12288u);
  EXPECT_EQ(Lens(*m, *s[0]), (std::vector<uint64_t>{4096, 4096, 4096}));
  EXPECT_EQ(s[1]->aio.length, 4096u);
  EXPECT_EQ(s[1]->extra_count, 0u);
}

iot_async_io Request(uint8_t phase, uint64_t ts, uint64_t req, uint64_t length, int64_t res,
                     uint16_t aflags) {
  iot_async_io a{};
  InitRecord(&a, IOT_REC_ASYNC_IO);
  a.engine = IOT_AIO_ENGINE_URING;
  a.phase = phase;
  a.opcode = kWritev;
  a.ts = ts;
  a.ctx = 0xabc;
  a.req_id = req;
  a.length = length;
  a.res = res;
  a.tgid = a.tid = 100;
  a.fd = 3;
  a.aflags = aflags;
  return a;
}

// report's async rows: the size asked for is the bytes, both for current records (their length)
// and older ones (their result).
TEST(AsyncVectored, AnalyzerSizesAreBytes) {
  for (uint16_t aflags : {uint16_t{IOT_AIOF_BYTES}, uint16_t{0}}) {
    analysis::Analyzer an{analysis::AnalyzerOptions{}};
    an.SetMeta(nlohmann::json::object());
    for (uint64_t i = 0; i < 4; i++) {
      // Current writers: length is bytes; older ones: the iovec count (1).
      iot_async_io s = Request(IOT_AIO_SUBMIT, 1000 + i, 10 + i, aflags ? 16384 : 1, 0, aflags);
      an.Consume(&s.hdr);
    }
    for (uint64_t i = 0; i < 4; i++) {
      iot_async_io c = Request(IOT_AIO_COMPLETE, 2000 + i, 10 + i, 0, 16384, 0);
      an.Consume(&c.hdr);
    }
    const nlohmann::json m = an.Model(std::nullopt);
    ASSERT_TRUE(m["async"].is_object()) << aflags;
    const nlohmann::json& row = m["async"]["rows"][0];
    EXPECT_EQ(row["name"], "WRITEV");
    EXPECT_EQ(row["bytes"], 4 * 16384) << aflags << row.dump();
    EXPECT_EQ(row["bytes_done"], 4 * 16384);
    EXPECT_EQ(row["dominant"]["size"], 16384) << aflags;
  }
}

TEST(AsyncVectored, LengthIsKnownUnlessAnOlderVectoredRecordOrAFault) {
  iot_async_io a{};
  a.engine = IOT_AIO_ENGINE_LIBAIO;
  a.opcode = IOCB_CMD_PREADV;
  EXPECT_FALSE(AsyncLengthKnown(a));
  a.aflags = IOT_AIOF_BYTES;
  EXPECT_TRUE(AsyncLengthKnown(a));
  a.aflags = IOT_AIOF_IOV_FAULT;
  EXPECT_FALSE(AsyncLengthKnown(a));
  a.aflags = 0;
  a.opcode = IOCB_CMD_PREAD;
  EXPECT_TRUE(AsyncLengthKnown(a));
}

}  // namespace
}  // namespace iotwin::test
