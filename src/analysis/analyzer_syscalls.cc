// Analyzer: system calls (the descriptor step, per-op and per-file statistics, access patterns
// and streams, heat maps) and their part of the report model (ops, sizes, pattern, offsets).
#include "analysis/analyzer.h"

#include <fcntl.h>
#include <linux/close_range.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "analysis/analyzer_internal.h"
#include "base/checked_math.h"
#include "format/op_info.h"
#include "model/op_fields.h"

namespace iotwin::analysis {
using namespace analyzer_detail;  // NOLINT(google-build-using-namespace): this class's own helpers

using nlohmann::json;

namespace {

// Ops that occurred, most frequent first.
std::vector<uint16_t> OpsByCount(const auto& ops) {
  std::vector<uint16_t> order;
  for (uint16_t op = 0; op <= IOT_OP_MAX; op++)
    if (ops[op].count) order.push_back(op);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint16_t a, uint16_t b) { return ops[a].count > ops[b].count; });
  return order;
}

json OpsJson(const auto& ops, const std::vector<uint16_t>& order) {
  json rows = json::array();
  for (uint16_t op : order) {
    const auto& s = ops[op];
    json o = {{"op", std::string(OpName(op))}, {"count", s.count}, {"errors", s.errors},
              {"bytes", s.bytes},              {"io_ns", s.io_ns}};
    if (s.latency) o["latency_ns"] = LatencyJson(*s.latency);
    rows.push_back(o);
  }
  return rows;
}

// Request sizes of the data ops among `order`.
json OpSizesJson(const auto& ops, const std::vector<uint16_t>& order) {
  json rows = json::array();
  for (uint16_t op : order) {
    const auto& s = ops[op];
    if (!s.sizes || !s.sizes->total()) continue;
    json z = SizesJson(*s.sizes, *s.top, 10);
    z["op"] = std::string(OpName(op));
    z["dir"] = OpIsRead(op) ? "read" : "write";
    rows.push_back(z);
  }
  return rows;
}

json PatternJson(const std::array<std::array<uint64_t, kAccessKinds>, 2>& access,
                 const std::array<SeekHistogram, 2>& seek, uint64_t streams_dropped) {
  json pattern = json::object();
  for (int dir = 0; dir < 2; dir++) {
    json p = AccessJson(access[dir]);
    p["seek_histogram"] = SeekJson(seek[dir]);
    pattern[dir == 0 ? "read" : "write"] = p;
  }
  pattern["streams_dropped"] = streams_dropped;
  return pattern;
}

}  // namespace

// ---- system calls ---------------------------------------------------------------------------

void Analyzer::TrackDataCall(const iot_syscall& r, uint16_t op, int dir, bool ok, uint64_t ret,
                             bool has_file, const model::SyscallEffect& e, CallTarget& c) {
  model::OpenFileDescription* d = fd_state_.Description(e.desc);
  // The description usually knows its file already: skip the file-table lookup.
  if (d && d->user != 0) {
    const int32_t known = static_cast<int32_t>(d->user - 1);
    const FileStats& f = files_[static_cast<size_t>(known)];
    if (!has_file || (f.ino == r.ino && f.dev == r.dev)) c.file = known;
  }
  if (c.file < 0 && has_file) c.file = FileIndex(r.dev, r.ino, true);
  if (c.file >= 0 && has_file) NoteFileType(c.file, r.ftype);
  if (d && d->user == 0 && c.file >= 0) d->user = static_cast<uint32_t>(c.file) + 1;
  if (!kOpClass.AtPosition(op, r.offset)) {
    ++offset_explicit_;
  } else if (d && e.pos_known) {
    c.offset = e.pos;
    ++offset_tracked_;
    // An O_APPEND write lands at the end of file, wherever the position was.
    const bool at_end = dir == 1 && d->append && ok && r.fsize >= ret;
    if (!at_end && r.offset != 0 && r.offset != e.pos) ++offset_mismatch_;
  } else {
    ++offset_recorded_;
  }
  c.direct = d && d->direct;
}

