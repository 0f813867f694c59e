// Async request opcodes in the interop formats come from the op table (format/op_info.h): the
// strace importer reads IOCB_CMD_* names by it, the Chrome exporter names requests by it.
#include <gtest/gtest.h>
#include <linux/aio_abi.h>
#include <linux/io_uring.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "format/records.h"
#include "interop/exporters.h"
#include "interop_test_util.h"
#include "trace_builder.h"

namespace iotwin::interop {
namespace {

using testing::ImportOutcome;

TEST(StraceImportAsyncNames, IocbOpcodesByName) {
  ImportOutcome out;
  testing::ImportText(
      &out, ImportFormat::kStrace,
      "100 io_submit(0x7f0000001000, 4, [{aio_data=1, aio_lio_opcode=IOCB_CMD_PREAD, "
      "aio_fildes=3, aio_buf=0x1, aio_nbytes=4096, aio_offset=0}, {aio_data=2, "
      "aio_lio_opcode=IOCB_CMD_PWRITEV, aio_fildes=3, aio_buf=[{iov_base=0x1, iov_len=512}], "
      "aio_offset=4096}, {aio_data=3, aio_lio_opcode=IOCB_CMD_FDSYNC, aio_fildes=3}, "
      "{aio_data=4, aio_lio_opcode=42, aio_fildes=3}]) = 4\n");
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  std::vector<int> opcodes;
  for (const iot_async_io& a : out.sink.Of<iot_async_io>(IOT_REC_ASYNC_IO)) {
    EXPECT_EQ(a.engine, IOT_AIO_ENGINE_LIBAIO);
    opcodes.push_back(a.opcode);
  }
  EXPECT_EQ(opcodes, (std::vector<int>{IOCB_CMD_PREAD, IOCB_CMD_PWRITEV, IOCB_CMD_FDSYNC, 42}));
}

std::vector<std::string> ChromeAsyncNames(const test::TraceBuilder& b) {
  testing::ScratchDir dir;
  EXPECT_TRUE(b.WriteFile(dir / "t.iotwin").ok());
  auto r = ExportChrome(dir / "t.iotwin", dir / "t.json");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  std::vector<std::string> names;
  auto doc = nlohmann::json::parse(testing::ReadFile(dir / "t.json"));
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("ph", "") == "b") names.push_back(e.value("name", ""));
  }
  return names;
}

// Every opcode the table names is named; the others by number.
TEST(ChromeExportAsyncNames, NamesComeFromTheOpTable) {
  test::TraceBuilder b;
  uint64_t req = 1;
  for (uint8_t op : {IORING_OP_READ, IORING_OP_WRITEV, IORING_OP_POLL_ADD, IORING_OP_OPENAT}) {
    b.Async(10, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, op, 1, req++, 3, 0, 4096);
  }
  b.Async(10, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, 250, 1, req++, 3, 0, 4096);
  b.Async(10, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_SUBMIT, IOCB_CMD_PREADV, 2, req++, 3, 0, 4096);
  b.Async(10, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_SUBMIT, 4, 2, req++, 3, 0, 4096);
  EXPECT_EQ(ChromeAsyncNames(b),
            (std::vector<std::string>{"read", "writev", "poll_add", "openat", "io_uring op 250",
                                      "preadv", "iocb 4"}));
}

}  // namespace
}  // namespace iotwin::interop
