#include "capture/memory_options.h"

#include <vector>

namespace iotwin::capture {

Result<MemoryOptions> ParseMemoryParts(std::string_view list, MemoryOptions base) {
  MemoryOptions o = base;
  o.faults = o.cache = o.writeback = o.state = false;
  if (list == "all") {
    o.faults = o.cache = o.writeback = o.state = true;
    return o;
  }
  if (list == "none") {
    o.off_reason = "switched off by --memory=none";
    return o;
  }
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string_view part =
        list.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    if (part == "faults") {
      o.faults = true;
    } else if (part == "cache") {
      o.cache = true;
    } else if (part == "writeback") {
      o.writeback = true;
    } else if (part == "state") {
      o.state = true;
    } else {
      return Status::Invalid(
          "--memory: unknown part '{}' (parts: faults, cache, writeback, state; or all, none)",
          part);
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  o.off_reason = fmt::format("not in --memory={}", list);
  return o;
}

std::string MemoryPartsString(const MemoryOptions& o) {
  std::string s;
  auto add = [&s](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ',';
    s += name;
  };
  add(o.faults, "faults");
  add(o.cache, "cache");
  add(o.writeback, "writeback");
  add(o.state, "state");
  return s.empty() ? "none" : s;
}

}  // namespace iotwin::capture
