// Analyzer::Model(): the aggregated state as the JSON report model that the text, JSON and HTML
// outputs share (docs/report.md lists its fields).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "analysis/analyzer.h"
#include "analysis/analyzer_internal.h"
#include "base/checked_math.h"
#include "base/json_fields.h"
#include "format/op_info.h"
#include "format/records.h"

namespace iotwin::analysis {

using nlohmann::json;

namespace analyzer_detail {

double Share(uint64_t part, uint64_t whole) {
  return whole ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

double Round4(double v) { return std::round(v * 1e4) / 1e4; }

json LatencyJson(const LogLinearHistogram& h) {
  return {{"count", h.total()},          {"mean", h.MeanRounded()},
          {"p50", h.Percentile(50)},     {"p90", h.Percentile(90)},
          {"p99", h.Percentile(99)},     {"max", h.max()},
          {"min", h.min()}};
}

json AccessJson(const std::array<uint64_t, kAccessKinds>& a) {
  uint64_t classified = a[1] + a[2] + a[3];
  return {{"first", a[0]},
          {"sequential", a[1]},
          {"strided", a[2]},
          {"random", a[3]},
          {"sequential_share", Round4(Share(a[1], classified))},
          {"strided_share", Round4(Share(a[2], classified))},
          {"random_share", Round4(Share(a[3], classified))}};
}

json SeekJson(const SeekHistogram& h) {
  json rows = json::array();
  for (int b = 0; b < SeekHistogram::kBuckets; b++) {
    if (!h.count(b)) continue;
    rows.push_back({{"from", SeekHistogram::BucketLow(b)}, {"count", h.count(b)}});
  }
  return rows;
}

json SizesJson(const SizeHistogram& h, const TopValues& top, size_t top_rows) {
  uint64_t ops = h.total(), bytes = 0;
  json hist = json::array();
  for (int b = 0; b < SizeHistogram::kBuckets; b++) {
    bytes += h.sum(b);
    if (!h.count(b)) continue;
    hist.push_back({{"le", SizeHistogram::BucketUpper(b)}, {"count", h.count(b)},
                    {"bytes", h.sum(b)}});
  }
  json tops = json::array();
  auto sorted = top.Sorted();
  for (size_t i = 0; i < sorted.size() && (top_rows == 0 || i < top_rows); i++) {
    const auto& e = sorted[i];
    tops.push_back({{"size", e.value},
                    {"count", e.count},
                    {"ops_share", Round4(Share(e.count, ops))},
                    {"bytes_share", Round4(Share(SaturatingMul(e.count, e.value), bytes))}});
  }
  json j = {{"ops", ops}, {"bytes", bytes}, {"exact", top.exact()}, {"histogram", hist},
            {"top", tops}};
  if (!tops.empty()) j["dominant"] = tops[0];
  return j;
}

}  // namespace analyzer_detail

using namespace analyzer_detail;  // NOLINT(google-build-using-namespace): this class's own helpers

namespace {

std::string Comm(const std::array<char, 16>& c) {
  return std::string(c.data(), strnlen(c.data(), c.size()));
}

using Strings = std::unordered_map<uint32_t, std::string>;
using LostCounts = std::map<std::pair<uint16_t, uint16_t>, uint64_t>;

// Up to `top` rows of `n` (0: all).
size_t Limited(size_t n, size_t top) { return top == 0 ? n : std::min(n, top); }

void CopyKey(const json& src, const char* key, json& dst) {
  if (src.is_object() && src.contains(key)) dst[key] = src[key];
}

// The header's host and tool facts, the footer's end of capture, and the losses: the footer's
// totals, else the LOST records' cumulative counts.
json CaptureJson(const json& meta, const std::optional<json>& summary, uint64_t span,
                 const LostCounts& lost_records) {
  json cap = json::object();
  // "scope": what `record --scope` left out of the trace (model/scope_filter.h).
  for (const char* key : {"tool", "host", "command", "layers", "replay", "source", "scope"})
    CopyKey(meta, key, cap);
  cap["duration_ns"] = span;
  if (summary) {
    CopyKey(*summary, "stop_reason", cap);
    CopyKey(*summary, "exit_status", cap);
    CopyKey(*summary, "events", cap);
    CopyKey(*summary, "scope_dropped", cap);
    CopyKey(*summary, "strings_over_budget", cap);  // names the writer could not keep in full
    // Page-cache removals of files the workload never touched (its drop_caches, its reclaim):
    // the capture left them out and counted their pages.
    const json* mem = json_fields::Object(*summary, "memory");
    const json* kernel = mem ? json_fields::Object(*mem, "kernel") : nullptr;
    if (kernel && json_fields::GetUint(*kernel, "untouched_removed_pages", 0) > 0) {
      cap["untouched_removed_pages"] = json_fields::GetUint(*kernel, "untouched_removed_pages", 0);
    }
    cap["duration_ns"] = json_fields::GetUint(*summary, "duration_ns", span);
  }
  cap["complete"] = summary.has_value();
  json lost = json::object();
  if (const json* footer_lost = summary ? json_fields::Object(*summary, "lost") : nullptr) {
    lost = *footer_lost;
  } else {
    std::map<std::string, uint64_t> by_source;
    for (const auto& [k, v] : lost_records) by_source[std::string(SourceName(k.first))] += v;
    for (const auto& [k, v] : by_source) lost[k] = v;
  }
  cap["lost"] = lost;
  return cap;
}

// The section builders below take Analyzer's private per-op, per-thread, per-file, ... tables
// as `auto` parameters: their types are private to Analyzer, their members are not.

// The series, without the block series of a trace without block records, without major
// faults when there were none and without the mapped series when there were no faults.
json TimeSeriesJson(const TimeSeries& series, uint64_t start, bool have_block,
                    bool have_major_faults, bool have_faults) {
  json ts = {{"start_ns", start}, {"bucket_ns", series.width_ns()}};
  static const char* kNames[Analyzer::kSeriesCount] = {
      "read_ops",         "write_ops",         "read_bytes",     "write_bytes",
      "block_read_ops",   "block_write_ops",   "block_read_bytes", "block_write_bytes",
      "major_faults",     "mmap_read_ops",     "mmap_write_ops", "mmap_read_bytes",
      "mmap_write_bytes"};
  for (size_t s = 0; s < Analyzer::kSeriesCount; s++) {
    if (s >= Analyzer::kBlockReadOps && s <= Analyzer::kBlockWriteBytes && !have_block) continue;
    if (s == Analyzer::kMajorFaults && !have_major_faults) continue;
    if (s >= Analyzer::kMmapReadOps && !have_faults) continue;
    ts[kNames[s]] = series.Series(s);
  }
  return ts;
}

// Processes by bytes moved, then operations; a process's operations are its threads' (only
// system calls count them).
json ProcessesJson(const auto& procs, const auto& threads, const Strings& strings, size_t top) {
  using Proc = std::remove_cvref_t<decltype(procs[0])>;
  struct ProcOps {
    const Proc* proc = nullptr;
    uint64_t ops = 0, io_ns = 0;
    std::array<uint64_t, 2> data_ops{}, bytes{};
  };
  std::vector<ProcOps> totals(procs.size());
  for (size_t i = 0; i < procs.size(); i++) totals[i].proc = &procs[i];
  for (const auto& t : threads) {
    ProcOps& o = totals[t.proc];
    o.ops += t.ops;
    o.io_ns += t.io_ns;
    for (size_t d = 0; d < 2; d++) {
      o.data_ops[d] += t.data_ops[d];
      o.bytes[d] += t.bytes[d];
    }
  }
  std::vector<const ProcOps*> ps;
  for (const ProcOps& o : totals)
    if (o.ops || o.proc->faults) ps.push_back(&o);
  std::stable_sort(ps.begin(), ps.end(), [](const ProcOps* a, const ProcOps* b) {
    uint64_t ba = a->bytes[0] + a->bytes[1], bb = b->bytes[0] + b->bytes[1];
    return ba != bb ? ba > bb : a->ops > b->ops;
  });
  json rows = json::array();
  for (size_t i = 0; i < Limited(ps.size(), top); i++) {
    const ProcOps& o = *ps[i];
    const Proc& p = *o.proc;
    json r = {{"tgid", p.tgid},       {"comm", Comm(p.comm)},        {"threads", p.threads},
              {"ops", o.ops},         {"read_ops", o.data_ops[0]},   {"write_ops", o.data_ops[1]},
              {"read_bytes", o.bytes[0]}, {"write_bytes", o.bytes[1]}, {"io_ns", o.io_ns},
              {"faults", p.faults},   {"parent", p.parent}};
    if (p.exe_id) {
      auto it = strings.find(p.exe_id);
      if (it != strings.end()) r["exe"] = it->second;
    }
    if (p.exited) r["exit_code"] = p.exit_code;
    rows.push_back(r);
  }
  return {{"total", ps.size()}, {"rows", rows}};
}

// Threads by bytes moved, then operations.
json ThreadsJson(const auto& threads, uint64_t start, size_t top) {
  using Thread = std::remove_cvref_t<decltype(threads[0])>;
  std::vector<const Thread*> ts;
  for (const Thread& t : threads)
    if (t.ops || t.faults) ts.push_back(&t);
  std::stable_sort(ts.begin(), ts.end(), [](const Thread* a, const Thread* b) {
    uint64_t ba = a->bytes[0] + a->bytes[1], bb = b->bytes[0] + b->bytes[1];
    return ba != bb ? ba > bb : a->ops > b->ops;
  });
  json rows = json::array();
  for (size_t i = 0; i < Limited(ts.size(), top); i++) {
    const Thread& t = *ts[i];
    json r = {{"tid", t.tid},           {"tgid", t.tgid},
              {"comm", Comm(t.comm)},   {"ops", t.ops},
              {"read_ops", t.data_ops[0]}, {"write_ops", t.data_ops[1]},
              {"read_bytes", t.bytes[0]},  {"write_bytes", t.bytes[1]},
              {"io_ns", t.io_ns},       {"faults", t.faults},
              {"first_op_ns", t.first_op_ts > start ? t.first_op_ts - start : 0}};
    if (t.offcpu_ns) r["offcpu_ns"] = t.offcpu_ns;
    rows.push_back(r);
  }
  return {{"total", ts.size()}, {"rows", rows}};
}

// Storage files with any activity by volume (bytes of system calls, async requests and
// mappings), then operations; `file_json` renders one.
json FilesJson(const auto& files, size_t top, uint64_t page_size, const auto& file_json) {
  using File = std::remove_cvref_t<decltype(files[0])>;
  std::vector<const File*> fs;
  for (const File& f : files)
    if (model::IsStorage(f.kind) && (f.ops || f.faults || f.async_ops[0] || f.async_ops[1] ||
                                     f.pc_add || f.wb_written || f.wb_dirtied))
      fs.push_back(&f);
  auto volume = [page_size](const File* f) {
    uint64_t v = SaturatingMul(SaturatingAdd(f->mmap_read_pages, f->mmap_write_pages), page_size);
    for (uint64_t b : {f->bytes[0], f->bytes[1], f->async_bytes[0], f->async_bytes[1]}) {
      v = SaturatingAdd(v, b);
    }
    return v;
  };
  std::stable_sort(fs.begin(), fs.end(), [&](const File* a, const File* b) {
    uint64_t va = volume(a), vb = volume(b);
    return va != vb ? va > vb : a->ops > b->ops;
  });
  json rows = json::array();
  for (size_t i = 0; i < Limited(fs.size(), top); i++) rows.push_back(file_json(*fs[i]));
  return {{"total", fs.size()}, {"rows", rows}};
}

// Bytes the block layer moved per byte the program read or wrote: by calls (system calls and
// async requests, `app_*`) and through mappings (`fault_*`).
json AmplificationJson(const std::array<uint64_t, 2>& app_bytes,
                       const std::array<uint64_t, 2>& blk_bytes,
                       const std::array<uint64_t, 2>& fault_bytes) {
  json a = {{"app_read_bytes", app_bytes[0]},
            {"app_write_bytes", app_bytes[1]},
            {"fault_read_bytes", fault_bytes[0]},
            {"fault_write_bytes", fault_bytes[1]},
            {"block_read_bytes", blk_bytes[0]},
            {"block_write_bytes", blk_bytes[1]}};
  const uint64_t read = SaturatingAdd(app_bytes[0], fault_bytes[0]);
  const uint64_t written = SaturatingAdd(app_bytes[1], fault_bytes[1]);
  if (read) a["read"] = Round4(Share(blk_bytes[0], read));
  if (written) a["write"] = Round4(Share(blk_bytes[1], written));
  return a;
}

json HeatmapJson(const auto& h, const auto& file, const auto& name_text, uint64_t span_ns) {
  using Heatmap = std::remove_cvref_t<decltype(h)>;
  json cells = json::array();
  for (int t = 0; t < Heatmap::kTimeBins; t++)
    for (int o = 0; o < Heatmap::kOffsetBins; o++) {
      uint64_t n = h.ops[static_cast<size_t>(t * Heatmap::kOffsetBins + o)];
      if (n) cells.push_back({t, o, n, h.bytes[static_cast<size_t>(t * Heatmap::kOffsetBins + o)]});
    }
  json points = json::array();
  for (const auto& p : h.points) points.push_back({p.ts, p.offset, p.length, p.dir});
  json names = json::array();
  for (uint32_t i = 0; i < file.nnames; i++) names.push_back(name_text(file.names[i]));
  return {{"dev", file.dev},
          {"ino", file.ino},
          {"names", names},
          {"time_bins", Heatmap::kTimeBins},
          {"offset_bins", Heatmap::kOffsetBins},
          {"span_ns", span_ns},
          {"max_offset", h.max_offset},
          {"cells", cells},
          {"points", points},
          {"sample_every", h.sample_every}};
}

}  // namespace

json Analyzer::FileJson(const FileStats& f) const {
  json names = json::array();
  for (uint32_t i = 0; i < f.nnames; i++) names.push_back(NameText(f.names[i]));
  json j = {{"dev", f.dev},
            {"ino", f.ino},
            {"names", names},
            {"more_names", f.more_names},
            {"opens", f.opens},
            {"ops", f.ops},
            {"io_ns", f.io_ns},
            {"maps", f.maps},
            {"size", f.fsize},
            {"max_end", f.max_end},
            {"read", {{"ops", f.data_ops[0]}, {"bytes", f.bytes[0]}, {"requested", f.requested[0]},
                      {"async_ops", f.async_ops[0]}, {"async_bytes", f.async_bytes[0]},
                      {"mmap_ops", f.read_faults},
                      {"mmap_bytes", SaturatingMul(f.mmap_read_pages, page_size_)},
                      {"exec_faults", f.exec_faults},
                      {"exec_bytes", SaturatingMul(f.exec_pages, page_size_)},
                      {"pattern", AccessJson(f.access[0])}}},
            {"write", {{"ops", f.data_ops[1]}, {"bytes", f.bytes[1]}, {"requested", f.requested[1]},
                       {"async_ops", f.async_ops[1]}, {"async_bytes", f.async_bytes[1]},
                       {"mmap_ops", f.shared_write_faults},
                       {"mmap_bytes", SaturatingMul(f.mmap_write_pages, page_size_)},
                       {"pattern", AccessJson(f.access[1])}}},
            {"direct_ops", f.direct_ops}};
  if (f.faults) {
    j["faults"] = {{"total", f.faults}, {"major", f.faults_major}, {"minor", f.faults - f.faults_major},
                   {"write", f.faults_write}, {"pages", f.fault_pages}};
  }
  if (f.pc_add || f.pc_delete || f.ra_windows) {
    j["page_cache"] = {{"added_pages", f.pc_add}, {"deleted_pages", f.pc_delete},
                       {"readahead_windows", f.ra_windows}, {"readahead_pages", f.ra_pages}};
  }
  if (f.wb_dirtied || f.wb_written) {
    j["writeback"] = {{"dirtied_pages", f.wb_dirtied}, {"written_pages", f.wb_written}};
  }
  if (f.cache_resident >= 0) {
    j["cache_at_start"] = {{"resident_pages", f.cache_resident}, {"total_pages", f.cache_total}};
  }
  // Hit ratio: pages read (by buffered calls and read faults) that did not miss the cache.
  const uint64_t accessed =
      SaturatingAdd(SaturatingAdd(f.read_pages, f.mmap_read_pages), f.exec_pages);
  const uint64_t missed = SaturatingAdd(f.missed_call_pages, f.missed_fault_pages);
  if (have_page_cache_ && accessed > 0) {
    j["missed_pages"] = missed;
    j["hit_ratio"] = Round4(1.0 - std::min(1.0, Share(missed, accessed)));
  }
  return j;
}

struct Analyzer::FileSums {
  std::array<uint64_t, 2> mmap_ops{}, mmap_pages{};  // storage files: read / write
  ReadPages read;
  std::array<uint64_t, model::kFileKinds> files_of_kind{};
};

Analyzer::FileSums Analyzer::SumFiles() const {
  FileSums s;
  for (const FileStats& f : files_) {
    if (f.ops || f.faults || f.async_ops[0] || f.async_ops[1])
      ++s.files_of_kind[static_cast<size_t>(f.kind)];
    if (!model::IsStorage(f.kind)) continue;
    s.mmap_ops[0] = SaturatingAdd(s.mmap_ops[0], f.read_faults);
    s.mmap_ops[1] = SaturatingAdd(s.mmap_ops[1], f.shared_write_faults);
    s.mmap_pages[0] = SaturatingAdd(s.mmap_pages[0], f.mmap_read_pages);
    s.mmap_pages[1] = SaturatingAdd(s.mmap_pages[1], f.mmap_write_pages);
    s.read.call = SaturatingAdd(s.read.call, f.read_pages);
    s.read.mapped = SaturatingAdd(s.read.mapped, f.mmap_read_pages);
    s.read.exec = SaturatingAdd(s.read.exec, f.exec_pages);
    s.read.missed_call = SaturatingAdd(s.read.missed_call, f.missed_call_pages);
    s.read.missed_fault = SaturatingAdd(s.read.missed_fault, f.missed_fault_pages);
  }
  s.read.untracked = pending_pages_.untracked();
  return s;
}

json Analyzer::TotalsJson(uint64_t span, const FileSums& sums) const {
  uint64_t syscalls = 0, errors = 0;
  for (const OpStats& s : ops_) {
    syscalls += s.count;
    errors += s.errors;
  }
  json records = json::object();
  for (int t = 0; t <= IOT_REC_MAX; t++)
    if (records_by_type_[t]) records[std::string(RecordTypeName(static_cast<uint16_t>(t)))] =
        records_by_type_[t];
  std::array<uint64_t, 2> dir_ops, dir_bytes, dir_requested;
  SyscallDirectionTotals(&dir_ops, &dir_bytes, &dir_requested);
  // Storage only: the calls on pipes, sockets, devices and pseudo files are reported apart.
  auto minus = [](uint64_t a, uint64_t b) { return a >= b ? a - b : 0; };
  for (const NonStorageStats& n : non_storage_) {
    for (size_t d = 0; d < 2; d++) {
      dir_ops[d] = minus(dir_ops[d], n.ops[d]);
      dir_bytes[d] = minus(dir_bytes[d], n.bytes[d]);
      dir_requested[d] = minus(dir_requested[d], n.requested[d]);
    }
  }
  std::array<uint64_t, 2> ops{}, bytes{}, mmap_bytes{};
  for (size_t d = 0; d < 2; d++) {
    mmap_bytes[d] = SaturatingMul(sums.mmap_pages[d], page_size_);
    ops[d] = SaturatingAdd(SaturatingAdd(dir_ops[d], async_dir_ops_[d]), sums.mmap_ops[d]);
    bytes[d] = SaturatingAdd(SaturatingAdd(dir_bytes[d], async_dir_bytes_[d]), mmap_bytes[d]);
  }
  const double span_s = static_cast<double>(span) / 1e9;
  auto rate = [span_s](uint64_t v) { return span_s > 0 ? static_cast<double>(v) / span_s : 0.0; };
  auto direction = [&](size_t d) {
    return json{{"ops", ops[d]},
                {"bytes", bytes[d]},
                {"syscall_ops", dir_ops[d]},
                {"syscall_bytes", dir_bytes[d]},
                {"requested", dir_requested[d]},
                {"async_ops", async_dir_ops_[d]},
                {"async_bytes", async_dir_bytes_[d]},
                {"mmap_ops", sums.mmap_ops[d]},
                {"mmap_bytes", mmap_bytes[d]},
                {"iops", Round4(rate(ops[d]))},
                {"bytes_per_s", Round4(rate(bytes[d]))}};
  };
  return {{"records", records_},
          {"records_by_type", records},
          {"filtered_out", filtered_out_},
          {"excluded_calls", excluded_calls_},
          {"start_ns", start_},
          {"first_ts_ns", first_ts_ == UINT64_MAX ? 0 : first_ts_},
          {"last_ts_ns", last_ts_},
          {"data_first_ts_ns", data_first_ts_ == UINT64_MAX ? 0 : data_first_ts_},
          {"data_last_ts_ns", data_last_ts_},
          {"span_ns", span},
          {"syscalls", syscalls},
          {"errors", errors},
          {"read", direction(0)},
          {"write", direction(1)},
          {"mix", {{"read_ops_share", Round4(Share(ops[0], ops[0] + ops[1]))},
                   {"read_bytes_share", Round4(Share(bytes[0], bytes[0] + bytes[1]))}}},
          {"direct_ops", direct_ops_},
          {"direct_bytes", direct_bytes_},
          {"unattributed_ops", unattributed_ops_},
          {"files", files_.size()},
          {"threads", threads_.size()},
          {"processes", procs_.size()}};
}

json Analyzer::NonStorageJson(const FileSums& sums) const {
  json kinds = json::object();
  for (int k = 1; k < model::kFileKinds; k++) {
    const NonStorageStats& n = non_storage_[static_cast<size_t>(k)];
    const uint64_t files = sums.files_of_kind[static_cast<size_t>(k)];
    if (!files) continue;
    json j = {{"files", files}};
    for (size_t d = 0; d < 2; d++) {
      const char* dir = d == 0 ? "read" : "write";
      j[fmt::format("{}_ops", dir)] = SaturatingAdd(n.ops[d], n.async_ops[d]);
      j[fmt::format("{}_bytes", dir)] = SaturatingAdd(n.bytes[d], n.async_bytes[d]);
    }
    kinds[std::string(model::FileKindKey(static_cast<model::FileKind>(k)))] = j;
  }
  return kinds;
}

json Analyzer::AmplificationModel(const FileSums& sums, const std::array<uint64_t, 2>& blk) const {
  std::array<uint64_t, 2> calls{}, mapped{};
  std::array<uint64_t, 2> dir_ops, dir_bytes, dir_requested;
  SyscallDirectionTotals(&dir_ops, &dir_bytes, &dir_requested);
  for (size_t d = 0; d < 2; d++) {
    uint64_t other = 0;
    for (const NonStorageStats& n : non_storage_) other = SaturatingAdd(other, n.bytes[d]);
    calls[d] = SaturatingAdd(dir_bytes[d] >= other ? dir_bytes[d] - other : 0, async_dir_bytes_[d]);
    mapped[d] = SaturatingMul(sums.mmap_pages[d], page_size_);
  }
  if (!calls[0] && !calls[1] && !faults_) return nullptr;
  return AmplificationJson(calls, blk, mapped);
}

json Analyzer::Model(const std::optional<json>& summary, const json& trace_facts) const {
  json m = json::object();
  m["model_version"] = 1;
  m["trace"] = trace_facts;
  const size_t top = options_.top;
  // Rates are over the window looked at: from the trace's start, or from --from when given.
  const uint64_t window_start = std::max(start_, from_ns_);
  const uint64_t span =
      last_ts_ > window_start && first_ts_ != UINT64_MAX ? last_ts_ - window_start : 0;
  m["capture"] = CaptureJson(meta_, summary, span, lost_);
  const json filter = options_.filter.ToJson();  // the scope has a key of its own
  m["filter"] = filter.empty() ? json(nullptr) : filter;
  if (!options_.filter.scope.IsAll()) {
    json scope = options_.filter.scope.ToJson();
    scope["left_out"] = {{"calls", scoped_out_calls_},
                         {"call_bytes", scoped_out_call_bytes_},
                         {"async", scoped_out_async_},
                         {"async_bytes", scoped_out_async_bytes_},
                         {"faults", scoped_out_faults_}};
    m["scope"] = std::move(scope);
  }

  const FileSums sums = SumFiles();
  m["totals"] = TotalsJson(span, sums);

  // ---- application layer
  SyscallModel(m);
  m["timeseries"] =
      TimeSeriesJson(series_, start_, have_block_, faults_major_ != 0, faults_ != 0);
  m["processes"] = ProcessesJson(procs_, threads_, strings_, top);
  m["threads"] = ThreadsJson(threads_, start_, top);
  m["files"] =
      FilesJson(files_, top, page_size_, [this](const FileStats& f) { return FileJson(f); });
  m["non_storage"] = NonStorageJson(sums);

  // ---- memory layer
  m["memory"] = MemoryModel(sums.read);

  // ---- block layer and NVMe
  std::array<uint64_t, 2> blk_bytes = {0, 0};
  m["block"] = BlockModel(&blk_bytes);
  m["nvme"] = NvmeModel();

  // ---- amplification between layers
  m["amplification"] = nullptr;
  if (have_block_) m["amplification"] = AmplificationModel(sums, blk_bytes);

  // ---- async I/O, intent markers, scheduling
  m["async"] = AsyncModel();
  m["intents"] = IntentsModel();
  if (offcpu_intervals_ || irq_ns_) {
    m["sched"] = {{"offcpu_ns", offcpu_ns_}, {"offcpu_intervals", offcpu_intervals_},
                  {"irq_ns", irq_ns_}};
  }

  // ---- heat maps (second pass of an HTML report)
  if (!heatmaps_.empty()) {
    json hm = json::array();
    for (const Heatmap& h : heatmaps_) {
      hm.push_back(HeatmapJson(h, files_[static_cast<size_t>(h.file)],
                               [this](uint32_t id) { return NameText(id); },
                               options_.heatmap_span_ns));
    }
    m["heatmaps"] = hm;
  }
  return m;
}

}  // namespace iotwin::analysis
