// The report's rseq%/wseq% on synthetic traces, against the definition of docs/report.md:
// sequential as btt's seek distance 0 (the request starts where the previous one of the same
// thread and file ended, or inside it), per thread and file as fio keeps its position.
#include <gtest/gtest.h>

#include "analysis/analyzer.h"
#include "trace_builder.h"

namespace iotwin::analysis {
namespace {

using nlohmann::json;
using test::FullCaptureMeta;
using test::TraceBuilder;

constexpr uint32_t kDev = (8u << 20) | 1;
constexpr uint64_t kStart = 1'000'000'000ULL;  // FullCaptureMeta's anchor

json Analyze(const TraceBuilder& t) {
  Analyzer a(AnalyzerOptions{});
  a.SetMeta(FullCaptureMeta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  return a.Model(std::nullopt);
}

// A file read front to back through stdio with fseek(f, 16, SEEK_CUR) after each 4 KiB record:
// glibc seeks to the block the position lands in and reads from there, so every other read
// starts 16-64 bytes before the previous one ended. Every read after the first is sequential
// (it was 50%: the overlapping ones counted as random).
TEST(SequentialDefinition, StdioRecordsWithHolesReadFrontToBack) {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = kStart + 1000;
  t.Open(100, ts, "/data/records.bin", 3, kDev, 42);
  uint64_t reads = 0;
  for (int i = 1; i < 200; i++) {
    const uint64_t block = static_cast<uint64_t>(i) * 4096;
    const uint64_t head = 16ull * static_cast<uint64_t>(i);  // the record's first bytes there
    t.Io(IOT_OP_PREAD64, 100, ts += 1000, 500, 3, kDev, 42, block, head, head);
    t.Io(IOT_OP_PREAD64, 100, ts += 1000, 500, 3, kDev, 42, block + head, 4096, 4096);
    reads += 2;
  }
  json m = Analyze(t);
  const json& p = m["files"]["rows"][0]["read"]["pattern"];
  EXPECT_EQ(p["first"], 1);
  EXPECT_EQ(p["sequential"], reads - 1) << p.dump();
  EXPECT_DOUBLE_EQ(p["sequential_share"].get<double>(), 1.0);
}

// Two threads reading alternate 4 KiB blocks of one file: each thread's own stream skips a
// block every time (fio keeps a position per job and file): strided, never sequential.
TEST(SequentialDefinition, DecidedPerThreadAndFile) {
  TraceBuilder t(FullCaptureMeta());
  t.Thread(100, 101);
  uint64_t ts = kStart + 1000;
  t.Open(100, ts, "/data/shared.bin", 3, kDev, 43);
  for (uint64_t b = 0; b < 64; b++) {
    t.Io(IOT_OP_PREAD64, b % 2 ? 101 : 100, ts += 1000, 500, 3, kDev, 43, b * 4096, 4096, 4096);
  }
  json m = Analyze(t);
  const json& p = m["files"]["rows"][0]["read"]["pattern"];
  EXPECT_EQ(p["first"], 2);
  EXPECT_EQ(p["sequential"], 0) << p.dump();
  EXPECT_EQ(p["strided"], 60);
  EXPECT_EQ(p["random"], 2);
}

}  // namespace
}  // namespace iotwin::analysis
