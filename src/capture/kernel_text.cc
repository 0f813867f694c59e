#include "capture/kernel_text.h"

#include <charconv>
#include <cstring>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "capture/feature_table.h"

namespace iotwin::capture {

std::string ErrnoText(int err) {
  const char* name = strerrorname_np(err);
  return fmt::format("{} ({})", name ? name : std::to_string(err), std::strerror(err));
}

std::map<std::string, std::string> ParseKernelConfig(std::string_view text) {
  std::map<std::string, std::string> config;
  constexpr std::string_view kNotSetPrefix = "# CONFIG_";
  constexpr std::string_view kNotSetSuffix = " is not set";
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.starts_with(kNotSetPrefix) && line.ends_with(kNotSetSuffix)) {
      std::string_view name = line.substr(2, line.size() - 2 - kNotSetSuffix.size());
      // (insert_or_assign: gcc 12 -O2 reports a false -Wrestrict for `config[...] = "n"` here.)
      if (name.find(' ') == std::string_view::npos) {
        config.insert_or_assign(std::string(name), std::string(1, 'n'));
      }
      continue;
    }
    if (!line.starts_with("CONFIG_")) continue;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == std::string_view::npos - 1) continue;
    std::string_view value = line.substr(eq + 1);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    config[std::string(line.substr(0, eq))] = std::string(value);
  }
  return config;
}

std::optional<std::string> FindTracefsMount(std::string_view proc_mounts) {
  std::optional<std::string> tracefs, debugfs;
  std::istringstream in{std::string(proc_mounts)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string source, target, type;
    if (!(fields >> source >> target >> type)) continue;
    if (type == "tracefs") {
      if (!tracefs || target == kTracefsDir) tracefs = target;
    } else if (type == "debugfs" && !debugfs) {
      debugfs = target + "/tracing";
    }
  }
  return tracefs ? tracefs : debugfs;
}

std::optional<uint64_t> ParseCapEff(std::string_view proc_status) {
  constexpr std::string_view kKey = "CapEff:";
  size_t pos = 0;
  while (pos < proc_status.size()) {
    size_t eol = proc_status.find('\n', pos);
    std::string_view line = proc_status.substr(pos, eol == std::string_view::npos ? eol : eol - pos);
    pos = eol == std::string_view::npos ? proc_status.size() : eol + 1;
    if (!line.starts_with(kKey)) continue;
    line.remove_prefix(kKey.size());
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    // The kernel prints exactly 16 hex digits; accept no more than that (64 bits).
    if (line.empty() || line.size() > 16) return std::nullopt;
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), value, 16);
    if (ec != std::errc() || end != line.data() + line.size()) return std::nullopt;
    return value;
  }
  return std::nullopt;
}

}  // namespace iotwin::capture
