// Block layer, direct I/O on a loop device: a 16 MiB O_DIRECT read split into device requests
// (checked against the device's limits), each request linked to the call with its per-layer
// latency, and the per-layer parts of every request summing to its call's duration.
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <set>
#include <utility>

#include "block_loop.h"

namespace iotwin::test {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Requests of the report caused by a pread64 of `length` bytes.
std::vector<nlohmann::json> RequestsOfPread(const nlohmann::json& report, uint64_t length) {
  std::vector<nlohmann::json> out;
  for (const auto& q : report["requests"]) {
    if (q["cause"] == "syscall" && q["syscall"]["op"] == "pread64" &&
        q["syscall"]["length"].get<uint64_t>() == length) {
      out.push_back(q);
    }
  }
  return out;
}

using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;  // [first, end) sectors, merged

Ranges Merge(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (auto [a, b] : r) {
    if (!out.empty() && a <= out.back().second) {
      out.back().second = std::max(out.back().second, b);
    } else {
      out.push_back({a, b});
    }
  }
  return out;
}

// Where the file's data lies on its device, in 512-byte sectors (FIEMAP; the file system sits
// directly on the loop device, so file system offsets are device offsets).
Ranges FileExtents(const std::string& path) {
  Ranges out;
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return out;
  constexpr unsigned kMax = 256;
  std::vector<char> buf(sizeof(fiemap) + kMax * sizeof(fiemap_extent), 0);
  auto* fm = reinterpret_cast<fiemap*>(buf.data());
  fm->fm_start = 0;
  fm->fm_length = ~0ull;
  fm->fm_flags = FIEMAP_FLAG_SYNC;
  fm->fm_extent_count = kMax;
  if (ioctl(fd, FS_IOC_FIEMAP, fm) == 0) {
    for (unsigned i = 0; i < fm->fm_mapped_extents; i++) {
      const fiemap_extent& e = fm->fm_extents[i];
      out.push_back({e.fe_physical / 512, (e.fe_physical + e.fe_length) / 512});
    }
  }
  close(fd);
  return Merge(out);
}

// The per-layer parts of a call's request sum to the call's own duration.
void ExpectLayersSumToCall(const nlohmann::json& q, const nlohmann::json& report) {
  const auto& l = q["latency_ns"];
  ASSERT_TRUE(l.contains("total")) << q.dump();
  int64_t total = l["total"].get<int64_t>();
  EXPECT_EQ(total, q["syscall"]["dur_ns"].get<int64_t>());
  for (const char* part : {"syscall_fs", "Q2D", "D2C", "completion"}) {
    ASSERT_TRUE(l.contains(part)) << part << " missing: " << q.dump();
    EXPECT_GE(l[part].get<int64_t>(), 0) << part << ": " << q.dump();
  }
  int64_t sum = l["syscall_fs"].get<int64_t>() + l["Q2D"].get<int64_t>() +
                l["D2C"].get<int64_t>() + l["completion"].get<int64_t>();
  // the stated tolerance: max(2 us, 1% of the call)
  const auto& tol = report["latency"]["tolerance"];
  int64_t allowed = std::max<int64_t>(tol["ns"].get<int64_t>(),
                                      static_cast<int64_t>(tol["fraction"].get<double>() * total));
  EXPECT_LE(std::llabs(sum - total), allowed) << q.dump();
  EXPECT_LE(l["deviation"].get<int64_t>(), allowed);
  // the btt parts the block layer reported are consistent with Q2D
  if (l.contains("Q2G") && l.contains("Q2D")) {
    EXPECT_LE(l["Q2G"], l["Q2D"]);
  }
}

TEST(BlockDirect, Read16MiBIsSplitIntoDeviceRequestsWithLayerLatencies) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  LoopFs fs;
  ASSERT_TRUE(fs.ok()) << fs.error();
  TempDir dir;
  std::string file = fs.path("data16");
  RunResult prep = iotwin::test::Run({TestProg("blk_direct"), dir / "prep.log", file, "prepare",
                        std::to_string(16 * kMiB)});
  ASSERT_EQ(prep.exit_code, 0) << prep.err;

  LayersRun r = RecordLayers(dir, "blk_direct", {file, "read16m"});
  ASSERT_EQ(r.record.exit_code, 0) << r.record.err;
  ASSERT_EQ(r.layers.exit_code, 0) << r.layers.err;
  ASSERT_TRUE(r.report.is_object());
  EXPECT_EQ(r.report["layers"]["block"]["enabled"], true);
  ExpectEveryRequestAccountedFor(r.report);

