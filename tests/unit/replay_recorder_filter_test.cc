// FilterTraceToThreads (replay --record): keeps the replay workers' records, drops the rest.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "format/records.h"
#include "format/trace_reader.h"
#include "format/trace_writer.h"
#include "replay/recorder.h"
#include "temp_dir.h"

namespace iotwin::replay {
namespace {

iot_async_io Async(uint32_t tid, uint8_t phase, uint64_t req, uint64_t ts) {
  iot_async_io a{};
  InitRecord(&a, IOT_REC_ASYNC_IO);
  a.engine = IOT_AIO_ENGINE_URING;
  a.phase = phase;
  a.opcode = 23;  // IORING_OP_WRITE
  a.ctx = 0xabc;
  a.req_id = req;
  a.user_data = req;
  a.tgid = 10;
  a.tid = tid;
  a.ts = ts;
  a.length = 4096;
  a.res = phase == IOT_AIO_COMPLETE ? 4096 : 0;
  return a;
}

// io_uring punts buffered writes to io-wq workers, threads of the replaying process that are
// not replay workers: the completion a worker thread posts belongs with the worker's
// submission. Dropping it left every such request without a completion in the recording.
TEST(ReplayRecorderFilter, KeepsCompletionsOfKeptSubmissionsPostedByOtherThreads) {
  test::TempDir dir;
  std::string in = dir / "in.iotwin";
  std::string out = dir / "out.iotwin";
  {
    auto w = TraceWriter::Create(in, nlohmann::json{{"tool", "test"}});
    ASSERT_TRUE(w.ok());
    auto& writer = *w.value();
    // The completion of request 1 is written before its submission (another CPU's buffer).
    ASSERT_TRUE(writer.Append(Async(/*io-wq*/ 77, IOT_AIO_COMPLETE, 1, 200)).ok());
    ASSERT_TRUE(writer.Append(Async(/*worker*/ 11, IOT_AIO_SUBMIT, 1, 100)).ok());
    ASSERT_TRUE(writer.Append(Async(/*bookkeeper*/ 12, IOT_AIO_SUBMIT, 2, 300)).ok());
    ASSERT_TRUE(writer.Append(Async(77, IOT_AIO_COMPLETE, 2, 400)).ok());
    ASSERT_TRUE(writer.Append(Async(11, IOT_AIO_SUBMIT, 3, 500)).ok());
    ASSERT_TRUE(writer.Append(Async(11, IOT_AIO_COMPLETE, 3, 600)).ok());
    ASSERT_TRUE(writer.Finish(nlohmann::json::object()).ok());
  }
  Status st = FilterTraceToThreads(in, out, {11}, nlohmann::json{{"pace", "fast"}});
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto r = TraceReader::Open(out);
  ASSERT_TRUE(r.ok());
  std::vector<std::pair<uint8_t, uint64_t>> seen;  // (phase, request)
  while (true) {
    auto rec = r.value()->Next();
    ASSERT_TRUE(rec.ok());
    if (!rec.value()) break;
    if (rec.value()->type != IOT_REC_ASYNC_IO) continue;
    const auto& a = As<iot_async_io>(rec.value());
    seen.emplace_back(a.phase, a.req_id);
  }
  EXPECT_EQ(seen, (std::vector<std::pair<uint8_t, uint64_t>>{{IOT_AIO_COMPLETE, 1},
                                                             {IOT_AIO_SUBMIT, 1},
                                                             {IOT_AIO_SUBMIT, 3},
                                                             {IOT_AIO_COMPLETE, 3}}));
}

}  // namespace
}  // namespace iotwin::replay
