// ScopeRecordFilter: which records of a trace concern files a data scope (model/scope.h) leaves
// out, decided in file order with the trace interpreter (model/trace_state.h), so that names are
// judged resolved: relative and dirfd-relative opens, descriptors and mappings held at attach.
//
// Dropped: calls on a descriptor whose open file is out of scope (its open, reads, writes, mmap,
// dup, close, ...), calls on a descriptor no open showed whose kind the scope leaves out (a
// pipe, a socket, a tty under `data`), path calls (stat, unlink, failed opens) whose resolved path is out, the
// IOVEC record after a dropped call, attach snapshots of files out of scope, and the memory
// layer's records (faults, page cache, write-back, cache state) of file identities seen only
// out of scope (by an open, a snapshot or a cache state naming the file: an executable mapped by
// exec is known by its cache state; its faults recorded before that stay); async requests submitted on such descriptors, with their completions. Kept:
// STRING, process, block, NVMe, sched, intent and loss records; directories (the bases names
// resolve against); calls that name no file. `iotwin record --scope` applies it to the
// trace it writes.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "iotwin_abi.h"
#include "model/scope.h"
#include "model/trace_state.h"

namespace iotwin::model {

struct ScopeFilterCounts {
  uint64_t records = 0;  // every record dropped
  uint64_t calls = 0;    // system calls dropped
  uint64_t bytes = 0;    // bytes the dropped calls read or wrote
  uint64_t faults = 0;   // page faults dropped
  nlohmann::json ToJson() const;
};

class ScopeRecordFilter {
 public:
  explicit ScopeRecordFilter(Scope scope);
  // Whether `rec` stays (records in file order, STRING records included).
  bool Keep(const iot_rec_hdr* rec);
  const ScopeFilterCounts& dropped() const { return dropped_; }

 private:
  bool KeepSyscall(const iot_syscall& sc);
  // Whether the file of description `id` is out of scope (directories and rings never are).
  bool DescriptionOut(DescriptionId id);
  bool IdentityOut(uint32_t dev, uint64_t ino) const;
  void NoteIdentity(uint32_t dev, uint64_t ino, bool out);
  std::optional<std::string_view> String(uint32_t id) const;
  bool Drop();

  Scope scope_;
  TraceState state_;
  std::unordered_map<uint32_t, std::string> strings_;
  std::set<std::pair<uint32_t, uint64_t>> out_ids_, in_ids_;
  std::unordered_set<uint64_t> dropped_async_;  // submissions dropped, by ctx ^ req_id
  uint32_t dropped_call_tid_ = 0;               // the IOVEC after a dropped call goes too
  bool last_call_dropped_ = false;
  ScopeFilterCounts dropped_;
};

// Copies the trace at `in` to `out` without the records `scope` leaves out; the header gets
// "scope" (Scope::ToJson) and the footer's summary "scope_dropped" (the counts).
Result<ScopeFilterCounts> WriteScopedTrace(const std::string& in, const std::string& out,
                                           const Scope& scope);

}  // namespace iotwin::model
