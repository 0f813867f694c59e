// Parsers of the kernel's text (kernel config, /proc/mounts, /proc/<pid>/status) and errno
// naming, for the feature probe; pure and unit-tested.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace iotwin::capture {

// Kernel config text ("CONFIG_X=y", "# CONFIG_Y is not set") to {"CONFIG_X":"y","CONFIG_Y":"n"};
// quoted values lose their quotes. Other lines are ignored.
std::map<std::string, std::string> ParseKernelConfig(std::string_view text);
// The tracefs directory given /proc/mounts text: a tracefs mount (preferring
// /sys/kernel/tracing), else a debugfs mount's tracing/ subdirectory; nullopt when neither.
std::optional<std::string> FindTracefsMount(std::string_view proc_mounts);
// CapEff from /proc/<pid>/status text.
std::optional<uint64_t> ParseCapEff(std::string_view proc_status);
// "EPERM (Operation not permitted)".
std::string ErrnoText(int err);

}  // namespace iotwin::capture
