// What the analyzer's files share (analyzer.cc: dispatch and tables; analyzer_syscalls.cc,
// analyzer_memory.cc, analyzer_block.cc, analyzer_async.cc: one layer's statistics and its part
// of the report model; analyzer_model.cc: the model's other sections): the op classes read from
// the op table, the bounds on per-request state, and the JSON pieces several sections use.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "analysis/histogram.h"
#include "analysis/pattern.h"
#include "format/op_info.h"
#include "iotwin_abi.h"
#include "model/op_fields.h"

namespace iotwin::analysis::analyzer_detail {

// What OnSyscall asks of every record's op, read once from the op table (format/op_info.h).
struct OpClassTable {
  // Direction of a data op: 0 read, 1 write, -1 neither.
  std::array<int8_t, IOT_OP_MAX + 1> dir{};
  // A data op at the current position (read, write, readv, writev), or at the offset it names
  // unless that is -1 (preadv2, pwritev2); else its offset is explicit.
  std::array<bool, IOT_OP_MAX + 1> at_position{};
  std::array<bool, IOT_OP_MAX + 1> offset_or_current{};
  std::array<bool, IOT_OP_MAX + 1> opens{};
  // Its path names the file the record identifies (stat, truncate): a name of that file.
  std::array<bool, IOT_OP_MAX + 1> names_file{};
  // Gives path2 as a new name of path's file (link, linkat).
  std::array<bool, IOT_OP_MAX + 1> links{};
  std::array<bool, IOT_OP_MAX + 1> maps_file{};  // mmap
  std::array<bool, IOT_OP_MAX + 1> copies{};     // copy_file_range, sendfile, splice
  // Its offset field holds an address (munmap, mremap, msync, madvise), which differs between
  // runs (ASLR): no part of the op's fingerprint.
  std::array<bool, IOT_OP_MAX + 1> address{};
  std::array<bool, IOT_OP_MAX + 1> whence{};  // lseek: `aux` holds whence
  // It names a path (the interpreter reads the text only then: opens, chdir, renames).
  std::array<bool, IOT_OP_MAX + 1> has_path{};
  std::array<bool, IOT_OP_MAX + 1> has_path2{};  // a second path (renames, links)
  OpClassTable() {
    for (uint16_t op = 0; op <= IOT_OP_MAX; op++) {
      const OpInfo& info = GetOpInfo(op);
      dir[op] = info.family == OpFamily::kRead ? 0 : info.family == OpFamily::kWrite ? 1 : -1;
      at_position[op] = dir[op] >= 0 && info.offset != FieldUse::kFileOffset &&
                        info.offset != FieldUse::kOffsetOrCurrent;
      offset_or_current[op] = dir[op] >= 0 && info.offset == FieldUse::kOffsetOrCurrent;
      opens[op] = info.family == OpFamily::kOpen;
      names_file[op] = info.path == PathRole::kResolved &&
                       (info.family == OpFamily::kStat || info.family == OpFamily::kSpace);
      links[op] = info.names == NameEffect::kLinks;
      maps_file[op] = info.mapping == OpMapping::kMaps;
      copies[op] = info.family == OpFamily::kCopy;
      address[op] = info.mapping != OpMapping::kNone && info.mapping != OpMapping::kMaps;
      whence[op] = info.aux == FieldUse::kWhence;
      has_path[op] = info.path != PathRole::kNone;
      has_path2[op] = info.path2 != PathRole::kNone;
    }
  }
  // Whether data op `op` used the current position, by its recorded offset.
  bool AtPosition(uint16_t op, uint64_t offset) const {
    return at_position[op] || (offset_or_current[op] && offset == model::kNoOffset);
  }
};
inline const OpClassTable kOpClass;

inline constexpr size_t kMaxStreams = 4u << 20;
// Bounds of the threads' direct stream tables (files and threads by index, in the order the trace
// first names them): at most 16 KiB per thread, 4 MiB in all.
inline constexpr int32_t kDirectStreamFiles = 1024;
inline constexpr size_t kDirectStreamThreads = 256;
inline constexpr size_t kMaxQueuedBios = 1u << 20;
inline constexpr size_t kMaxPending = 1u << 20;

// Offsets and lengths come from the trace: a request's length is cut where its end would pass
// 2^64, so [offset, offset + length) is never a wrapped (reversed) range.
inline uint64_t ClampedLength(uint64_t offset, uint64_t length) {
  return std::min(length, UINT64_MAX - offset);
}

// Pages read by storage files' calls and read faults, and those of them that missed the cache.
struct ReadPages {
  uint64_t call = 0, mapped = 0, exec = 0, missed_call = 0, missed_fault = 0, untracked = 0;
};

// JSON pieces (analyzer_model.cc).
double Share(uint64_t part, uint64_t whole);
// Rounded to 4 decimals so golden outputs do not depend on the last bits of a division.
double Round4(double v);
nlohmann::json LatencyJson(const LogLinearHistogram& h);
nlohmann::json AccessJson(const std::array<uint64_t, kAccessKinds>& a);
nlohmann::json SeekJson(const SeekHistogram& h);
// Size table of one stream of requests: histogram, exact top sizes, dominant size.
nlohmann::json SizesJson(const SizeHistogram& h, const TopValues& top, size_t top_rows);

}  // namespace iotwin::analysis::analyzer_detail
