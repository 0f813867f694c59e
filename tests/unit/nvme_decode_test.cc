// NVMe command decoding (src/correlate/nvme_decode.h): unit cases from the NVMe specification, and
// the commands captured in the emulated-NVMe guest (tools/nvme-guest/samples, 512 B and 4 KiB LBA
// formats): the decoder, fed the raw dwords the kernel's tracepoint printed, must name each
// command as the kernel did and give back the byte range the probe program logged.
#include "correlate/nvme_decode.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace iotwin::correlate {
namespace {

TEST(NvmeDecode, ReadWriteCarryTheirRangeInLbas) {
  // slba 0x1'0000'0002 (CDW10-11), NLB-1 = 7, FUA (CDW12 bit 30)
  NvmeDecoded d = DecodeNvme(0x02, 1, 2, 1, 7 | (1u << 30), 4096);
  EXPECT_EQ(d.name, "read");
  EXPECT_TRUE(d.has_range);
  EXPECT_EQ(d.slba, 0x100000002ull);
  EXPECT_EQ(d.nlb, 8u);
  EXPECT_EQ(d.bytes, 8u * 4096);
  EXPECT_TRUE(d.fua);
  NvmeDecoded w = DecodeNvme(0x01, 3, 100, 0, 0, 512);
  EXPECT_EQ(w.name, "write");
  EXPECT_EQ(w.nlb, 1u) << "NLB is 0-based";
  EXPECT_EQ(w.bytes, 512u);
  EXPECT_FALSE(w.fua);
}

TEST(NvmeDecode, CommandsWithoutARangeAreDecodedByTheirOwnFields) {
  NvmeDecoded f = DecodeNvme(0x00, 1, 0, 0, 0, 4096);
  EXPECT_EQ(f.name, "flush");
  EXPECT_FALSE(f.has_range);
  EXPECT_EQ(f.bytes, 0u);
  // dataset management: 3 ranges (NR = 2), deallocate (AD, CDW11 bit 2): a discard
  NvmeDecoded dsm = DecodeNvme(0x09, 1, 2, 1u << 2, 0, 4096);
  EXPECT_EQ(dsm.name, "dsm");
  EXPECT_FALSE(dsm.has_range);
  EXPECT_EQ(dsm.dsm_ranges, 3u);
  EXPECT_TRUE(dsm.deallocate);
  EXPECT_EQ(dsm.detail, "ranges=3 deallocate");
  // write zeroes has a range but moves no data; DEAC is CDW12 bit 25
  NvmeDecoded wz = DecodeNvme(0x08, 1, 64, 0, 255 | (1u << 25), 4096);
  EXPECT_EQ(wz.name, "write_zeroes");
  EXPECT_EQ(wz.nlb, 256u);
  EXPECT_TRUE(wz.deallocate);
}

TEST(NvmeDecode, AdminAndFabricsOpcodesAreNotIoCommands) {
  // opcode 0x02 on the admin queue is Get Log Page, not a read
  NvmeDecoded a = DecodeNvme(0x02, 0, 0x7f0001, 0, 0, 4096);
  EXPECT_EQ(a.name, "admin:get_log_page");
  EXPECT_TRUE(a.admin);
  EXPECT_FALSE(a.has_range);
  EXPECT_EQ(DecodeNvme(0x06, 0, 1, 0, 0, 512).name, "admin:identify");
  EXPECT_EQ(DecodeNvme(0x7f, 0, 0, 0, 0, 512, 0x01).name, "fabrics:connect");
  EXPECT_EQ(NvmeKernelName(0x02, false), "nvme_cmd_read");
  EXPECT_EQ(NvmeKernelName(0x02, true), "nvme_admin_get_log_page");
}

// ---- the guest's captured commands --------------------------------------------------------------

struct Captured {
  uint16_t qid = 0, cid = 0;
  std::string kernel_name;  // nvme_cmd_write ...
  uint32_t cdw10 = 0, cdw11 = 0, cdw12 = 0;
};

struct Logged {
  std::string op;
  uint64_t offset = 0, bytes = 0;
};

// The samples live in the source tree: tools/nvme-guest/samples, beside this file's tests/.
std::string Sample(const std::string& rel) {
  std::string here = __FILE__;
  return here.substr(0, here.rfind('/')) + "/../../tools/nvme-guest/samples/" + rel;
}

// nvme_setup_cmd lines of a tracefs capture, turned back into the dwords they were printed from:
// read/write print "slba=S, len=L, ctrl=C" (CDW10-11, CDW12[15:0], CDW12[31:16]); other
// commands print the raw CDW10.. bytes.
std::vector<Captured> ParseTracefs(const std::string& path) {
  std::ifstream in(path);
  std::vector<Captured> out;
  std::regex head(R"(nvme_setup_cmd: nvme\d+: disk=\S+, qid=(\d+), cmdid=(\d+), .* cmd=\((\w+) (.*)\)$)");
  std::regex rw(R"(slba=(\d+), len=(\d+), ctrl=0x([0-9a-f]+))");
  std::regex raw(R"(cdw10=((?:[0-9a-f]{2} ?){24}))");
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, head)) continue;
    Captured c;
    c.qid = static_cast<uint16_t>(std::stoul(m[1]));
    c.cid = static_cast<uint16_t>(std::stoul(m[2]));
    c.kernel_name = m[3];
    std::string args = m[4];
    std::smatch a;
    if (std::regex_search(args, a, rw)) {
      uint64_t slba = std::stoull(a[1]);
      c.cdw10 = static_cast<uint32_t>(slba);
      c.cdw11 = static_cast<uint32_t>(slba >> 32);
      c.cdw12 = static_cast<uint32_t>(std::stoul(a[2])) |
                (static_cast<uint32_t>(std::stoul(a[3], nullptr, 16)) << 16);
    } else if (std::regex_search(args, a, raw)) {
      std::vector<uint8_t> bytes;
      std::string hex = a[1];
      for (size_t i = 0; i + 1 < hex.size(); i += 3) bytes.push_back(std::stoul(hex.substr(i, 2), nullptr, 16));
      auto dw = [&](size_t i) {
        return static_cast<uint32_t>(bytes[i * 4]) | (bytes[i * 4 + 1] << 8) |
               (bytes[i * 4 + 2] << 16) | (static_cast<uint32_t>(bytes[i * 4 + 3]) << 24);
      };
      c.cdw10 = dw(0);
      c.cdw11 = dw(1);
      c.cdw12 = dw(2);
    }
    out.push_back(c);
  }
  return out;
}

