// End-to-end test of the emulated NVMe guest (tools/nvme-guest): installs what it needs
// (setup.sh), boots the guest once per LBA size with nvme_guest_probe, and checks that the NVMe
// commands captured inside the guest, through tracefs text and through a static libbpf program
// (classic tracepoint and tp_btf), are exactly the commands the probe's reads, writes and flush
// should have produced: opcode, starting LBA and block count in units of the namespace's LBA size.
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "runtime_util.h"

namespace iotwin::test {
namespace {

constexpr int kNvmeFlush = 0x00;
constexpr int kNvmeWrite = 0x01;
constexpr int kNvmeRead = 0x02;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The value of `key=` in `line`, up to the next space or comma; nullopt when absent.
std::optional<std::string> Field(const std::string& line, const std::string& key) {
  size_t pos = 0;
  while ((pos = line.find(key + "=", pos)) != std::string::npos) {
    if (pos == 0 || line[pos - 1] == ' ' || line[pos - 1] == '(' || line[pos - 1] == ',') {
      size_t start = pos + key.size() + 1;
      size_t end = line.find_first_of(" ,)", start);
      return line.substr(start, end == std::string::npos ? std::string::npos : end - start);
    }
    pos += key.size();
  }
  return std::nullopt;
}

uint64_t U64(const std::optional<std::string>& s) {
  return s ? std::strtoull(s->c_str(), nullptr, 0) : ~0ull;
}

struct ProbeOp {
  std::string op;  // read, write, flush
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

struct NvmeCommand {
  int opcode = -1;
  uint64_t slba = 0;
  uint64_t nlb = 0;  // 1-based block count (read/write)
  unsigned cid = 0;
};

// A probe log: "lba_size=N ..." then one "op=..." line per completed call.
std::vector<ProbeOp> ParseProbeLog(const std::string& text, uint64_t* lba_size) {
  std::vector<ProbeOp> ops;
  for (const auto& line : Lines(text)) {
    if (auto lbs = Field(line, "lba_size")) *lba_size = U64(lbs);
    auto op = Field(line, "op");
    if (!op) continue;
    ops.push_back({*op, U64(Field(line, "offset")), U64(Field(line, "bytes"))});
  }
  return ops;
}

// nvme_setup_cmd lines of the tracefs text for I/O queues of nvme0n1, e.g.
//   nvme_setup_cmd: nvme0: disk=nvme0n1, qid=1, cmdid=961, nsid=1, flags=0x0, meta=0x0,
//   cmd=(nvme_cmd_write slba=2048, len=15, ctrl=0x0, dsmgmt=0, reftag=0)
// The text gives the opcode by name and the length 0-based, as the NVMe command holds it.
std::vector<NvmeCommand> ParseTracefsSetups(const std::string& text) {
  static const std::map<std::string, int> kOpcodeByName = {
      {"nvme_cmd_flush", kNvmeFlush}, {"nvme_cmd_write", kNvmeWrite}, {"nvme_cmd_read", kNvmeRead}};
  std::vector<NvmeCommand> cmds;
  for (const auto& line : Lines(text)) {
    if (line.find("nvme_setup_cmd:") == std::string::npos) continue;
    if (Field(line, "disk") != "nvme0n1" || U64(Field(line, "qid")) == 0) continue;
    NvmeCommand cmd;
    cmd.cid = static_cast<unsigned>(U64(Field(line, "cmdid")));
    size_t name_at = line.find("cmd=(");
    std::string name = name_at == std::string::npos
                           ? ""
                           : line.substr(name_at + 5, line.find(' ', name_at) - name_at - 5);
    auto known = kOpcodeByName.find(name);
    cmd.opcode = known == kOpcodeByName.end() ? 0x100 : known->second;  // 0x100: unexpected
    if (cmd.opcode == kNvmeRead || cmd.opcode == kNvmeWrite) {
      cmd.slba = U64(Field(line, "slba"));
      cmd.nlb = U64(Field(line, "len")) + 1;
    }
    cmds.push_back(cmd);
  }
  return cmds;
}

// cmdid -> status of the tracefs nvme_complete_rq lines for I/O queues of nvme0n1.
std::map<unsigned, uint64_t> ParseTracefsCompletions(const std::string& text) {
  std::map<unsigned, uint64_t> status_by_cid;
  for (const auto& line : Lines(text)) {
    if (line.find("nvme_complete_rq:") == std::string::npos) continue;
    if (Field(line, "disk") != "nvme0n1" || U64(Field(line, "qid")) == 0) continue;
    status_by_cid[static_cast<unsigned>(U64(Field(line, "cmdid")))] = U64(Field(line, "status"));
  }
  return status_by_cid;
}

// nvme_guest_bpf "event src=SRC kind=setup ..." lines for namespace I/O: from the classic
// tracepoint the I/O queues (qid != 0); from tp_btf, which has no qid, the commands carrying a
// namespace id (admin commands carry none).
std::vector<NvmeCommand> ParseBpfSetups(const std::string& text, const std::string& source) {
  std::vector<NvmeCommand> cmds;
  for (const auto& line : Lines(text)) {
    if (line.rfind("event ", 0) != 0 || Field(line, "src") != source ||
        Field(line, "kind") != "setup") {
      continue;
    }
    if (source == "tp" ? U64(Field(line, "qid")) == 0 : U64(Field(line, "nsid")) == 0) continue;
    NvmeCommand cmd;
    cmd.opcode = static_cast<int>(U64(Field(line, "opcode")));
    cmd.slba = U64(Field(line, "slba"));
    cmd.nlb = U64(Field(line, "nlb"));
    cmd.cid = static_cast<unsigned>(U64(Field(line, "cid")));
    cmds.push_back(cmd);
  }
  return cmds;
}

// The commands must be, in order, exactly what the probe's calls ask of the device: each read or
// write becomes one or more commands of its opcode that cover its byte range contiguously in LBA
// units (more than one where the block layer split it; none larger than max_request_bytes), each
// fsync one flush; nothing else on the namespace.
::testing::AssertionResult CommandsMatchProbe(const std::vector<ProbeOp>& ops,
                                              const std::vector<NvmeCommand>& cmds,
                                              uint64_t lba_size, uint64_t max_request_bytes) {
  if (ops.empty()) return ::testing::AssertionFailure() << "the probe logged no operation";
  size_t next = 0;
  for (size_t i = 0; i < ops.size(); i++) {
    const ProbeOp& op = ops[i];
    auto where = [&] {
      std::ostringstream s;
      s << "probe op #" << i << " (" << op.op << " offset=" << op.offset << " bytes=" << op.bytes
        << ", lba_size " << lba_size << ")";
      return s.str();
    };
    if (op.op == "flush") {
      if (next >= cmds.size()) return ::testing::AssertionFailure() << where() << ": no command";
      if (cmds[next].opcode != kNvmeFlush) {
        return ::testing::AssertionFailure()
               << where() << ": expected flush (0x00), got opcode " << cmds[next].opcode;
      }
      next++;
      continue;
    }
    int opcode = op.op == "read" ? kNvmeRead : op.op == "write" ? kNvmeWrite : -1;
    if (opcode < 0) return ::testing::AssertionFailure() << where() << ": unknown op";
    if (op.offset % lba_size != 0 || op.bytes % lba_size != 0) {
      return ::testing::AssertionFailure() << where() << ": not aligned to the LBA size";
    }
    uint64_t lba = op.offset / lba_size;
    uint64_t remaining = op.bytes / lba_size;
    while (remaining > 0) {
      if (next >= cmds.size()) {
        return ::testing::AssertionFailure()
               << where() << ": commands end with " << remaining << " blocks uncovered";
      }
      const NvmeCommand& cmd = cmds[next++];
      if (cmd.opcode != opcode || cmd.slba != lba || cmd.nlb == 0 || cmd.nlb > remaining ||
          cmd.nlb * lba_size > max_request_bytes) {
        return ::testing::AssertionFailure()
               << where() << ": expected opcode " << opcode << " at slba " << lba << " (up to "
               << remaining << " blocks, at most " << max_request_bytes << " bytes), got opcode "
               << cmd.opcode << " slba " << cmd.slba << " nlb " << cmd.nlb << " (cid " << cmd.cid
               << ")";
      }
      lba += cmd.nlb;
      remaining -= cmd.nlb;
    }
  }
  if (next != cmds.size()) {
    return ::testing::AssertionFailure()
           << cmds.size() - next << " unexplained command(s) after the probe's, first opcode "
           << cmds[next].opcode << " slba " << cmds[next].slba;
  }
  return ::testing::AssertionSuccess();
}

#if defined(IOTWIN_NVME_GUEST_DIR)

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::map<std::string, std::string> ParseKeyValues(const std::string& text) {
  std::map<std::string, std::string> kv;
  for (const auto& line : Lines(text)) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

bool IsStaticExecutable(const std::string& path) {
  RunResult r = Run({"/bin/sh", "-c", "LC_ALL=C readelf -l \"$0\"", path}, 30);
  return r.exit_code == 0 && r.out.find("Requesting program interpreter") == std::string::npos;
}

class NvmeGuestTest : public ::testing::Test {
 protected:
  // Installs qemu/busybox/cpio and downloads the guest kernel when missing (CI machines are
  // fresh); quick when everything is there.
  static void SetUpTestSuite() {
    auto start = std::chrono::steady_clock::now();
    setup_ = ::iotwin::test::Run({std::string(IOTWIN_NVME_GUEST_DIR) + "/setup.sh"}, 600);
    setup_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  static std::string GuestBinary() {
    if (const char* bin = getenv("IOTWIN_NVME_GUEST_IOTWIN"); bin && *bin) return bin;
    return IsStaticExecutable(IotwinBin()) ? IotwinBin() : "";
  }

  void BootAndCheck(int lba_size) {
    IOTWIN_REQUIRE_BPF_OR_SKIP();
    if (setup_.exit_code != 0) {
      std::string why = "tools/nvme-guest/setup.sh failed (exit " +
                        std::to_string(setup_.exit_code) + "): " + setup_.err;
      if (BpfRequired()) FAIL() << why;
      GTEST_SKIP() << why;
    }
    std::cout << "setup.sh took " << setup_s_ << " s\n";

    TempDir tmp;
    std::vector<std::string> argv = {std::string(IOTWIN_NVME_GUEST_DIR) + "/run.sh", "--binary",
                                     IOTWIN_NVME_GUEST_PROBE, IOTWIN_NVME_GUEST_BPF};
    std::string iotwin = GuestBinary();
    if (!iotwin.empty()) argv.push_back(iotwin);
    argv.insert(argv.end(), {"--script", std::string(IOTWIN_NVME_GUEST_DIR) + "/probe-guest.sh",
                             "--disk-mb", "16", "--timeout", "100", "--lba-size",
                             std::to_string(lba_size), "--out", tmp / "out"});
    RunResult run = ::iotwin::test::Run(argv, 115);
    const std::string results = tmp / "out/results";
    auto harness = ParseKeyValues(ReadText(tmp / "out/harness.txt"));
    std::cout << "boot lba " << lba_size << ": qemu " << harness["qemu_wall_s"]
              << " s, guest ready at " << harness["guest_ready_s"] << " s uptime, script "
              << harness["guest_script_s"] << " s\n";
    ASSERT_EQ(run.exit_code, 0) << run.err << "\nconsole:\n" << ReadText(tmp / "out/console.log");
    ASSERT_EQ(harness["exit_status"], "0");

    // The namespace has the requested block size, as the guest kernel sees it.
    ASSERT_EQ(std::strtoull(ReadText(results + "/lba_size").c_str(), nullptr, 10),
              static_cast<uint64_t>(lba_size));
    uint64_t max_request_bytes =
        std::strtoull(ReadText(results + "/max_sectors_kb").c_str(), nullptr, 10) * 1024;
    ASSERT_GT(max_request_bytes, 0u);

    // 1. tracefs text.
    uint64_t logged_lba_size = 0;
    auto ops = ParseProbeLog(ReadText(results + "/probe-tracefs.log"), &logged_lba_size);
    EXPECT_EQ(logged_lba_size, static_cast<uint64_t>(lba_size));
    // The probe always does two writes, two reads and a flush (plus a 1-block read at 512 B).
    ASSERT_EQ(ops.size(), lba_size == 512 ? 6u : 5u);
    std::string trace = ReadText(results + "/tracefs.txt");
    auto setups = ParseTracefsSetups(trace);
    EXPECT_TRUE(CommandsMatchProbe(ops, setups, lba_size, max_request_bytes)) << trace;
    // The 1 MiB read is larger than the controller accepts in one command: it was split.
    EXPECT_GT(setups.size(), ops.size()) << trace;
    auto completions = ParseTracefsCompletions(trace);
    for (const auto& cmd : setups) {
      auto done = completions.find(cmd.cid);
      ASSERT_NE(done, completions.end()) << "no completion for cid " << cmd.cid << "\n" << trace;
      EXPECT_EQ(done->second, 0u) << "cid " << cmd.cid << " failed\n" << trace;
    }

    // 2. static libbpf in the guest: both attachment kinds see the same commands.
    std::string bpf = ReadText(results + "/bpf.txt");
    for (const char* section : {"tracepoint/nvme/nvme_setup_cmd", "tp_btf/nvme_setup_cmd",
                                "tracepoint/nvme/nvme_complete_rq"}) {
      EXPECT_NE(bpf.find(std::string("attach ") + section + " ok"), std::string::npos)
          << section << "\n"
          << bpf << ReadText(results + "/bpf.err");
    }
    EXPECT_NE(bpf.find(" dropped=0 command_status=0"), std::string::npos) << bpf;
    ops = ParseProbeLog(ReadText(results + "/probe-bpf.log"), &logged_lba_size);
    ASSERT_EQ(ops.size(), lba_size == 512 ? 6u : 5u);
    auto tp_setups = ParseBpfSetups(bpf, "tp");
    auto btf_setups = ParseBpfSetups(bpf, "btf");
    EXPECT_TRUE(CommandsMatchProbe(ops, tp_setups, lba_size, max_request_bytes)) << bpf;
    EXPECT_TRUE(CommandsMatchProbe(ops, btf_setups, lba_size, max_request_bytes)) << bpf;
    ASSERT_EQ(tp_setups.size(), btf_setups.size()) << bpf;
    for (size_t i = 0; i < tp_setups.size(); i++) {
      EXPECT_EQ(tp_setups[i].cid, btf_setups[i].cid) << "command #" << i << "\n" << bpf;
    }

    // 3. A static iotwin, when this build has one: it must at least run in the guest.
    if (iotwin.empty()) {
      std::cout << "no static iotwin (configure with -DIOTWIN_STATIC=ON or set "
                   "IOTWIN_NVME_GUEST_IOTWIN): not run in the guest\n";
    } else {
      std::string version = ReadText(results + "/iotwin-version.txt");
      EXPECT_NE(version.find("exit=0"), std::string::npos) << version;
      std::cout << "iotwin in the guest: " << version << ReadText(results + "/iotwin-check.txt");
    }
  }

  static RunResult setup_;
  static double setup_s_;
};

RunResult NvmeGuestTest::setup_;
double NvmeGuestTest::setup_s_ = 0;

TEST_F(NvmeGuestTest, CapturesProbeCommandsWith512ByteBlocks) { BootAndCheck(512); }

TEST_F(NvmeGuestTest, CapturesProbeCommandsWith4KiBBlocks) { BootAndCheck(4096); }

#else

TEST(NvmeGuestTest, NeedsTheBpfBuild) {
  if (BpfRequired()) FAIL() << "built with IOTWIN_BUILD_BPF=OFF: tools/nvme-guest not built";
  GTEST_SKIP() << "built with IOTWIN_BUILD_BPF=OFF: tools/nvme-guest not built";
}

#endif

// The matcher itself, on hand-made command lists, so a matcher that accepts anything is caught.
TEST(NvmeGuestMatcherTest, RejectsWrongOrMissingCommands) {
  std::vector<ProbeOp> ops = {{"write", 8192, 8192}, {"flush", 0, 0}, {"read", 0, 1 << 20}};
  std::vector<NvmeCommand> good = {{kNvmeWrite, 16, 16, 1},
                                   {kNvmeFlush, 0, 0, 2},
                                   {kNvmeRead, 0, 1024, 3},
                                   {kNvmeRead, 1024, 1024, 4}};
  EXPECT_TRUE(CommandsMatchProbe(ops, good, 512, 512 * 1024));
  EXPECT_FALSE(CommandsMatchProbe(ops, good, 4096, 512 * 1024));  // LBAs in the wrong unit
  EXPECT_FALSE(CommandsMatchProbe(ops, good, 512, 256 * 1024));   // larger than allowed
  auto missing = good;
  missing.pop_back();
  EXPECT_FALSE(CommandsMatchProbe(ops, missing, 512, 512 * 1024));
  auto extra = good;
  extra.push_back({kNvmeWrite, 0, 1, 5});
  EXPECT_FALSE(CommandsMatchProbe(ops, extra, 512, 512 * 1024));
  auto wrong_opcode = good;
  wrong_opcode[1].opcode = kNvmeWrite;
  EXPECT_FALSE(CommandsMatchProbe(ops, wrong_opcode, 512, 512 * 1024));
  auto gap = good;
  gap[3].slba = 1025;
  EXPECT_FALSE(CommandsMatchProbe(ops, gap, 512, 512 * 1024));

  std::string trace =
      "  kworker/0:1H-35 [000] ..... 8.1: nvme_setup_cmd: nvme0: disk=nvme0n1, qid=1, cmdid=961, "
      "nsid=1, flags=0x0, meta=0x0, cmd=(nvme_cmd_write slba=2048, len=15, ctrl=0x0, dsmgmt=0, "
      "reftag=0)\n"
      "  kworker/0:1H-35 [000] ..... 8.2: nvme_setup_cmd: nvme0: qid=0, cmdid=1, nsid=0, "
      "flags=0x0, meta=0x0, cmd=(nvme_admin_identify cns=1, ctrlid=0)\n"
      "  <idle>-0 [000] d.h1. 8.3: nvme_complete_rq: nvme0: disk=nvme0n1, qid=1, cmdid=961, "
      "res=0x0, retries=0, flags=0x0, status=0x2\n";
  auto parsed = ParseTracefsSetups(trace);
  ASSERT_EQ(parsed.size(), 1u);
  EXPECT_EQ(parsed[0].opcode, kNvmeWrite);
  EXPECT_EQ(parsed[0].slba, 2048u);
  EXPECT_EQ(parsed[0].nlb, 16u);
  EXPECT_EQ(parsed[0].cid, 961u);
  EXPECT_EQ(ParseTracefsCompletions(trace).at(961), 2u);

  uint64_t lba_size = 0;
  auto logged = ParseProbeLog(
      "lba_size=4096 dev=/dev/nvme0n1 size=16777216\n"
      "op=write offset=8192 bytes=4096\nop=flush\n",
      &lba_size);
  EXPECT_EQ(lba_size, 4096u);
  ASSERT_EQ(logged.size(), 2u);
  EXPECT_EQ(logged[0].op, "write");
  EXPECT_EQ(logged[0].offset, 8192u);
  EXPECT_EQ(logged[0].bytes, 4096u);
  EXPECT_EQ(logged[1].op, "flush");

  std::string bpf =
      "attach tp_btf/nvme_setup_cmd ok\n"
      "event src=tp kind=setup qid=0 cid=7 nsid=0 opcode=0x01 slba=0 nlb=0\n"
      "event src=tp kind=setup qid=1 cid=8 nsid=1 opcode=0x02 slba=2 nlb=1\n"
      "event src=btf kind=setup qid=-1 cid=7 nsid=0 opcode=0x01 slba=0 nlb=0\n"
      "event src=btf kind=setup qid=-1 cid=8 nsid=1 opcode=0x02 slba=2 nlb=1\n"
      "event src=tp kind=complete qid=1 cid=8 status=0x0\n";
  for (const char* source : {"tp", "btf"}) {
    auto cmds = ParseBpfSetups(bpf, source);  // the admin command (qid 0, nsid 0) is left out
    ASSERT_EQ(cmds.size(), 1u) << source;
    EXPECT_EQ(cmds[0].opcode, kNvmeRead);
    EXPECT_EQ(cmds[0].slba, 2u);
    EXPECT_EQ(cmds[0].nlb, 1u);
    EXPECT_EQ(cmds[0].cid, 8u);
  }
}

}  // namespace
}  // namespace iotwin::test
