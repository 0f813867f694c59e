// NVMe layer end to end, in the emulated NVMe guest (tools/nvme-guest, docs/nvme-guest.md): a
// static iotwin records nvme_guest_probe's O_DIRECT writes, reads and fsync on /dev/nvme0n1
// inside the guest, the trace comes back to the host, and its NVME records must be exactly the
// commands those calls ask of the device (opcode, starting LBA and block count in units of the
// namespace's LBA size, 512 B and 4 KiB), each completed, each joined by rq_id to the BLOCK
// records of its request, and each request linked to the call that caused it.
//
// It needs a static iotwin: the one under test when this build is static
// (cmake -DIOTWIN_STATIC=ON), the build's iotwin-static (built whenever Debian's static archives
// are installed), or the one IOTWIN_NVME_GUEST_IOTWIN names; without one it skips and says so.
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/records.h"
#include "nvme_guest_util.h"

namespace iotwin::test {
namespace {

#if defined(IOTWIN_NVME_GUEST_DIR)

// What runs in the guest: record the probe, keep the trace and the probe's log.
constexpr const char* kGuestScript = R"(set -u
out="${IOTWIN_OUT:?}"
# The static iotwin under test keeps its file name: iotwin or iotwin-static.
iotwin=$(command -v iotwin || command -v iotwin-static)
cat /sys/block/nvme0n1/queue/logical_block_size > "$out/lba_size"
cat /sys/block/nvme0n1/queue/max_sectors_kb > "$out/max_sectors_kb"
"$iotwin" record -o "$out/trace.iotwin" --no-status --ring-mb 8 -- \
  nvme_guest_probe --dev /dev/nvme0n1 --log "$out/probe.log" > "$out/record.out" 2>&1
echo "$?" > "$out/record.status"
)";

class NvmeCapture : public ::testing::TestWithParam<int> {};

TEST_P(NvmeCapture, RecordedCommandsAreTheProbesAndJoinTheirRequests) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  const int lba = GetParam();
  std::string iotwin = StaticIotwin();
  if (iotwin.empty()) GTEST_SKIP() << kNoStaticIotwin;
  RunResult setup = NvmeGuestSetup();
  if (setup.exit_code != 0) {
    if (BpfRequired()) FAIL() << "setup.sh: " << setup.err;
    GTEST_SKIP() << "tools/nvme-guest/setup.sh failed: " << setup.err;
  }
  TempDir tmp;
  RunResult run = BootNvmeGuest(kGuestScript, tmp / "out", {IOTWIN_NVME_GUEST_PROBE, iotwin}, {},
                                lba);
  std::string results = tmp / "out/results";
  ASSERT_EQ(run.exit_code, 0) << run.err << "\n" << ReadAll(tmp / "out/console.log");
  ASSERT_EQ(ReadAll(results + "/record.status"), "0\n") << ReadAll(results + "/record.out");
  ASSERT_EQ(std::stoi(ReadAll(results + "/lba_size")), lba);
  uint64_t max_bytes = std::stoull(ReadAll(results + "/max_sectors_kb")) * 1024;

  GuestTrace t = LoadGuestTrace(results + "/trace.iotwin");
  ASSERT_TRUE(t.error.empty()) << t.error;
  // The header says the NVMe layer ran, and gives the namespace's LBA size from sysfs.
  EXPECT_EQ(t.meta["layers"]["nvme"]["enabled"], true) << t.meta["layers"].dump();
  EXPECT_EQ(t.meta["lba_sizes"]["nvme0n1"], lba) << t.meta.dump();

  // Setup records in time order, each completed with status 0 on the same command id.
  std::vector<iot_nvme> setups;
  std::map<uint64_t, std::vector<iot_nvme>> completes;  // rq_id ->
  for (const iot_nvme& n : t.nvme) {
    if (n.phase == IOT_NVME_SETUP) setups.push_back(n);
    if (n.phase == IOT_NVME_COMPLETE) completes[n.rq_id].push_back(n);
  }
  std::sort(setups.begin(), setups.end(),
            [](const iot_nvme& a, const iot_nvme& b) { return a.ts < b.ts; });
  std::set<uint64_t> block_requests;
  for (const iot_block& b : t.block) {
    if (b.rq_id) block_requests.insert(b.rq_id);
  }
  for (const iot_nvme& s : setups) {
    EXPECT_EQ(s.lba_size, static_cast<uint32_t>(lba));
    EXPECT_NE(s.qid, 0) << "an admin command in the probe's trace";
    EXPECT_EQ(s.nsid, 1u);
    EXPECT_TRUE(block_requests.count(s.rq_id)) << "NVMe command not joined to a request";
    auto c = completes.find(s.rq_id);
    ASSERT_NE(c, completes.end()) << "no completion for cid " << s.cid;
    EXPECT_EQ(c->second.front().cid, s.cid);
    EXPECT_EQ(c->second.front().status, 0);
    EXPECT_GE(c->second.front().ts, s.ts);
  }

