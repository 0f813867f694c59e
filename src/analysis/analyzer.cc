// Analyzer: construction, the record dispatch (Consume), the filters, the thread, process and
// file tables, processes and snapshots, intents, losses and scheduling. Each layer's statistics
// live in a file of their own (analyzer_internal.h lists them).
#include "analysis/analyzer.h"
#include <fcntl.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "analysis/analyzer_internal.h"
#include "base/checked_math.h"
#include "base/json_fields.h"
#include "format/hosts.h"
#include "format/op_info.h"
#include "format/records.h"
#include "model/op_fields.h"

namespace iotwin::analysis {
using namespace analyzer_detail;  // NOLINT(google-build-using-namespace): this class's own helpers
namespace {

// The report follows descriptors by number and files by identity, and names files by the paths
// the interpreter resolves (cwd, dirfd, renamed directories). A runaway table (lost closes)
// stops growing at four times kMaxPending descriptors.
bool FiltersPaths(const AnalysisFilter& f) { return !f.file_globs.empty() || !f.scope.IsAll(); }
model::TraceStateOptions DescriptorStateOptions() {
  model::TraceStateOptions o;
  o.keep_paths = true;
  o.limits.descriptors = kMaxPending * 4;
  // A descriptor opened before the capture attached (no snapshot) is followed from its first
  // read, write or lseek.
  o.adopt_unknown = true;
  return o;
}

}  // namespace

uint64_t OpFingerprint(uint16_t op, uint64_t offset, uint64_t length, uint32_t flags,
                       uint64_t whence) {
  uint64_t h = MixBits(static_cast<uint64_t>(op) | (static_cast<uint64_t>(flags) << 16) |
                       (whence << 48));
  h = MixBits(h ^ offset);
  h = MixBits(h ^ (length + 0x9e3779b97f4a7c15ULL));
  return h;
}

nlohmann::json AnalysisFilter::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  if (!tgids.empty()) j["tgid"] = tgids;
  if (!tids.empty()) j["tid"] = tids;
  if (!host_names.empty()) j["host"] = host_names;
  if (!file_globs.empty()) j["file"] = file_globs;
  if (!ops.empty()) {
    std::vector<std::string> names;
    for (uint16_t op : ops) names.emplace_back(OpName(op));
    j["op"] = names;
  }
  if (from_s) j["from_s"] = *from_s;
  if (to_s) j["to_s"] = *to_s;
  if (excluded_calls) j["excluded_calls"] = excluded_calls->size();
  return j;
}

Analyzer::Analyzer(AnalyzerOptions options)
    : options_(std::move(options)),
      ops_(IOT_OP_MAX + 1),
      fd_state_(DescriptorStateOptions()),
      series_(kSeriesCount) {
  task_filter_ = !options_.filter.tgids.empty() || !options_.filter.tids.empty() ||
                 !options_.filter.host_names.empty();
  filtering_ = !options_.filter.empty();
  path_filter_ = FiltersPaths(options_.filter);
  fd_state_.SetHandoverRule(true);  // until the header names a clock too coarse for it
  for (const HeatmapTarget& t : options_.heatmaps) {
    Heatmap h;
    h.file = FileIndex(t.dev, t.ino, true);
    h.max_offset = std::max<uint64_t>(t.max_offset, 1);
    h.sample_every = std::max<uint64_t>(t.sample_every, 1);
    h.ops.assign(Heatmap::kTimeBins * Heatmap::kOffsetBins, 0);
    h.bytes.assign(Heatmap::kTimeBins * Heatmap::kOffsetBins, 0);
    heatmap_of_file_.FindOrInsert(static_cast<uint64_t>(h.file)) =
        static_cast<uint32_t>(heatmaps_.size() + 1);
    heatmaps_.push_back(std::move(h));
  }
}

Analyzer::~Analyzer() = default;

