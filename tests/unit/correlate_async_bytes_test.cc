// The layers report's application bytes of async requests: an opcode counts as a read or a
// write by the one async-opcode classification (format/op_info.h), per engine.
#include <gtest/gtest.h>

#include <cstdint>

#include "correlate/correlate.h"
#include "correlate/layers_report.h"
#include "format/records.h"

namespace iotwin::correlate {
namespace {

// One completed async request of `engine`/`opcode` that moved `bytes`.
void AddAsync(Correlator& c, uint8_t engine, uint8_t opcode, uint64_t req_id, int32_t bytes) {
  iot_async_io a{};
  InitRecord(&a, IOT_REC_ASYNC_IO);
  a.engine = engine;
  a.opcode = opcode;
  a.phase = IOT_AIO_SUBMIT;
  a.ts = 1000 + req_id;
  a.tgid = a.tid = 100;
  a.req_id = req_id;
  a.length = static_cast<uint64_t>(bytes);
  c.Add(&a.hdr);
  a.phase = IOT_AIO_COMPLETE;
  a.ts = 5000 + req_id;
  a.res = bytes;
  c.Add(&a.hdr);
}

uint64_t AppBytes(const nlohmann::json& report, const char* dir) {
  return report["amplification"][dir]["application"].get<uint64_t>();
}

TEST(LayersAsyncBytes, ReadsAndWritesOfBothEnginesCount) {
  Correlator c;
  AddAsync(c, IOT_AIO_ENGINE_URING, 22, 1, 4096);  // IORING_OP_READ
  AddAsync(c, IOT_AIO_ENGINE_URING, 1, 2, 512);    // IORING_OP_READV
  AddAsync(c, IOT_AIO_ENGINE_URING, 23, 3, 8192);  // IORING_OP_WRITE
  AddAsync(c, IOT_AIO_ENGINE_URING, 3, 4, 100);    // IORING_OP_FSYNC: no data
  AddAsync(c, IOT_AIO_ENGINE_LIBAIO, 0, 5, 1024);  // IOCB_CMD_PREAD
  AddAsync(c, IOT_AIO_ENGINE_LIBAIO, 8, 6, 2048);  // IOCB_CMD_PWRITEV
  const nlohmann::json r = LayersReport(c.Finish());
  EXPECT_EQ(AppBytes(r, "read"), 4096u + 512 + 1024);
  EXPECT_EQ(AppBytes(r, "write"), 8192u + 2048);
}

// A damaged trace's unknown engine says nothing about its opcodes: its requests move no bytes
// the report can name, rather than being read as libaio's.
TEST(LayersAsyncBytes, UnknownEngineCountsNeither) {
  Correlator c;
  AddAsync(c, 9, 0, 1, 4096);  // IOCB_CMD_PREAD's number
  AddAsync(c, 9, 1, 2, 4096);  // IOCB_CMD_PWRITE's number
  const nlohmann::json r = LayersReport(c.Finish());
  EXPECT_EQ(AppBytes(r, "read"), 0u);
  EXPECT_EQ(AppBytes(r, "write"), 0u);
}

}  // namespace
}  // namespace iotwin::correlate
