// Analyzer::Model(): the aggregated state as the JSON report model that the text, JSON and HTML
// outputs share (docs/report.md lists its fields).
#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "analysis/analyzer.h"
#include "base/checked_math.h"
#include "base/json_fields.h"
#include "format/records.h"

namespace iotwin::analysis {
namespace {

using nlohmann::json;

double Share(uint64_t part, uint64_t whole) {
  return whole ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// Rounded to 4 decimals so golden outputs do not depend on the last bits of a division.
double Round4(double v) { return std::round(v * 1e4) / 1e4; }

json LatencyJson(const LogLinearHistogram& h) {
  return {{"count", h.total()},          {"mean", std::llround(h.mean())},
          {"p50", h.Percentile(50)},     {"p90", h.Percentile(90)},
          {"p99", h.Percentile(99)},     {"max", h.max()},
          {"min", h.min()}};
}

std::string Comm(const std::array<char, 16>& c) {
  return std::string(c.data(), strnlen(c.data(), c.size()));
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

// Size table of one stream of requests: histogram, exact top sizes, dominant size.
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

}  // namespace

json Analyzer::FileJson(const FileStats& f) const {
  json names = json::array();
  for (uint32_t i = 0; i < f.nnames; i++) {
    auto it = strings_.find(f.names[i]);
    names.push_back(it != strings_.end() ? it->second : fmt::format("<string {}>", f.names[i]));
  }
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
                      {"pattern", AccessJson(f.access[0])}}},
            {"write", {{"ops", f.data_ops[1]}, {"bytes", f.bytes[1]}, {"requested", f.requested[1]},
                       {"async_ops", f.async_ops[1]}, {"async_bytes", f.async_bytes[1]},
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
  // Hit ratio of buffered reads: pages read (syscalls + faults) that did not have to be added
  // to the page cache. Only for files that were not written (writes add pages too).
  uint64_t accessed = f.read_pages + f.fault_pages;
  if (have_page_cache_ && accessed > 0 && f.data_ops[1] == 0 && f.wb_dirtied == 0) {
    j["hit_ratio"] = Round4(1.0 - std::min(1.0, Share(f.pc_add, accessed)));
  }
  return j;
}

json Analyzer::Model(const std::optional<json>& summary, const json& trace_facts) const {
  json m = json::object();
  m["model_version"] = 1;
  m["trace"] = trace_facts;
  const size_t top = options_.top;
  auto limited = [top](size_t n) { return top == 0 ? n : std::min(n, top); };

  // ---- capture facts
  json cap = json::object();
  auto copy = [&](const json& src, const char* key, json& dst) {
    if (src.is_object() && src.contains(key)) dst[key] = src[key];
  };
  copy(meta_, "tool", cap);
  copy(meta_, "host", cap);
  copy(meta_, "command", cap);
  copy(meta_, "layers", cap);
  copy(meta_, "replay", cap);
  copy(meta_, "source", cap);
  uint64_t span = last_ts_ > start_ && first_ts_ != UINT64_MAX ? last_ts_ - start_ : 0;
  cap["duration_ns"] = span;
  if (summary) {
    copy(*summary, "stop_reason", cap);
    copy(*summary, "exit_status", cap);
    copy(*summary, "events", cap);
    cap["duration_ns"] = json_fields::GetUint(*summary, "duration_ns", span);
  }
  cap["complete"] = summary.has_value();
  // Losses: the footer's totals, else the LOST records' cumulative counts.
  json lost = json::object();
  if (const json* footer_lost = summary ? json_fields::Object(*summary, "lost") : nullptr) {
    lost = *footer_lost;
  } else {
    std::map<std::string, uint64_t> by_source;
    for (const auto& [k, v] : lost_) by_source[std::string(SourceName(k.first))] += v;
    for (const auto& [k, v] : by_source) lost[k] = v;
  }
  cap["lost"] = lost;
  m["capture"] = cap;
  m["filter"] = options_.filter.empty() ? json(nullptr) : options_.filter.ToJson();

  // ---- totals
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
  uint64_t app_ops[2] = {dir_ops[0] + async_dir_ops_[0], dir_ops[1] + async_dir_ops_[1]};
  uint64_t app_bytes[2] = {dir_bytes[0] + async_dir_bytes_[0], dir_bytes[1] + async_dir_bytes_[1]};
  double span_s = static_cast<double>(span) / 1e9;
  auto rate = [span_s](uint64_t v) { return span_s > 0 ? static_cast<double>(v) / span_s : 0.0; };
  m["totals"] = {
      {"records", records_},
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
      {"read", {{"ops", app_ops[0]}, {"bytes", app_bytes[0]}, {"syscall_ops", dir_ops[0]},
                {"syscall_bytes", dir_bytes[0]}, {"requested", dir_requested[0]},
                {"async_ops", async_dir_ops_[0]}, {"async_bytes", async_dir_bytes_[0]},
                {"iops", Round4(rate(app_ops[0]))}, {"bytes_per_s", Round4(rate(app_bytes[0]))}}},
      {"write", {{"ops", app_ops[1]}, {"bytes", app_bytes[1]}, {"syscall_ops", dir_ops[1]},
                 {"syscall_bytes", dir_bytes[1]}, {"requested", dir_requested[1]},
                 {"async_ops", async_dir_ops_[1]}, {"async_bytes", async_dir_bytes_[1]},
                 {"iops", Round4(rate(app_ops[1]))}, {"bytes_per_s", Round4(rate(app_bytes[1]))}}},
      {"mix", {{"read_ops_share", Round4(Share(app_ops[0], app_ops[0] + app_ops[1]))},
               {"read_bytes_share", Round4(Share(app_bytes[0], app_bytes[0] + app_bytes[1]))}}},
      {"direct_ops", direct_ops_},
      {"direct_bytes", direct_bytes_},
      {"unattributed_ops", unattributed_ops_},
      {"files", files_.size()},
      {"threads", threads_.size()},
      {"processes", procs_.size()}};
  m["offsets"] = {{"explicit", offset_explicit_},
                  {"tracked", offset_tracked_},
                  {"recorded", offset_recorded_},
                  {"tracked_vs_recorded_mismatch", offset_mismatch_},
                  {"previous_instance", previous_instance_calls_}};

  // ---- per op
  std::vector<uint16_t> op_order;
  for (uint16_t op = 0; op <= IOT_OP_MAX; op++)
    if (ops_[op].count) op_order.push_back(op);
  std::stable_sort(op_order.begin(), op_order.end(),
                   [&](uint16_t a, uint16_t b) { return ops_[a].count > ops_[b].count; });
  json ops = json::array();
  json sizes = json::array();
  for (uint16_t op : op_order) {
    const OpStats& s = ops_[op];
    json o = {{"op", std::string(OpName(op))}, {"count", s.count}, {"errors", s.errors},
              {"bytes", s.bytes},              {"io_ns", s.io_ns}};
    if (s.latency) o["latency_ns"] = LatencyJson(*s.latency);
    ops.push_back(o);
    if (s.sizes && s.sizes->total()) {
      json z = SizesJson(*s.sizes, *s.top, 10);
      z["op"] = std::string(OpName(op));
      z["dir"] = OpIsRead(op) ? "read" : "write";
      sizes.push_back(z);
    }
  }
  m["ops"] = ops;
  m["sizes"] = sizes;

  // ---- access pattern
  m["pattern"] = json::object();
  for (int dir = 0; dir < 2; dir++) {
    json p = AccessJson(access_[dir]);
    p["seek_histogram"] = SeekJson(seek_[dir]);
    m["pattern"][dir == 0 ? "read" : "write"] = p;
  }
  m["pattern"]["streams_dropped"] = streams_dropped_;

  // ---- time series
  {
    json ts = {{"start_ns", start_}, {"bucket_ns", series_.width_ns()}};
    static const char* kNames[kSeriesCount] = {"read_ops",        "write_ops",       "read_bytes",
                                               "write_bytes",     "block_read_ops",  "block_write_ops",
                                               "block_read_bytes", "block_write_bytes", "major_faults"};
    for (size_t s = 0; s < kSeriesCount; s++) {
      if (s >= kBlockReadOps && s <= kBlockWriteBytes && !have_block_) continue;
      if (s == kMajorFaults && faults_major_ == 0) continue;
      ts[kNames[s]] = series_.Series(s);
    }
    m["timeseries"] = ts;
  }

  // ---- processes, threads, files
  {
    // A process's operations are its threads' (only system calls count them).
    struct ProcOps {
      const ProcStats* proc = nullptr;
      uint64_t ops = 0, io_ns = 0;
      std::array<uint64_t, 2> data_ops{}, bytes{};
    };
    std::vector<ProcOps> totals(procs_.size());
    for (size_t i = 0; i < procs_.size(); i++) totals[i].proc = &procs_[i];
    for (const ThreadStats& t : threads_) {
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
    for (size_t i = 0; i < limited(ps.size()); i++) {
      const ProcOps& o = *ps[i];
      const ProcStats& p = *o.proc;
      json r = {{"tgid", p.tgid},       {"comm", Comm(p.comm)},        {"threads", p.threads},
                {"ops", o.ops},         {"read_ops", o.data_ops[0]},   {"write_ops", o.data_ops[1]},
                {"read_bytes", o.bytes[0]}, {"write_bytes", o.bytes[1]}, {"io_ns", o.io_ns},
                {"faults", p.faults},   {"parent", p.parent}};
      if (p.exe_id) {
        auto it = strings_.find(p.exe_id);
        if (it != strings_.end()) r["exe"] = it->second;
      }
      if (p.exited) r["exit_code"] = p.exit_code;
      rows.push_back(r);
    }
    m["processes"] = {{"total", ps.size()}, {"rows", rows}};
  }
  {
    std::vector<const ThreadStats*> ts;
    for (const ThreadStats& t : threads_)
      if (t.ops || t.faults) ts.push_back(&t);
    std::stable_sort(ts.begin(), ts.end(), [](const ThreadStats* a, const ThreadStats* b) {
      uint64_t ba = a->bytes[0] + a->bytes[1], bb = b->bytes[0] + b->bytes[1];
      return ba != bb ? ba > bb : a->ops > b->ops;
    });
    json rows = json::array();
    for (size_t i = 0; i < limited(ts.size()); i++) {
      const ThreadStats& t = *ts[i];
      json r = {{"tid", t.tid},           {"tgid", t.tgid},
                {"comm", Comm(t.comm)},   {"ops", t.ops},
                {"read_ops", t.data_ops[0]}, {"write_ops", t.data_ops[1]},
                {"read_bytes", t.bytes[0]},  {"write_bytes", t.bytes[1]},
                {"io_ns", t.io_ns},       {"faults", t.faults},
                {"first_op_ns", t.first_op_ts > start_ ? t.first_op_ts - start_ : 0}};
      if (t.offcpu_ns) r["offcpu_ns"] = t.offcpu_ns;
      rows.push_back(r);
    }
    m["threads"] = {{"total", ts.size()}, {"rows", rows}};
  }
  {
    std::vector<const FileStats*> fs;
    for (const FileStats& f : files_)
      if (f.ops || f.faults || f.async_ops[0] || f.async_ops[1] || f.pc_add || f.wb_written ||
          f.wb_dirtied)
        fs.push_back(&f);
    auto volume = [](const FileStats* f) {
      uint64_t v = SaturatingMul(f->fault_pages, 4096);
      for (uint64_t b : {f->bytes[0], f->bytes[1], f->async_bytes[0], f->async_bytes[1]}) {
        v = SaturatingAdd(v, b);
      }
      return v;
    };
    std::stable_sort(fs.begin(), fs.end(), [&](const FileStats* a, const FileStats* b) {
      uint64_t va = volume(a), vb = volume(b);
      return va != vb ? va > vb : a->ops > b->ops;
    });
    json rows = json::array();
    for (size_t i = 0; i < limited(fs.size()); i++) rows.push_back(FileJson(*fs[i]));
    m["files"] = {{"total", fs.size()}, {"rows", rows}};
  }

  // ---- memory layer
  if (faults_ || have_page_cache_ || wb_dirtied_ || wb_written_ || cache_state_files_) {
    json mem = {{"faults", {{"total", faults_}, {"major", faults_major_},
                            {"minor", faults_ - faults_major_}, {"write", faults_write_},
                            {"pages", fault_pages_}, {"unattributed", faults_unattributed_}}},
                {"page_cache", {{"added_pages", pc_add_}, {"deleted_pages", pc_delete_},
                                {"readahead_windows", ra_windows_}, {"readahead_pages", ra_pages_}}},
                {"writeback", {{"dirtied_pages", wb_dirtied_}, {"written_pages", wb_written_},
                               {"flusher_works", wb_works_}, {"waits", wb_waits_}}},
                {"page_size", page_size_}};
    if (faults_) mem["fault_hit_ratio"] = Round4(Share(faults_ - faults_major_, faults_));
    // Buffered-read hit ratio over files that were only read (see FileJson).
    uint64_t accessed = 0, added = 0;
    for (const FileStats& f : files_) {
      if (f.data_ops[1] || f.wb_dirtied) continue;
      accessed += f.read_pages + f.fault_pages;
      added += f.pc_add;
    }
    if (have_page_cache_ && accessed)
      mem["read_hit_ratio"] = Round4(1.0 - std::min(1.0, Share(added, accessed)));
    if (cache_state_files_) {
      mem["cache_at_start"] = {{"files", cache_state_files_},
                               {"resident_pages", cache_state_resident_},
                               {"total_pages", cache_state_total_}};
    }
    m["memory"] = mem;
  } else {
    m["memory"] = nullptr;
  }

  // ---- block layer
  uint64_t blk_bytes[2] = {0, 0};
  if (have_block_) {
    json devs = json::array();
    SizeHistogram all_sizes[2];
    TopValues all_top[2];
    uint64_t requests = 0, blk_ops[2] = {0, 0};
    std::array<std::array<uint64_t, kAccessKinds>, 2> access{};
    for (const auto& [dev, d] : block_devs_) {
      requests += d.issued;
      json dj = {{"dev", dev},
                 {"name", fmt::format("{}:{}", dev >> 20, dev & 0xfffff)},
                 {"queued", d.queued},
                 {"requests", d.issued},
                 {"completed", d.completed},
                 {"merges", d.merges},
                 {"splits", d.splits},
                 {"requeues", d.requeues},
                 {"errors", d.errors},
                 {"flushes", d.flushes},
                 {"discards", d.discards},
                 {"readahead", d.readahead},
                 {"sync", d.sync},
                 {"fua", d.fua}};
      for (int dir = 0; dir < 2; dir++) {
        blk_bytes[dir] += d.bytes[dir];
        blk_ops[dir] += d.ops[dir];
        all_sizes[dir].Merge(d.sizes[dir]);
        all_top[dir].Merge(d.top[dir]);
        for (int a = 0; a < kAccessKinds; a++) access[dir][a] += d.access[dir][a];
        json z = SizesJson(d.sizes[dir], d.top[dir], 10);
        z["pattern"] = AccessJson(d.access[dir]);
        dj[dir == 0 ? "read" : "write"] = z;
      }
      dj["seek_histogram"] = SeekJson(d.seek);
      if (d.q2q.total()) dj["q2q_ns"] = LatencyJson(d.q2q);
      devs.push_back(dj);
    }
    json b = {{"requests", requests},
              {"devices", devs},
              {"read", SizesJson(all_sizes[0], all_top[0], 10)},
              {"write", SizesJson(all_sizes[1], all_top[1], 10)},
              {"mix", {{"read_ops_share", Round4(Share(blk_ops[0], blk_ops[0] + blk_ops[1]))},
                       {"read_bytes_share",
                        Round4(Share(blk_bytes[0], blk_bytes[0] + blk_bytes[1]))}}},
              {"queued_dropped", blk_queue_dropped_}};
    b["read"]["pattern"] = AccessJson(access[0]);
    b["write"]["pattern"] = AccessJson(access[1]);
    json lat = json::object();
    if (q2c_.total()) lat["Q2C"] = LatencyJson(q2c_);
    if (q2d_.total()) lat["Q2D"] = LatencyJson(q2d_);
    if (i2d_.total()) lat["I2D"] = LatencyJson(i2d_);
    if (d2c_.total()) lat["D2C"] = LatencyJson(d2c_);
    b["latency_ns"] = lat;
    json phases = json::object();
    for (uint16_t p = 1; p < blk_phase_counts_.size(); p++)
      if (blk_phase_counts_[p]) phases[std::string(BlockPhaseName(p))] = blk_phase_counts_[p];
    b["phases"] = phases;
    m["block"] = b;
  } else {
    m["block"] = nullptr;
  }

  if (have_nvme_) {
    m["nvme"] = {{"commands", nvme_cmds_}, {"bytes", nvme_bytes_}, {"errors", nvme_errors_},
                 {"latency_ns", LatencyJson(nvme_latency_)}};
  } else {
    m["nvme"] = nullptr;
  }

  // ---- amplification between layers
  if (have_block_ && (app_bytes[0] || app_bytes[1] || faults_)) {
    // Reads through mappings: read faults on file pages (write faults and anonymous memory are
    // not reads the device serves for the application).
    const uint64_t fault_read_bytes = SaturatingMul(fault_read_pages_, page_size_);
    json a = {{"app_read_bytes", app_bytes[0]},
              {"app_write_bytes", app_bytes[1]},
              {"fault_read_bytes", fault_read_bytes},
              {"block_read_bytes", blk_bytes[0]},
              {"block_write_bytes", blk_bytes[1]}};
    if (app_bytes[0]) a["read"] = Round4(Share(blk_bytes[0], app_bytes[0]));
    if (app_bytes[1]) a["write"] = Round4(Share(blk_bytes[1], app_bytes[1]));
    if (fault_read_bytes)
      a["read_incl_faults"] =
          Round4(Share(blk_bytes[0], SaturatingAdd(app_bytes[0], fault_read_bytes)));
    m["amplification"] = a;
  } else {
    m["amplification"] = nullptr;
  }

  // ---- async I/O
  if (!async_stats_.empty() || async_unpaired_) {
    json rows = json::array();
    uint64_t total = 0;
    for (const auto& [key, s] : async_stats_) {
      total += s.count;
      json r = SizesJson(s.sizes, s.top, 5);
      r["engine"] = s.engine == IOT_AIO_ENGINE_URING    ? "io_uring"
                    : s.engine == IOT_AIO_ENGINE_LIBAIO ? "libaio"
                                                        : "unknown";
      r["opcode"] = s.opcode;
      r["name"] = AsyncOpName(s.engine, s.opcode);
      r["count"] = s.count;
      r["errors"] = s.errors;
      r["bytes_done"] = s.bytes;
      r["latency_ns"] = LatencyJson(s.latency);
      rows.push_back(r);
    }
    m["async"] = {{"requests", total}, {"unpaired_completions", async_unpaired_}, {"rows", rows}};
  } else {
    m["async"] = nullptr;
  }

  // ---- intent markers
  if (!labels_.empty() || intents_unmatched_) {
    std::vector<std::pair<uint32_t, const LabelStats*>> ls;
    for (const auto& [id, l] : labels_) ls.emplace_back(id, &l);
    std::sort(ls.begin(), ls.end(), [](const auto& a, const auto& b) {
      return a.second->total_ns != b.second->total_ns ? a.second->total_ns > b.second->total_ns
                                                      : a.first < b.first;
    });
    std::map<uint32_t, uint64_t> open;
    for (const auto& [tid, stack] : intent_stacks_)
      for (const auto& e : stack) open[e.first]++;
    json rows = json::array();
    for (const auto& [id, l] : ls) {
      auto it = strings_.find(id);
      rows.push_back({{"label", it != strings_.end() ? it->second : fmt::format("<{}>", id)},
                      {"intervals", l->count},
                      {"instants", l->instants},
                      {"total_ns", l->total_ns},
                      {"mean_ns", l->count ? l->total_ns / l->count : 0},
                      {"max_ns", l->max_ns},
                      {"open", open.count(id) ? open[id] : 0},
                      {"ops", l->ops},
                      {"bytes", l->bytes}});
    }
    m["intents"] = {{"rows", rows}, {"unmatched_ends", intents_unmatched_}};
  } else {
    m["intents"] = nullptr;
  }

  if (offcpu_intervals_ || irq_ns_) {
    m["sched"] = {{"offcpu_ns", offcpu_ns_}, {"offcpu_intervals", offcpu_intervals_},
                  {"irq_ns", irq_ns_}};
  }

  // ---- heat maps (second pass of an HTML report)
  if (!heatmaps_.empty()) {
    json hm = json::array();
    for (const Heatmap& h : heatmaps_) {
      const FileStats& f = files_[static_cast<size_t>(h.file)];
      json cells = json::array();
      for (int t = 0; t < Heatmap::kTimeBins; t++)
        for (int o = 0; o < Heatmap::kOffsetBins; o++) {
          uint64_t n = h.ops[static_cast<size_t>(t * Heatmap::kOffsetBins + o)];
          if (n)
            cells.push_back({t, o, n, h.bytes[static_cast<size_t>(t * Heatmap::kOffsetBins + o)]});
        }
      json points = json::array();
      for (const auto& p : h.points) points.push_back({p.ts, p.offset, p.length, p.dir});
      json names = json::array();
      for (uint32_t i = 0; i < f.nnames; i++) {
        auto it = strings_.find(f.names[i]);
        if (it != strings_.end()) names.push_back(it->second);
      }
      hm.push_back({{"dev", f.dev},
                    {"ino", f.ino},
                    {"names", names},
                    {"time_bins", Heatmap::kTimeBins},
                    {"offset_bins", Heatmap::kOffsetBins},
                    {"span_ns", options_.heatmap_span_ns},
                    {"max_offset", h.max_offset},
                    {"cells", cells},
                    {"points", points},
                    {"sample_every", h.sample_every}});
    }
    m["heatmaps"] = hm;
  }
  return m;
}

}  // namespace iotwin::analysis