void Analyzer::SetMeta(const nlohmann::json& meta) {
  meta_ = meta;
  types_recorded_ = json_fields::Object(meta, "capture") != nullptr;
  if (!options_.filter.host_names.empty()) {
    const std::vector<std::string> hosts = HostNames(meta);
    options_.filter.hosts.clear();
    for (size_t i = 0; i < hosts.size(); i++) {
      const auto& names = options_.filter.host_names;
      if (std::find(names.begin(), names.end(), hosts[i]) != names.end())
        options_.filter.hosts.push_back(static_cast<uint32_t>(i));
    }
  }
  const nlohmann::json* host = json_fields::Object(meta, "host");
  if (!host) return;
  if (uint64_t ps = json_fields::GetUint(*host, "page_size", 0)) page_size_ = ps;
  page_shift_ = (page_size_ & (page_size_ - 1)) == 0 ? Log2Floor(page_size_) : -1;
  const std::string arch = json_fields::GetString(*host, "arch");
  fd_state_.SetArch(arch);  // O_DIRECT differs between architectures
  fd_state_.SetPageSize(page_size_);
  if (const nlohmann::json* clock = json_fields::Find(*host, "clock");
      clock && clock->is_string()) {
    // Clocks whose start times resolve calls as finely as their durations: iotwin's own,
    // and strace's -ttt (realtime) and -r (relative). Not -t/-tt (time_of_day: -t is whole
    // seconds) nor imports without timestamps (synthetic: one microsecond per line).
    const std::string c = clock->get<std::string>();
    fd_state_.SetHandoverRule(c == "monotonic" || c == "realtime" || c == "relative");
  }
  anchor_ns_ = json_fields::GetUint(*host, "anchor/monotonic_ns", anchor_ns_);
}

bool Analyzer::StartAt(uint64_t ts) {
  if (started_) return true;
  started_ = true;  // at the first timed record, even at 0 (blkparse, strace -r, fio iologs)
  if (options_.start_ns_override) {
    start_ = options_.start_ns_override;
  } else if (anchor_ns_ != 0 && anchor_ns_ <= ts && ts - anchor_ns_ < 60'000'000'000ULL) {
    // The capture's start anchor, when it plausibly precedes the first record.
    start_ = anchor_ns_;
  } else {
    start_ = ts;
  }
  series_.SetStart(start_);
  const AnalysisFilter& f = options_.filter;
  // The options are parsed durations (at most 1e19 ns); the trace's start is not bounded.
  auto after_start = [&](double s) {
    return SaturatingAdd(start_, static_cast<uint64_t>(std::max(0.0, s) * 1e9));
  };
  if (f.from_s) from_ns_ = after_start(*f.from_s);
  if (f.to_s) to_ns_ = after_start(*f.to_s);
  return true;
}

bool Analyzer::TaskAllowedSlow(uint32_t tgid, uint32_t tid) const {
  const AnalysisFilter& f = options_.filter;
  if (!f.tgids.empty() && std::find(f.tgids.begin(), f.tgids.end(), tgid) == f.tgids.end())
    return false;
  if (!f.tids.empty() && std::find(f.tids.begin(), f.tids.end(), tid) == f.tids.end())
    return false;
  if (!f.host_names.empty() &&
      std::find(f.hosts.begin(), f.hosts.end(), HostOfPid(tgid)) == f.hosts.end())
    return false;
  return true;
}

bool Analyzer::OpAllowedSlow(uint16_t op) const {
  const auto& ops = options_.filter.ops;
  return ops.empty() || std::find(ops.begin(), ops.end(), op) != ops.end();
}

bool Analyzer::FileAllowedSlow(int32_t file_index) {
  if (file_index < 0) return options_.filter.file_globs.empty() && InScope(file_index);
  const FileStats& f = files_[static_cast<size_t>(file_index)];
  if (!options_.filter.file_globs.empty() && f.glob != 1) return false;
  return InScope(file_index);
}

bool Analyzer::InScope(int32_t file_index) const {
  const model::Scope& scope = options_.filter.scope;
  if (scope.IsAll()) return true;
  if (file_index < 0) return scope.Admits({}, model::FileKind::kStorage);
  const FileStats& f = files_[static_cast<size_t>(file_index)];
  const bool path_in = f.scope >= 0 ? f.scope == 1 : scope.AdmitsPath({});
  return path_in && scope.AdmitsKind(f.kind);
}