  // The commands are exactly what the probe's calls ask of the device, in order.
  std::vector<ProbeOp> ops = ParseProbeLog(ReadAll(results + "/probe.log"));
  ASSERT_EQ(ops.size(), lba == 512 ? 6u : 5u);
  size_t next = 0;
  for (const ProbeOp& op : ops) {
    if (op.op == "flush") {
      ASSERT_LT(next, setups.size());
      EXPECT_EQ(setups[next].opcode, 0x00) << "expected a flush";
      EXPECT_EQ(setups[next].nlb, 0u);
      next++;
      continue;
    }
    uint8_t opcode = op.op == "read" ? 0x02 : 0x01;
    uint64_t slba = op.offset / lba, blocks = op.bytes / lba;
    while (blocks > 0) {
      ASSERT_LT(next, setups.size()) << op.op << " at " << op.offset << ": commands missing";
      const iot_nvme& s = setups[next++];
      EXPECT_EQ(s.opcode, opcode);
      EXPECT_EQ(s.slba, slba);
      ASSERT_GT(s.nlb, 0u);
      ASSERT_LE(s.nlb, blocks);
      EXPECT_LE(uint64_t{s.nlb} * lba, max_bytes);
      slba += s.nlb;
      blocks -= s.nlb;
    }
  }
  EXPECT_EQ(next, setups.size()) << "commands the probe did not ask for";

  // The host's correlation links every command's request to the probe's call.
  RunResult layers = iotwin::test::Run({IotwinBin(), "layers", "--json", "--all-requests",
                          results + "/trace.iotwin"});
  ASSERT_EQ(layers.exit_code, 0) << layers.err;
  auto report = nlohmann::json::parse(layers.out);
  EXPECT_EQ(report["coverage"]["nvme_unjoined"], 0);
  EXPECT_EQ(report["coverage"]["nvme_commands"].get<size_t>(), setups.size());
  size_t with_nvme = 0;
  for (const auto& q : report["requests"]) {
    if (!q.contains("nvme")) continue;
    with_nvme++;
    ASSERT_TRUE(q.contains("syscall")) << q.dump();
    std::string call = q["syscall"]["op"];
    EXPECT_TRUE(call == "pread64" || call == "pwrite64" || call == "fsync") << q.dump();
    uint64_t nvme_bytes = 0;
    for (const auto& c : q["nvme"]) nvme_bytes += c.value("bytes", 0ull);
    if (q["op"] != "flush") {
      EXPECT_EQ(nvme_bytes, q["bytes"].get<uint64_t>()) << q.dump();
    }
    EXPECT_TRUE(q["latency_ns"].contains("nvme")) << q.dump();
  }
  EXPECT_GE(with_nvme, ops.size());
  std::cout << "[ nvme ] lba " << lba << ": " << setups.size() << " commands for " << ops.size()
            << " calls, all joined\n";
}

INSTANTIATE_TEST_SUITE_P(Guest, NvmeCapture, ::testing::Values(512, 4096));

#endif

// On the build host (no NVMe driver) the layer is off and says why.
TEST(NvmeCaptureHost, WithoutAnNvmeDriverTheHeaderSaysSo) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  struct stat st;
  if (stat("/sys/kernel/btf/nvme_core", &st) == 0 || stat("/sys/module/nvme_core", &st) == 0) {
    GTEST_SKIP() << "this machine has an NVMe driver";
  }
  TempDir dir;
  RunResult r = iotwin::test::Run({IotwinBin(), "record", "-o", dir / "t.iotwin", "--no-status", "--", "/bin/true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  GuestTrace t = LoadGuestTrace(dir / "t.iotwin");
  ASSERT_TRUE(t.error.empty()) << t.error;
  EXPECT_EQ(t.meta["layers"]["nvme"]["enabled"], false);
  EXPECT_NE(t.meta["layers"]["nvme"]["reason"].get<std::string>().find("no NVMe driver loaded"),
            std::string::npos);
  EXPECT_EQ(t.meta["layers"]["pmu"]["enabled"], false);
  EXPECT_NE(t.meta["layers"]["pmu"]["reason"].get<std::string>().find("unavailable"),
            std::string::npos);
  EXPECT_TRUE(t.nvme.empty());
}

}  // namespace
}  // namespace iotwin::test
