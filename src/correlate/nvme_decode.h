// NVMe command decoding from the raw fields an NVME record keeps (opcode, queue, CDW10-12), per
// the NVMe base and NVM command set specifications: names, LBA ranges of I/O commands, and the
// fields of commands without one (flush, dataset management, admin commands).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace iotwin::correlate {

struct NvmeDecoded {
  std::string name;        // "read", "write", "flush", "dsm", ... ("admin:identify" on queue 0)
  bool admin = false;      // admin queue (qid 0)
  bool has_range = false;  // SLBA + NLB in CDW10-12
  uint64_t slba = 0;
  uint32_t nlb = 0;        // 1-based
  uint64_t bytes = 0;      // nlb * lba_size (0 when the LBA size is unknown)
  bool fua = false;        // force unit access (read/write/write zeroes)
  bool deallocate = false; // write zeroes DEAC / dataset management AD
  uint32_t dsm_ranges = 0; // dataset management: number of ranges (1-based)
  std::string detail;      // "slba=256 nlb=2 fua" / "ranges=3 deallocate"
};

// `qid` 0 is the admin queue (opcodes mean different things there); fabrics commands (0x7f)
// carry `fctype` instead.
NvmeDecoded DecodeNvme(uint8_t opcode, uint16_t qid, uint32_t cdw10, uint32_t cdw11,
                       uint32_t cdw12, uint32_t lba_size, uint8_t fctype = 0);

// The kernel's name for the opcode as its nvme tracepoints print it ("nvme_cmd_read",
// "nvme_admin_identify"), so text from tracefs and iotwin's decoding can be compared.
std::string_view NvmeKernelName(uint8_t opcode, bool admin);

}  // namespace iotwin::correlate