void Analyzer::NoteScopedOut(int32_t file_index, uint64_t* count, uint64_t* bytes, uint64_t n) {
  if (InScope(file_index)) return;
  ++*count;
  if (bytes) *bytes = SaturatingAdd(*bytes, n);
}

void Analyzer::Consume(const iot_rec_hdr* rec) {
  ++records_;
  if (rec->type <= IOT_REC_MAX) ++records_by_type_[rec->type];
  switch (rec->type) {
    case IOT_REC_STRING: OnString(rec); break;
    case IOT_REC_SYSCALL: OnSyscall(As<iot_syscall>(rec)); break;
    case IOT_REC_PROC: OnProc(As<iot_proc>(rec)); break;
    case IOT_REC_FD_SNAPSHOT: OnFdSnapshot(As<iot_fd_snapshot>(rec)); break;
    case IOT_REC_MAP_SNAPSHOT: OnMapSnapshot(As<iot_map_snapshot>(rec)); break;
    case IOT_REC_PAGE_FAULT: OnPageFault(As<iot_page_fault>(rec)); break;
    case IOT_REC_PAGE_CACHE: OnPageCache(As<iot_page_cache>(rec)); break;
    case IOT_REC_WRITEBACK: OnWriteback(As<iot_writeback>(rec)); break;
    case IOT_REC_BLOCK: OnBlock(As<iot_block>(rec)); break;
    case IOT_REC_NVME: OnNvme(As<iot_nvme>(rec)); break;
    case IOT_REC_ASYNC_IO: OnAsync(As<iot_async_io>(rec)); break;
    case IOT_REC_INTENT: OnIntent(As<iot_intent>(rec)); break;
    case IOT_REC_LOST: OnLost(As<iot_lost>(rec)); break;
    case IOT_REC_CACHE_STATE: OnCacheState(As<iot_cache_state>(rec)); break;
    case IOT_REC_SCHED: OnSched(As<iot_sched>(rec)); break;
    default: break;  // CLOCK, SUBPAGE, IOVEC: nothing to aggregate yet
  }
}

void Analyzer::OnString(const iot_rec_hdr* rec) {
  const auto& s = As<iot_string>(rec);
  size_t avail = rec->size > sizeof(iot_string) ? rec->size - sizeof(iot_string) : 0;
  size_t len = std::min<size_t>(s.len, avail);
  strings_[s.id] = std::string(reinterpret_cast<const char*>(rec) + sizeof(iot_string), len);
}

// ---- threads, processes, files -------------------------------------------------------------

Analyzer::ProcStats& Analyzer::Proc(uint32_t tgid, uint64_t ts) {
  bool inserted = false;
  uint32_t& idx = proc_index_.FindOrInsert(tgid, &inserted);
  if (inserted) {
    idx = static_cast<uint32_t>(procs_.size());
    ProcStats p;
    p.tgid = tgid;
    p.first_ts = ts;
    procs_.push_back(p);
  }
  return procs_[idx];
}

Analyzer::ThreadStats& Analyzer::ThreadSlow(uint32_t tgid, uint32_t tid, uint64_t ts) {
  const uint64_t key = (static_cast<uint64_t>(tgid) << 32) | tid;
  KeySlot& slot = thread_cache_[KeyCacheSlot(key)];
  bool inserted = false;
  uint32_t& idx = thread_index_.FindOrInsert(key, &inserted);
  if (inserted) {
    idx = static_cast<uint32_t>(threads_.size());
    ThreadStats t;
    t.tid = tid;
    t.tgid = tgid;
    t.first_ts = ts;
    ProcStats& p = Proc(tgid, ts);
    t.proc = static_cast<uint32_t>(&p - procs_.data());
    p.threads++;
    if (tid == tgid) t.comm = p.comm;
    threads_.push_back(std::move(t));
  }
  slot.key = key;
  slot.value = idx;
  return threads_[idx];
}

