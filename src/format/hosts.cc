#include "format/hosts.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstddef>
#include <cstring>

#include "format/records.h"

namespace iotwin {

std::optional<uint32_t> HostOfRecord(const iot_rec_hdr* rec) {
  size_t at = 0;
  switch (rec->type) {
    case IOT_REC_SYSCALL: at = offsetof(iot_syscall, tgid); break;
    case IOT_REC_PROC: at = offsetof(iot_proc, tgid); break;
    case IOT_REC_FD_SNAPSHOT: at = offsetof(iot_fd_snapshot, tgid); break;
    case IOT_REC_MAP_SNAPSHOT: at = offsetof(iot_map_snapshot, tgid); break;
    case IOT_REC_PAGE_FAULT: at = offsetof(iot_page_fault, tgid); break;
    case IOT_REC_PAGE_CACHE: at = offsetof(iot_page_cache, tgid); break;
    case IOT_REC_WRITEBACK: at = offsetof(iot_writeback, tgid); break;
    case IOT_REC_BLOCK: at = offsetof(iot_block, tgid); break;
    case IOT_REC_ASYNC_IO: at = offsetof(iot_async_io, tgid); break;
    case IOT_REC_INTENT: at = offsetof(iot_intent, tgid); break;
    case IOT_REC_SUBPAGE: at = offsetof(iot_subpage, tgid); break;
    case IOT_REC_SCHED: at = offsetof(iot_sched, tgid); break;
    case IOT_REC_IOVEC: at = offsetof(iot_iovec, tid); break;
    case IOT_REC_FDLIST: at = offsetof(iot_fdlist, tid); break;
    default: return std::nullopt;
  }
  uint32_t pid = 0;
  if (at + sizeof pid > rec->size) return std::nullopt;
  std::memcpy(&pid, reinterpret_cast<const uint8_t*>(rec) + at, sizeof pid);
  if (pid == 0) return std::nullopt;
  return HostOfPid(pid);
}

std::vector<std::string> HostNames(const nlohmann::json& meta) {
  std::vector<std::string> names;
  if (!meta.is_object()) return names;
  auto hosts = meta.find("hosts");
  if (hosts != meta.end() && hosts->is_array()) {
    for (const nlohmann::json& h : *hosts) {
      const nlohmann::json* name = h.is_object() && h.contains("name") ? &h["name"] : nullptr;
      names.push_back(name && name->is_string() ? name->get<std::string>() : std::string());
      if (names.size() >= kMaxHosts) break;
    }
    return names;
  }
  auto host = meta.find("host");
  std::string name;
  if (host != meta.end() && host->is_object()) {
    auto hn = host->find("hostname");
    if (hn != host->end() && hn->is_string()) name = hn->get<std::string>();
  }
  names.push_back(std::move(name));
  return names;
}

Result<std::vector<uint32_t>> ResolveHostNames(const nlohmann::json& meta,
                                               const std::vector<std::string>& names) {
  const std::vector<std::string> hosts = HostNames(meta);
  std::vector<uint32_t> out;
  for (const std::string& name : names) {
    bool found = false;
    for (size_t i = 0; i < hosts.size(); i++) {
      if (hosts[i] != name) continue;
      out.push_back(static_cast<uint32_t>(i));
      found = true;
      break;
    }
    if (!found) {
      return Status::Invalid("--host {}: no such host in the trace (hosts: {})", name,
                             fmt::join(hosts, ", "));
    }
  }
  return out;
}

}  // namespace iotwin
