// iotwin record, asynchronous I/O: every io_uring and libaio request is recorded at submission
// (opcode, fd, offset, length, user_data) and at completion (user_data, result), as the program
// logged them.
#include <map>

#include "record_check.h"

namespace iotwin::test {
namespace {

struct Recorded {
  RunResult run;
  LoadedTrace trace;
  std::vector<nlohmann::json> log;
};

Recorded RecordProg(const TempDir& dir, const std::string& prog) {
  Recorded r;
  std::string trace = dir / "trace.iotwin";
  std::string log = dir / "calls.log";
  r.run = Run({IotwinBin(), "record", "-o", trace, "--", TestProg(prog), log, dir.path()}, 120);
  r.trace = LoadTrace(trace);
  r.log = ReadLog(log);
  return r;
}

std::vector<nlohmann::json> OfKind(const std::vector<nlohmann::json>& log, const std::string& k) {
  std::vector<nlohmann::json> out;
  for (const auto& e : log) {
    if (e.value("kind", "") == k) out.push_back(e);
  }
  return out;
}

// ASYNC_IO records of one engine and phase, by user_data.
std::map<uint64_t, iot_async_io> Requests(const LoadedTrace& t, uint8_t engine, uint8_t phase) {
  std::map<uint64_t, iot_async_io> out;
  for (const auto& a : t.asyncs) {
    if (a.engine == engine && a.phase == phase) out[a.user_data] = a;
  }
  return out;
}

TEST(RecordAsync, IoUringRequestsAreRecordedOneByOne) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  Recorded r = RecordProg(dir, "io_uring_rw");
  if (r.run.exit_code == 4) GTEST_SKIP() << "io_uring unavailable: " << r.run.err;
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  ASSERT_TRUE(r.trace.error.empty()) << r.trace.error;
  ASSERT_TRUE(r.trace.summary.has_value());
  EXPECT_EQ(LostInSummary(r.trace), 0u);
  ASSERT_TRUE(r.trace.meta["layers"]["async"]["enabled"].get<bool>())
      << r.trace.meta["layers"]["async"].dump();

  auto submits = OfKind(r.log, "submit");
  auto completes = OfKind(r.log, "complete");
  ASSERT_EQ(submits.size(), 8u);
  ASSERT_EQ(completes.size(), 8u);
  auto rec_submits = Requests(r.trace, IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT);
  auto rec_completes = Requests(r.trace, IOT_AIO_ENGINE_URING, IOT_AIO_COMPLETE);
  EXPECT_EQ(rec_submits.size(), 8u);
  EXPECT_EQ(rec_completes.size(), 8u);
  uint32_t pid = r.log[0]["pid"].get<uint32_t>();
  for (const auto& s : submits) {
    uint64_t ud = s["user_data"].get<uint64_t>();
    auto it = rec_submits.find(ud);
    ASSERT_NE(it, rec_submits.end()) << "submit of user_data " << ud << " not recorded";
    const iot_async_io& a = it->second;
    EXPECT_EQ(a.opcode, s["opcode"].get<int>()) << ud;
    EXPECT_EQ(a.fd, s["fd"].get<int>()) << ud;
    EXPECT_EQ(a.offset, s["offset"].get<uint64_t>()) << ud;
    EXPECT_EQ(a.length, s["length"].get<uint64_t>()) << ud;
    EXPECT_EQ(a.tgid, pid);
    EXPECT_NE(a.ctx, 0u);
  }
  for (const auto& c : completes) {
    uint64_t ud = c["user_data"].get<uint64_t>();
    auto it = rec_completes.find(ud);
    ASSERT_NE(it, rec_completes.end()) << "completion of user_data " << ud << " not recorded";
    EXPECT_EQ(it->second.res, c["res"].get<int64_t>()) << ud;
    EXPECT_EQ(it->second.tgid, pid);
    EXPECT_GE(it->second.ts, rec_submits[ud].ts);
    EXPECT_EQ(it->second.ctx, rec_submits[ud].ctx);
  }
  // The submitting system calls are there too.
  size_t enters = 0;
  for (const auto& s : r.trace.syscalls) {
    if (s.sc.op == IOT_OP_IO_URING_ENTER && s.sc.tgid == pid) enters++;
  }
  EXPECT_GE(enters, 2u);
}

TEST(RecordAsync, LibaioIocbsAndEventsAreRecorded) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  Recorded r = RecordProg(dir, "io_libaio");
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  ASSERT_TRUE(r.trace.error.empty()) << r.trace.error;
  ASSERT_TRUE(r.trace.summary.has_value());
  EXPECT_EQ(LostInSummary(r.trace), 0u);
  // The system calls themselves (io_setup, io_submit, io_getevents, io_destroy).
  auto problems = CompareCalls(r.log, r.trace);
  EXPECT_TRUE(problems.empty()) << Join(problems);

  auto submits = OfKind(r.log, "submit");
  auto completes = OfKind(r.log, "complete");
  ASSERT_EQ(submits.size(), 6u);
  ASSERT_EQ(completes.size(), 6u);
  auto rec_submits = Requests(r.trace, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_SUBMIT);
  auto rec_completes = Requests(r.trace, IOT_AIO_ENGINE_LIBAIO, IOT_AIO_COMPLETE);
  EXPECT_EQ(rec_submits.size(), 6u);
  EXPECT_EQ(rec_completes.size(), 6u);
  for (const auto& s : submits) {
    uint64_t ud = s["user_data"].get<uint64_t>();
    auto it = rec_submits.find(ud);
    ASSERT_NE(it, rec_submits.end()) << "iocb with data " << ud << " not recorded";
    const iot_async_io& a = it->second;
    EXPECT_EQ(a.opcode, s["opcode"].get<int>());
    EXPECT_EQ(a.fd, s["fd"].get<int>());
    EXPECT_EQ(a.offset, s["offset"].get<uint64_t>());
    EXPECT_EQ(a.length, s["length"].get<uint64_t>());
    EXPECT_EQ(a.req_id, s["iocb"].get<uint64_t>());
  }
  for (const auto& c : completes) {
    uint64_t ud = c["user_data"].get<uint64_t>();
    auto it = rec_completes.find(ud);
    ASSERT_NE(it, rec_completes.end()) << "event with data " << ud << " not recorded";
    EXPECT_EQ(it->second.res, c["res"].get<int64_t>());
    EXPECT_EQ(it->second.req_id, c["iocb"].get<uint64_t>());
    EXPECT_EQ(it->second.ctx, rec_submits[ud].ctx);
  }
}

}  // namespace
}  // namespace iotwin::test