int32_t Analyzer::FileIndex(uint32_t dev, uint64_t ino, bool create) {
  // Devices are few: number them, and pack (device number, ino) into one 64-bit key.
  uint32_t dev_index;
  if (dev == last_dev_) {
    dev_index = last_dev_index_;
  } else {
    auto it = std::find(devs_.begin(), devs_.end(), dev);
    if (it == devs_.end()) {
      devs_.push_back(dev);
      it = devs_.end() - 1;
    }
    dev_index = static_cast<uint32_t>(it - devs_.begin());
    last_dev_ = dev;
    last_dev_index_ = dev_index;
  }
  uint32_t* found = nullptr;
  bool packable = ino < (uint64_t{1} << 44) && dev_index < (1u << 20);
  uint64_t key = (static_cast<uint64_t>(dev_index) << 44) | ino;
  if (packable) {
    found = file_index_.Find(key);
  } else {
    auto it = file_index_wide_.find(FileKey{dev, ino});
    if (it != file_index_wide_.end()) found = &it->second;
  }
  if (found) return static_cast<int32_t>(*found);
  if (!create) return -1;
  uint32_t idx = static_cast<uint32_t>(files_.size());
  FileStats f;
  f.dev = dev;
  f.ino = ino;
  const auto& images = options_.filter.program_images;
  if (images && images->contains({dev, ino})) f.scope = 0;  // no name will ever say otherwise
  files_.push_back(f);
  if (packable)
    file_index_.FindOrInsert(key) = idx;
  else
    file_index_wide_[FileKey{dev, ino}] = idx;
  return static_cast<int32_t>(idx);
}

std::string Analyzer::ResolvedName(const iot_syscall& r) const {
  if (r.path_id == 0 || (r.sflags & (IOT_SCF_PATH_TRUNC | IOT_SCF_PATH_FAULT))) return {};
  auto it = strings_.find(r.path_id);
  if (it == strings_.end()) return {};
  std::optional<std::string> resolved = fd_state_.Resolve(r.tgid, model::PathDirFd(r), it->second);
  return resolved ? std::move(*resolved) : std::string();
}

std::string Analyzer::AbsoluteName(uint32_t path_id) const {
  if (path_id == 0) return {};
  auto it = strings_.find(path_id);
  if (it == strings_.end() || it->second.empty() || it->second[0] != '/') return {};
  return model::NormalizePath(it->second);
}

uint32_t Analyzer::NameId(std::string_view text) {
  if (auto it = name_ids_.find(text); it != name_ids_.end()) return it->second;
  name_texts_.emplace_back(text);
  const auto id = static_cast<uint32_t>(name_texts_.size());
  name_ids_.emplace(name_texts_.back(), id);
  return id;
}

std::string_view Analyzer::NameText(uint32_t id) const {
  return id != 0 && id <= name_texts_.size() ? std::string_view(name_texts_[id - 1])
                                             : std::string_view();
}

void Analyzer::AddFileName(int32_t file_index, uint32_t path_id, std::string_view resolved) {
  if (file_index < 0 || path_id == 0) return;
  FileStats& f = files_[static_cast<size_t>(file_index)];
  // The scope judges resolved names only; one name in scope puts the file in. The kind of the
  // resolved name counts too: a /proc file opened relative to a dirfd on /proc is no storage.
  if (!resolved.empty() && f.scope != 1 && !options_.filter.scope.IsAll()) {
    const model::FileKind kind =
        model::ClassifyFile(f.ftype, resolved, types_recorded_ && f.untyped);
    f.scope = options_.filter.scope.Admits(resolved, kind) ? 1 : 0;
  }
  auto recorded = strings_.find(path_id);
  // The file is named by the path resolved, else as recorded.
  std::string unknown;
  std::string_view text = resolved;
  if (text.empty() && recorded != strings_.end()) text = recorded->second;
  if (text.empty() && recorded == strings_.end()) {
    unknown = fmt::format("<string {}>", path_id);
    text = unknown;
  }
  const uint32_t name = NameId(text);
  for (uint32_t i = 0; i < f.nnames; i++)
    if (f.names[i] == name) return;
  if (f.nnames < kMaxNames)
    f.names[f.nnames++] = name;
  else
    f.more_names++;
  if (f.kind_path == 0 && text.starts_with('/')) {
    f.kind_path = name;
    UpdateFileKind(f);
  }
  if (!options_.filter.file_globs.empty() && f.glob != 1) {
    // The name as recorded (a relative glob still matches a relative name) or resolved.
    f.glob = 0;
    for (const std::string& g : options_.filter.file_globs) {
      if ((recorded != strings_.end() && model::GlobMatch(g, recorded->second)) ||
          (!resolved.empty() && model::GlobMatch(g, resolved)))
        f.glob = 1;
    }
  }
}

