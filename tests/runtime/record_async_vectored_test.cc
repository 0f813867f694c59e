// Vectored and registered-buffer async I/O, recorded and replayed as it was: io_uring READV /
// WRITEV and libaio PREADV / PWRITEV carry their bytes (the sum of the iovec lengths, not the
// iovec count the request passes) and their iovec shape; fio's io_uring and libaio engines in
// every mode record the bytes fio says it moved, and replay them without a mismatch: requests on
// registered files (IOSQE_FIXED_FILE, fio's --registerfiles and --sqthread_poll) included, through
// the file table io_uring_register's FDLIST record lists.
#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <set>
#include <sstream>

#include "record_check.h"
#include "replay_util.h"

namespace iotwin::test {
namespace {

std::vector<uint64_t> ParseLens(const std::string& s) {
  std::vector<uint64_t> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoull(item));
  return out;
}

TEST(RecordAsyncVectored, RequestsCarryTheirBytesAndIovecShape) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  const std::string trace = dir / "trace.iotwin", log = dir / "calls.log";
  RunResult run = iotwin::test::Run(
      {IotwinBin(), "record", "-o", trace, "--", TestProg("io_vec_async"), log, dir.path()}, 120);
  if (run.exit_code == 4) GTEST_SKIP() << "io_uring unavailable: " << run.err;
  ASSERT_EQ(run.exit_code, 0) << run.err;
  LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  EXPECT_EQ(LostInSummary(t), 0u);
  std::map<std::pair<uint8_t, uint64_t>, iot_async_io> submits;  // (engine, user_data)
  for (const auto& a : t.asyncs) {
    if (a.phase == IOT_AIO_SUBMIT) submits[{a.engine, a.user_data}] = a;
  }
  size_t checked = 0;
  for (const auto& e : ReadLog(log)) {
    if (e.value("kind", "") != "submit") continue;
    const uint8_t engine =
        e["engine"] == "libaio" ? IOT_AIO_ENGINE_LIBAIO : IOT_AIO_ENGINE_URING;
    const uint64_t ud = e["user_data"].get<uint64_t>();
    auto it = submits.find({engine, ud});
    ASSERT_NE(it, submits.end()) << e.dump();
    const iot_async_io& a = it->second;
    const std::vector<uint64_t> lens = ParseLens(e["lens"].get<std::string>());
    EXPECT_EQ(a.opcode, e["opcode"].get<int>()) << e.dump();
    EXPECT_EQ(a.offset, e["offset"].get<uint64_t>()) << e.dump();
    EXPECT_EQ(a.length, e["bytes"].get<uint64_t>()) << "bytes, not the iovec count: " << e.dump();
    EXPECT_EQ(a.iov_count, e["iovcnt"].get<uint64_t>()) << e.dump();
    EXPECT_EQ(a.aflags & (IOT_AIOF_BYTES | IOT_AIOF_IOV_FAULT), IOT_AIOF_BYTES) << e.dump();
    auto iv = t.async_iovecs.find({a.tid, a.ts});
    ASSERT_NE(iv, t.async_iovecs.end()) << "no IOVEC record after " << e.dump();
    EXPECT_EQ(iv->second.first, lens.size());
    // The first IOT_IOVEC_MAX lengths are kept.
    const std::vector<uint64_t> kept(lens.begin(),
                                     lens.begin() + std::min<size_t>(lens.size(), IOT_IOVEC_MAX));
    EXPECT_EQ(iv->second.second, kept) << e.dump();
    checked++;
  }
  EXPECT_EQ(checked, 6u);  // io_uring: 2 writes, 2 reads; libaio: 1 write, 1 read
}

// ---- fio, every engine mode ----------------------------------------------------------------