std::vector<Logged> ParseProbeLog(const std::string& path, uint32_t* lba_size) {
  std::ifstream in(path);
  std::vector<Logged> out;
  std::string line;
  std::regex op(R"(^op=(\w+)(?: offset=(\d+) bytes=(\d+))?)");
  std::regex lba(R"(^lba_size=(\d+))");
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, lba)) *lba_size = static_cast<uint32_t>(std::stoul(m[1]));
    if (!std::regex_search(line, m, op)) continue;
    Logged l;
    l.op = m[1];
    if (m[2].matched) {
      l.offset = std::stoull(m[2]);
      l.bytes = std::stoull(m[3]);
    }
    out.push_back(l);
  }
  return out;
}

class NvmeSamples : public ::testing::TestWithParam<const char*> {};

TEST_P(NvmeSamples, DecodedCommandsAreWhatTheProbeProgramDid) {
  std::string dir = GetParam();
  uint32_t lba = 0;
  std::vector<Logged> logged = ParseProbeLog(Sample(dir + "/probe-tracefs.log"), &lba);
  ASSERT_TRUE(lba == 512 || lba == 4096) << dir;
  std::vector<Captured> captured = ParseTracefs(Sample(dir + "/tracefs.txt"));
  ASSERT_FALSE(captured.empty());
  // Decode each command from its dwords alone, name it as the kernel did, and merge the
  // consecutive commands of one request the driver had to split (MDTS, segment limits).
  std::vector<Logged> decoded;
  for (const Captured& c : captured) {
    uint8_t opcode = 0;
    bool found = false;
    for (int op = 0; op < 256 && !found; op++) {
      if (NvmeKernelName(static_cast<uint8_t>(op), c.qid == 0) == c.kernel_name) {
        opcode = static_cast<uint8_t>(op);
        found = true;
      }
    }
    ASSERT_TRUE(found) << c.kernel_name;
    NvmeDecoded d = DecodeNvme(opcode, c.qid, c.cdw10, c.cdw11, c.cdw12, lba);
    EXPECT_EQ("nvme_cmd_" + d.name, c.kernel_name);
    if (d.name == "flush") {
      EXPECT_FALSE(d.has_range);
      EXPECT_EQ(c.cdw10, 0u);
      decoded.push_back({"flush", 0, 0});
      continue;
    }
    ASSERT_TRUE(d.has_range) << d.name;
    Logged l{d.name, d.slba * lba, d.bytes};
    if (!decoded.empty() && decoded.back().op == l.op &&
        decoded.back().offset + decoded.back().bytes == l.offset) {
      decoded.back().bytes += l.bytes;  // the next part of the same call
    } else {
      decoded.push_back(l);
    }
  }
  ASSERT_EQ(decoded.size(), logged.size()) << dir;
  for (size_t i = 0; i < logged.size(); i++) {
    EXPECT_EQ(decoded[i].op, logged[i].op) << dir << " #" << i;
    EXPECT_EQ(decoded[i].offset, logged[i].offset) << dir << " #" << i;
    EXPECT_EQ(decoded[i].bytes, logged[i].bytes) << dir << " #" << i;
  }
}

TEST_P(NvmeSamples, TpBtfEventsDecodeLikeTheTracepoint) {
  std::string dir = GetParam();
  uint32_t lba = 0;
  ParseProbeLog(Sample(dir + "/probe-tracefs.log"), &lba);
  std::ifstream in(Sample(dir + "/bpf.txt"));
  std::regex ev(R"(src=btf kind=setup qid=-?\d+ cid=(\d+) nsid=(\d+) opcode=0x([0-9a-f]+) slba=(\d+) nlb=(\d+))");
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, ev)) continue;
    n++;
    uint8_t opcode = static_cast<uint8_t>(std::stoul(m[3], nullptr, 16));
    uint64_t slba = std::stoull(m[4]);
    uint32_t nlb = static_cast<uint32_t>(std::stoul(m[5]));
    // the loader printed nlb 1-based for I/O, 0 for others: rebuild the dwords
    uint32_t cdw12 = nlb ? nlb - 1 : 0;
    NvmeDecoded d = DecodeNvme(opcode, 1, static_cast<uint32_t>(slba),
                               static_cast<uint32_t>(slba >> 32), cdw12, lba);
    if (opcode == 0x00) {
      EXPECT_EQ(d.name, "flush");
      EXPECT_FALSE(d.has_range);
    } else {
      EXPECT_TRUE(d.name == "read" || d.name == "write") << d.name;
      EXPECT_EQ(d.slba, slba);
      EXPECT_EQ(d.nlb, nlb);
      EXPECT_EQ(d.bytes, uint64_t{nlb} * lba);
    }
  }
  EXPECT_GE(n, 5u);
}

INSTANTIATE_TEST_SUITE_P(Guest, NvmeSamples, ::testing::Values("lba512", "lba4096"));

}  // namespace
}  // namespace iotwin::correlate