void Analyzer::NoteFileTypeSlow(FileStats& f, uint16_t ftype) {
  if (ftype != 0)
    f.ftype = ftype;
  else
    f.untyped = true;
  UpdateFileKind(f);
}

void Analyzer::UpdateFileKind(FileStats& f) {
  std::string normalized;
  if (f.kind_path != 0) normalized = model::NormalizePath(NameText(f.kind_path));
  f.kind = model::ClassifyFile(f.ftype, normalized, types_recorded_ && f.untyped);
}

// ---- descriptors -------------------------------------------------------------------------

int32_t Analyzer::DescriptorFile(uint32_t tgid, int32_t fd) const {
  const model::OpenFileDescription* d = fd_state_.Description(fd_state_.DescriptionOf(tgid, fd));
  return d && d->user != 0 ? static_cast<int32_t>(d->user - 1) : -1;
}

void Analyzer::NonStorageOp(FileStats& f, int dir, uint64_t bytes, uint64_t requested,
                            bool async) {
  NonStorageStats& n = non_storage_[static_cast<size_t>(f.kind)];
  const size_t d = static_cast<size_t>(dir);
  if (async) {
    ++f.async_ops[d];
    f.async_bytes[d] = SaturatingAdd(f.async_bytes[d], bytes);
    ++n.async_ops[d];
    n.async_bytes[d] = SaturatingAdd(n.async_bytes[d], bytes);
    return;
  }
  ++f.data_ops[d];
  f.bytes[d] = SaturatingAdd(f.bytes[d], bytes);
  f.requested[d] = SaturatingAdd(f.requested[d], requested);
  ++n.ops[d];
  n.bytes[d] = SaturatingAdd(n.bytes[d], bytes);
  n.requested[d] = SaturatingAdd(n.requested[d], requested);
}

// ---- processes and snapshots -----------------------------------------------------------------

void Analyzer::OnProc(const iot_proc& r) {
  ensure_start(r.ts);
  // Descriptor tables follow fork, exec (close-on-exec), the process's end and its cwd.
  fd_state_.OnProc(r, PathText(r.path_id));
  auto set_comm = [&](std::array<char, 16>& dst) {
    if (r.comm[0] != '\0') std::memcpy(dst.data(), r.comm, 16);
  };
  switch (r.kind) {
    case IOT_PROC_FORK: {
      ThreadStats& t = Thread(r.child_tgid, r.child_tid, r.ts);
      set_comm(t.comm);
      ProcStats& p = procs_[t.proc];
      set_comm(p.comm);
      p.parent = r.tgid;
      break;
    }
    case IOT_PROC_THREAD: {
      ThreadStats& t = Thread(r.tgid, r.child_tid ? r.child_tid : r.tid, r.ts);
      set_comm(t.comm);
      break;
    }
    case IOT_PROC_EXEC: {
      ThreadStats& t = Thread(r.tgid, r.tid, r.ts);
      set_comm(t.comm);
      ProcStats& p = procs_[t.proc];
      set_comm(p.comm);
      if (r.path_id) p.exe_id = r.path_id;
      break;
    }
    case IOT_PROC_EXIT: {
      if (r.flags & IOT_PROCF_GROUP_DEAD) {
        ProcStats& p = Proc(r.tgid, r.ts);
        p.exited = true;
        p.exit_code = r.exit_code;
      }
      break;
    }
    case IOT_PROC_ATTACH:
    case IOT_PROC_START:
    case IOT_PROC_CWD:
    default: {
      ThreadStats& t = Thread(r.tgid, r.tid ? r.tid : r.tgid, r.ts);
      set_comm(t.comm);
      if (r.tid == r.tgid || r.tid == 0) set_comm(procs_[t.proc].comm);
      break;
    }
  }
}

