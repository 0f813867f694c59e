#include "correlate/nvme_decode.h"

#include <fmt/format.h>

namespace iotwin::correlate {
namespace {

struct OpName {
  uint8_t opcode;
  const char* kernel;  // include/linux/nvme.h enum name
  const char* name;
};

// NVM command set I/O commands.
constexpr OpName kIo[] = {
    {0x00, "nvme_cmd_flush", "flush"},
    {0x01, "nvme_cmd_write", "write"},
    {0x02, "nvme_cmd_read", "read"},
    {0x04, "nvme_cmd_write_uncor", "write_uncor"},
    {0x05, "nvme_cmd_compare", "compare"},
    {0x08, "nvme_cmd_write_zeroes", "write_zeroes"},
    {0x09, "nvme_cmd_dsm", "dsm"},
    {0x0c, "nvme_cmd_verify", "verify"},
    {0x0d, "nvme_cmd_resv_register", "resv_register"},
    {0x0e, "nvme_cmd_resv_report", "resv_report"},
    {0x11, "nvme_cmd_resv_acquire", "resv_acquire"},
    {0x15, "nvme_cmd_resv_release", "resv_release"},
    {0x19, "nvme_cmd_copy", "copy"},
    {0x79, "nvme_cmd_zone_mgmt_send", "zone_mgmt_send"},
    {0x7a, "nvme_cmd_zone_mgmt_recv", "zone_mgmt_recv"},
    {0x7d, "nvme_cmd_zone_append", "zone_append"},
};

constexpr OpName kAdmin[] = {
    {0x00, "nvme_admin_delete_sq", "delete_sq"},
    {0x01, "nvme_admin_create_sq", "create_sq"},
    {0x02, "nvme_admin_get_log_page", "get_log_page"},
    {0x04, "nvme_admin_delete_cq", "delete_cq"},
    {0x05, "nvme_admin_create_cq", "create_cq"},
    {0x06, "nvme_admin_identify", "identify"},
    {0x08, "nvme_admin_abort_cmd", "abort"},
    {0x09, "nvme_admin_set_features", "set_features"},
    {0x0a, "nvme_admin_get_features", "get_features"},
    {0x0c, "nvme_admin_async_event", "async_event"},
    {0x0d, "nvme_admin_ns_mgmt", "ns_mgmt"},
    {0x10, "nvme_admin_activate_fw", "activate_fw"},
    {0x11, "nvme_admin_download_fw", "download_fw"},
    {0x15, "nvme_admin_ns_attach", "ns_attach"},
    {0x18, "nvme_admin_keep_alive", "keep_alive"},
    {0x19, "nvme_admin_directive_send", "directive_send"},
    {0x1a, "nvme_admin_directive_recv", "directive_recv"},
    {0x7c, "nvme_admin_dbbuf", "dbbuf"},
    {0x80, "nvme_admin_format_nvm", "format_nvm"},
    {0x81, "nvme_admin_security_send", "security_send"},
    {0x82, "nvme_admin_security_recv", "security_recv"},
    {0x84, "nvme_admin_sanitize_nvm", "sanitize"},
    {0x86, "nvme_admin_get_lba_status", "get_lba_status"},
};

constexpr uint8_t kFabrics = 0x7f;

const OpName* Find(uint8_t opcode, bool admin) {
  if (admin) {
    for (const OpName& o : kAdmin) {
      if (o.opcode == opcode) return &o;
    }
  } else {
    for (const OpName& o : kIo) {
      if (o.opcode == opcode) return &o;
    }
  }
  return nullptr;
}

// Opcodes whose CDW10-11 hold the starting LBA and CDW12[15:0] the 0-based block count.
bool HasLbaRange(uint8_t opcode) {
  switch (opcode) {
    case 0x01: case 0x02: case 0x04: case 0x05: case 0x08: case 0x0c: case 0x7d:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string_view NvmeKernelName(uint8_t opcode, bool admin) {
  if (opcode == kFabrics) return "nvme_fabrics_command";
  const OpName* o = Find(opcode, admin);
  return o ? o->kernel : "unknown";
}

NvmeDecoded DecodeNvme(uint8_t opcode, uint16_t qid, uint32_t cdw10, uint32_t cdw11,
                       uint32_t cdw12, uint32_t lba_size, uint8_t fctype) {
  NvmeDecoded d;
  d.admin = qid == 0;
  if (opcode == kFabrics) {
    static constexpr const char* kTypes[] = {"property_set", "connect", "", "", "property_get",
                                             "auth_send", "auth_receive", "", "disconnect"};
    const char* t = fctype < 9 && *kTypes[fctype] ? kTypes[fctype] : nullptr;
    d.name = t ? fmt::format("fabrics:{}", t) : fmt::format("fabrics:{:#x}", fctype);
    return d;
  }
  const OpName* o = Find(opcode, d.admin);
  std::string base = o ? o->name : fmt::format("{:#04x}", opcode);
  d.name = d.admin ? "admin:" + base : base;
  if (d.admin) {
    d.detail = fmt::format("cdw10={:#x} cdw11={:#x}", cdw10, cdw11);
    return d;
  }
  if (HasLbaRange(opcode)) {
    d.has_range = true;
    d.slba = static_cast<uint64_t>(cdw10) | (static_cast<uint64_t>(cdw11) << 32);
    d.nlb = (cdw12 & 0xffff) + 1;
    d.bytes = static_cast<uint64_t>(d.nlb) * lba_size;
    d.fua = (cdw12 >> 30) & 1;
    if (opcode == 0x08) d.deallocate = (cdw12 >> 25) & 1;  // write zeroes: DEAC
    d.detail = fmt::format("slba={} nlb={}{}{}", d.slba, d.nlb, d.fua ? " fua" : "",
                           d.deallocate ? " deallocate" : "");
  } else if (opcode == 0x09) {
    // Dataset management: the ranges are in the data buffer; the command gives their number
    // (CDW10[7:0], 0-based) and the attributes (CDW11 bit 2: deallocate, i.e. discard/trim).
    d.dsm_ranges = (cdw10 & 0xff) + 1;
    d.deallocate = (cdw11 >> 2) & 1;
    d.detail = fmt::format("ranges={}{}", d.dsm_ranges, d.deallocate ? " deallocate" : "");
  } else if (opcode == 0x00) {
    d.detail = "";  // flush: no fields
  } else {
    d.detail = fmt::format("cdw10={:#x} cdw11={:#x} cdw12={:#x}", cdw10, cdw11, cdw12);
  }
  return d;
}

}  // namespace iotwin::correlate
