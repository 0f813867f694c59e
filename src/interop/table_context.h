// The context of the CSV/JSONL export's rows: what a row needs besides its record (the files it
// concerns, the trace's strings it shows), worked out in record order by feeding every record to
// model::TraceState, the one interpreter of descriptors, paths, cwd and processes; and the
// `files` table those rows point into.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/json_fields.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "interop/flag_names.h"
#include "interop/table_schema.h"
#include "model/trace_state.h"

namespace iotwin::interop {
class ColumnTable;
}

namespace iotwin::interop::table_export {

// Files by identity (dev, ino) or, for rows without one, by resolved path. A file's path is the
// first resolved path the trace gives it.
class FileIds {
 public:
  static constexpr uint32_t kNoType = UINT32_MAX;  // the record carries no file type

  struct Entry {
    uint32_t dev = 0;
    uint64_t ino = 0;
    std::string path;
    uint16_t ftype = 0;
    bool untyped = false;  // a record showed the identity with type 0
  };

  uint32_t ByIdentity(uint32_t dev, uint64_t ino, std::string_view path, uint32_t ftype) {
    Slot& slot = cache_[((ino * 0x9E3779B97F4A7C15ull) ^ dev) >> (64 - kCacheBits)];
    uint32_t id;
    if (slot.id != 0 && slot.ino == ino && slot.dev == dev) {
      id = slot.id - 1;
    } else {
      auto [it, inserted] = by_identity_.try_emplace(Identity{ino, dev}, Size());
      if (inserted) entries_.push_back(Entry{dev, ino, {}, 0, false});
      id = it->second;
      slot = Slot{ino, dev, id + 1};
    }
    Note(entries_[id], path, ftype);
    return id;
  }
  uint32_t ByPath(std::string_view path, uint32_t ftype) {
    auto [it, inserted] = by_path_.try_emplace(std::string(path), Size());
    if (inserted) entries_.push_back(Entry{0, 0, std::string(path), 0, false});
    Note(entries_[it->second], {}, ftype);
    return it->second;
  }
  // The file behind an open file description.
  uint32_t OfDescription(const model::OpenFileDescription& d) {
    if (d.ino != 0) return ByIdentity(d.dev, d.ino, d.path, d.ftype ? d.ftype : kNoType);
    if (!d.path.empty()) return ByPath(d.path, d.ftype ? d.ftype : kNoType);
    return kNoFile;
  }
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  static constexpr int kCacheBits = 10;
  struct Slot {
    uint64_t ino = 0;
    uint32_t dev = 0;
    uint32_t id = 0;  // id + 1; 0: empty
  };
  struct Identity {
    uint64_t ino;
    uint32_t dev;
    bool operator==(const Identity&) const = default;
  };
  struct IdentityHash {
    size_t operator()(const Identity& k) const { return (k.ino * 0x9E3779B97F4A7C15ull) ^ k.dev; }
  };

  uint32_t Size() const { return static_cast<uint32_t>(entries_.size()); }
  static void Note(Entry& e, std::string_view path, uint32_t ftype) {
    if (e.path.empty() && !path.empty()) e.path = path;
    if (ftype == kNoType) return;
    if (ftype != 0) {
      e.ftype = static_cast<uint16_t>(ftype);
    } else {
      e.untyped = true;
    }
  }

  std::array<Slot, size_t{1} << kCacheBits> cache_{};
  std::unordered_map<Identity, uint32_t, IdentityHash> by_identity_;
  std::unordered_map<std::string, uint32_t> by_path_;
  std::vector<Entry> entries_;
};

// What the rows of one trace need besides their records: the descriptor state and the files,
// fed every record in order.
class RowModel {
 public:
  explicit RowModel(const TraceReader& reader) : reader_(reader) {
    if (const nlohmann::json* host = json_fields::Object(reader.meta(), "host")) {
      state_.SetArch(json_fields::GetString(*host, "arch"));
      state_.SetPageSize(json_fields::GetUint(*host, "page_size", 4096));
    }
    types_recorded_ = json_fields::Object(reader.meta(), "capture") != nullptr;
  }

  // The flag names of the trace's machine.
  FlagNames flag_names() const {
    return FlagNames(state_.o_direct_flag(), state_.o_directory_flag());
  }

  // Updates the model with record `h` and sets the context of its row; false for a record that
  // has no table.
  bool Context(const iot_rec_hdr* h, RowContext* ctx) {
    switch (h->type) {
      case IOT_REC_SYSCALL: *ctx = Prepare(As<iot_syscall>(h)); break;
      case IOT_REC_PROC: *ctx = Prepare(As<iot_proc>(h)); break;
      case IOT_REC_FD_SNAPSHOT: *ctx = Prepare(As<iot_fd_snapshot>(h)); break;
      case IOT_REC_MAP_SNAPSHOT: *ctx = Prepare(As<iot_map_snapshot>(h)); break;
      case IOT_REC_PAGE_FAULT: ctx->file = ByIdentity(As<iot_page_fault>(h)); break;
      case IOT_REC_PAGE_CACHE: ctx->file = ByIdentity(As<iot_page_cache>(h)); break;
      case IOT_REC_WRITEBACK: ctx->file = ByIdentity(As<iot_writeback>(h)); break;
      case IOT_REC_BLOCK: {
        const iot_block& b = As<iot_block>(h);
        ctx->file = ByIdentity(b.ino_dev, b.ino);
        break;
      }
      case IOT_REC_ASYNC_IO: *ctx = Prepare(As<iot_async_io>(h)); break;
      case IOT_REC_INTENT: ctx->text[0] = TextOrEmpty(As<iot_intent>(h).label_id); break;
      case IOT_REC_CACHE_STATE: *ctx = Prepare(As<iot_cache_state>(h)); break;
      case IOT_REC_SUBPAGE: ctx->file = ByIdentity(As<iot_subpage>(h)); break;
      case IOT_REC_NVME:
      case IOT_REC_LOST:
      case IOT_REC_CLOCK:
      case IOT_REC_SCHED:
      case IOT_REC_IOVEC: break;
      default: return false;
    }
    return true;
  }

  // The files table, and the files named so far (ids 0..n-1) with their paths.
  template <class T>
  void FilesTable(T& t) const;
  size_t FileCount() const { return files_.entries().size(); }
  std::string_view FilePath(uint32_t id) const { return files_.entries()[id].path; }

 private:
  std::optional<std::string_view> Text(uint32_t id) const {
    if (id == 0) return std::nullopt;
    return reader_.String(id);
  }
  std::string_view TextOrEmpty(uint32_t id) const { return id ? reader_.String(id) : ""; }
  uint32_t ByIdentity(uint32_t dev, uint64_t ino) {
    return ino != 0 ? files_.ByIdentity(dev, ino, {}, FileIds::kNoType) : kNoFile;
  }
  template <typename R>
  uint32_t ByIdentity(const R& r) {
    return ByIdentity(r.dev, r.ino);
  }

  RowContext Prepare(const iot_syscall& s);
  RowContext Prepare(const iot_proc& p);
  RowContext Prepare(const iot_fd_snapshot& s);
  RowContext Prepare(const iot_map_snapshot& m);
  RowContext Prepare(const iot_async_io& a);
  RowContext Prepare(const iot_cache_state& c);

  const TraceReader& reader_;
  model::TraceState state_;
  bool types_recorded_ = false;
  FileIds files_;
};

extern template void RowModel::FilesTable<Table>(Table&) const;
extern template void RowModel::FilesTable<ColumnTable>(ColumnTable&) const;

}  // namespace iotwin::interop::table_export
