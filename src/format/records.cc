#include "format/records.h"

#include "format/op_info.h"

#include <array>
#include <string>
#include <unordered_map>

// The ABI must have no implicit padding: every byte on disk is a declared field.
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wpadded"
#include "iotwin_abi.h"
#pragma GCC diagnostic pop

namespace iotwin {
namespace {

struct TypeInfo {
  std::string_view name;
  size_t size;
};
constexpr std::array<TypeInfo, IOT_REC_MAX + 1> kTypes = {{
    {"unknown", 0},
    {"string", sizeof(iot_string)},
    {"syscall", sizeof(iot_syscall)},
    {"proc", sizeof(iot_proc)},
    {"fd_snapshot", sizeof(iot_fd_snapshot)},
    {"map_snapshot", sizeof(iot_map_snapshot)},
    {"page_fault", sizeof(iot_page_fault)},
    {"page_cache", sizeof(iot_page_cache)},
    {"writeback", sizeof(iot_writeback)},
    {"block", sizeof(iot_block)},
    {"nvme", sizeof(iot_nvme)},
    {"async_io", sizeof(iot_async_io)},
    {"intent", sizeof(iot_intent)},
    {"lost", sizeof(iot_lost)},
    {"clock", sizeof(iot_clock)},
    {"cache_state", sizeof(iot_cache_state)},
    {"subpage", sizeof(iot_subpage)},
    {"sched", sizeof(iot_sched)},
    {"iovec", sizeof(iot_iovec)},
    {"fdlist", sizeof(iot_fdlist)},
}};

}  // namespace

size_t RecordFixedSize(uint16_t type) { return type <= IOT_REC_MAX ? kTypes[type].size : 0; }

std::string_view RecordTypeName(uint16_t type) {
  return type <= IOT_REC_MAX ? kTypes[type].name : "unknown";
}

std::string_view OpName(uint16_t op) { return GetOpInfo(op).name; }

std::optional<uint16_t> OpFromName(std::string_view name) {
  for (uint16_t i = 1; i <= IOT_OP_MAX; i++) {
    if (GetOpInfo(i).name == name) return i;
  }
  return std::nullopt;
}

std::vector<uint16_t> OpsNamedBy(std::string_view word) {
  std::vector<uint16_t> ops;
  if (word == "reads" || word == "writes") {
    const OpFamily family = word == "reads" ? OpFamily::kRead : OpFamily::kWrite;
    for (uint16_t op = 1; op <= IOT_OP_MAX; op++)
      if (GetOpInfo(op).family == family) ops.push_back(op);
  } else if (auto op = OpFromName(word)) {
    ops.push_back(*op);
  }
  return ops;
}

bool OpIsRead(uint16_t op) { return GetOpInfo(op).family == OpFamily::kRead; }

bool OpIsWrite(uint16_t op) { return GetOpInfo(op).family == OpFamily::kWrite; }

bool OpOpensFd(uint16_t op) { return GetOpInfo(op).family == OpFamily::kOpen; }

bool OpHasExplicitOffset(uint16_t op) {
  const OpInfo& i = GetOpInfo(op);
  return (i.family == OpFamily::kRead || i.family == OpFamily::kWrite) &&
         (i.offset == FieldUse::kFileOffset || i.offset == FieldUse::kOffsetOrCurrent);
}

std::string_view SourceName(uint16_t source) {
  static constexpr std::array<std::string_view, IOT_SRC_MAX + 1> kNames = {
      "unknown", "syscall", "proc", "memory", "block", "nvme", "async", "sched", "intent", "join"};
  return source <= IOT_SRC_MAX ? kNames[source] : "unknown";
}

std::string_view BlockPhaseName(uint16_t phase) {
  static constexpr std::array<std::string_view, 13> kNames = {
      "?", "Q", "X", "M", "F", "A", "G", "I", "D", "C", "R", "rq_merge", "bio_complete"};
  return phase < kNames.size() ? kNames[phase] : "?";
}

}  // namespace iotwin
