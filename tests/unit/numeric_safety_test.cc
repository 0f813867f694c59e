// Numbers from untrusted traces in block replay: every sector and byte sum is checked, and a
// request that cannot be placed inside [--device-offset, device size) is refused and counted,
// never wrapped onto other sectors. Also the checked-arithmetic helpers everything uses.
// (Analysis, correlation and block import: numeric_safety_analysis_test.cc.)
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "base/checked_math.h"
#include "format/records.h"
#include "interop/importer.h"
#include "interop_test_util.h"
#include "model/trace_model.h"
#include "replay/block_replay.h"
#include "replay/stats.h"

namespace iotwin {
namespace {

using replay::BlockLayout;
using replay::BlockRefusal;
using replay::PlaceBlockRequests;

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint32_t kDev = (254u << 20) | 0;

model::BlockRequest Req(uint64_t sector, uint32_t bytes, uint32_t flags) {
  model::BlockRequest r;
  r.sector = sector;
  r.bytes = bytes;
  r.flags = flags;
  r.dev = kDev;
  r.inflight = 1;
  return r;
}

std::vector<const model::BlockRequest*> Ptrs(const std::vector<model::BlockRequest>& v) {
  std::vector<const model::BlockRequest*> out;
  for (const auto& r : v) out.push_back(&r);
  return out;
}

// Every placed (not refused) range lies inside [device_offset, dev_size).
void ExpectInside(const BlockLayout& layout, uint64_t dev_size, uint64_t device_offset) {
  for (const auto& p : layout.placements) {
    if (p.refused != BlockRefusal::kNone) continue;
    EXPECT_GE(p.offset, device_offset);
    std::optional<uint64_t> end = CheckedAdd(p.offset, p.bytes);
    ASSERT_TRUE(end.has_value()) << p.offset << " + " << p.bytes;
    EXPECT_LE(*end, dev_size) << p.offset << " + " << p.bytes;
  }
}

// ---- block replay ----------------------------------------------------------------------------

// The bpftrace-CSV line `2000,W,1052672,36028797018961920,2056`: sector * 512 is 2^64 - 1 MiB
// and adding 1052672 bytes wraps to 4096, which put the write 1 MiB before --device-offset.
TEST(Security, DeviceOffsetOverflowIsRefused) {
  std::vector<model::BlockRequest> reqs = {Req(36028797018961920ull, 1052672, IOT_BLKF_WRITE),
                                           Req(8, 4096, IOT_BLKF_WRITE)};
  for (bool wrap : {false, true}) {
    auto layout = PlaceBlockRequests(Ptrs(reqs), 16 * kMiB, kMiB, wrap);
    ASSERT_TRUE(layout.ok()) << layout.status().ToString();
    EXPECT_EQ(layout->placements[0].refused, BlockRefusal::kRangeOverflow);
    EXPECT_EQ(layout->refused[static_cast<size_t>(BlockRefusal::kRangeOverflow)], 1u);
    EXPECT_EQ(layout->refused_total(), 1u);
    EXPECT_EQ(layout->placements[1].refused, BlockRefusal::kNone);
    EXPECT_EQ(layout->placements[1].offset, kMiB + 8 * 512);
    EXPECT_EQ(layout->extent, 8 * 512 + 4096u);
    ExpectInside(*layout, 16 * kMiB, kMiB);
  }
}

// The same line through the real path: bpftrace-CSV import, then the replay model.
TEST(Security, ImportedOverflowingCsvRequestIsRefusedByBlockReplay) {
  interop::testing::ImportOutcome out;
  interop::ImportOptions io;
  io.dev = kDev;
  interop::testing::ImportText(&out, interop::ImportFormat::kBpftraceCsv,
                               "1000,W,4096,16,8\n2000,W,1052672,36028797018961920,2056\n", io);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  model::ModelBuilder builder;
  builder.SetMeta({{"layers", {{"block", {{"enabled", true}}}}}});
  for (const auto& rec : out.sink.records()) {
    std::vector<uint8_t> buf(std::max<size_t>(rec.size(), 4096), 0);
    std::memcpy(buf.data(), rec.data(), rec.size());
    ASSERT_TRUE(builder.Add(reinterpret_cast<const iot_rec_hdr*>(buf.data())).ok());
  }
  auto m = builder.Finish();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<const model::BlockRequest*> reqs;
  for (const auto& r : (*m)->block_requests()) reqs.push_back(&r);
  ASSERT_EQ(reqs.size(), 2u);
  auto layout = PlaceBlockRequests(reqs, 16 * kMiB, kMiB, false);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->placements[0].offset, kMiB + 16 * 512);
  EXPECT_EQ(layout->placements[1].refused, BlockRefusal::kRangeOverflow);
  ExpectInside(*layout, 16 * kMiB, kMiB);
}

TEST(Security, BlockPlacementNeverLeavesTheDeviceRange) {
  std::mt19937_64 rng(7);
  const uint64_t edges[] = {0, 1, 8, (1ull << 55) - 1, 1ull << 55, (1ull << 55) - 2048,
                            UINT64_MAX, UINT64_MAX - 7, 1ull << 40};
  const uint32_t flags[] = {IOT_BLKF_READ, IOT_BLKF_WRITE, IOT_BLKF_DISCARD,
                            IOT_BLKF_WRITE_ZEROES, IOT_BLKF_WRITE | IOT_BLKF_FUA};
  for (int round = 0; round < 400; round++) {
    std::vector<model::BlockRequest> reqs;
    for (int i = 0; i < 20; i++) {
      uint64_t sector = rng() % 2 ? edges[rng() % std::size(edges)] : rng() % (64 * 2048);
      uint32_t bytes = rng() % 3 ? static_cast<uint32_t>((rng() % 256) * 512)
                                 : static_cast<uint32_t>(rng());
      reqs.push_back(Req(sector, bytes, flags[rng() % std::size(flags)]));
    }
    const uint64_t dev_size = (1 + rng() % 64) * kMiB;
    const uint64_t offset = (rng() % (dev_size / 512)) * 512;
    auto layout = PlaceBlockRequests(Ptrs(reqs), dev_size, offset, /*wrap=*/true);
    ASSERT_TRUE(layout.ok()) << layout.status().ToString();
    ExpectInside(*layout, dev_size, offset);
    for (size_t i = 0; i < reqs.size(); i++) {
      const auto& p = layout->placements[i];
      if (p.refused != BlockRefusal::kNone) continue;
      EXPECT_EQ(p.bytes, reqs[i].bytes);
      if ((reqs[i].flags & (IOT_BLKF_READ | IOT_BLKF_WRITE)) &&
          !(reqs[i].flags & (IOT_BLKF_DISCARD | IOT_BLKF_WRITE_ZEROES))) {
        EXPECT_LE(p.bytes, replay::kMaxBlockTransferBytes);
      }
    }
    EXPECT_LE(layout->max_transfer, replay::kMaxBlockTransferBytes);
  }
}

// Without --wrap, a range past the room is an error naming the way out, not a silent write.
TEST(Security, BlockRangePastTheDeviceNeedsWrap) {
  std::vector<model::BlockRequest> reqs = {Req(1ull << 40, 4096, IOT_BLKF_WRITE)};
  auto layout = PlaceBlockRequests(Ptrs(reqs), 16 * kMiB, kMiB, false);
  ASSERT_FALSE(layout.ok());
  EXPECT_NE(layout.status().ToString().find("--wrap"), std::string::npos);
  auto off_end = PlaceBlockRequests(Ptrs(reqs), 16 * kMiB, 16 * kMiB, true);
  EXPECT_FALSE(off_end.ok());
}

// A flush's recorded sector (ftrace prints 2^64 - 1) is no range: never refused, never extent.
TEST(Security, FlushWithAllOnesSectorIsNotARange) {
  std::vector<model::BlockRequest> reqs = {Req(UINT64_MAX, 0, IOT_BLKF_FLUSH),
                                           Req(UINT64_MAX, 0, IOT_BLKF_WRITE | IOT_BLKF_PREFLUSH)};
  auto layout = PlaceBlockRequests(Ptrs(reqs), 16 * kMiB, 0, false);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->refused_total(), 0u);
  EXPECT_EQ(layout->extent, 0u);
}