void Analyzer::OnFdSnapshot(const iot_fd_snapshot& r) {
  ensure_start(r.ts);
  int32_t file = r.ino ? FileIndex(r.dev, r.ino, true) : -1;
  if (file >= 0) NoteFileType(file, r.ftype);
  const std::string resolved = AbsoluteName(r.path_id);
  AddFileName(file, r.path_id, resolved);
  const model::DescriptionId id = fd_state_.OnFdSnapshot(r, PathText(r.path_id));
  if (model::OpenFileDescription* d = fd_state_.Description(id); d && file >= 0)
    d->user = static_cast<uint32_t>(file) + 1;
  if (file >= 0 && r.fsize > files_[static_cast<size_t>(file)].fsize)
    files_[static_cast<size_t>(file)].fsize = r.fsize;
}

void Analyzer::OnMapSnapshot(const iot_map_snapshot& r) {
  ensure_start(r.ts);
  fd_state_.OnMapSnapshot(r, PathText(r.path_id));
  if (!r.ino) return;
  int32_t file = FileIndex(r.dev, r.ino, true);
  AddFileName(file, r.path_id, AbsoluteName(r.path_id));
  files_[static_cast<size_t>(file)].maps++;
}
// ---- intents, losses, scheduling -----------------------------------------------------------

// OnIntent: analyzer_phases.cc.

void Analyzer::OnLost(const iot_lost& r) {
  uint64_t& v = lost_[{r.source, r.cpu}];
  v = std::max(v, r.count);
}

void Analyzer::OnSched(const iot_sched& r) {
  if (!TimeAllowed(r.ts)) return;
  if (r.kind == IOT_SCHED_OFFCPU) {
    if (!TaskAllowed(r.tgid, r.tid)) return;
    offcpu_ns_ = SaturatingAdd(offcpu_ns_, r.dur);
    ++offcpu_intervals_;
    uint64_t& thread_offcpu = Thread(r.tgid, r.tid, r.ts).offcpu_ns;
    thread_offcpu = SaturatingAdd(thread_offcpu, r.dur);
  } else {
    irq_ns_ = SaturatingAdd(irq_ns_, r.dur);
  }
}

const LogLinearHistogram* Analyzer::op_latency(uint16_t op) const {
  if (op > IOT_OP_MAX) return nullptr;
  return ops_[op].latency.get();
}

std::vector<Analyzer::ThreadSequence> Analyzer::Sequences() const {
  // Processes and threads ranked by their first system call.
  std::vector<const ThreadStats*> ts;
  for (const ThreadStats& t : threads_)
    if (!t.seq.empty()) ts.push_back(&t);
  std::stable_sort(ts.begin(), ts.end(), [](const ThreadStats* a, const ThreadStats* b) {
    return a->first_op_ts < b->first_op_ts;
  });
  std::unordered_map<uint32_t, uint32_t> proc_rank, threads_in_proc;
  std::vector<ThreadSequence> out;
  for (const ThreadStats* t : ts) {
    auto [it, fresh] = proc_rank.emplace(t->proc, static_cast<uint32_t>(proc_rank.size()));
    ThreadSequence s;
    s.tgid = t->tgid;
    s.tid = t->tid;
    s.first_ts = t->first_op_ts;
    s.process_rank = it->second;
    s.thread_rank = threads_in_proc[t->proc]++;
    s.ops = &t->seq;
    out.push_back(s);
  }
  return out;
}

}  // namespace iotwin::analysis
