// C++ view of the trace record types defined in abi/iotwin_abi.h: names, v1 sizes, typed access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "iotwin_abi.h"

namespace iotwin {

static_assert(sizeof(iot_rec_hdr) == 4);
static_assert(sizeof(iot_string) == 12);
static_assert(sizeof(iot_syscall) == 112);
static_assert(offsetof(iot_syscall, ts) == 8);
static_assert(offsetof(iot_syscall, ret) == 32);
static_assert(offsetof(iot_syscall, ino) == 80);
static_assert(sizeof(iot_iovec) == 24);
static_assert(sizeof(iot_fdlist) == 32);
static_assert(offsetof(iot_fdlist, ts) == 16);
static_assert(sizeof(iot_fdlist_entry) == 24);
static_assert(sizeof(iot_proc) == 64);
static_assert(sizeof(iot_fd_snapshot) == 64);
static_assert(sizeof(iot_map_snapshot) == 64);
static_assert(sizeof(iot_page_fault) == 64);
static_assert(sizeof(iot_page_cache) == 48);
static_assert(sizeof(iot_writeback) == 56);
static_assert(sizeof(iot_block) == 120);
static_assert(sizeof(iot_nvme) == 88);
static_assert(sizeof(iot_async_io) == 104);
static_assert(offsetof(iot_async_io, ring_flags) == 88);
static_assert(sizeof(iot_intent) == 40);
static_assert(sizeof(iot_lost) == 24);
static_assert(sizeof(iot_clock) == 32);
static_assert(sizeof(iot_cache_state) == 56);
static_assert(sizeof(iot_subpage) == 104);
static_assert(sizeof(iot_sched) == 40);

// Size of the fixed part of each record type in format v1 (0 for unknown types). A reader
// zero-extends shorter records to this size; records may be longer (newer writers, or the
// variable tail of STRING and IOVEC records).
size_t RecordFixedSize(uint16_t type);

// "syscall", "page_fault", ... ; "unknown" for types this build does not know.
std::string_view RecordTypeName(uint16_t type);

// "pread64", "openat", ... (format/op_info.h); "unknown" for out-of-range codes.
std::string_view OpName(uint16_t op);
std::optional<uint16_t> OpFromName(std::string_view name);
// The ops a filter word names: one op's name, or `reads` / `writes` (every op of that family).
// Empty for an unknown word. The command line's --filter op= and Python's where={"op": ...}.
std::vector<uint16_t> OpsNamedBy(std::string_view word);

// Classification used by analysis and replay.
bool OpIsRead(uint16_t op);   // read, pread64, readv, preadv, preadv2
bool OpIsWrite(uint16_t op);  // write, pwrite64, writev, pwritev, pwritev2
bool OpOpensFd(uint16_t op);  // open, openat, openat2, creat
bool OpHasExplicitOffset(uint16_t op);  // pread/pwrite/preadv*/pwritev*

std::string_view SourceName(uint16_t source);  // IOT_SRC_* -> "syscall", ...
std::string_view BlockPhaseName(uint16_t phase);  // IOT_BLK_* -> "Q", "X", ...

// Typed access to a record already validated and zero-extended by TraceReader.
template <typename T>
const T& As(const iot_rec_hdr* h) {
  return *reinterpret_cast<const T*>(h);
}

// Fill the common header of a record struct.
template <typename T>
void InitRecord(T* rec, uint16_t type) {
  rec->hdr.type = type;
  rec->hdr.size = static_cast<uint16_t>(sizeof(T));
}

}  // namespace iotwin