  auto reqs = RequestsOfPread(r.report, 16 * kMiB);
  uint64_t max_bytes = uint64_t{fs.QueueLimit("max_sectors_kb")} * 1024;
  ASSERT_GT(max_bytes, 0u);
  // At least 16 MiB / max_sectors_kb requests, none larger than the limit, together covering
  // exactly the sectors where the file's data lies (its extents), each sector once.
  EXPECT_GE(reqs.size(), (16 * kMiB + max_bytes - 1) / max_bytes);
  uint64_t bytes = 0;
  Ranges covered;
  for (const auto& q : reqs) {
    EXPECT_LE(q["bytes"].get<uint64_t>(), max_bytes);
    EXPECT_EQ(q["op"], "read");
    EXPECT_EQ(q["dev"].get<std::string>().rfind("7:", 0), 0u) << "not the loop device";
    uint64_t first = q["sector"].get<uint64_t>();
    covered.push_back({first, first + q["bytes"].get<uint64_t>() / 512});
    bytes += q["bytes"].get<uint64_t>();
    ExpectLayersSumToCall(q, r.report);
  }
  EXPECT_EQ(bytes, 16 * kMiB) << "a sector read twice or missed";
  Ranges extents = FileExtents(file);
  ASSERT_FALSE(extents.empty());
  EXPECT_EQ(Merge(covered), extents) << "the requests do not cover the file's extents";
  std::cout << "[ split ] 16 MiB O_DIRECT read -> " << reqs.size() << " requests (max_sectors_kb "
            << max_bytes / 1024 << ", max_segments " << fs.QueueLimit("max_segments") << ")\n";

  // The splits section explains the call: how many bios the file system built, how many pieces
  // the block layer split off and why.
  bool found = false;
  for (const auto& c : r.report["splits"]["calls"]) {
    if (c["op"] == "pread64" && c["length"].get<uint64_t>() == 16 * kMiB) {
      found = true;
      EXPECT_EQ(c["requests"].get<size_t>(), reqs.size());
      EXPECT_GE(c["bios_built_by_fs"].get<uint64_t>(), 1u);
      // each request starts from a bio the file system built or a piece the block layer split
      // off (merges can only make fewer requests)
      EXPECT_GE(c["bios_built_by_fs"].get<uint64_t>() + c["kernel_split_pieces"].get<uint64_t>(),
                reqs.size());
      if (c["kernel_split_pieces"].get<uint64_t>() > 0) {
        EXPECT_FALSE(c["split_reasons"].empty());
      }
      std::cout << "[ split ] " << c.dump() << "\n";
    }
  }
  EXPECT_TRUE(found) << r.report["splits"].dump();
}

TEST(BlockDirect, PerLayerLatencyOfEveryRequestSumsToItsCall) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  LoopFs fs;
  ASSERT_TRUE(fs.ok()) << fs.error();
  TempDir dir;
  std::string file = fs.path("data8");
  ASSERT_EQ(iotwin::test::Run({TestProg("blk_direct"), dir / "prep.log", file, "prepare",
                 std::to_string(8 * kMiB)})
                .exit_code,
            0);
  LayersRun r = RecordLayers(dir, "blk_direct", {file, "reads", "64", "65536"});
  ASSERT_EQ(r.record.exit_code, 0) << r.record.err;
  ASSERT_TRUE(r.report.is_object()) << r.layers.err;
  ExpectEveryRequestAccountedFor(r.report);
  auto reqs = RequestsOfPread(r.report, 65536);
  EXPECT_GE(reqs.size(), 64u);
  std::set<uint64_t> calls;
  for (const auto& q : reqs) {
    ExpectLayersSumToCall(q, r.report);
    calls.insert(q["syscall"]["ts"].get<uint64_t>());
  }
  EXPECT_EQ(calls.size(), 64u) << "every call has its own request";
  // The report's own check agrees: every request of a call within the tolerance.
  const auto& lat = r.report["latency"];
  EXPECT_EQ(lat["within_tolerance"], lat["requests"]);
  // Synchronous reads have a software share between 0 and 100%.
  const auto& sw = r.report["software_share"];
  EXPECT_GE(sw["calls"].get<uint64_t>(), 64u);
  EXPECT_GE(sw["mean_pct"].get<double>(), 0.0);
  EXPECT_LE(sw["mean_pct"].get<double>(), 100.0);
}

TEST(BlockDirect, DependentReadsAreDetectedAsAChain) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  LoopFs fs;
  ASSERT_TRUE(fs.ok()) << fs.error();
  TempDir dir;
  std::string file = fs.path("chain");
  ASSERT_EQ(iotwin::test::Run({TestProg("blk_direct"), dir / "prep.log", file, "prepare",
                 std::to_string(4 * kMiB)})
                .exit_code,
            0);
  LayersRun r = RecordLayers(dir, "blk_direct", {file, "chain", "32"});
  ASSERT_EQ(r.record.exit_code, 0) << r.record.err;
  ASSERT_TRUE(r.report.is_object()) << r.layers.err;
  const auto& dc = r.report["dependent_chains"];
  // 32 pointer-chasing reads back to back: the gaps are a few microseconds of user code, but a
  // loaded machine can preempt the thread between two reads; most reads still form chains.
  EXPECT_GE(dc["chains"].get<uint64_t>(), 1u) << dc.dump();
  EXPECT_GE(dc["reads_in_chains"].get<uint64_t>(), 16u) << dc.dump();
  EXPECT_GT(dc["estimated_speedup"].get<double>(), 1.0);
  std::cout << "[ chains ] " << dc.dump() << "\n";
}

}  // namespace
}  // namespace iotwin::test
