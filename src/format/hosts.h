// Hosts of a merged trace (docs/multi-host.md): how a record names its host.
//
// `iotwin merge` folds the host's index h into every process identity: pid' = h * 2^22 + pid
// (Linux pids are below PID_MAX_LIMIT = 2^22), pid 0 staying 0. The header's `hosts` array is
// the table of hosts by index. A trace of one host has no table: every pid is of host 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

struct iot_rec_hdr;

namespace iotwin {

inline constexpr uint32_t kHostPidBits = 22;
inline constexpr uint32_t kHostPidLimit = 1u << kHostPidBits;  // PID_MAX_LIMIT
inline constexpr uint32_t kMaxHosts = 512;                      // bit 31 of a pid stays clear
// Kernel object identities (rq_id, bio_id, ring contexts) are XORed with h << kHostIdShift.
inline constexpr uint32_t kHostIdShift = 48;

// The host index of a (folded) pid: 0 in every trace of one host.
inline uint32_t HostOfPid(uint32_t pid) { return pid >> kHostPidBits; }

// The host of a record: HostOfPid of the process it names (its tgid, or the tid of an IOVEC or
// FDLIST record, which belong to the call before them); nothing for a record that names no
// process (STRING, CLOCK, LOST, NVME, CACHE_STATE, a pid of 0, a field past the record's size).
std::optional<uint32_t> HostOfRecord(const iot_rec_hdr* rec);

// The host names of a trace by index: the header's `hosts` table, or for a trace of one host its
// `host.hostname` (one entry, possibly empty).
std::vector<std::string> HostNames(const nlohmann::json& meta);

// Indices of `names` among the trace's hosts; an unknown name is an error naming the known ones.
Result<std::vector<uint32_t>> ResolveHostNames(const nlohmann::json& meta,
                                               const std::vector<std::string>& names);

}  // namespace iotwin
