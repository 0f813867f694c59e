// The permission bits a replay gives the files and directories it creates (docs/security.md,
// "Modes"). A recorded mode is untrusted input and the replay runs as root, so the mode of a
// replayed creat, open/openat/openat2 with O_CREAT or O_TMPFILE, mkdir or mkdirat is not passed
// to the kernel as recorded:
//   * set-user-ID and set-group-ID are never applied (a root-owned set-id file is a privilege
//     the trace would hand out);
//   * group and other write are masked unless --keep-modes, whatever the invoking umask (a
//     umask of 000 would otherwise make the sandbox's files and directories writable to every
//     local user). The kernel still applies the umask on top.
// The sticky bit and the other permission bits stay as recorded. The trace keeps the recorded
// mode; the replay's summary counts the calls whose mode it changed, with an example.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "model/trace_model.h"

namespace iotwin::replay {

inline constexpr uint32_t kNeverAppliedModeBits = S_ISUID | S_ISGID;
inline constexpr uint32_t kDefaultModeMask = S_IWGRP | S_IWOTH;

// The mode the replay passes to the kernel for recorded mode `recorded`.
inline uint32_t AppliedMode(uint64_t recorded, bool keep_modes) {
  uint32_t mode = static_cast<uint32_t>(recorded & 07777) & ~kNeverAppliedModeBits;
  return keep_modes ? mode : mode & ~kDefaultModeMask;
}

// Whether the kernel reads the mode argument of `sc` (it creates something with it).
bool PassesMode(const iot_syscall& sc);

// The recorded calls (replayable, syscall ops) whose mode AppliedMode changes, as the replay's
// summary shows them: {"changed": N, "keep_modes": bool, "example": {...}} (no example when 0).
nlohmann::json ModeChangesJson(const model::TraceModel& model, bool keep_modes);
// One line for the human summary ("" when no mode changes).
std::string ModeChangesText(const nlohmann::json& modes);

}  // namespace iotwin::replay
