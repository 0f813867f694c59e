// compare of device-level streams (analysis/compare_block.h): a faithful replay of a block
// stream passes; one that dropped every 10th request, doubled the sizes, moved the requests or
// lost the flushes fails, and says what differed.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "analysis/compare.h"
#include "analysis/compare_block.h"
#include "format/records.h"
#include "format/trace_writer.h"
#include "interop_test_util.h"
#include "trace_builder.h"

namespace iotwin::analysis {
namespace {

constexpr uint32_t kSourceDev = (7u << 20) | 0;  // 7:0
constexpr uint32_t kTargetDev = (7u << 20) | 1;  // 7:1
constexpr uint32_t kOtherDev = (254u << 20) | 0;

struct StreamShape {
  uint32_t dev = kSourceDev;
  uint64_t sector_shift = 0;  // sectors added to every request (a --device-offset)
  int drop_every = 0;         // drop every Nth request (0: none)
  uint32_t size_mult = 1;
  bool flushes = true;
  uint64_t gap_ns = 20'000;   // between issues
  const char* replay_pace = nullptr;  // a replay's header when set
  uint64_t device_offset = 0;
  uint32_t nvme_split = 0;  // with the NVMe layer: each data request sent as this many commands
};

// 200 requests: 4 KiB and 16 KiB reads and writes over 64 MiB, each completing 50 us after its
// issue (so up to 3 in flight), a flush every 50th; plus 300 requests on another device that
// only the original has (the loader reading libraries): the busiest device, not the replayed one.
void WriteStream(const std::string& path, const StreamShape& s, bool other_device = false) {
  test::TraceBuilder b;
  b.meta()["layers"] = {{"syscall", {{"enabled", false}}}, {"block", {{"enabled", true}}},
                        {"nvme", {{"enabled", s.nvme_split > 0}}}};
  if (s.replay_pace) {
    b.meta()["replay"] = {{"source", "orig.iotwin"}, {"layer", "block"}, {"pace", s.replay_pace},
                          {"device_offset", s.device_offset}, {"source_dev", "7:0"}};
  }
  const uint64_t t0 = 1'000'000'000;
  std::map<uint64_t, std::vector<iot_nvme>> nvme;  // request -> its commands, after its issue
  for (uint64_t i = 0; i < 200; i++) {
    if (s.drop_every && (i + 1) % static_cast<uint64_t>(s.drop_every) == 0) continue;
    const uint64_t ts = t0 + i * s.gap_ns;
    uint32_t flags = i % 3 == 0 ? IOT_BLKF_WRITE : IOT_BLKF_READ;
    uint32_t bytes = (i % 4 == 0 ? 16384 : 4096) * s.size_mult;
    uint64_t sector = (i * 7919 % 16384) * 8 + s.sector_shift;
    if (i % 50 == 49) {
      if (!s.flushes) continue;
      flags = IOT_BLKF_WRITE | IOT_BLKF_FLUSH;
      bytes = 0;
      sector = 0;
    }
    b.SetTime(ts);
    b.Block(IOT_BLK_ISSUE, sector, bytes, flags, i + 1, s.dev);
    for (uint32_t c = 0; s.nvme_split && c < (bytes ? s.nvme_split : 1); c++) {
      iot_nvme n{};
      n.hdr.type = IOT_REC_NVME;
      n.hdr.size = sizeof n;
      n.phase = IOT_NVME_SETUP;
      n.ts = ts + 1000;
      n.opcode = bytes == 0 ? 0x00 : flags & IOT_BLKF_WRITE ? 0x01 : 0x02;
      n.nlb = bytes / 512 / s.nvme_split;
      n.slba = sector + c * n.nlb;
      n.rq_id = i + 1;
      n.dev = s.dev;
      n.lba_size = 512;
      n.nsid = 1;
      n.qid = 1;
      nvme[i + 1].push_back(n);
    }
    b.SetTime(ts + 50'000);
    b.Block(IOT_BLK_COMPLETE, sector, bytes, flags, i + 1, s.dev);
  }
  for (uint64_t i = 0; other_device && i < 300; i++) {
    b.SetTime(t0 + i * 1000);
    b.Block(IOT_BLK_ISSUE, 1'000'000 + i * 8, 4096, IOT_BLKF_READ, 10'000 + i, kOtherDev);
    b.Block(IOT_BLK_COMPLETE, 1'000'000 + i * 8, 4096, IOT_BLKF_READ, 10'000 + i, kOtherDev);
  }
  auto writer = TraceWriter::Create(path, b.meta());
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  for (const auto& bytes : b.records()) {
    const auto* rec = reinterpret_cast<const iot_rec_hdr*>(bytes.data());
    ASSERT_TRUE((*writer)->Append(rec).ok());
    if (rec->type != IOT_REC_BLOCK || As<iot_block>(rec).phase != IOT_BLK_ISSUE) continue;
    auto it = nvme.find(As<iot_block>(rec).rq_id);
    for (size_t c = 0; it != nvme.end() && c < it->second.size(); c++) {
      ASSERT_TRUE((*writer)->Append(it->second[c]).ok());
    }
  }
  Status st = (*writer)->Finish({{"stop_reason", "exit"}});
  ASSERT_TRUE(st.ok()) << st.ToString();
}

const nlohmann::json& Find(const nlohmann::json& r, const char* name) {
  for (const auto& m : r["measures"]) {
    if (m["name"] == name) return m;
  }
  static const nlohmann::json kNone;
  ADD_FAILURE() << "no measure " << name;
  return kNone;
}

class CompareBlockStreamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    orig_ = dir_ / "orig.iotwin";
    rep_ = dir_ / "rep.iotwin";
    WriteStream(orig_, {}, /*other_device=*/true);
  }
  nlohmann::json Compare(const StreamShape& replay, CompareOptions o = {}) {
    WriteStream(rep_, replay);
    auto r = CompareTraces(orig_, rep_, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : nlohmann::json();
  }
  interop::testing::ScratchDir dir_;
  std::string orig_, rep_;
};

TEST_F(CompareBlockStreamsTest, AFaithfulReplayAtAnOffsetOnAnotherDevicePasses) {
  // Placed 1 MiB into the target device: sectors move by 2048, the header says by how much.
  auto r = Compare({.dev = kTargetDev, .sector_shift = 2048, .replay_pace = "original",
                    .device_offset = 1 << 20});
  EXPECT_EQ(r["layer"], "block");
  EXPECT_EQ(r["verdict"], "pass") << RenderCompareText(r);
  EXPECT_EQ(r["original"]["dev"], "7:0");  // the replay header's source_dev, not the busiest
  EXPECT_EQ(r["original"]["requests"], 200u);
  EXPECT_EQ(r["replay"]["flushes"], 4u);
  EXPECT_EQ(Find(r, "dev-lba-ks")["value"], 0.0);
  EXPECT_EQ(Find(r, "dev-qd-ks")["value"], 0.0);
  EXPECT_TRUE(Find(r, "dev-iops-rel-err")["judged"].get<bool>());
  EXPECT_FALSE(Find(r, "dev-d2c-ks")["judged"].get<bool>());  // information only
  EXPECT_EQ(r["schedule_offset_ns"]["p50"], 0u);
  EXPECT_EQ(r["schedule_offset_ns"]["max"], 0u);
}

TEST_F(CompareBlockStreamsTest, EveryTenthRequestDroppedFailsOnTheRequestCount) {
  auto r = Compare({.dev = kTargetDev, .drop_every = 10, .replay_pace = "fast"});
  EXPECT_EQ(r["verdict"], "fail");
  EXPECT_FALSE(Find(r, "dev-requests-rel-err")["pass"].get<bool>());
  EXPECT_EQ(Find(r, "dev-requests-rel-err")["replay"], 180u);
  EXPECT_TRUE(r["schedule_offset_ns"].is_null());  // the i-th requests are not the same ones
  const std::string text = RenderCompareText(r);
  EXPECT_NE(text.find("the replay issued 180 requests, the original 200 (-10.0%)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("VERDICT: FAIL (dev-requests-rel-err"), std::string::npos) << text;
}

TEST_F(CompareBlockStreamsTest, DoubledSizesFailOnSizesAndBytes) {
  auto r = Compare({.dev = kTargetDev, .size_mult = 2, .replay_pace = "fast"});
  EXPECT_EQ(r["verdict"], "fail");
  EXPECT_GT(Find(r, "dev-size-ks")["value"].get<double>(), 0.5);
  EXPECT_FALSE(Find(r, "dev-bytes-rel-err")["pass"].get<bool>());
  EXPECT_TRUE(Find(r, "dev-requests-rel-err")["pass"].get<bool>());
  EXPECT_NE(RenderCompareText(r).find("dev-size-ks: request sizes (p50): reads 8192"),
            std::string::npos)
      << RenderCompareText(r);
}

TEST_F(CompareBlockStreamsTest, MovedRequestsAndLostFlushesFail) {
  // 32 MiB further in, the header claiming no offset.
  auto moved = Compare({.dev = kTargetDev, .sector_shift = 65536, .replay_pace = "fast"});
  EXPECT_FALSE(Find(moved, "dev-lba-ks")["pass"].get<bool>()) << RenderCompareText(moved);
  auto no_flush = Compare({.dev = kTargetDev, .flushes = false, .replay_pace = "fast"});
  EXPECT_FALSE(Find(no_flush, "dev-flags-rel-err")["pass"].get<bool>());
  EXPECT_NE(RenderCompareText(no_flush).find("flush 0 vs 4"), std::string::npos);
}

TEST_F(CompareBlockStreamsTest, TimingIsJudgedOnlyWhenThePacingPromisesIt) {
  // Twice as fast: a "fast" replay passes, an "original" one fails on timing only.
  auto fast = Compare({.dev = kTargetDev, .gap_ns = 10'000, .replay_pace = "fast"});
  EXPECT_EQ(fast["verdict"], "pass") << RenderCompareText(fast);
  EXPECT_FALSE(Find(fast, "dev-iops-rel-err")["judged"].get<bool>());
  auto paced = Compare({.dev = kTargetDev, .gap_ns = 10'000, .replay_pace = "original"});
  EXPECT_EQ(paced["verdict"], "fail");
  EXPECT_FALSE(Find(paced, "dev-iops-rel-err")["pass"].get<bool>());
  // Request i at 10 us * i instead of 20 us * i: the last is 1.99 ms early.
  EXPECT_NEAR(paced["schedule_offset_ns"]["max"].get<double>(), 1'990'000, 1'990'000 / 64.0);
  EXPECT_EQ(paced["schedule_offset_ns"]["early"], 199u);
  EXPECT_TRUE(Find(paced, "dev-size-ks")["pass"].get<bool>());
}

TEST_F(CompareBlockStreamsTest, NvmeCommandsAreJudgedWhenBothTracesHaveThem) {
  WriteStream(orig_, {.nvme_split = 1}, /*other_device=*/true);
  // One command per request on both sides: 200 commands, the same opcodes and sizes.
  auto same = Compare({.dev = kTargetDev, .replay_pace = "fast", .nvme_split = 1});
  EXPECT_EQ(same["verdict"], "pass") << RenderCompareText(same);
  EXPECT_TRUE(Find(same, "dev-nvme-commands-rel-err")["judged"].get<bool>());
  EXPECT_EQ(Find(same, "dev-nvme-commands-rel-err")["original"], 200u);
  EXPECT_EQ(Find(same, "dev-nvme-opcode-diff")["value"], 0.0);
  EXPECT_EQ(same["replay"]["nvme"]["opcodes"], "flush=4 write=66 read=130");
  // Every data request split in two commands: the block stream is the same, the NVMe one not.
  auto split = Compare({.dev = kTargetDev, .replay_pace = "fast", .nvme_split = 2});
  EXPECT_EQ(split["verdict"], "fail");
  EXPECT_TRUE(Find(split, "dev-requests-rel-err")["pass"].get<bool>());
  EXPECT_FALSE(Find(split, "dev-nvme-commands-rel-err")["pass"].get<bool>());
  EXPECT_FALSE(Find(split, "dev-nvme-size-ks")["pass"].get<bool>());
  const std::string text = RenderCompareText(split);
  EXPECT_NE(text.find("the replay sent 396 NVMe commands, the original 200 (+98.0%)"),
            std::string::npos)
      << text;
  // Flushes lost: 2% of the commands were flushes, none are.
  auto no_flush =
      Compare({.dev = kTargetDev, .flushes = false, .replay_pace = "fast", .nvme_split = 1});
  EXPECT_FALSE(Find(no_flush, "dev-nvme-opcode-diff")["pass"].get<bool>());
  EXPECT_NEAR(Find(no_flush, "dev-nvme-opcode-diff")["value"].get<double>(), 0.02, 1e-9);
  // A replay without the NVMe layer (another kind of device): reported, not judged.
  auto none = Compare({.dev = kTargetDev, .replay_pace = "fast"});
  EXPECT_EQ(none["verdict"], "pass") << RenderCompareText(none);
  EXPECT_FALSE(Find(none, "dev-nvme-commands-rel-err")["judged"].get<bool>());
  EXPECT_EQ(Find(none, "dev-nvme-commands-rel-err")["detail"],
            "no NVMe commands on the device in the replay");
}

TEST_F(CompareBlockStreamsTest, LayerOptionChoosesTheComparison) {
  // Not a replay: the system-call comparison unless asked for the block streams.
  CompareOptions o;
  auto calls = Compare({.dev = kTargetDev}, o);
  EXPECT_NE(calls.value("layer", ""), "block");
  o.layer = "block";
  auto blocks = Compare({.dev = kTargetDev}, o);
  EXPECT_EQ(blocks["layer"], "block");
  // Without a source_dev in the replay's header the original's busiest device is compared.
  EXPECT_EQ(blocks["original"]["dev"], "254:0");
  // Thresholds of block measures are accepted and used.
  CompareOptions loose_options;
  ASSERT_TRUE(ParseThreshold("dev-requests-rel-err=0.2", &loose_options).ok());
  auto loose = Compare({.dev = kTargetDev, .drop_every = 10, .replay_pace = "fast"}, loose_options);
  EXPECT_TRUE(Find(loose, "dev-requests-rel-err")["judged"].get<bool>());
  EXPECT_TRUE(Find(loose, "dev-requests-rel-err")["pass"].get<bool>()) << RenderCompareText(loose);
  o.layer = "nvme";
  WriteStream(rep_, {});
  EXPECT_FALSE(CompareTraces(orig_, rep_, o).ok());
}

}  // namespace
}  // namespace iotwin::analysis
