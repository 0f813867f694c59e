#include "model/scope_filter.h"

#include <fcntl.h>

#include <algorithm>
#include <optional>

#include "base/checked_math.h"
#include "format/op_info.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "format/trace_writer.h"
#include "model/op_fields.h"
#include "model/path.h"

namespace iotwin::model {
namespace {

constexpr uint16_t kDirectoryType = 4;  // S_IFDIR >> 12

uint64_t AsyncKey(uint64_t ctx, uint64_t req_id) { return (ctx * 0x9e3779b97f4a7c15ULL) ^ req_id; }

}  // namespace

nlohmann::json ScopeFilterCounts::ToJson() const {
  return {{"records", records}, {"calls", calls}, {"bytes", bytes}, {"faults", faults}};
}

ScopeRecordFilter::ScopeRecordFilter(Scope scope) : scope_(std::move(scope)) {}

std::optional<std::string_view> ScopeRecordFilter::String(uint32_t id) const {
  if (id == 0) return std::nullopt;
  auto it = strings_.find(id);
  if (it == strings_.end()) return std::nullopt;
  return std::string_view(it->second);
}

bool ScopeRecordFilter::Drop() {
  ++dropped_.records;
  return false;
}

bool ScopeRecordFilter::IdentityOut(uint32_t dev, uint64_t ino) const {
  return ino != 0 && out_ids_.count({dev, ino}) && !in_ids_.count({dev, ino});
}

void ScopeRecordFilter::NoteIdentity(uint32_t dev, uint64_t ino, bool out) {
  if (ino != 0) (out ? out_ids_ : in_ids_).insert({dev, ino});
}

bool ScopeRecordFilter::DescriptionOut(DescriptionId id) {
  const OpenFileDescription* d = state_.Description(id);
  if (d == nullptr || d->ring || d->directory || d->ftype == kDirectoryType) return false;
  const bool out = !scope_.Admits(d->path, ClassifyFile(d->ftype, d->path, true));
  NoteIdentity(d->dev, d->ino, out);
  return out;
}

bool ScopeRecordFilter::KeepSyscall(const iot_syscall& sc) {
  const SyscallEffect e = state_.OnSyscall(sc, String(sc.path_id), String(sc.path2_id));
  const DescriptionId desc = e.created != kNoDescription ? e.created : e.desc;
  bool out = false;
  const bool has_file = sc.ino != 0 && !(sc.sflags & IOT_SCF_NO_FILE);
  if (desc != kNoDescription) {
    out = DescriptionOut(desc);
  } else if (has_file && sc.path_id == 0) {
    // A descriptor no open showed (a pipe, a socket, an inherited tty): its kind alone.
    out = !scope_.AdmitsKind(ClassifyFile(sc.ftype, {}, true));
  } else if (MakesOrRemovesDir(sc)) {
    // mkdir, rmdir and unlinkat(AT_REMOVEDIR) carry no identity; the directories that files in
    // scope live in are kept, so these calls are too.
    out = false;
  } else if (GetOpInfo(sc.op).names != NameEffect::kSetsCwd && sc.path_id != 0 && sc.path2_id == 0 &&
             sc.ftype != kDirectoryType &&
             !(sc.sflags & (IOT_SCF_PATH_TRUNC | IOT_SCF_PATH_FAULT))) {
    // A call on a name alone (stat, unlink, a failed open): judged by the resolved name. Calls
    // with a second name (rename, link) stay: the names they move may be in scope.
    if (auto name = String(sc.path_id)) {
      if (auto resolved = state_.Resolve(sc.tgid, PathDirFd(sc), *name)) {
        out = !scope_.Admits(*resolved, ClassifyFile(has_file ? sc.ftype : 0, *resolved, false));
      }
    }
  }
  last_call_dropped_ = out;
  dropped_call_tid_ = sc.tid;
  if (!out) return true;
  ++dropped_.calls;
  if (sc.ret > 0 && (OpIsRead(sc.op) || OpIsWrite(sc.op)))
    dropped_.bytes = SaturatingAdd(dropped_.bytes, static_cast<uint64_t>(sc.ret));
  return Drop();
}

bool ScopeRecordFilter::Keep(const iot_rec_hdr* rec) {
  if (rec->type != IOT_REC_IOVEC && rec->type != IOT_REC_FDLIST && rec->type != IOT_REC_STRING) {
    last_call_dropped_ = false;
  }
  switch (rec->type) {
    case IOT_REC_STRING: {
      const auto& s = As<iot_string>(rec);
      const size_t avail = rec->size > sizeof(iot_string) ? rec->size - sizeof(iot_string) : 0;
      strings_[s.id].assign(reinterpret_cast<const char*>(rec) + sizeof(iot_string),
                            std::min<size_t>(s.len, avail));
      return true;
    }
    case IOT_REC_SYSCALL: {
      const bool keep = KeepSyscall(As<iot_syscall>(rec));
      last_call_dropped_ = !keep;
      return keep;
    }
    case IOT_REC_IOVEC:
      if (last_call_dropped_ && As<iot_iovec>(rec).tid == dropped_call_tid_) return Drop();
      return true;
    case IOT_REC_FDLIST:
      if (last_call_dropped_ && As<iot_fdlist>(rec).tid == dropped_call_tid_) return Drop();
      return true;
    case IOT_REC_PROC: {
      const auto& p = As<iot_proc>(rec);
      state_.OnProc(p, String(p.path_id));
      return true;
    }
    case IOT_REC_FD_SNAPSHOT: {
      const auto& s = As<iot_fd_snapshot>(rec);
      const DescriptionId id = state_.OnFdSnapshot(s, String(s.path_id));
      return id != kNoDescription && DescriptionOut(id) ? Drop() : true;
    }
    case IOT_REC_MAP_SNAPSHOT: {
      const auto& s = As<iot_map_snapshot>(rec);
      state_.OnMapSnapshot(s, String(s.path_id));
      const FileMapping* m = state_.MappingAt(s.tgid, s.start);
      return m != nullptr && DescriptionOut(m->desc) ? Drop() : true;
    }
    case IOT_REC_CACHE_STATE: {
      const auto& s = As<iot_cache_state>(rec);
      auto name = String(s.path_id);
      const std::string path = name && !name->empty() && (*name)[0] == '/' ? NormalizePath(*name)
                                                                           : std::string();
      if (path.empty()) return IdentityOut(s.dev, s.ino) ? Drop() : true;
      // It names files no open showed (an executable mapped by exec): their faults follow it.
      const bool out = !scope_.Admits(path, FileKind::kStorage);
      NoteIdentity(s.dev, s.ino, out);
      return out ? Drop() : true;
    }
    case IOT_REC_PAGE_FAULT: {
      const auto& f = As<iot_page_fault>(rec);
      if (!IdentityOut(f.dev, f.ino)) return true;
      ++dropped_.faults;
      return Drop();
    }
    case IOT_REC_PAGE_CACHE: {
      const auto& c = As<iot_page_cache>(rec);
      return IdentityOut(c.dev, c.ino) ? Drop() : true;
    }
    case IOT_REC_WRITEBACK: {
      const auto& w = As<iot_writeback>(rec);
      return IdentityOut(w.dev, w.ino) ? Drop() : true;
    }
    case IOT_REC_ASYNC_IO: {
      const auto& a = As<iot_async_io>(rec);
      const uint64_t key = AsyncKey(a.ctx, a.req_id);
      if (a.phase == IOT_AIO_SUBMIT) {
        const DescriptionId id = state_.DescriptionOf(a.tgid, a.fd);
        if (id == kNoDescription || !DescriptionOut(id)) return true;
        if (dropped_async_.size() < (size_t{1} << 20)) dropped_async_.insert(key);
        // A vectored request's IOVEC record follows it and goes with it.
        last_call_dropped_ = true;
        dropped_call_tid_ = a.tid;
        return Drop();
      }
      if (dropped_async_.erase(key)) return Drop();
      return true;
    }
    default:
      return true;
  }
}

Result<ScopeFilterCounts> WriteScopedTrace(const std::string& in, const std::string& out,
                                           const Scope& scope) {
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(in));
  nlohmann::json meta = reader->meta();
  meta["scope"] = scope.ToJson();
  IOTWIN_ASSIGN_OR_RETURN(auto writer, TraceWriter::Create(out, meta));
  ScopeRecordFilter filter(scope);
  while (true) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* rec, reader->Next());
    if (rec == nullptr) break;
    if (filter.Keep(rec)) IOTWIN_RETURN_IF_ERROR(writer->Append(rec));
  }
  nlohmann::json summary =
      reader->summary() ? *reader->summary() : nlohmann::json(nlohmann::json::object());
  summary["scope_dropped"] = filter.dropped().ToJson();
  IOTWIN_RETURN_IF_ERROR(writer->Finish(summary));
  return filter.dropped();
}

}  // namespace iotwin::model
