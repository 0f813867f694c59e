#include "analysis/analyzer.h"

#include <fcntl.h>
#include <linux/close_range.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include <fmt/format.h>

#include "base/checked_math.h"
#include "base/json_fields.h"
#include "format/op_info.h"
#include "format/records.h"
#include "model/op_fields.h"

namespace iotwin::analysis {
namespace {

// What OnSyscall asks of every record's op, read once from the op table (format/op_info.h):
// direction of a data op (0 read, 1 write, -1 neither), whether that data op takes an explicit
// offset, whether it opens a file.
struct OpClassTable {
  std::array<int8_t, IOT_OP_MAX + 1> dir{};
  std::array<bool, IOT_OP_MAX + 1> explicit_offset{};
  std::array<bool, IOT_OP_MAX + 1> opens{};
  OpClassTable() {
    for (uint16_t op = 0; op <= IOT_OP_MAX; op++) {
      const OpInfo& info = GetOpInfo(op);
      dir[op] = info.family == OpFamily::kRead ? 0 : info.family == OpFamily::kWrite ? 1 : -1;
      explicit_offset[op] = dir[op] >= 0 && (info.offset == FieldUse::kFileOffset ||
                                             info.offset == FieldUse::kOffsetOrCurrent);
      opens[op] = info.family == OpFamily::kOpen;
    }
  }
};
const OpClassTable kOpClass;

constexpr size_t kMaxStreams = 4u << 20;
// Bounds of the threads' direct stream tables (files and threads by index, in the order the trace
// first names them): at most 16 KiB per thread, 4 MiB in all.
constexpr int32_t kDirectStreamFiles = 1024;
constexpr size_t kDirectStreamThreads = 256;
constexpr size_t kMaxQueuedBios = 1u << 20;
constexpr size_t kMaxPending = 1u << 20;

// The report follows descriptors by number and files by identity: paths only for a filter on
// them (file globs, a scope). A runaway table (lost closes) stops growing at four times
// kMaxPending descriptors.
bool FiltersPaths(const AnalysisFilter& f) { return !f.file_globs.empty() || !f.scope.IsAll(); }
model::TraceStateOptions DescriptorStateOptions(bool keep_paths) {
  model::TraceStateOptions o;
  o.keep_paths = keep_paths;
  o.limits.descriptors = kMaxPending * 4;
  return o;
}

}  // namespace

int AsyncDirection(uint8_t engine, uint8_t opcode) {
  switch (AsyncOp(engine, opcode).kind) {
    case AsyncKind::kRead: return 0;
    case AsyncKind::kWrite: return 1;
    default: return -1;
  }
}

std::string AsyncOpName(uint8_t engine, uint8_t opcode) {
  const std::string_view name = AsyncOp(engine, opcode).name;
  if (!name.empty()) return std::string(name);
  return fmt::format("op{}", opcode);
}

namespace {

uint64_t BlockKey(const iot_block& r) {
  if (r.rq_id != 0) return r.rq_id;
  return (static_cast<uint64_t>(r.dev) << 44) ^ r.sector;
}

// Offsets and lengths come from the trace: a request's length is cut where its end would pass
// 2^64, so [offset, offset + length) is never a wrapped (reversed) range.
uint64_t ClampedLength(uint64_t offset, uint64_t length) {
  return std::min(length, UINT64_MAX - offset);
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

uint64_t CallKey(uint32_t tid, uint64_t ts) { return MixBits(ts ^ (static_cast<uint64_t>(tid) << 40)); }

nlohmann::json AnalysisFilter::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  if (!tgids.empty()) j["tgid"] = tgids;
  if (!tids.empty()) j["tid"] = tids;
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
      fd_state_(DescriptorStateOptions(FiltersPaths(options_.filter))),
      series_(kSeriesCount) {
  task_filter_ = !options_.filter.tgids.empty() || !options_.filter.tids.empty();
  filtering_ = !options_.filter.empty();
  path_filter_ = FiltersPaths(options_.filter);
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
  const nlohmann::json* host = json_fields::Object(meta, "host");
  if (!host) return;
  if (uint64_t ps = json_fields::GetUint(*host, "page_size", 0)) page_size_ = ps;
  page_shift_ = (page_size_ & (page_size_ - 1)) == 0 ? Log2Floor(page_size_) : -1;
  const std::string arch = json_fields::GetString(*host, "arch");
  fd_state_.SetArch(arch);  // O_DIRECT differs between architectures
  if (const nlohmann::json* clock = json_fields::Find(*host, "clock");
      clock && clock->is_string()) {
    // Clocks whose start times resolve calls as finely as their durations: iotwin's own,
    // and strace's -ttt (realtime) and -r (relative). Not -t/-tt (time_of_day: -t is whole
    // seconds) nor imports without timestamps (synthetic: one microsecond per line).
    const std::string c = clock->get<std::string>();
    handover_rule_ = c == "monotonic" || c == "realtime" || c == "relative";
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
  if (!path_filter_ || r.path_id == 0 || (r.sflags & (IOT_SCF_PATH_TRUNC | IOT_SCF_PATH_FAULT)))
    return {};
  auto it = strings_.find(r.path_id);
  if (it == strings_.end()) return {};
  std::optional<std::string> resolved = fd_state_.Resolve(r.tgid, model::PathDirFd(r), it->second);
  return resolved ? std::move(*resolved) : std::string();
}

std::string Analyzer::AbsoluteName(uint32_t path_id) const {
  if (!path_filter_ || path_id == 0) return {};
  auto it = strings_.find(path_id);
  if (it == strings_.end() || it->second.empty() || it->second[0] != '/') return {};
  return model::NormalizePath(it->second);
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
  for (uint32_t i = 0; i < f.nnames; i++)
    if (f.names[i] == path_id) return;
  if (f.nnames < kMaxNames)
    f.names[f.nnames++] = path_id;
  else
    f.more_names++;
  if (f.kind_path == 0) {
    auto it = strings_.find(path_id);
    if (it != strings_.end() && !it->second.empty() && it->second[0] == '/') {
      f.kind_path = path_id;
      UpdateFileKind(f);
    }
  }
  if (!options_.filter.file_globs.empty() && f.glob != 1) {
    // The name as recorded (a relative glob still matches a relative name) or resolved.
    auto it = strings_.find(path_id);
    f.glob = 0;
    for (const std::string& g : options_.filter.file_globs) {
      if ((it != strings_.end() && model::GlobMatch(g, it->second)) ||
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
  if (f.kind_path != 0) {
    auto it = strings_.find(f.kind_path);
    if (it != strings_.end()) normalized = model::NormalizePath(it->second);
  }
  f.kind = model::ClassifyFile(f.ftype, normalized, types_recorded_ && f.untyped);
}

// ---- descriptors -------------------------------------------------------------------------

model::DescriptionId Analyzer::NewDescription(int32_t file_index, uint64_t pos, bool pos_known,
                                              uint32_t open_flags, std::string_view path) {
  const model::DescriptionId id = fd_state_.NewDescription(open_flags, path);
  if (id == model::kNoDescription) return id;
  model::OpenFileDescription& d = *fd_state_.Description(id);
  d.pos = pos;
  d.pos_known = pos_known;
  if (id >= desc_notes_.size()) desc_notes_.resize(static_cast<size_t>(id) + 1);
  desc_notes_[id] = DescriptionNote{file_index, 0, 0};
  return id;
}

// ---- system calls ---------------------------------------------------------------------------

Analyzer::CallTarget Analyzer::TrackDescriptors(const iot_syscall& r, uint16_t op, int dir,
                                                bool ok, uint64_t ret) {
  fd_state_.NextRecord();
  const bool has_file = r.ino != 0 && !(r.sflags & IOT_SCF_NO_FILE);
  CallTarget c;
  int32_t& file = c.file;
  c.offset = r.offset;
  if (dir < 0 && has_file) {
    file = FileIndex(r.dev, r.ino, true);
    NoteFileType(file, r.ftype);
  }
  if (dir >= 0) {
    DescriptionNote* note = nullptr;
    model::OpenFileDescription* d = FdDescription(r.tgid, r.fd, &note);
    const bool previous_instance = d && ok && UsesPreviousInstance(*note, r);
    if (previous_instance) {
      // The old file's description is gone: its recorded position and file serve this call.
      ++previous_instance_calls_;
      d = nullptr;
    }
    // The descriptor usually knows its file already: skip the file-table lookup.
    if (d && note->file >= 0) {
      const FileStats& known = files_[static_cast<size_t>(note->file)];
      if (!has_file || (known.ino == r.ino && known.dev == r.dev)) file = note->file;
    }
    if (file < 0 && has_file) file = FileIndex(r.dev, r.ino, true);
    if (file >= 0 && has_file) NoteFileType(file, r.ftype);
    if (d && note->file < 0) note->file = file;
    bool implicit = !kOpClass.explicit_offset[op] ||
                    ((op == IOT_OP_PREADV2 || op == IOT_OP_PWRITEV2) && r.offset == UINT64_MAX);
    if (implicit) {
      if (dir == 1 && d && d->append && ok && r.fsize >= ret) {
        c.offset = r.fsize - ret;
        ++offset_tracked_;
      } else if (d && d->pos_known) {
        c.offset = d->pos;
        ++offset_tracked_;
        if (r.offset != 0 && r.offset != d->pos) ++offset_mismatch_;
      } else {
        c.offset = r.offset;
        ++offset_recorded_;
      }
      if (ok) {
        if (!d && r.fd >= 0 && !previous_instance) {
          // Opened before the capture attached: start tracking from the recorded position.
          fd_state_.Bind(r.tgid, r.fd, NewDescription(file, 0, false, 0), false);
          d = FdDescription(r.tgid, r.fd);
        }
        if (d) {
          d->pos = SaturatingAdd(c.offset, ret);
          d->pos_known = true;
        }
      }
    } else {
      ++offset_explicit_;
    }
    c.direct = d && d->direct;
  } else if (op == IOT_OP_LSEEK) {
    DescriptionNote* note = nullptr;
    model::OpenFileDescription* d = ok ? FdDescription(r.tgid, r.fd, &note) : nullptr;
    if (d && UsesPreviousInstance(*note, r)) {
      ++previous_instance_calls_;
    } else if (ok) {
      if (!d && r.fd >= 0) {
        fd_state_.Bind(r.tgid, r.fd, NewDescription(file, 0, false, 0), false);
        d = FdDescription(r.tgid, r.fd);
      }
      if (d) {
        d->pos = ret;
        d->pos_known = true;
      }
    }
  } else if (kOpClass.opens[op]) {
    if (ok) {
      const std::string resolved = ResolvedName(r);  // before the new number is bound
      const model::DescriptionId di = NewDescription(file, 0, true, r.flags, resolved);
      if (di != model::kNoDescription && handover_rule_ && r.dur > 0) {
        desc_notes_[di].open_tid = r.tid;
        desc_notes_[di].open_end = SaturatingAdd(r.ts, r.dur);
      }
      fd_state_.Bind(r.tgid, static_cast<int32_t>(r.ret), di, model::OpResultCloexec(r));
      // O_TMPFILE names the directory the new, unnamed file lies in: not the file's name.
      if ((model::EffectiveOpenFlags(r) & O_TMPFILE) != O_TMPFILE) {
        AddFileName(file, r.path_id, resolved);
      } else if (file >= 0) {
        files_[static_cast<size_t>(file)].tmpfile = true;
      }
    }
  } else if (op == IOT_OP_CLOSE) {
    // close releases the number even when it fails later (EINTR, EIO); EBADF: nothing was open.
    if (r.ret != -EBADF) {
      // Closing the previous instance, which the open's binding already replaced.
      DescriptionNote* note = nullptr;
      if (FdDescription(r.tgid, r.fd, &note) && UsesPreviousInstance(*note, r))
        ++previous_instance_calls_;
      else
        fd_state_.Close(r.tgid, r.fd);
    }
  } else if (op == IOT_OP_CLOSE_RANGE) {
    // CLOSE_RANGE_CLOEXEC closes nothing now.
    if (ok && !(r.flags & CLOSE_RANGE_CLOEXEC)) {
      const uint32_t first = model::CloseRangeFirst(r), last = model::CloseRangeLast(r);
      std::vector<int32_t> closing;
      fd_state_.ForEachFd(r.tgid, [&](int32_t fd, const model::Descriptor& d) {
        if (static_cast<uint32_t>(fd) < first || static_cast<uint32_t>(fd) > last) return;
        if (UsesPreviousInstance(desc_notes_[d.desc], r))
          ++previous_instance_calls_;
        else
          closing.push_back(fd);
      });
      for (int32_t fd : closing) fd_state_.Close(r.tgid, fd);
    }
  } else if (op == IOT_OP_DUP || op == IOT_OP_DUP2 || op == IOT_OP_DUP3 ||
             (op == IOT_OP_FCNTL &&
              (model::FcntlCmd(r) == F_DUPFD || model::FcntlCmd(r) == F_DUPFD_CLOEXEC))) {
    // newfd shares oldfd's description; an unknown oldfd leaves newfd unknown too.
    if (ok && r.ret <= INT32_MAX)
      fd_state_.Dup(r.tgid, r.fd, static_cast<int32_t>(r.ret), model::OpResultCloexec(r));
  } else if (op == IOT_OP_FCNTL && ok && model::FcntlCmd(r) == F_SETFD) {
    fd_state_.SetCloexec(r.tgid, r.fd, (model::FcntlArg(r) & FD_CLOEXEC) != 0);
  } else if (op == IOT_OP_FCNTL && ok && model::FcntlCmd(r) == F_SETFL) {
    fd_state_.OnSyscall(r);  // the interpreter's F_SETFL: O_APPEND and O_DIRECT may change
  } else if (op == IOT_OP_CREAT || op == IOT_OP_TRUNCATE || op == IOT_OP_STAT ||
             op == IOT_OP_LSTAT || op == IOT_OP_NEWFSTATAT || op == IOT_OP_STATX) {
    AddFileName(file, r.path_id, ResolvedName(r));
  } else if (op == IOT_OP_LINKAT && ok) {
    NameLinkedDescriptor(r);
  } else if ((op == IOT_OP_CHDIR || op == IOT_OP_FCHDIR) && path_filter_) {
    // The cwd relative names resolve against (the interpreter's chdir and fchdir).
    auto it = r.path_id ? strings_.find(r.path_id) : strings_.end();
    std::optional<std::string_view> path;
    if (it != strings_.end()) path = it->second;
    fd_state_.OnSyscall(r, path);
  }
  return c;
}

void Analyzer::OnSyscall(const iot_syscall& r) {
  ensure_start(r.ts);
  const uint16_t op = r.op <= IOT_OP_MAX ? r.op : IOT_OP_UNKNOWN;
  const bool ok = r.ret >= 0 && !(r.sflags & IOT_SCF_INTERRUPTED);
  const uint64_t ret = ok ? static_cast<uint64_t>(r.ret) : 0;
  const int dir = kOpClass.dir[op];

  // Descriptor state first: it must follow every call, counted or filtered out.
  const CallTarget target = TrackDescriptors(r, op, dir, ok, ret);
  const int32_t file = target.file;
  const uint64_t offset = target.offset;

  // Statistics, for calls the filter lets through.
  if (filtering_) {
    if (!TimeAllowed(r.ts) || !TaskAllowed(r.tgid, r.tid) || !OpAllowed(op)) {
      ++filtered_out_;
      return;
    }
    if (!FileAllowed(file)) {
      ++filtered_out_;
      NoteScopedOut(file, &scoped_out_calls_, &scoped_out_call_bytes_, dir >= 0 ? ret : 0);
      return;
    }
    if (options_.filter.excluded_calls &&
        options_.filter.excluded_calls->count(CallKey(r.tid, r.ts))) {
      ++filtered_out_;
      ++excluded_calls_;
      return;
    }
  }
  first_ts_ = std::min(first_ts_, r.ts);
  last_ts_ = std::max(last_ts_, SaturatingAdd(r.ts, r.dur));

  ThreadStats& t = Thread(r.tgid, r.tid, r.ts);
  OpStats& s = ops_[op];
  ++s.count;
  if (!ok) ++s.errors;
  s.io_ns = SaturatingAdd(s.io_ns, r.dur);
  if (!s.latency) s.latency = std::make_unique<LogLinearHistogram>();
  s.latency->Add(r.dur);

  if (options_.collect_distributions && t.prev_enter != 0 && r.ts >= t.prev_enter)
    inter_arrival_.Add(r.ts - t.prev_enter);
  t.prev_enter = r.ts;
  if (t.first_op_ts == 0) t.first_op_ts = r.ts;
  t.last_ts = std::max(t.last_ts, r.ts);
  ++t.ops;
  t.io_ns = SaturatingAdd(t.io_ns, r.dur);

  if (file >= 0) {
    FileStats& f = files_[static_cast<size_t>(file)];
    if (f.first_ts == 0) f.first_ts = r.ts;
    ++f.ops;
    f.io_ns = SaturatingAdd(f.io_ns, r.dur);
    if (r.fsize > f.fsize) f.fsize = r.fsize;
    if (dir < 0 && ok) {
      if (kOpClass.opens[op]) ++f.opens;
      if (op == IOT_OP_MMAP) ++f.maps;
    }
  }

  if (dir >= 0) {
    if (ok) DataOp(r, t, dir, offset, ret, file, target.direct);
  } else if (ok && (op == IOT_OP_SENDFILE || op == IOT_OP_COPY_FILE_RANGE ||
                    op == IOT_OP_SPLICE)) {
    s.bytes = SaturatingAdd(s.bytes, ret);
  }

  if (options_.collect_sequences) {
    if (sequence_ops_ < options_.max_sequence_ops) {
      // munmap/mremap/msync/madvise carry an address, which differs between runs (ASLR).
      const bool address = op == IOT_OP_MUNMAP || op == IOT_OP_MREMAP || op == IOT_OP_MSYNC ||
                           op == IOT_OP_MADVISE;
      uint64_t fp_offset = dir >= 0 ? offset : address ? 0 : r.offset;
      uint64_t whence = op == IOT_OP_LSEEK ? r.aux : 0;
      t.seq.push_back(OpFingerprint(op, fp_offset, r.length, r.flags, whence));
      ++sequence_ops_;
    } else {
      sequences_truncated_ = true;
    }
  }

  if (dir >= 0 && ok && !intent_stacks_.empty()) {
    auto it = intent_stacks_.find(r.tid);
    if (it != intent_stacks_.end() && !it->second.empty()) {
      LabelStats& l = labels_[it->second.back().first];
      ++l.ops;
      l.bytes = SaturatingAdd(l.bytes, ret);
    }
  }
}

StreamState* Analyzer::StreamSlow(ThreadStats& t, int32_t file, int dir, bool async) {
  const size_t thread_index = static_cast<size_t>(&t - threads_.data());
  const size_t at = StreamSlot(file, dir, async);
  const bool direct = file < kDirectStreamFiles && thread_index < kDirectStreamThreads;
  uint32_t* index = nullptr;
  uint64_t key = 0;
  if (direct) {
    if (at >= t.streams.size()) {
      const size_t grown = std::min(StreamSlot(kDirectStreamFiles, 0, false),
                                    std::max(at + 1, 2 * t.streams.size()));
      t.streams.reserve(grown);  // exactly: resize() alone may allocate twice the size
      t.streams.resize(grown);
    }
    index = &t.streams[at];
  } else {
    // at < 2^33 (file < 2^31); thread indices are uint32_t and far below 2^31.
    key = (static_cast<uint64_t>(thread_index) << 33) | at;
    index = stream_index_.Find(key);
  }
  if (index && *index != 0) return &stream_states_[*index - 1];
  if (stream_states_.size() >= kMaxStreams) {
    ++streams_dropped_;
    return nullptr;
  }
  stream_states_.emplace_back();
  const auto created = static_cast<uint32_t>(stream_states_.size());
  if (direct)
    *index = created;
  else
    stream_index_.FindOrInsert(key) = created;
  return &stream_states_.back();
}

void Analyzer::SyscallDirectionTotals(std::array<uint64_t, 2>* ops, std::array<uint64_t, 2>* bytes,
                                      std::array<uint64_t, 2>* requested) const {
  *ops = {};
  *bytes = {};
  *requested = {};
  for (size_t op = 0; op < ops_.size(); op++) {
    const int dir = kOpClass.dir[op];
    if (dir < 0) continue;
    // A data op's bytes and requested length are counted when it succeeds (DataOp).
    const OpStats& s = ops_[op];
    (*ops)[static_cast<size_t>(dir)] += s.count - s.errors;
    (*bytes)[static_cast<size_t>(dir)] += s.bytes;
    (*requested)[static_cast<size_t>(dir)] += s.requested;
  }
}

void Analyzer::DataOp(const iot_syscall& r, ThreadStats& t, int dir, uint64_t offset,
                      uint64_t bytes, int32_t file, bool direct) {
  OpStats& s = ops_[r.op];
  s.bytes = SaturatingAdd(s.bytes, bytes);
  s.requested = SaturatingAdd(s.requested, r.length);
  if (!s.sizes) {
    s.sizes = std::make_unique<SizeHistogram>();
    s.top = std::make_unique<TopValues>();
  }
  s.sizes->Add(r.length);
  s.top->Add(r.length);
  if (options_.collect_distributions) {
    req_size_ll_[dir].Add(r.length);
    offset_ll_[dir].Add(offset);
  }
  if (file >= 0 && !model::IsStorage(files_[static_cast<size_t>(file)].kind)) {
    NonStorageOp(files_[static_cast<size_t>(file)], dir, bytes, r.length, false);
    return;
  }
  ++t.data_ops[dir];
  t.bytes[dir] = SaturatingAdd(t.bytes[dir], bytes);
  series_.AddOpAndBytes(kAppReadOps + static_cast<size_t>(dir),
                        kAppReadBytes + static_cast<size_t>(dir), r.ts, bytes);
  data_first_ts_ = std::min(data_first_ts_, r.ts);
  data_last_ts_ = std::max(data_last_ts_, r.ts);
  if (direct) {
    ++direct_ops_;
    direct_bytes_ = SaturatingAdd(direct_bytes_, bytes);
  }

  if (file < 0) {
    ++unattributed_ops_;
    return;
  }
  FileStats& f = files_[static_cast<size_t>(file)];
  ++f.data_ops[dir];
  f.bytes[dir] = SaturatingAdd(f.bytes[dir], bytes);
  f.requested[dir] = SaturatingAdd(f.requested[dir], r.length);
  f.max_end = std::max(f.max_end, SaturatingAdd(offset, std::max<uint64_t>(bytes, r.length)));
  if (direct) {
    ++f.direct_ops;
  } else if (bytes > 0) {
    // Pages from the first byte's to the last byte's, inclusive (the last byte saturated).
    const uint64_t first_page = PageIndex(offset);
    const uint64_t last_page = PageIndex(LastOfRun(offset, bytes));
    const uint64_t end_page = SaturatingAdd(last_page, 1);
    if (dir == 0) {
      f.read_pages += last_page - first_page + 1;
      f.missed_call_pages += NoteAccess(file, f, kAccessCall, first_page, end_page);
    } else {
      NoteAccess(file, f, kAccessWrite, first_page, end_page);
    }
  }
  StreamState* st = Stream(t, file, dir, false);
  if (!st) return;
  int64_t gap = 0;
  Access a = ClassifyAccess(*st, offset, ClampedLength(offset, bytes), &gap);
  ++access_[dir][static_cast<int>(a)];
  ++f.access[dir][static_cast<int>(a)];
  if (a != Access::kFirst) seek_[dir].Add(gap);
  if (!heatmaps_.empty()) Heat(file, r.ts, offset, bytes, dir);
}

void Analyzer::Heat(int32_t file_index, uint64_t ts, uint64_t offset, uint64_t bytes, int dir) {
  uint32_t* hi = heatmap_of_file_.Find(static_cast<uint64_t>(file_index));
  if (!hi) return;
  Heatmap& h = heatmaps_[*hi - 1];
  uint64_t span = std::max<uint64_t>(options_.heatmap_span_ns, 1);
  uint64_t rel = ts > start_ ? ts - start_ : 0;
  size_t tb = std::min<uint64_t>(SaturatingMul(rel, Heatmap::kTimeBins) / span,
                                 Heatmap::kTimeBins - 1);
  size_t ob = std::min<uint64_t>(
      static_cast<uint64_t>(static_cast<double>(offset) / static_cast<double>(h.max_offset) *
                            Heatmap::kOffsetBins),
      Heatmap::kOffsetBins - 1);
  h.ops[tb * Heatmap::kOffsetBins + ob] += 1;
  uint64_t& cell_bytes = h.bytes[tb * Heatmap::kOffsetBins + ob];
  cell_bytes = SaturatingAdd(cell_bytes, bytes);
  if (h.seen++ % h.sample_every == 0) h.points.push_back({rel, offset, bytes, dir});
}

// ---- processes and snapshots -----------------------------------------------------------------

void Analyzer::OnProc(const iot_proc& r) {
  ensure_start(r.ts);
  fd_state_.NextRecord();
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
      fd_state_.Fork(r.tgid, r.child_tgid);
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
      fd_state_.Exec(r.tgid);  // close-on-exec descriptors close
      break;
    }
    case IOT_PROC_EXIT: {
      if (r.flags & IOT_PROCF_GROUP_DEAD) {
        ProcStats& p = Proc(r.tgid, r.ts);
        p.exited = true;
        p.exit_code = r.exit_code;
        fd_state_.DropProcess(r.tgid);
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
      // Attach and cwd records carry the cwd relative names resolve against.
      if (path_filter_ && r.kind != IOT_PROC_START) {
        const std::string cwd = AbsoluteName(r.path_id);
        if (!cwd.empty()) fd_state_.SetCwd(r.tgid, cwd);
      }
      break;
    }
  }
}

// linkat(fd, "", ..., AT_EMPTY_PATH) or linkat(AT_FDCWD, "/proc/self/fd/N", ...,
// AT_SYMLINK_FOLLOW): the new name is the descriptor's file's (an O_TMPFILE file, mostly, which
// has no other).
void Analyzer::NameLinkedDescriptor(const iot_syscall& r) {
  int fd = -1;
  if (r.flags & AT_EMPTY_PATH) {
    fd = r.fd;
  } else if (r.flags & AT_SYMLINK_FOLLOW) {
    auto it = r.path_id ? strings_.find(r.path_id) : strings_.end();
    if (it != strings_.end()) fd = model::ProcSelfFdNumber(it->second, r.tgid);
  }
  DescriptionNote* note = nullptr;
  if (fd < 0 || !FdDescription(r.tgid, fd, &note) || note->file < 0) return;
  auto name = r.path2_id ? strings_.find(r.path2_id) : strings_.end();
  if (name == strings_.end()) return;
  std::optional<std::string> resolved;  // only what a filter judges (as ResolvedName)
  if (path_filter_) resolved = fd_state_.Resolve(r.tgid, model::Path2DirFd(r), name->second);
  AddFileName(note->file, r.path2_id, resolved ? *resolved : std::string());
}

void Analyzer::OnFdSnapshot(const iot_fd_snapshot& r) {
  ensure_start(r.ts);
  int32_t file = r.ino ? FileIndex(r.dev, r.ino, true) : -1;
  if (file >= 0) NoteFileType(file, r.ftype);
  const std::string resolved = AbsoluteName(r.path_id);
  AddFileName(file, r.path_id, resolved);
  fd_state_.NextRecord();
  fd_state_.Bind(r.tgid, r.fd, NewDescription(file, r.pos, true, r.flags, resolved),
                 (r.flags & O_CLOEXEC) != 0);
  if (file >= 0 && r.fsize > files_[static_cast<size_t>(file)].fsize)
    files_[static_cast<size_t>(file)].fsize = r.fsize;
}

void Analyzer::OnMapSnapshot(const iot_map_snapshot& r) {
  ensure_start(r.ts);
  if (!r.ino) return;
  int32_t file = FileIndex(r.dev, r.ino, true);
  AddFileName(file, r.path_id, AbsoluteName(r.path_id));
  files_[static_cast<size_t>(file)].maps++;
}

// ---- memory layer --------------------------------------------------------------------------

void Analyzer::OnPageFault(const iot_page_fault& r) {
  int32_t file = r.ino ? FileIndex(r.dev, r.ino, true) : -1;
  if (!TimeAllowed(r.ts) || !TaskAllowed(r.tgid, r.tid)) {
    ++filtered_out_;
    return;
  }
  if (!FileAllowed(file)) {
    ++filtered_out_;
    NoteScopedOut(file, &scoped_out_faults_, nullptr, 0);
    return;
  }
  first_ts_ = std::min(first_ts_, r.ts);
  last_ts_ = std::max(last_ts_, r.ts);
  uint64_t pages = r.nr_pages ? r.nr_pages : 1;
  bool major = r.flags & IOT_PFF_MAJOR;
  FileStats* f = file >= 0 ? &files_[static_cast<size_t>(file)] : nullptr;
  // Mapped I/O and cache misses are storage's: a mapping of /dev/zero or of a /proc file is not.
  if (f && model::IsStorage(f->kind)) major = MappedFault(r, file, *f, pages) || major;
  ++faults_;
  fault_pages_ += pages;
  if (major) {
    ++faults_major_;
    series_.Add(kMajorFaults, r.ts, 1);
  }
  if (r.flags & IOT_PFF_WRITE) ++faults_write_;
  ThreadStats& t = Thread(r.tgid, r.tid, r.ts);
  ++t.faults;
  ++procs_[t.proc].faults;
  if (!f) {
    ++faults_unattributed_;
    return;
  }
  ++f->faults;
  f->fault_pages += pages;
  f->max_end = std::max(f->max_end, SaturatingMul(SaturatingAdd(r.pgoff, pages), page_size_));
  if (major) ++f->faults_major;
  if (r.flags & IOT_PFF_WRITE) ++f->faults_write;
  if (!heatmaps_.empty()) {
    Heat(file, r.ts, SaturatingMul(r.pgoff, page_size_), SaturatingMul(pages, page_size_),
         (r.flags & IOT_PFF_WRITE) ? 1 : 0);
  }
}

bool Analyzer::MappedFault(const iot_page_fault& r, int32_t file, FileStats& f, uint64_t pages) {
  // The pages the fault mapped: its fault-around window when that holds the faulting page.
  uint64_t first = r.pgoff;
  if (r.nr_pages && r.around_start <= r.pgoff && r.pgoff - r.around_start < r.nr_pages)
    first = r.around_start;
  uint64_t end = PendingPages::End(first, pages);
  // Fault-around never maps past the end of the file.
  const uint64_t size_pages = f.fsize ? PageIndex(f.fsize - 1) + 1 : 0;
  if (size_pages > first && end > size_pages) end = size_pages;
  const bool write = r.flags & IOT_PFF_WRITE;
  if (write) {
    // Pages dirtied through a shared mapping reach the file at write-back: the program wrote
    // them. A private mapping's write fault copies the page into anonymous memory.
    NoteAccess(file, f, kAccessWrite, first, end);
    if (r.flags & IOT_PFF_SHARED) {
      ++f.shared_write_faults;
      f.mmap_write_pages = SaturatingAdd(f.mmap_write_pages, end - first);
      series_.AddOpAndBytes(kMmapWriteOps, kMmapWriteBytes, r.ts,
                            SaturatingMul(end - first, page_size_));
    }
    return false;
  }
  // A fault that waited for pages another fault of the same window brought in maps them again:
  // only pages outside the previous fault's window are new reads.
  uint64_t fresh = end - first;
  const uint64_t lo = std::max(first, f.fault_window_first);
  const uint64_t hi = std::min(end, f.fault_window_end);
  if (lo < hi) {
    fresh -= hi - lo;
    f.fault_window_first = std::min(first, f.fault_window_first);
    f.fault_window_end = std::max(end, f.fault_window_end);
  } else {
    f.fault_window_first = first;
    f.fault_window_end = end;
  }
  if (r.flags & IOT_PFF_EXEC) {
    ++f.exec_faults;
    f.exec_pages = SaturatingAdd(f.exec_pages, fresh);
  } else {
    ++f.read_faults;
    f.mmap_read_pages = SaturatingAdd(f.mmap_read_pages, fresh);
    series_.AddOpAndBytes(kMmapReadOps, kMmapReadBytes, r.ts, SaturatingMul(fresh, page_size_));
  }
  const uint64_t missed = NoteAccess(file, f, kAccessFault, first, end);
  f.missed_fault_pages = SaturatingAdd(f.missed_fault_pages, missed);
  f.last_fault_major = missed > 0 || (r.flags & IOT_PFF_MAJOR);
  return missed > 0;
}

uint64_t Analyzer::NoteAccess(int32_t file_index, FileStats& f, uint8_t access, uint64_t first,
                              uint64_t end) {
  f.last_access = access;
  f.last_first = first;
  f.last_end = end;
  f.last_fault_major = false;
  const uint64_t taken = TakePending(file_index, f, first, end);
  return access == kAccessWrite ? 0 : taken;
}

void Analyzer::NotePageAdd(int32_t file_index, FileStats& f, uint64_t first, uint64_t count,
                           uint64_t ts) {
  uint64_t end = PendingPages::End(first, count);
  // The capture can write an insertion after the record of the access that caused it (a read
  // call's record is written at its exit, before the thread's coalesced insertions): pages of
  // the file's last access count as that access's misses.
  const uint64_t lo = std::max(first, f.last_first), hi = std::min(end, f.last_end);
  if (f.last_access != kAccessNone && lo < hi) {
    if (f.last_access == kAccessCall) {
      f.missed_call_pages = SaturatingAdd(f.missed_call_pages, hi - lo);
    }
    if (f.last_access == kAccessFault) {
      f.missed_fault_pages = SaturatingAdd(f.missed_fault_pages, hi - lo);
      if (!f.last_fault_major) {
        f.last_fault_major = true;
        ++f.faults_major;
        ++faults_major_;
        series_.Add(kMajorFaults, ts, 1);
      }
    }
    if (lo > first) AddPending(file_index, f, first, lo);
    first = hi;
    // Credited once: the same pages evicted and added again without a new access are pending.
    if (lo == f.last_first) {
      f.last_first = hi;
    } else {
      f.last_end = lo;
    }
  }
  if (first < end) AddPending(file_index, f, first, end);
}

void Analyzer::AddPending(int32_t file_index, FileStats& f, uint64_t first, uint64_t end) {
  const uint64_t added = pending_pages_.Add(static_cast<uint32_t>(file_index), first, end);
  if (added == 0) return;
  if (f.pending_pages == 0) {
    f.pending_first = first;
    f.pending_end = end;
  } else {
    f.pending_first = std::min(f.pending_first, first);
    f.pending_end = std::max(f.pending_end, end);
  }
  f.pending_pages += added;
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

void Analyzer::OnPageCache(const iot_page_cache& r) {
  have_page_cache_ = true;
  int32_t file = r.ino ? FileIndex(r.dev, r.ino, true) : -1;
  if (!TimeAllowed(r.ts) || !FileAllowed(file) ||
      (r.tgid != 0 && !TaskAllowed(r.tgid, r.tid))) {
    ++filtered_out_;
    return;
  }
  uint64_t pages = r.nr_pages ? r.nr_pages : 1;
  FileStats* f = file >= 0 ? &files_[static_cast<size_t>(file)] : nullptr;
  switch (r.kind) {
    case IOT_PC_ADD:
      pc_add_ += pages;
      if (f) {
        f->pc_add += pages;
        if (model::IsStorage(f->kind)) NotePageAdd(file, *f, r.index, pages, r.ts);
      }
      break;
    case IOT_PC_DELETE:
      pc_delete_ += pages;
      if (f) {
        f->pc_delete += pages;
        // An evicted page read later is read from storage again: a miss then, when its
        // insertion is seen; not one of this insertion's.
        TakePending(file, *f, r.index, PendingPages::End(r.index, pages));
      }
      break;
    case IOT_PC_READAHEAD:
      ++ra_windows_;
      ra_pages_ += r.nr_pages;
      if (f) {
        ++f->ra_windows;
        f->ra_pages += r.nr_pages;
      }
      break;
    default: break;
  }
}

void Analyzer::OnWriteback(const iot_writeback& r) {
  int32_t file = r.ino ? FileIndex(r.dev, r.ino, true) : -1;
  if (!TimeAllowed(r.ts) || (r.ino && !FileAllowed(file))) {
    ++filtered_out_;
    return;
  }
  FileStats* f = file >= 0 ? &files_[static_cast<size_t>(file)] : nullptr;
  switch (r.kind) {
    case IOT_WB_DIRTY_FOLIO: {
      uint64_t pages = r.nr ? r.nr : 1;
      wb_dirtied_ += pages;
      if (f) f->wb_dirtied += pages;
      break;
    }
    case IOT_WB_INODE_DONE:
      wb_written_ += r.nr;
      if (f) f->wb_written += r.nr;
      break;
    case IOT_WB_WORK_START: ++wb_works_; break;
    case IOT_WB_WAIT: ++wb_waits_; break;
    default: break;
  }
}

void Analyzer::OnCacheState(const iot_cache_state& r) {
  if (!r.ino) return;
  int32_t file = FileIndex(r.dev, r.ino, true);
  FileStats& f = files_[static_cast<size_t>(file)];
  // The capture names an O_TMPFILE file by the directory it was opened in.
  if (!f.tmpfile) AddFileName(file, r.path_id, AbsoluteName(r.path_id));
  f.cache_resident = static_cast<int64_t>(r.resident_pages);
  f.cache_total = static_cast<int64_t>(r.total_pages);
  ++cache_state_files_;
  cache_state_resident_ += r.resident_pages;
  cache_state_total_ += r.total_pages;
}

// ---- block and NVMe --------------------------------------------------------------------------

void Analyzer::OnBlock(const iot_block& r) {
  have_block_ = true;
  if (r.phase < blk_phase_counts_.size()) ++blk_phase_counts_[r.phase];
  if (!TimeAllowed(r.ts)) {
    ++filtered_out_;
    return;
  }
  first_ts_ = std::min(first_ts_, r.ts);
  last_ts_ = std::max(last_ts_, r.ts);
  if (!last_block_stats_ || r.dev != last_block_dev_) {
    last_block_stats_ = &block_devs_[r.dev];
    last_block_dev_ = r.dev;
  }
  BlockDevStats& d = *last_block_stats_;
  const uint64_t key = BlockKey(r);
  switch (r.phase) {
    case IOT_BLK_QUEUE: {
      ++d.queued;
      if (d.last_queue_ts != 0 && r.ts >= d.last_queue_ts) d.q2q.Add(r.ts - d.last_queue_ts);
      d.last_queue_ts = r.ts;
      if (blk_queue_pending_.size() >= kMaxQueuedBios) {
        blk_queue_dropped_ += blk_queue_pending_.size();
        blk_queue_pending_.clear();
      }
      blk_queue_pending_.emplace(std::make_pair(r.dev, r.sector), r.ts);
      break;
    }
    case IOT_BLK_BACKMERGE:
    case IOT_BLK_FRONTMERGE:
    case IOT_BLK_RQ_MERGE: ++d.merges; break;
    case IOT_BLK_SPLIT: ++d.splits; break;
    case IOT_BLK_REQUEUE: ++d.requeues; break;
    case IOT_BLK_INSERT:
      if (blk_insert_pending_.size() < kMaxPending) blk_insert_pending_.FindOrInsert(key) = r.ts;
      break;
    case IOT_BLK_ISSUE: {
      ++d.issued;
      uint64_t bytes = r.bytes ? r.bytes : static_cast<uint64_t>(r.nr_sector) * 512;
      if (r.flags & (IOT_BLKF_FLUSH | IOT_BLKF_PREFLUSH)) ++d.flushes;  // each flushes the cache
      if (r.flags & (IOT_BLKF_DISCARD | IOT_BLKF_SECURE_ERASE | IOT_BLKF_WRITE_ZEROES)) ++d.discards;
      if (r.flags & IOT_BLKF_READAHEAD) ++d.readahead;
      if (r.flags & IOT_BLKF_SYNC) ++d.sync;
      if (r.flags & IOT_BLKF_FUA) ++d.fua;
      int dir = (r.flags & IOT_BLKF_READ) ? 0 : (r.flags & IOT_BLKF_WRITE) ? 1 : -1;
      if (dir >= 0 && bytes > 0) {
        ++d.ops[dir];
        d.bytes[dir] += bytes;
        d.sizes[dir].Add(bytes);
        d.top[dir].Add(bytes);
        block_size_ll_[dir].Add(bytes);
        int64_t gap = 0;
        const uint64_t at = SectorToByteSaturated(r.sector);
        Access a = ClassifyAccess(d.stream[dir], at, ClampedLength(at, bytes), &gap);
        ++d.access[dir][static_cast<int>(a)];
        if (a != Access::kFirst) d.seek.Add(gap);
        series_.AddOpAndBytes(kBlockReadOps + static_cast<size_t>(dir),
                              kBlockReadBytes + static_cast<size_t>(dir), r.ts, bytes);
      }
      if (uint64_t* ins = blk_insert_pending_.Find(key)) {
        if (r.ts >= *ins) i2d_.Add(r.ts - *ins);
        blk_insert_pending_.Erase(key);
      }
      auto q = blk_queue_pending_.find({r.dev, r.sector});
      if (q != blk_queue_pending_.end() && r.ts >= q->second) q2d_.Add(r.ts - q->second);
      if (blk_issue_pending_.size() < kMaxPending) blk_issue_pending_.FindOrInsert(key) = r.ts;
      break;
    }
    case IOT_BLK_COMPLETE: {
      ++d.completed;
      if (r.error != 0) ++d.errors;
      if (uint64_t* is = blk_issue_pending_.Find(key)) {
        if (r.ts >= *is) d2c_.Add(r.ts - *is);
        blk_issue_pending_.Erase(key);
      }
      // Q2C for the bio that started the request; forget the bios merged into it: those queued
      // at its sectors [sector, last]. `last` saturates (a flush completes at sector 2^64 - 1),
      // so the range is never reversed.
      auto lo = blk_queue_pending_.lower_bound({r.dev, r.sector});
      if (lo != blk_queue_pending_.end() && lo->first == std::make_pair(r.dev, r.sector) &&
          r.ts >= lo->second)
        q2c_.Add(r.ts - lo->second);
      const uint64_t last = LastOfRun(r.sector, r.nr_sector);
      auto hi = blk_queue_pending_.upper_bound({r.dev, last});
      blk_queue_pending_.erase(lo, hi);
      break;
    }
    default: break;
  }
}

void Analyzer::OnNvme(const iot_nvme& r) {
  have_nvme_ = true;
  if (!TimeAllowed(r.ts)) {
    ++filtered_out_;
    return;
  }
  uint64_t key = (static_cast<uint64_t>(r.ctrl_id) << 32) | (static_cast<uint64_t>(r.qid) << 16) |
                 r.cid;
  if (r.phase == IOT_NVME_SETUP) {
    ++nvme_cmds_;
    if (r.nlb && r.lba_size) {
      nvme_bytes_ = SaturatingAdd(nvme_bytes_, static_cast<uint64_t>(r.nlb) * r.lba_size);
    }
    if (nvme_pending_.size() < kMaxPending) nvme_pending_.FindOrInsert(key) = r.ts;
  } else if (r.phase == IOT_NVME_COMPLETE) {
    if (r.status != 0) ++nvme_errors_;
    if (uint64_t* s = nvme_pending_.Find(key)) {
      if (r.ts >= *s) nvme_latency_.Add(r.ts - *s);
      nvme_pending_.Erase(key);
    }
  }
}

// ---- async I/O -------------------------------------------------------------------------------

void Analyzer::OnAsync(const iot_async_io& r) {
  ensure_start(r.ts);
  const uint64_t key = r.req_id ^ MixBits(r.ctx);
  if (r.phase == IOT_AIO_SUBMIT) {
    if (async_pending_.size() >= kMaxPending) return;
    AsyncPending& p = async_pending_.FindOrInsert(key);
    p.ts = r.ts;
    p.offset = r.offset;
    p.length_known = AsyncLengthKnown(r);
    p.length = p.length_known ? r.length : 0;
    p.ctx = r.ctx;
    p.tgid = r.tgid;
    p.tid = r.tid;
    p.engine = r.engine;
    p.opcode = r.opcode;
    DescriptionNote* note = nullptr;
    // io_uring's IOSQE_FIXED_FILE (1): fd indexes the ring's registered files, no descriptor.
    const bool fixed_file = r.engine == IOT_AIO_ENGINE_URING && (r.flags & 1);
    const model::OpenFileDescription* d =
        fixed_file ? nullptr : FdDescription(r.tgid, r.fd, &note);
    p.file = d ? note->file : -1;
    p.direct = d && d->direct;
    // Access pattern at submission, where the application chose the offset.
    int dir = AsyncDirection(r.engine, r.opcode);
    if (dir >= 0 && p.file >= 0 && IsStorageFile(p.file) && TimeAllowed(r.ts) &&
        TaskAllowed(r.tgid, r.tid) && FileAllowed(p.file)) {
      ThreadStats& t = Thread(r.tgid, r.tid, r.ts);
      if (StreamState* st = Stream(t, p.file, dir, true)) {
        int64_t gap = 0;
        Access a = ClassifyAccess(*st, r.offset, ClampedLength(r.offset, p.length), &gap);
        ++access_[dir][static_cast<int>(a)];
        ++files_[static_cast<size_t>(p.file)].access[dir][static_cast<int>(a)];
        if (a != Access::kFirst) seek_[dir].Add(gap);
      }
    }
    return;
  }
  if (r.phase != IOT_AIO_COMPLETE) return;
  AsyncPending p;
  bool paired = false;
  if (AsyncPending* found = async_pending_.Find(key); found && found->ctx == r.ctx) {
    p = *found;
    paired = true;
    async_pending_.Erase(key);
  } else {
    ++async_unpaired_;
    p.ts = r.ts;
    p.offset = r.offset;
    p.length = r.length;
    p.tgid = r.tgid;
    p.tid = r.tid;
    p.engine = r.engine;
    p.opcode = r.opcode;
  }
  if (!TimeAllowed(p.ts) || !TaskAllowed(p.tgid, p.tid)) {
    ++filtered_out_;
    return;
  }
  if (!FileAllowed(p.file)) {
    ++filtered_out_;
    NoteScopedOut(p.file, &scoped_out_async_, &scoped_out_async_bytes_,
                  r.res > 0 ? static_cast<uint64_t>(r.res) : 0);
    return;
  }
  first_ts_ = std::min(first_ts_, p.ts);
  last_ts_ = std::max(last_ts_, r.ts);
  AsyncStats& s = async_stats_[(static_cast<uint32_t>(p.engine) << 8) | p.opcode];
  s.engine = p.engine;
  s.opcode = p.opcode;
  ++s.count;
  uint64_t bytes = r.res > 0 ? static_cast<uint64_t>(r.res) : 0;
  if (!p.length_known) p.length = bytes;
  if (r.res < 0) ++s.errors;
  s.bytes = SaturatingAdd(s.bytes, bytes);
  s.requested = SaturatingAdd(s.requested, p.length);
  s.sizes.Add(p.length);
  s.top.Add(p.length);
  if (paired && r.ts >= p.ts) s.latency.Add(r.ts - p.ts);
  int dir = AsyncDirection(p.engine, p.opcode);
  if (dir >= 0 && r.res >= 0 && !IsStorageFile(p.file)) {
    NonStorageOp(files_[static_cast<size_t>(p.file)], dir, bytes, p.length, true);
  } else if (dir >= 0 && r.res >= 0) {
    ++async_dir_ops_[dir];
    async_dir_bytes_[dir] = SaturatingAdd(async_dir_bytes_[dir], bytes);
    if (p.direct) direct_bytes_ = SaturatingAdd(direct_bytes_, bytes);
    series_.AddOpAndBytes(kAppReadOps + static_cast<size_t>(dir),
                          kAppReadBytes + static_cast<size_t>(dir), r.ts, bytes);
    data_first_ts_ = std::min(data_first_ts_, r.ts);
    data_last_ts_ = std::max(data_last_ts_, r.ts);
    if (p.file >= 0) {
      FileStats& f = files_[static_cast<size_t>(p.file)];
      ++f.async_ops[dir];
      f.async_bytes[dir] = SaturatingAdd(f.async_bytes[dir], bytes);
      f.max_end = std::max(f.max_end, SaturatingAdd(p.offset, std::max(p.length, bytes)));
      if (!heatmaps_.empty()) Heat(p.file, p.ts, p.offset, bytes, dir);
    }
  }
}

// ---- intents, losses, scheduling -----------------------------------------------------------

void Analyzer::OnIntent(const iot_intent& r) {
  if (!TimeAllowed(r.ts) || !TaskAllowed(r.tgid, r.tid)) {
    ++filtered_out_;
    return;
  }
  switch (r.kind) {
    case IOT_INTENT_INSTANT: ++labels_[r.label_id].instants; break;
    case IOT_INTENT_BEGIN: intent_stacks_[r.tid].emplace_back(r.label_id, r.ts); break;
    case IOT_INTENT_END: {
      auto& stack = intent_stacks_[r.tid];
      for (size_t i = stack.size(); i-- > 0;) {
        if (stack[i].first != r.label_id) continue;
        uint64_t dur = r.ts >= stack[i].second ? r.ts - stack[i].second : 0;
        LabelStats& l = labels_[r.label_id];
        ++l.count;
        l.total_ns = SaturatingAdd(l.total_ns, dur);
        l.max_ns = std::max(l.max_ns, dur);
        stack.erase(stack.begin() + static_cast<long>(i), stack.end());
        return;
      }
      ++intents_unmatched_;
      break;
    }
    default: break;
  }
}

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
