// MemoryOptions: which parts of the memory layer `iotwin record` captures (docs/memory-layer.md).
//
// Parts: "faults" (page faults on file mappings), "cache" (page-cache insertions, removals and
// readahead windows), "writeback" (dirtied pages and inodes, write-back of files), "state"
// (page-cache residency of each file when the workload first opens or maps it). The sub-page
// tracker (--subpage) is opt-in and separate.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace iotwin::capture {

struct MemoryOptions {
  bool faults = true;
  bool cache = true;
  bool writeback = true;
  bool state = true;
  bool subpage = false;
  int subpage_interval_ms = 10;
  uint64_t subpage_max_bytes = 256ull << 20;  // shadow copies kept at most
  // Why parts are off, when the user switched them off ("--no-memory", "--memory=...").
  std::string off_reason;

  bool AnyKernelPart() const { return faults || cache || writeback || subpage; }
  bool Any() const { return AnyKernelPart() || state; }
};

// Parses a --memory list: comma-separated part names, or "all" / "none". Parts not named are off.
// Errors name the unknown part and list the valid ones.
Result<MemoryOptions> ParseMemoryParts(std::string_view list, MemoryOptions base = {});

// "faults,cache,writeback,state" for the parts that are on ("none" when none is).
std::string MemoryPartsString(const MemoryOptions& o);

}  // namespace iotwin::capture
