#include "format/merge.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "base/checked_math.h"
#include "base/json_fields.h"
#include "format/hosts.h"
#include "format/records.h"
#include "format/trace_reader.h"

namespace iotwin {
namespace {

using i128 = __int128;

// What merge rewrites in a record: its time, a process identity, a kernel object identity, a
// string id (docs/multi-host.md, "How a record names its host").
enum class Fold : uint8_t { kTs, kPid, kId64, kString };
struct FieldFold {
  uint16_t type;
  uint16_t offset;
  Fold fold;
  const char* name;
};

#define IOTWIN_FOLD(TYPE, REC, FIELD, FOLD) \
  FieldFold { TYPE, static_cast<uint16_t>(offsetof(REC, FIELD)), Fold::FOLD, #FIELD }
// Every field of every record type that names a time, a process, a kernel object or a string.
constexpr FieldFold kFolds[] = {
    IOTWIN_FOLD(IOT_REC_SYSCALL, iot_syscall, ts, kTs),
    IOTWIN_FOLD(IOT_REC_SYSCALL, iot_syscall, tgid, kPid),
    IOTWIN_FOLD(IOT_REC_SYSCALL, iot_syscall, tid, kPid),
    IOTWIN_FOLD(IOT_REC_SYSCALL, iot_syscall, path_id, kString),
    IOTWIN_FOLD(IOT_REC_SYSCALL, iot_syscall, path2_id, kString),
    IOTWIN_FOLD(IOT_REC_PROC, iot_proc, ts, kTs),
    IOTWIN_FOLD(IOT_REC_PROC, iot_proc, tgid, kPid),
    IOTWIN_FOLD(IOT_REC_PROC, iot_proc, tid, kPid),
    IOTWIN_FOLD(IOT_REC_PROC, iot_proc, child_tgid, kPid),
    IOTWIN_FOLD(IOT_REC_PROC, iot_proc, child_tid, kPid),
    IOTWIN_FOLD(IOT_REC_PROC, iot_proc, path_id, kString),
    IOTWIN_FOLD(IOT_REC_FD_SNAPSHOT, iot_fd_snapshot, ts, kTs),
    IOTWIN_FOLD(IOT_REC_FD_SNAPSHOT, iot_fd_snapshot, tgid, kPid),
    IOTWIN_FOLD(IOT_REC_FD_SNAPSHOT, iot_fd_snapshot, path_id, kString),
    IOTWIN_FOLD(IOT_REC_MAP_SNAPSHOT, iot_map_snapshot, ts, kTs),
    IOTWIN_FOLD(IOT_REC_MAP_SNAPSHOT, iot_map_snapshot, tgid, kPid),
    IOTWIN_FOLD(IOT_REC_MAP_SNAPSHOT, iot_map_snapshot, path_id, kString),
    IOTWIN_FOLD(IOT_REC_PAGE_FAULT, iot_page_fault, ts, kTs),
    IOTWIN_FOLD(IOT_REC_PAGE_FAULT, iot_page_fault, tgid, kPid),
    IOTWIN_FOLD(IOT_REC_PAGE_FAULT, iot_page_fault, tid, kPid),
    IOTWIN_FOLD(IOT_REC_PAGE_CACHE, iot_page_cache, ts, kTs),
    IOTWIN_FOLD(IOT_REC_PAGE_CACHE, iot_page_cache, tgid, kPid),
    IOTWIN_FOLD(IOT_REC_PAGE_CACHE, iot_page_cache, tid, kPid),
    IOTWIN_FOLD(IOT_REC_WRITEBACK, iot_writeback, ts, kTs),
    IOTWIN_FOLD(IOT_REC_WRITEBACK, iot_writeback, tgid, kPid),
    IOTWIN_FOLD(IOT_REC_WRITEBACK, iot_writeback, tid, kPid),
    IOTWIN_FOLD(IOT_REC_BLOCK, iot_block, ts, kTs),
    IOTWIN_FOLD(IOT_REC_BLOCK, iot_block, rq_id, kId64),
    IOTWIN_FOLD(IOT_REC_BLOCK, iot_block, bio_id, kId64),
    IOTWIN_FOLD(IOT_REC_BLOCK, iot_block, parent_id, kId64),
    IOTWIN_FOLD(IOT_REC_BLOCK, iot_block, tgid, kPid),
    IOTWIN_FOLD(IOT_REC_BLOCK, iot_block, tid, kPid),
    IOTWIN_FOLD(IOT_REC_NVME, iot_nvme, ts, kTs),
    IOTWIN_FOLD(IOT_REC_NVME, iot_nvme, rq_id, kId64),
    IOTWIN_FOLD(IOT_REC_ASYNC_IO, iot_async_io, ts, kTs),
    IOTWIN_FOLD(IOT_REC_ASYNC_IO, iot_async_io, ctx, kId64),
    IOTWIN_FOLD(IOT_REC_ASYNC_IO, iot_async_io, req_id, kId64),
    IOTWIN_FOLD(IOT_REC_ASYNC_IO, iot_async_io, tgid, kPid),
    IOTWIN_FOLD(IOT_REC_ASYNC_IO, iot_async_io, tid, kPid),
    IOTWIN_FOLD(IOT_REC_INTENT, iot_intent, ts, kTs),
    IOTWIN_FOLD(IOT_REC_INTENT, iot_intent, tgid, kPid),
    IOTWIN_FOLD(IOT_REC_INTENT, iot_intent, tid, kPid),
    IOTWIN_FOLD(IOT_REC_INTENT, iot_intent, label_id, kString),
    IOTWIN_FOLD(IOT_REC_LOST, iot_lost, ts, kTs),
    IOTWIN_FOLD(IOT_REC_CLOCK, iot_clock, monotonic_ns, kTs),
    IOTWIN_FOLD(IOT_REC_CACHE_STATE, iot_cache_state, ts, kTs),
    IOTWIN_FOLD(IOT_REC_CACHE_STATE, iot_cache_state, path_id, kString),
    IOTWIN_FOLD(IOT_REC_SUBPAGE, iot_subpage, ts, kTs),
    IOTWIN_FOLD(IOT_REC_SUBPAGE, iot_subpage, tgid, kPid),
    IOTWIN_FOLD(IOT_REC_SCHED, iot_sched, ts, kTs),
    IOTWIN_FOLD(IOT_REC_SCHED, iot_sched, tgid, kPid),
    IOTWIN_FOLD(IOT_REC_SCHED, iot_sched, tid, kPid),
    IOTWIN_FOLD(IOT_REC_IOVEC, iot_iovec, ts, kTs),
    IOTWIN_FOLD(IOT_REC_IOVEC, iot_iovec, tid, kPid),
    IOTWIN_FOLD(IOT_REC_FDLIST, iot_fdlist, ts, kTs),
    IOTWIN_FOLD(IOT_REC_FDLIST, iot_fdlist, tid, kPid),
};
#undef IOTWIN_FOLD

template <typename T>
T Load(const uint8_t* rec, uint16_t offset) {
  T v;
  std::memcpy(&v, rec + offset, sizeof v);
  return v;
}
template <typename T>
void Store(uint8_t* rec, uint16_t offset, T v) {
  std::memcpy(rec + offset, &v, sizeof v);
}

// A timestamp moved by `shift`, or nothing when it would leave the 64-bit range.
std::optional<uint64_t> Shifted(uint64_t ts, int64_t shift) {
  const i128 v = static_cast<i128>(ts) + shift;
  if (v < 0 || v > static_cast<i128>(UINT64_MAX)) return std::nullopt;
  return static_cast<uint64_t>(v);
}

struct Source {
  std::string path;
  std::string name;
  uint32_t host = 0;
  std::unique_ptr<TraceReader> reader;
  i128 base = 0;      // realtime - monotonic - offset at the anchor
  int64_t shift = 0;  // added to each timestamp: base - the reference's base
  std::unordered_map<uint32_t, uint32_t> strings;  // the input's string id -> the output's
  std::vector<uint8_t> next;  // the next record to write, folded; empty at the end
  uint64_t key = 0;           // its aligned time (the last timed record's, for untimed ones)
  uint64_t records = 0;       // records read, STRING excluded
  i128 clock_min = 0, clock_max = 0;  // realtime - monotonic of the anchor and CLOCK records
  std::map<std::pair<uint16_t, uint16_t>, uint64_t> lost;  // last cumulative count by source, cpu
  std::optional<MergeOffset> offset;
  uint64_t anchor = 0;  // the header's monotonic anchor on the reference's clock
};

class Merger {
 public:
  explicit Merger(const MergeOptions& options) : options_(options) {
    for (const FieldFold& f : kFolds) folds_[f.type].push_back(f);
  }
  Result<MergeResult> Run();

 private:
  Status OpenInputs();
  Status CheckInput(const Source& s, const Source& first);
  Status CheckNames();
  Status AttachOffsets();
  Status ComputeShifts();
  nlohmann::json MergedMeta() const;
  nlohmann::json Summary() const;
  Status Fill(Source& s);
  Status FoldRecord(Source& s, uint8_t* rec);
  Status Emit(Source& s);
  std::string Where(const Source& s) const {
    return fmt::format("{}: record {} (in the chunk ending at byte offset {})", s.path, s.records,
                       s.reader->offset());
  }

  const MergeOptions& options_;
  std::array<std::vector<FieldFold>, IOT_REC_MAX + 1> folds_;
  std::vector<Source> sources_;
  std::unique_ptr<TraceWriter> writer_;
  std::map<std::pair<uint16_t, uint16_t>, uint64_t> lost_total_;
  uint64_t first_ts_ = UINT64_MAX, last_ts_ = 0;
  uint64_t job_start_ = UINT64_MAX;  // the earliest anchor on the reference's clock
  MergeResult result_;
};

Status Merger::OpenInputs() {
  if (options_.inputs.empty()) return Status::Invalid("merge: no input trace");
  if (options_.inputs.size() > kMaxHosts)
    return Status::Invalid("merge: {} inputs; a merged trace holds at most {} hosts",
                           options_.inputs.size(), kMaxHosts);
  for (const MergeInput& in : options_.inputs) {
    Source s;
    s.path = in.path;
    s.host = static_cast<uint32_t>(sources_.size());
    IOTWIN_ASSIGN_OR_RETURN(s.reader, TraceReader::Open(in.path));
    s.name = !in.name.empty() ? in.name
                              : json_fields::GetString(s.reader->meta(), "host/hostname");
    if (s.name.empty())
      return Status::Invalid("{}: the header names no host: give it one with --name", in.path);
    IOTWIN_RETURN_IF_ERROR(CheckInput(s, sources_.empty() ? s : sources_.front()));
    sources_.push_back(std::move(s));
  }
  return Status::Ok();
}

Status Merger::CheckInput(const Source& s, const Source& first) {
  const TraceReader& r = *s.reader;
  if (r.format_major() != first.reader->format_major() ||
      r.format_minor() != first.reader->format_minor()) {
    return Status::Invalid(
        "{}: trace format {}.{}, but {} is {}.{}: merge traces recorded by one iotwin version",
        s.path, r.format_major(), r.format_minor(), first.path, first.reader->format_major(),
        first.reader->format_minor());
  }
  if (r.meta().is_object() && r.meta().contains("hosts")) {
    return Status::Invalid("{}: already a merged trace (its header has a host table); merge the "
                           "hosts' own traces",
                           s.path);
  }
  const uint64_t mono = json_fields::GetUint(r.meta(), "host/anchor/monotonic_ns", 0);
  const uint64_t real = json_fields::GetUint(r.meta(), "host/anchor/realtime_ns", 0);
  if (mono == 0 || real == 0) {
    return Status::Invalid(
        "{}: no clock anchor in the header (host.anchor monotonic_ns and realtime_ns): merge aligns "
        "hosts by the anchor `iotwin record` writes (imported traces have none)",
        s.path);
  }
  return Status::Ok();
}

Status Merger::CheckNames() {
  for (size_t i = 0; i < sources_.size(); i++) {
    for (size_t j = 0; j < i; j++) {
      const nlohmann::json& a = sources_[i].reader->meta();
      const nlohmann::json& b = sources_[j].reader->meta();
      if (json_fields::GetUint(a, "host/anchor/monotonic_ns", 0) ==
              json_fields::GetUint(b, "host/anchor/monotonic_ns", 0) &&
          json_fields::GetUint(a, "host/anchor/realtime_ns", 0) ==
              json_fields::GetUint(b, "host/anchor/realtime_ns", 0)) {
        return Status::Invalid("{} and {}: the same recording (the same clock anchors), given twice",
                               sources_[j].path, sources_[i].path);
      }
      if (sources_[i].name == sources_[j].name) {
        return Status::Invalid("{} and {}: both are host '{}'; name them apart with --name",
                               sources_[j].path, sources_[i].path, sources_[i].name);
      }
    }
  }
  return Status::Ok();
}

Status Merger::AttachOffsets() {
  for (const MergeOffset& o : options_.offsets) {
    auto it = std::find_if(sources_.begin(), sources_.end(),
                           [&](const Source& s) { return s.name == o.host; });
    if (it == sources_.end()) {
      std::vector<std::string> names;
      for (const Source& s : sources_) names.push_back(s.name);
      return Status::Invalid("--offset {}: no input is host '{}' (hosts: {})", o.host, o.host,
                             fmt::join(names, ", "));
    }
    if (it->offset) return Status::Invalid("--offset {}: given twice", o.host);
    it->offset = o;
  }
  return Status::Ok();
}

Status Merger::ComputeShifts() {
  for (Source& s : sources_) {
    const nlohmann::json& m = s.reader->meta();
    const i128 real = json_fields::GetUint(m, "host/anchor/realtime_ns", 0);
    const i128 mono = json_fields::GetUint(m, "host/anchor/monotonic_ns", 0);
    s.clock_min = s.clock_max = real - mono;
    s.base = real - mono - (s.offset ? s.offset->offset_ns : 0);
    const i128 shift = s.base - sources_.front().base;
    if (shift > INT64_MAX || shift < INT64_MIN) {
      return Status::Invalid("{}: its clock is more than 292 years from {}'s: not one job",
                             s.path, sources_.front().path);
    }
    s.shift = static_cast<int64_t>(shift);
    const std::optional<uint64_t> anchor = Shifted(static_cast<uint64_t>(mono), s.shift);
    if (!anchor) {
      return Status::Invalid("{}: its start ({} ns) falls outside {}'s clock once aligned: record "
                             "the host that started first as the first input",
                             s.path, static_cast<uint64_t>(mono), sources_.front().path);
    }
    s.anchor = *anchor;
    job_start_ = std::min(job_start_, s.anchor);
  }
  return Status::Ok();
}

Status Merger::FoldRecord(Source& s, uint8_t* rec) {
  const uint16_t type = Load<uint16_t>(rec, 0);
  if (type > IOT_REC_MAX) return Status::Ok();
  if (type == IOT_REC_CLOCK) {
    const i128 d = static_cast<i128>(Load<uint64_t>(rec, offsetof(iot_clock, realtime_ns))) -
                   Load<uint64_t>(rec, offsetof(iot_clock, monotonic_ns));
    s.clock_min = std::min(s.clock_min, d);
    s.clock_max = std::max(s.clock_max, d);
  }
  for (const FieldFold& f : folds_[type]) {
    switch (f.fold) {
      case Fold::kTs: {
        const uint64_t ts = Load<uint64_t>(rec, f.offset);
        if (ts == 0) break;  // unknown stays unknown
        const std::optional<uint64_t> moved = Shifted(ts, s.shift);
        if (!moved) {
          return Status::Invalid("{}: {} {} moved by the clock alignment ({} ns) leaves 0..2^64-1",
                                 Where(s), f.name, ts, s.shift);
        }
        Store<uint64_t>(rec, f.offset, *moved);
        break;
      }
      case Fold::kPid: {
        const uint32_t pid = Load<uint32_t>(rec, f.offset);
        if (pid == 0) break;
        if (pid >= kHostPidLimit) {
          return Status::Invalid("{}: {} {} is not below {} (PID_MAX_LIMIT): not a Linux pid",
                                 Where(s), f.name, pid, kHostPidLimit);
        }
        Store<uint32_t>(rec, f.offset, pid + (s.host << kHostPidBits));
        break;
      }
      case Fold::kId64: {
        const uint64_t id = Load<uint64_t>(rec, f.offset);
        if (id != 0) Store<uint64_t>(rec, f.offset, id ^ (uint64_t{s.host} << kHostIdShift));
        break;
      }
      case Fold::kString: {
        const uint32_t id = Load<uint32_t>(rec, f.offset);
        if (id == 0) break;
        auto it = s.strings.find(id);
        Store<uint32_t>(rec, f.offset, it == s.strings.end() ? 0 : it->second);
        break;
      }
    }
  }
  return Status::Ok();
}

Status Merger::Fill(Source& s) {
  s.next.clear();
  for (;;) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* rec, s.reader->Next());
    if (!rec) return Status::Ok();
    if (rec->type == IOT_REC_STRING) {
      const auto& str = As<iot_string>(rec);
      const size_t avail = rec->size > sizeof(iot_string) ? rec->size - sizeof(iot_string) : 0;
      const std::string_view bytes(reinterpret_cast<const char*>(rec) + sizeof(iot_string),
                                   std::min<size_t>(str.len, avail));
      IOTWIN_ASSIGN_OR_RETURN(uint32_t id,
                              writer_->InternString(bytes, (str.flags & IOT_STRF_TRUNCATED) != 0));
      if (str.id != 0) s.strings[str.id] = id;
      continue;
    }
    ++s.records;
    // The reader zero-extends a short record to its fixed size: the fields folded are all there.
    const size_t size = std::max<size_t>(rec->size, RecordFixedSize(rec->type));
    s.next.assign(size, 0);
    std::memcpy(s.next.data(), rec, std::min<size_t>(rec->size, size));
    Store<uint16_t>(s.next.data(), offsetof(iot_rec_hdr, size), static_cast<uint16_t>(size));
    IOTWIN_RETURN_IF_ERROR(FoldRecord(s, s.next.data()));
    const uint64_t ts = RecordTimestamp(reinterpret_cast<const iot_rec_hdr*>(s.next.data()));
    if (ts != 0) s.key = ts;
    return Status::Ok();
  }
}

// Writes `s`'s next record and reads the one after it; an IOVEC or FDLIST record stays right
// after the call it belongs to.
Status Merger::Emit(Source& s) {
  do {
    auto* rec = reinterpret_cast<iot_rec_hdr*>(s.next.data());
    if (rec->type == IOT_REC_LOST) {
      // Cumulative per (source, cpu) on each host: the merged count is the sum of the hosts'.
      auto* lost = reinterpret_cast<iot_lost*>(rec);
      uint64_t& last = s.lost[{lost->source, lost->cpu}];
      const uint64_t delta = lost->count > last ? lost->count - last : 0;
      last = std::max(last, lost->count);
      uint64_t& total = lost_total_[{lost->source, lost->cpu}];
      total = SaturatingAdd(total, delta);
      lost->count = total;
    }
    const uint64_t ts = RecordTimestamp(rec);
    if (ts != 0 && rec->type != IOT_REC_CLOCK) {
      first_ts_ = std::min(first_ts_, ts);
      last_ts_ = std::max(last_ts_, ts);
    }
    IOTWIN_RETURN_IF_ERROR(writer_->Append(rec));
    IOTWIN_RETURN_IF_ERROR(Fill(s));
  } while (!s.next.empty() && (Load<uint16_t>(s.next.data(), 0) == IOT_REC_IOVEC ||
                               Load<uint16_t>(s.next.data(), 0) == IOT_REC_FDLIST));
  return Status::Ok();
}

// Each layer is on when some host recorded it; the reason names the hosts where it was off.
nlohmann::json MergedLayers(const std::vector<Source>& sources) {
  nlohmann::json layers = nlohmann::json::object();
  for (const Source& s : sources) {
    const nlohmann::json* own = json_fields::Object(s.reader->meta(), "layers");
    if (!own) continue;
    for (const auto& [name, layer] : own->items()) {
      nlohmann::json& merged = layers[name];
      if (!merged.is_object()) merged = {{"enabled", false}, {"reason", ""}};
      if (json_fields::GetBool(layer, "enabled", false)) {
        merged["enabled"] = true;
        continue;
      }
      std::string reason = json_fields::GetString(merged, "reason");
      reason += fmt::format("{}off on {}: {}", reason.empty() ? "" : "; ", s.name,
                            json_fields::GetString(layer, "reason"));
      merged["reason"] = reason;
    }
  }
  return layers;
}

nlohmann::json Merger::MergedMeta() const {
  const Source& ref = sources_.front();
  nlohmann::json meta = ref.reader->meta();
  nlohmann::json hosts = nlohmann::json::array();
  bool measured = sources_.size() > 1;  // every other host has an offset with its error
  bool any_offset = false;
  uint64_t max_error = 0;
  for (const Source& s : sources_) {
    const nlohmann::json& m = s.reader->meta();
    nlohmann::json h = {{"name", s.name},
                        {"source", s.path},
                        {"pid_base", uint64_t{s.host} << kHostPidBits},
                        {"clock_shift_ns", s.shift}};
    for (const char* key : {"host", "command", "layers"})
      if (m.is_object() && m.contains(key)) h[key] = m[key];
    if (s.offset) {
      any_offset = true;
      h["offset_ns"] = s.offset->offset_ns;
      if (s.offset->error_ns) h["offset_error_ns"] = *s.offset->error_ns;
    }
    if (&s != &ref) {
      if (s.offset && s.offset->error_ns)
        max_error = std::max(max_error, *s.offset->error_ns);
      else
        measured = false;
    }
    hosts.push_back(std::move(h));
  }
  meta["hosts"] = std::move(hosts);
  meta["layers"] = MergedLayers(sources_);
  if (!options_.replay.is_null()) meta["replay"] = options_.replay;
  if (meta["host"].is_object()) {  // the job's start, on the reference's clocks
    const i128 mono = json_fields::GetUint(meta, "host/anchor/monotonic_ns", 0);
    const i128 real = json_fields::GetUint(meta, "host/anchor/realtime_ns", 0);
    const i128 boot = json_fields::GetUint(meta, "host/anchor/boottime_ns", 0);
    auto at_start = [&](i128 clock) -> uint64_t {
      const i128 v = clock - mono + job_start_;
      return v < 0 || v > static_cast<i128>(UINT64_MAX) || clock == 0 ? 0 : static_cast<uint64_t>(v);
    };
    meta["host"]["anchor"] = {{"monotonic_ns", job_start_},
                              {"realtime_ns", at_start(real)},
                              {"boottime_ns", at_start(boot)}};
  }
  std::string why;
  if (sources_.size() == 1) {
    why = "one host: nothing to align";
  } else if (measured) {
    why = "the largest error of the offsets measured at launch";
  } else {
    why = fmt::format(
        "hosts without a measured offset and its error are aligned by their realtime clocks, "
        "taken to agree; the traces cannot measure how well (NTP keeps hosts within "
        "milliseconds, PTP within microseconds){}",
        any_offset ? "" : "; give --offset HOST=NS:ERROR_NS from a measurement at launch");
  }
  meta["merge"] = {
      {"reference", ref.name},
      {"pid_bits", kHostPidBits},
      {"id_fold_shift", kHostIdShift},
      {"alignment", any_offset ? "realtime anchors and offsets measured at launch"
                               : "realtime anchors"},
      {"uncertainty_ns",
       sources_.size() == 1 ? nlohmann::json(0)
                            : measured ? nlohmann::json(max_error) : nlohmann::json(nullptr)},
      {"uncertainty", why}};
  return meta;
}

// Sums the numbers of `from` into `into`, key by key.
void AddCounts(const nlohmann::json& from, nlohmann::json* into) {
  if (!from.is_object()) return;
  for (const auto& [key, value] : from.items()) {
    if (!value.is_number_unsigned()) continue;
    const uint64_t have = json_fields::GetUint(*into, key, 0);
    (*into)[key] = SaturatingAdd(have, value.get<uint64_t>());
  }
}

nlohmann::json Merger::Summary() const {
  nlohmann::json sum = {{"events", nlohmann::json::object()}, {"lost", nlohmann::json::object()}};
  nlohmann::json hosts = nlohmann::json::array();
  std::string stop;
  uint64_t end = last_ts_;
  for (const Source& s : sources_) {
    const i128 drift = s.clock_max - s.clock_min;
    nlohmann::json h = {{"name", s.name},
                        {"records", s.records},
                        {"clock_drift_ns", drift > static_cast<i128>(UINT64_MAX)
                                               ? UINT64_MAX
                                               : static_cast<uint64_t>(drift)}};
    if (const auto& own = s.reader->summary()) {
      h["summary"] = *own;
      if (const nlohmann::json* events = json_fields::Object(*own, "events"))
        AddCounts(*events, &sum["events"]);
      if (const nlohmann::json* lost = json_fields::Object(*own, "lost")) AddCounts(*lost, &sum["lost"]);
      const std::string reason = json_fields::GetString(*own, "stop_reason");
      stop = stop.empty() || stop == reason ? reason : "mixed";
      if (uint64_t d = json_fields::GetUint(*own, "duration_ns", 0))
        end = std::max(end, SaturatingAdd(s.anchor, d));
    }
    if (s.reader->damage().truncated) h["truncated"] = s.reader->damage().Description();
    hosts.push_back(std::move(h));
  }
  if (!stop.empty()) sum["stop_reason"] = stop;
  if (const auto& ref = sources_.front().reader->summary(); ref && ref->contains("exit_status"))
    sum["exit_status"] = (*ref)["exit_status"];
  const uint64_t start = std::min(job_start_, first_ts_);
  if (start != UINT64_MAX && end > start) sum["duration_ns"] = end - start;
  sum["hosts"] = std::move(hosts);
  return sum;
}

Result<MergeResult> Merger::Run() {
  IOTWIN_RETURN_IF_ERROR(OpenInputs());
  IOTWIN_RETURN_IF_ERROR(CheckNames());
  IOTWIN_RETURN_IF_ERROR(AttachOffsets());
  IOTWIN_RETURN_IF_ERROR(ComputeShifts());
  result_.meta = MergedMeta();
  IOTWIN_ASSIGN_OR_RETURN(writer_,
                          TraceWriter::Create(options_.output, result_.meta, options_.writer));
  for (Source& s : sources_) {
    Status st = Fill(s);
    if (!st.ok()) {
      writer_->Discard();
      return st;
    }
  }
  for (;;) {
    Source* best = nullptr;  // the earliest next record; the first input's on a tie
    for (Source& s : sources_)
      if (!s.next.empty() && (!best || s.key < best->key)) best = &s;
    if (!best) break;
    Status st = Emit(*best);
    if (!st.ok()) {
      writer_->Discard();
      return st;
    }
  }
  IOTWIN_RETURN_IF_ERROR(writer_->Finish(Summary()));
  result_.records = writer_->records_written();
  for (const Source& s : sources_) result_.records_per_host.push_back(s.records);
  return std::move(result_);
}

}  // namespace

Result<MergeOffset> ParseMergeOffset(const std::string& spec) {
  const size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    return Status::Invalid("--offset {}: expected HOST=NS or HOST=NS:ERROR_NS", spec);
  MergeOffset o;
  o.host = spec.substr(0, eq);
  const std::string value = spec.substr(eq + 1);
  const size_t colon = value.find(':');
  const std::string ns = value.substr(0, colon);
  auto [p, ec] = std::from_chars(ns.data(), ns.data() + ns.size(), o.offset_ns);
  if (ec != std::errc() || p != ns.data() + ns.size())
    return Status::Invalid("--offset {}: '{}' is not a whole number of nanoseconds", spec, ns);
  if (colon != std::string::npos) {
    const std::string err = value.substr(colon + 1);
    uint64_t e = 0;
    auto [q, ec2] = std::from_chars(err.data(), err.data() + err.size(), e);
    if (ec2 != std::errc() || q != err.data() + err.size())
      return Status::Invalid("--offset {}: error '{}' is not a whole number of nanoseconds", spec,
                             err);
    o.error_ns = e;
  }
  return o;
}

Result<MergeResult> MergeTraces(const MergeOptions& options) {
  Merger merger(options);
  return merger.Run();
}

}  // namespace iotwin