// A read claiming 4 GiB is refused rather than given a 4 GiB buffer.
TEST(Security, OversizedBlockTransferIsRefusedNotAllocated) {
  std::vector<model::BlockRequest> reqs = {Req(0, UINT32_MAX, IOT_BLKF_READ),
                                           Req(0, 8192, IOT_BLKF_READ)};
  auto layout = PlaceBlockRequests(Ptrs(reqs), 8ull << 30, 0, false);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->placements[0].refused, BlockRefusal::kTooLarge);
  EXPECT_EQ(layout->max_transfer, 8192u);
}

// A fast block replay that finished within its 1 ms start margin printed 18446744073.709 s.
TEST(Security, ReplayDurationNeverUnderflows) {
  EXPECT_EQ(replay::ElapsedSeconds(2'000'000, 1'000'000), 0.0);
  EXPECT_DOUBLE_EQ(replay::ElapsedSeconds(1'000'000'000, 3'000'000'000), 2.0);
  EXPECT_EQ(replay::PerSecond(10, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(replay::PerSecond(10, 2.0), 5.0);
}

TEST(Security, CheckedMathHelpers) {
  EXPECT_FALSE(CheckedAdd(UINT64_MAX, 1).has_value());
  EXPECT_EQ(*CheckedAdd(1, 2), 3u);
  EXPECT_FALSE(CheckedMul(1ull << 55, 512).has_value());
  EXPECT_EQ(SaturatingAdd(UINT64_MAX - 1, uint64_t{5}), UINT64_MAX);
  EXPECT_EQ(SaturatingAdd(INT64_MAX, int64_t{1}), INT64_MAX);
  EXPECT_EQ(SaturatingAdd(INT64_MIN, int64_t{-1}), INT64_MIN);
  EXPECT_EQ(SaturatingSub(INT64_MIN, int64_t{1}), INT64_MIN);
  EXPECT_EQ(SaturatingSub(INT64_MAX, int64_t{-1}), INT64_MAX);
  EXPECT_EQ(SaturatingAbs(INT64_MIN), INT64_MAX);
  EXPECT_EQ(SignedDelta(0, UINT64_MAX), INT64_MAX);
  EXPECT_EQ(SignedDelta(UINT64_MAX, 0), INT64_MIN);
  EXPECT_EQ(SignedDelta(10, 4), -6);
  EXPECT_EQ(LastOfRun(UINT64_MAX, 0), UINT64_MAX);
  EXPECT_EQ(LastOfRun(UINT64_MAX - 5, UINT32_MAX), UINT64_MAX);
  EXPECT_EQ(LastOfRun(8, 8), 15u);
  EXPECT_EQ(DivCeil(UINT64_MAX, 4096), (UINT64_MAX >> 12) + 1);
}

}  // namespace
}  // namespace iotwin
