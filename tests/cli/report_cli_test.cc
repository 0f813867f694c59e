// `iotwin report` end to end on synthetic traces written with TraceWriter (no BPF needed).
#include <fcntl.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../unit/trace_builder.h"
#include "runtime_util.h"

namespace iotwin::test {
namespace {

constexpr uint32_t kDev = (8u << 20) | 1;
constexpr uint64_t kT0 = 1'000'000'000ULL;

// The CHEOPS'25 shape: model weights read in 128 KiB requests, a few 4 KiB index probes,
// a checkpoint written in 1 MiB chunks by a second thread.
TraceBuilder CheopsLike() {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = kT0 + 1000;
  t.ProcAt(IOT_PROC_START, ts, 500, 500, "python3");
  t.ProcAt(IOT_PROC_THREAD, ts, 500, 500, "writer", 500, 501);
  t.Open(500, ts += 1000, "/models/opt-13b/shard-0.bin", 3, kDev, 10);
  t.Open(500, ts += 1000, "/models/opt-13b/index.json", 4, kDev, 11);
  t.Open(501, ts += 1000, "/ckpt/kv.bin", 5, kDev, 12, O_WRONLY | O_CREAT, 500);
  for (int i = 0; i < 937; i++)
    t.Io(IOT_OP_READ, 500, ts += 20'000, 40'000, 3, kDev, 10, 0, 131072, 131072);
  for (int i = 0; i < 63; i++)
    t.Io(IOT_OP_PREAD64, 500, ts += 20'000, 9'000, 4, kDev, 11, uint64_t(i * 7919 % 97) * 4096,
         4096, 4096);
  for (int i = 0; i < 16; i++)
    t.Io(IOT_OP_PWRITE64, 501, ts += 100'000, 800'000, 5, kDev, 12, uint64_t(i) << 20, 1 << 20,
         1 << 20, 500);
  return t;
}

nlohmann::json Summary() { return {{"stop_reason", "exited"}, {"exit_status", 0}}; }

TEST(ReportCli, TextReportMakesTheDominantSizeObvious) {
  TempDir dir;
  std::string path = dir / "t.iotwin";
  ASSERT_TRUE(CheopsLike().WriteFile(path, Summary()).ok());
  RunResult r = test::Run({IotwinBin(), "report", path, "--no-progress"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 937 of 937 read() calls are 128 KiB.
  EXPECT_NE(r.out.find("read:     128 KiB = 100.0% of ops, 100.0% of bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pwrite64: 1 MiB = 100.0% of ops, 100.0% of bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/models/opt-13b/shard-0.bin"), std::string::npos);
  EXPECT_NE(r.out.find("python3"), std::string::npos);
  EXPECT_NE(r.out.find("writer"), std::string::npos);
  EXPECT_NE(r.out.find("nvme off (no NVMe device)"), std::string::npos);
  // Every line fits 100 columns.
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) EXPECT_LE(line.size(), 100u) << line;
}

TEST(ReportCli, JsonModelAndFilters) {
  TempDir dir;
  std::string path = dir / "t.iotwin";
  ASSERT_TRUE(CheopsLike().WriteFile(path, Summary()).ok());
  RunResult r = test::Run({IotwinBin(), "report", path, "--json", "--no-progress"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto m = nlohmann::json::parse(r.out);
  EXPECT_EQ(m["totals"]["read"]["ops"], 1000);
  EXPECT_EQ(m["totals"]["write"]["ops"], 16);
  EXPECT_EQ(m["capture"]["stop_reason"], "exited");
  EXPECT_TRUE(m["capture"]["complete"].get<bool>());
  // read() has no offset field set: tracked positions make the 937 reads sequential.
  EXPECT_EQ(m["offsets"]["tracked"], 937);
  EXPECT_GE(m["pattern"]["read"]["sequential"].get<int>(), 936);

  r = test::Run({IotwinBin(), "report", path, "--json", "--no-progress", "--filter", "tid=501"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  m = nlohmann::json::parse(r.out);
  EXPECT_EQ(m["totals"]["read"]["ops"], 0);
  EXPECT_EQ(m["totals"]["write"]["ops"], 16);

  r = test::Run({IotwinBin(), "report", path, "--json", "--no-progress", "--filter", "file=*.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  m = nlohmann::json::parse(r.out);
  EXPECT_EQ(m["totals"]["read"]["ops"], 63);
  EXPECT_EQ(m["files"]["total"], 1);

  r = test::Run({IotwinBin(), "report", path, "--json", "--no-progress", "--filter", "op=writes"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  m = nlohmann::json::parse(r.out);
  EXPECT_EQ(m["totals"]["read"]["ops"], 0);
  EXPECT_EQ(m["totals"]["write"]["ops"], 16);

  // Reads happen between ~5 ms and ~26 ms after the start.
  r = test::Run({IotwinBin(), "report", path, "--json", "--no-progress", "--from", "0.010", "--to", "0.015"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  m = nlohmann::json::parse(r.out);
  EXPECT_GT(m["totals"]["read"]["ops"].get<int>(), 200);
  EXPECT_LT(m["totals"]["read"]["ops"].get<int>(), 300);

  r = test::Run({IotwinBin(), "report", path, "--filter", "colour=blue"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown key"), std::string::npos) << r.err;
  r = test::Run({IotwinBin(), "report", path, "--filter", "op=frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
}

TEST(ReportCli, BadAndDamagedInput) {
  TempDir dir;
  RunResult r = test::Run({IotwinBin(), "report", dir / "missing.iotwin"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("missing.iotwin"), std::string::npos) << r.err;

  std::string junk = dir / "junk.iotwin";
  std::ofstream(junk) << "this is not a trace at all, just some text that is long enough";
  r = test::Run({IotwinBin(), "report", junk});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("junk.iotwin: byte 0"), std::string::npos) << r.err;

  // A capture that was killed: no footer. The report still works and says so.
  std::string path = dir / "t.iotwin";
  ASSERT_TRUE(CheopsLike().WriteFile(path, Summary()).ok());
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::string cut = dir / "cut.iotwin";
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 200);
  r = test::Run({IotwinBin(), "report", cut, "--no-progress"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("INCOMPLETE"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace iotwin::test
