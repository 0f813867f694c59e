// compare --layer block of a device replay onto another device (analysis/compare_device.h): a
// replay that issued the original's stream on time onto a slower device with smaller queue
// limits passes, its deeper queue, longer D2C and split request reported as the device's
// answer; a replay whose issue stream itself differs (reordered, missing requests) still fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "analysis/compare.h"
#include "analysis/compare_block.h"
#include "analysis/compare_device.h"
#include "format/records.h"
#include "format/trace_writer.h"
#include "interop_test_util.h"
#include "trace_builder.h"

namespace iotwin::analysis {
namespace {

constexpr uint32_t kSourceDev = (7u << 20) | 0;  // 7:0
constexpr uint32_t kTargetDev = (7u << 20) | 2;  // 7:2
constexpr int kRequests = 40;
constexpr int kLarge = 10;  // the one 128 KiB request

struct DeviceShape {
  uint32_t dev = kSourceDev;
  uint64_t d2c_ns = 80'000;
  uint32_t max_sectors_kb = 512;
  bool replay = false;     // a replay header: --layer block, pace original, source 7:0
  bool bios = true;        // a QUEUE record for each issued I/O
  bool split_large = false;  // the device cuts the 128 KiB request in two 64 KiB ones
  int swap_at = -1;        // the issue stream: this request and the next swapped
  int drop_at = -1;        // the issue stream: this request missing
};

struct Event {
  uint64_t ts;
  uint16_t phase;
  uint64_t sector;
  uint32_t bytes, flags;
  uint64_t id;
};

// 40 requests 100 us apart (4 KiB reads and writes, one 128 KiB read), each completing d2c_ns
// after its issue: at 80 us one in flight at a time, at 800 us eight.
void WriteDeviceTrace(const std::string& path, const DeviceShape& s) {
  test::TraceBuilder b;
  b.meta()["layers"] = {{"syscall", {{"enabled", false}}}, {"block", {{"enabled", true}}}};
  const std::string name = s.dev == kSourceDev ? "loop0" : "loop2";
  b.meta()["block_devices"] = {
      {name, {{"dev", s.dev == kSourceDev ? "7:0" : "7:2"}, {"logical_block_size", 512},
              {"physical_block_size", 512}, {"max_sectors_kb", s.max_sectors_kb},
              {"max_hw_sectors_kb", s.max_sectors_kb}, {"max_segments", 128},
              {"max_segment_size", 65536}, {"scheduler", "none"}, {"nr_requests", 128},
              {"rotational", 0}, {"model", ""}}}};
  if (s.replay) {
    b.meta()["replay"] = {{"source", "orig.iotwin"}, {"layer", "block"}, {"pace", "original"},
                          {"device_offset", 0}, {"source_dev", "7:0"}};
  }
  std::vector<int> order;
  for (int i = 0; i < kRequests; i++) {
    if (i != s.drop_at) order.push_back(i);
  }
  if (s.swap_at >= 0) std::swap(order[s.swap_at], order[s.swap_at + 1]);
  const uint64_t t0 = 1'000'000'000;
  std::vector<Event> ev;
  uint64_t id = 1;
  for (size_t slot = 0; slot < order.size(); slot++) {
    const int i = order[slot];
    const uint64_t ts = t0 + slot * 100'000;
    const uint32_t flags = i % 3 == 0 ? IOT_BLKF_WRITE : IOT_BLKF_READ;
    const uint32_t bytes = i == kLarge ? 128 << 10 : 4096;
    const uint64_t sector = static_cast<uint64_t>(i) * 7919 % 4096 * 256;
    if (s.bios) ev.push_back({ts, IOT_BLK_QUEUE, sector, bytes, flags, 0});
    const int pieces = i == kLarge && s.split_large ? 2 : 1;
    for (int p = 0; p < pieces; p++) {
      const uint32_t piece = bytes / pieces;
      const uint64_t at = sector + p * (piece / 512);
      ev.push_back({ts + 2'000 + p, IOT_BLK_ISSUE, at, piece, flags, id});
      ev.push_back({ts + 2'000 + p + s.d2c_ns, IOT_BLK_COMPLETE, at, piece, flags, id});
      id++;
    }
  }
  std::stable_sort(ev.begin(), ev.end(), [](const Event& x, const Event& y) { return x.ts < y.ts; });
  uint64_t bio = 1;
  for (const Event& e : ev) {
    b.SetTime(e.ts);
    iot_block& r = b.Block(e.phase, e.sector, e.bytes, e.flags, e.id, s.dev);
    if (e.phase == IOT_BLK_QUEUE) r.bio_id = bio++;
  }
  auto writer = TraceWriter::Create(path, b.meta());
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  for (const auto& bytes : b.records()) {
    ASSERT_TRUE((*writer)->Append(reinterpret_cast<const iot_rec_hdr*>(bytes.data())).ok());
  }
  Status st = (*writer)->Finish({{"stop_reason", "exit"}});
  ASSERT_TRUE(st.ok()) << st.ToString();
}

const nlohmann::json& Measure(const nlohmann::json& r, const char* name) {
  for (const auto& m : r["measures"]) {
    if (m["name"] == name) return m;
  }
  static const nlohmann::json kNone;
  ADD_FAILURE() << "no measure " << name;
  return kNone;
}

bool Failed(const nlohmann::json& r, const char* name) {
  for (const auto& f : r["failed"]) {
    if (f == name) return true;
  }
  return false;
}

class CompareDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    orig_ = dir_ / "orig.iotwin";
    WriteDeviceTrace(orig_, {});
  }
  // The replay written as `name`; with IOTWIN_TEST_KEEP_DIR set, both traces are copied there
  // (to run another iotwin's compare on them).
  nlohmann::json Compare(const char* name, const DeviceShape& replay, CompareOptions o = {}) {
    const std::string rep = dir_ / name;
    WriteDeviceTrace(rep, replay);
    if (const char* keep = std::getenv("IOTWIN_TEST_KEEP_DIR")) {
      namespace fs = std::filesystem;
      fs::copy_file(orig_, fs::path(keep) / "orig.iotwin", fs::copy_options::overwrite_existing);
      fs::copy_file(rep, fs::path(keep) / name, fs::copy_options::overwrite_existing);
    }
    auto r = CompareTraces(orig_, rep, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : nlohmann::json();
  }
  interop::testing::ScratchDir dir_;
  std::string orig_;
};

DeviceShape SlowerTarget() {
  return {.dev = kTargetDev, .d2c_ns = 800'000, .max_sectors_kb = 64, .replay = true,
          .split_large = true};
}

TEST_F(CompareDeviceTest, TheSameIssueStreamOnASlowerDevicePassesWithTheDevicesAnswer) {
  auto r = Compare("slower.iotwin", SlowerTarget());
  const std::string text = RenderCompareText(r);
  EXPECT_EQ(r["verdict"], "pass") << text;
  EXPECT_EQ(r["target_device"]["another_device"], true);
  EXPECT_EQ(r["target_device"]["speed"], "slower");
  EXPECT_EQ(r["target_device"]["issue_stream"], "bios");
  EXPECT_EQ(r["target_device"]["device_requests"], 41u);
  EXPECT_EQ(r["target_device"]["split"], 1u);
  // The issue stream: the original's 40 requests, in order and on time.
  EXPECT_EQ(r["replay"]["requests"], 40u);
  EXPECT_EQ(Measure(r, "dev-issue-order")["value"], 0.0);
  EXPECT_TRUE(Measure(r, "dev-issue-order")["judged"].get<bool>());
  EXPECT_TRUE(Measure(r, "dev-schedule-p99-us")["judged"].get<bool>());
  EXPECT_EQ(Measure(r, "dev-schedule-p99-us")["value"], 0.0);
  EXPECT_TRUE(Measure(r, "dev-iat-ks")["judged"].get<bool>());
  // The device's answer: deeper queue, longer D2C, reported and not judged.
  const auto& qd = Measure(r, "dev-qd-ks");
  EXPECT_FALSE(qd["judged"].get<bool>());
  EXPECT_EQ(qd["device_answer"], true);
  EXPECT_GT(qd["value"].get<double>(), 0.5);
  EXPECT_NE(text.find("another device (auto: its D2C latency differs, the target is slower)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("D2C p50 800.0us vs 80.0us, p99 800.0us vs 80.0us"), std::string::npos)
      << text;
  EXPECT_NE(text.find("queue depth at issue p50 8 vs 1"), std::string::npos) << text;
  EXPECT_NE(text.find("1 issued I/Os split into 2 requests by the target's queue limits "
                      "(max_sectors_kb 64 vs 512"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("device's answer"), std::string::npos) << text;
}

TEST_F(CompareDeviceTest, WithoutBiosTheSplitIsAttributedAndBytesAreJudged) {
  DeviceShape s = SlowerTarget();
  s.bios = false;
  auto r = Compare("slower-nobios.iotwin", s);
  const std::string text = RenderCompareText(r);
  EXPECT_EQ(r["verdict"], "pass") << text;
  EXPECT_EQ(r["target_device"]["issue_stream"], "requests");
  EXPECT_EQ(r["issue_match"]["split"], 1u);
  EXPECT_EQ(Measure(r, "dev-requests-rel-err")["device_answer"], true);
  EXPECT_TRUE(Measure(r, "dev-bytes-rel-err")["judged"].get<bool>());
  EXPECT_EQ(Measure(r, "dev-issue-order")["value"], 0.0);
  EXPECT_NE(text.find("bytes compared instead of counts"), std::string::npos) << text;
}

TEST_F(CompareDeviceTest, AReorderedOrIncompleteIssueStreamStillFails) {
  DeviceShape swapped = SlowerTarget();
  swapped.swap_at = 20;
  auto r = Compare("swapped.iotwin", swapped);
  EXPECT_EQ(r["verdict"], "fail") << RenderCompareText(r);
  EXPECT_TRUE(Failed(r, "dev-issue-order")) << RenderCompareText(r);
  EXPECT_EQ(r["issue_match"]["out_of_order"], 1u);
  DeviceShape dropped = SlowerTarget();
  dropped.drop_at = 5;
  r = Compare("dropped.iotwin", dropped);
  const std::string text = RenderCompareText(r);
  EXPECT_EQ(r["verdict"], "fail") << text;
  EXPECT_TRUE(Failed(r, "dev-issue-order")) << text;
  EXPECT_TRUE(Failed(r, "dev-requests-rel-err")) << text;
  EXPECT_NE(text.find("1 missing"), std::string::npos) << text;
}

TEST_F(CompareDeviceTest, TargetDeviceSameJudgesTheQueueDepth) {
  CompareOptions o;
  o.target_device = "same";
  auto r = Compare("same.iotwin", SlowerTarget(), o);
  EXPECT_EQ(r["verdict"], "fail");
  EXPECT_EQ(r["target_device"]["another_device"], false);
  EXPECT_TRUE(Failed(r, "dev-qd-ks")) << RenderCompareText(r);
  // An equally fast device with the same limits is the same device.
  auto same_speed = Compare("equal.iotwin", {.dev = kTargetDev, .replay = true});
  EXPECT_EQ(same_speed["target_device"]["another_device"], false);
  EXPECT_EQ(same_speed["verdict"], "pass") << RenderCompareText(same_speed);
}

TEST(MatchIssues, SplitsMergesAndLatenessAgainstTheSchedule) {
  const std::vector<IssuedIo> ref = {{100, 0, 8192, IOT_BLKF_READ},
                                     {200, 8192, 4096, IOT_BLKF_READ},
                                     {300, 12288, 4096, IOT_BLKF_READ},
                                     {400, 65536, 4096, IOT_BLKF_WRITE}};
  // The first split in two, the next two merged, the last 50 ns late against the others.
  const std::vector<IssuedIo> other = {{1100, 0, 4096, IOT_BLKF_READ},
                                       {1101, 4096, 4096, IOT_BLKF_READ},
                                       {1200, 8192, 8192, IOT_BLKF_READ},
                                       {1450, 65536, 4096, IOT_BLKF_WRITE}};
  const IssueMatch m = MatchIssues(ref, other);
  EXPECT_EQ(m.paired, 1u);
  EXPECT_EQ(m.split, 1u);
  EXPECT_EQ(m.split_pieces, 2u);
  EXPECT_EQ(m.merged, 1u);
  EXPECT_EQ(m.merged_parts, 2u);
  EXPECT_EQ(m.missing, 0u);
  EXPECT_EQ(m.extra, 0u);
  EXPECT_EQ(m.OrderError(), 0.0);
  EXPECT_EQ(m.late_ns.max(), 0u);  // one pair: it is its own origin
}

}  // namespace
}  // namespace iotwin::analysis
