// export --fio --layer block on requests fio cannot replay: offsets past the largest file offset
// (sector x 512 past 2^64, or the end past 2^63 - 1) are left out and counted; a device whose
// requests are all flushes gets no iolog, and is counted as such, not as a preflush.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "format/records.h"
#include "interop/exporters.h"
#include "interop_test_util.h"

namespace iotwin::interop {
namespace {

using testing::ReadFile;
using testing::ScratchDir;
using ::iotwin::test::TraceBuilder;

constexpr uint32_t Dev(uint32_t maj, uint32_t min) { return (maj << 20) | min; }
constexpr const char* kPastOffsets =
    "block: request ending past the largest file offset (2^63 - 1)";

TEST(FioExport, BlockRequestPastTheLargestOffsetIsSkippedAndCounted) {
  ScratchDir dir;
  const uint32_t d = Dev(254, 0);
  {
    TraceBuilder b(nlohmann::json::object());
    b.Add(b.BlockRecord(IOT_BLK_ISSUE, 1000, d, 2056, 4096, IOT_BLKF_WRITE, 1));
    // End passes 2^64; offset wraps past 2^64; offset 2^63 exactly; sector x 512 overflows.
    b.Add(b.BlockRecord(IOT_BLK_ISSUE, 2000, d, 36028797018961920ull, 1052672, IOT_BLKF_WRITE, 2));
    b.Add(b.BlockRecord(IOT_BLK_ISSUE, 3000, d, 36028797018963967ull, 4096, IOT_BLKF_READ, 3));
    b.Add(b.BlockRecord(IOT_BLK_ISSUE, 3500, d, uint64_t{1} << 54, 4096, IOT_BLKF_READ, 4));
    b.Add(b.BlockRecord(IOT_BLK_ISSUE, 4000, d, UINT64_MAX, 4096, IOT_BLKF_DISCARD, 5));
    EXPECT_TRUE(b.WriteFile(dir / "b.iotwin", nlohmann::json::object()).ok());
  }
  FioExportOptions o;
  o.dir = dir / "fio";
  o.block_layer = true;
  auto r = ExportFio(dir / "b.iotwin", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->writes, 1u);
  EXPECT_EQ(r->reads, 0u);
  EXPECT_EQ(r->trims, 0u);
  ASSERT_TRUE(r->skipped.count(kPastOffsets)) << r->ToJson().dump();
  EXPECT_EQ(r->skipped.at(kPastOffsets), 4u);
  const std::string extent = std::to_string(2056 * 512 + 4096);
  EXPECT_NE(ReadFile(dir / "fio/files.tsv").find("\t/dev/block/254:0\t" + extent + "\n"),
            std::string::npos)
      << ReadFile(dir / "fio/files.tsv");
  EXPECT_NE(ReadFile(dir / "fio/replay.fio").find("size=1056768\n"), std::string::npos);
  EXPECT_EQ(ReadFile(dir / "fio/dev-254-0.iolog").find("184467"), std::string::npos);
}

TEST(FioExport, BlockFlushOnlyDeviceIsNotCalledAPreflushBeforeAWrite) {
  ScratchDir dir;
  {
    TraceBuilder b(nlohmann::json::object());
    b.Add(b.BlockRecord(IOT_BLK_ISSUE, 1000, Dev(254, 0), 2048, 4096, IOT_BLKF_READ, 1));
    // An empty preflush write (ftrace's "FWS 0 () 0 + 0"): a flush, nothing to write after it.
    b.Add(b.BlockRecord(IOT_BLK_ISSUE, 2000, Dev(8, 0), 0, 0,
                  IOT_BLKF_PREFLUSH | IOT_BLKF_WRITE | IOT_BLKF_SYNC, 2));
    EXPECT_TRUE(b.WriteFile(dir / "b.iotwin", nlohmann::json::object()).ok());
  }
  FioExportOptions o;
  o.dir = dir / "fio";
  o.block_layer = true;
  auto r = ExportFio(dir / "b.iotwin", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string json = r->ToJson().dump();
  EXPECT_EQ(r->skipped.count("block: preflush replayed as a sync before the write"), 0u) << json;
  EXPECT_EQ(r->skipped.count("device without reads, writes or trims (fio needs one)"), 1u) << json;
  EXPECT_EQ(r->syncs, 0u);  // 8:0 has no iolog
  EXPECT_EQ(ReadFile(dir / "fio/dev-8-0.iolog"), "");
}

}  // namespace
}  // namespace iotwin::interop
