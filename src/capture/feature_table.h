// The static half of Features: each feature's key, title, users and fallback (the fallbacks the
// capture's programs decide are derived from the attach table, attach_table.h), the tracepoint
// groups probed for existence, and where the kernel keeps what the probes read.
#pragma once

#include <string_view>
#include <vector>

#include "capture/features.h"

namespace iotwin::capture {

inline constexpr const char* kTracefsDir = "/sys/kernel/tracing";
inline constexpr const char* kVmlinuxBtf = "/sys/kernel/btf/vmlinux";
inline constexpr const char* kPmuDir = "/sys/bus/event_source/devices";

// Static facts about a feature: its key, what needs it and what iotwin does without it.
struct FeatureInfo {
  Feature id;
  std::string_view key;
  std::string_view title;
  std::string_view needed_by;
  std::string_view fallback;
};
FeatureInfo FeatureInfoOf(Feature id);

// Tracepoint groups probed for existence. "a|b" means either name (renamed across kernels).
struct TracepointGroupSpec {
  Feature feature;
  std::string_view group;
  std::vector<std::string_view> required;
  std::vector<std::string_view> optional;
};
const std::vector<TracepointGroupSpec>& TracepointGroups();

}  // namespace iotwin::capture
