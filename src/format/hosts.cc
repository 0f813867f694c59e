#include "format/hosts.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace iotwin {

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