void Analyzer::NoteOpen(const iot_syscall& r, int32_t file, const model::SyscallEffect& e) {
  model::OpenFileDescription* d = fd_state_.Description(e.created);
  if (d && file >= 0) d->user = static_cast<uint32_t>(file) + 1;
  // O_TMPFILE names the directory the new, unnamed file lies in: not the file's name.
  if ((model::EffectiveOpenFlags(r) & O_TMPFILE) != O_TMPFILE) {
    // The name the interpreter resolved (cwd, dirfd, renamed directories followed).
    AddFileName(file, r.path_id, d ? std::string_view(d->path) : std::string_view());
  } else if (file >= 0) {
    files_[static_cast<size_t>(file)].tmpfile = true;
  }
}

std::optional<std::string_view> Analyzer::PathText(uint32_t path_id) const {
  if (path_id == 0) return std::nullopt;
  auto it = strings_.find(path_id);
  if (it == strings_.end()) return std::nullopt;
  return std::string_view(it->second);
}

Analyzer::CallTarget Analyzer::TrackDescriptors(const iot_syscall& r, uint16_t op, int dir,
                                                bool ok, uint64_t ret) {
  const bool has_file = r.ino != 0 && !(r.sflags & IOT_SCF_NO_FILE);
  CallTarget c;
  c.offset = r.offset;
  if (dir < 0 && has_file) {
    c.file = FileIndex(r.dev, r.ino, true);
    NoteFileType(c.file, r.ftype);
  }
  const bool opened = ok && kOpClass.opens[op];
  // The descriptor tables, positions and the hand-over rule are the interpreter's.
  // Most calls name no path: they skip the string-table lookup (a hot path).
  const model::SyscallEffect e =
      kOpClass.has_path[op]
          ? fd_state_.OnSyscall(r, PathText(r.path_id),
                                kOpClass.has_path2[op] ? PathText(r.path2_id) : std::nullopt)
          : fd_state_.OnSyscall(r);
  previous_instance_calls_ += e.previous_instances;
  if (dir >= 0) {
    TrackDataCall(r, op, dir, ok, ret, has_file, e, c);
  } else if (opened) {
    NoteOpen(r, c.file, e);
  } else if (kOpClass.names_file[op] && !EmptyPath(r.path_id)) {
    // An empty path (fstat is newfstatat(fd, "", AT_EMPTY_PATH)) names the descriptor's file,
    // by the name it already has: no name of its own.
    AddFileName(c.file, r.path_id, ResolvedName(r));
  } else if (kOpClass.links[op] && ok) {
    NameLinkedDescriptor(r);
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
      if (kOpClass.maps_file[op]) ++f.maps;
    }
  }

  if (dir >= 0) {
    if (ok) DataOp(r, t, dir, offset, ret, file, target.direct);
  } else if (ok && kOpClass.copies[op]) {
    s.bytes = SaturatingAdd(s.bytes, ret);
  }

  if (options_.collect_sequences) {
    if (sequence_ops_ < options_.max_sequence_ops) {
      uint64_t fp_offset = dir >= 0 ? offset : kOpClass.address[op] ? 0 : r.offset;
      uint64_t whence = kOpClass.whence[op] ? r.aux : 0;
      t.seq.push_back(OpFingerprint(op, fp_offset, r.length, r.flags, whence));
      ++sequence_ops_;
    } else {
      sequences_truncated_ = true;
    }
  }

  if (dir >= 0 && ok && open_intents_ != 0) NotePhaseCall(r, dir, ret);
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
  const int32_t file = DescriptorFile(r.tgid, fd);
  if (file < 0) return;
  auto name = r.path2_id ? strings_.find(r.path2_id) : strings_.end();
  if (name == strings_.end()) return;
  const std::optional<std::string> resolved =
      fd_state_.Resolve(r.tgid, model::Path2DirFd(r), name->second);
  AddFileName(file, r.path2_id, resolved ? *resolved : std::string());
}

void Analyzer::SyscallModel(json& m) const {
  m["offsets"] = {{"explicit", offset_explicit_},
                  {"tracked", offset_tracked_},
                  {"recorded", offset_recorded_},
                  {"tracked_vs_recorded_mismatch", offset_mismatch_},
                  {"previous_instance", previous_instance_calls_}};
  const std::vector<uint16_t> op_order = OpsByCount(ops_);
  m["ops"] = OpsJson(ops_, op_order);
  m["sizes"] = OpSizesJson(ops_, op_order);
  m["pattern"] = PatternJson(access_, seek_, streams_dropped_);
}

}  // namespace iotwin::analysis