std::string FindFio() {
  for (const char* p : {"/usr/bin/fio", "/usr/local/bin/fio"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return {};
}

bool DirectIoWorks(const std::string& dir) {
  const std::string p = dir + "/direct.probe";
  int fd = open(p.c_str(), O_CREAT | O_RDWR | O_DIRECT, 0644);
  if (fd >= 0) close(fd);
  unlink(p.c_str());
  return fd >= 0;
}

struct FioMode {
  const char* label;
  std::vector<std::string> args;
  std::string read_op, write_op;  // the request names report lists
  // Requests name registered files (IOSQE_FIXED_FILE) by index into the ring's file table.
  bool registered_files = false;
};

const FioMode kFioModes[] = {
    {"uring_vectored", {"--ioengine=io_uring", "--nonvectored=0"}, "READV", "WRITEV"},
    {"uring_nonvectored", {"--ioengine=io_uring", "--nonvectored=1"}, "READ", "WRITE"},
    {"uring_fixedbufs", {"--ioengine=io_uring", "--fixedbufs=1"}, "READ_FIXED", "WRITE_FIXED"},
    {"uring_registerfiles", {"--ioengine=io_uring", "--registerfiles=1", "--nonvectored=0"},
     "READV", "WRITEV", true},
    {"uring_registerfiles_fixedbufs",
     {"--ioengine=io_uring", "--registerfiles=1", "--fixedbufs=1"}, "READ_FIXED", "WRITE_FIXED",
     true},
    // fio registers its files for a polled submission queue.
    {"uring_sqpoll", {"--ioengine=io_uring", "--sqthread_poll=1", "--nonvectored=0"}, "READV",
     "WRITEV", true},
    {"libaio", {"--ioengine=libaio"}, "PREAD", "PWRITE"},
};

struct FioRun {
  std::string trace;
  uint64_t read_bytes = 0, write_bytes = 0;  // fio's own count
};

// Records fio moving 1 MiB in 16 KiB requests, half reads, half writes, 4 in flight.
FioRun RecordFio(const TempDir& dir, const FioMode& mode, bool direct) {
  FioRun out;
  out.trace = dir / "fio.iotwin";
  const std::string json = dir / "fio.json";
  std::vector<std::string> argv = {IotwinBin(), "record", "--no-status", "-o", out.trace, "--",
                                   FindFio(), "--name=x", "--filename=" + (dir / "data"),
                                   "--size=1M", "--bs=16k", "--rw=rw", "--iodepth=4",
                                   "--direct=" + std::string(direct ? "1" : "0"),
                                   "--output-format=json", "--output=" + json};
  argv.insert(argv.end(), mode.args.begin(), mode.args.end());
  RunResult r = Run(argv, 180);
  EXPECT_EQ(r.exit_code, 0) << mode.label << "\n" << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(ReadFileText(json), nullptr, false);
  if (j.is_discarded() || !j.contains("jobs")) {
    ADD_FAILURE() << mode.label << ": no fio JSON output:\n" << r.out << r.err;
    return out;
  }
  out.read_bytes = j["jobs"][0]["read"]["io_bytes"].get<uint64_t>();
  out.write_bytes = j["jobs"][0]["write"]["io_bytes"].get<uint64_t>();
  return out;
}

// Requests (`bytes`: asked for, `bytes_done`: results) of the async rows named `name`.
struct AsyncRow {
  uint64_t count = 0, bytes = 0, done = 0, dominant = 0, errors = 0;
};
AsyncRow ReportRow(const nlohmann::json& report, const std::string& name) {
  AsyncRow r;
  if (!report.contains("async") || !report["async"].is_object()) return r;
  for (const auto& row : report["async"]["rows"]) {
    if (row["name"] != name) continue;
    r.count += row["count"].get<uint64_t>();
    r.bytes += row["bytes"].get<uint64_t>();
    r.done += row["bytes_done"].get<uint64_t>();
    r.errors += row["errors"].get<uint64_t>();
    if (row.contains("dominant")) r.dominant = row["dominant"]["size"].get<uint64_t>();
  }
  return r;
}

void CheckReport(const FioMode& mode, bool direct, const FioRun& fio) {
  const std::string what = std::string(mode.label) + (direct ? " O_DIRECT" : " buffered");
  RunResult r = Run({IotwinBin(), "report", fio.trace, "--json", "--no-progress"});
  ASSERT_EQ(r.exit_code, 0) << what << "\n" << r.err;
  const nlohmann::json report = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << what;
  ASSERT_GT(fio.read_bytes, 0u) << what;
  ASSERT_GT(fio.write_bytes, 0u) << what;
  for (const auto& [name, bytes] : {std::pair{mode.read_op, fio.read_bytes},
                                    std::pair{mode.write_op, fio.write_bytes}}) {
    const AsyncRow row = ReportRow(report, name);
    EXPECT_EQ(row.bytes, bytes) << what << " " << name << ": " << report["async"].dump();
    EXPECT_EQ(row.done, bytes) << what << " " << name;
    EXPECT_EQ(row.count, bytes / 16384) << what << " " << name;
    EXPECT_EQ(row.errors, 0u) << what << " " << name;
    EXPECT_EQ(row.dominant, 16384u) << what << " " << name;
  }
}

// The fast replay into a sandbox issues every request with its recorded shape: the async
// requests move the bytes fio moved, and nothing differs from the recording.
void CheckReplay(const TempDir& dir, const FioMode& mode, bool direct, const FioRun& fio) {
  const std::string what = std::string(mode.label) + (direct ? " O_DIRECT" : " buffered");
  ReplayRun r = RunReplayCmd({fio.trace, "--root", dir / "root", "--pace", "fast", "--json",
                              "-q"}, 180);
  ASSERT_EQ(r.run.exit_code, 0) << what << "\n" << r.run.err;
  EXPECT_EQ(J(r.summary, "/mismatches/total"), 0u) << what << "\n"
                                                   << r.summary["mismatches"].dump(2);
  const std::string prefix =
      mode.read_op.rfind("PREAD", 0) == 0 ? "/per_op/libaio:" : "/per_op/uring:";
  std::string rd = mode.read_op, wr = mode.write_op;
  for (std::string* s : {&rd, &wr})
    for (char& c : *s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (mode.registered_files) {
    // Each request is issued on the descriptor registered in its slot: none is skipped.
    const nlohmann::json& skipped = r.summary["skipped"]["by_reason"];
    for (const auto& [reason, ops] : skipped.items()) {
      EXPECT_FALSE(ops.contains(prefix.substr(8) + rd) || ops.contains(prefix.substr(8) + wr))
          << what << ": " << reason << " " << ops.dump();
    }
  }
  EXPECT_EQ(J(r.summary, prefix + rd + "/bytes"), fio.read_bytes) << what << "\n"
                                                                   << r.summary["per_op"].dump();
  EXPECT_EQ(J(r.summary, prefix + wr + "/bytes"), fio.write_bytes) << what;
}

class FioAsyncModes : public ::testing::TestWithParam<std::tuple<FioMode, bool>> {};

TEST_P(FioAsyncModes, RecordsWhatFioMovedAndReplaysIt) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  const auto& [mode, direct] = GetParam();
  if (FindFio().empty()) GTEST_SKIP() << "fio is not installed";
  TempDir dir;
  if (direct && !DirectIoWorks(dir.path())) GTEST_SKIP() << "no O_DIRECT in " << dir.path();
  FioRun run = RecordFio(dir, mode, direct);
  if (HasFailure()) return;
  CheckReport(mode, direct, run);
  CheckReplay(dir, mode, direct, run);
}

INSTANTIATE_TEST_SUITE_P(Engines, FioAsyncModes,
                         ::testing::Combine(::testing::ValuesIn(kFioModes), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).label) +
                                  (std::get<1>(info.param) ? "_direct" : "_buffered");
                         });

}  // namespace
}  // namespace iotwin::test
