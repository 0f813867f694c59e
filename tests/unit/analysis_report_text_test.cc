// Golden test of the text report on a small hand-checkable synthetic trace. The expected output
// is tests/data/analysis/report_golden.txt; after an intended change of the layout, regenerate
// it with IOTWIN_UPDATE_GOLDEN=1 and review the diff (every number below is derivable by hand
// from the trace built here).
#include <fcntl.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "analysis/analyzer.h"
#include "analysis/report_text.h"
#include "trace_builder.h"

namespace iotwin::analysis {
namespace {

constexpr uint32_t kDev = (8u << 20) | 1;
constexpr uint64_t kT0 = 1'000'000'000ULL;  // the anchor of FullCaptureMeta
constexpr uint64_t kMs = 1'000'000;

// Process 42 "trainer": thread 42 reads /data/a.bin (8 x 128 KiB in sequence, then 2 x 4 KiB
// probes); thread 43 "ckpt" writes /ckpt/b.pt (3 x 1 MiB with write(), positions tracked);
// one open fails with ENOENT; the disk serves 2 x 512 KiB reads in 100 us each.
test::TraceBuilder GoldenTrace() {
  test::TraceBuilder t(test::FullCaptureMeta());
  t.ProcAt(IOT_PROC_START, kT0, 42, 42, "trainer");
  t.ProcAt(IOT_PROC_THREAD, kT0, 42, 42, "ckpt", 42, 43);
  t.Open(42, kT0 + 1 * kMs, "/data/a.bin", 3, kDev, 100);
  iot_syscall missing = test::TraceBuilder::Sys(IOT_OP_OPENAT, 42, kT0 + 2 * kMs);
  missing.ret = -ENOENT;
  missing.path_id = t.Str("/data/missing");
  t.Add(missing);
  for (int i = 0; i < 8; i++)
    t.Io(IOT_OP_PREAD64, 42, kT0 + (10 + 10 * i) * kMs, 50'000, 3, kDev, 100, uint64_t(i) * 131072,
         131072, 131072);
  t.Io(IOT_OP_PREAD64, 42, kT0 + 200 * kMs, 20'000, 3, kDev, 100, 4 << 20, 4096, 4096);
  t.Io(IOT_OP_PREAD64, 42, kT0 + 210 * kMs, 20'000, 3, kDev, 100, 2 << 20, 4096, 4096);
  t.Open(43, kT0 + 300 * kMs, "/ckpt/b.pt", 4, kDev, 101, O_WRONLY | O_CREAT, 42);
  for (int i = 0; i < 3; i++)
    t.Io(IOT_OP_WRITE, 43, kT0 + (400 + 100 * i) * kMs, 2'000'000, 4, kDev, 101, 0, 1 << 20,
         1 << 20, 42);
  const uint32_t disk = 253u << 20;
  for (int i = 0; i < 2; i++) {
    uint64_t ts = kT0 + (20 + 40 * i) * kMs;
    t.BlockAt(IOT_BLK_ISSUE, ts, disk, uint64_t(i) * 1024, 524288, IOT_BLKF_READ, 7 + i);
    t.BlockAt(IOT_BLK_COMPLETE, ts + 100'000, disk, uint64_t(i) * 1024, 524288, IOT_BLKF_READ, 7 + i);
  }
  return t;
}

std::string GoldenPath() { return std::string(IOTWIN_TEST_DATA_DIR) + "/analysis/report_golden.txt"; }

TEST(ReportText, MatchesGolden) {
  Analyzer a;
  a.SetMeta(test::FullCaptureMeta());
  GoldenTrace().ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  nlohmann::json summary = {{"stop_reason", "exited"}, {"exit_status", 0}, {"duration_ns", 1'000'000'000}};
  nlohmann::json facts = {{"path", "golden.iotwin"}, {"size_bytes", 4096}, {"format", "1.0"}};
  std::string text = RenderText(a.Model(summary, facts));

  if (getenv("IOTWIN_UPDATE_GOLDEN")) {
    std::ofstream(GoldenPath()) << text;
    GTEST_SKIP() << "golden file rewritten: " << GoldenPath();
  }
  std::ifstream in(GoldenPath());
  ASSERT_TRUE(in) << "missing " << GoldenPath();
  std::string expected((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, expected);

  // Independently of the layout, the key statements are present.
  EXPECT_NE(text.find("pread64:  128 KiB = 80.0% of ops, 99.2% of bytes  (10 ops)"), std::string::npos);
  EXPECT_NE(text.find("write:    1 MiB = 100.0% of ops, 100.0% of bytes  (3 ops)"), std::string::npos);
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) EXPECT_LE(line.size(), 100u) << line;
}

}  // namespace
}  // namespace iotwin::analysis
