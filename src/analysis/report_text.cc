#include "analysis/report_text.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "base/bytes_text.h"
#include "base/checked_math.h"
#include "base/json_fields.h"

namespace iotwin::analysis {
namespace {

using nlohmann::json;

uint64_t U(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return 0;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  // Negative, fractional or huge numbers (a header's, say): clamped, never a cast out of range.
  const double d = it->get<double>();
  if (!(d > 0)) return 0;
  return d >= 18446744073709551615.0 ? UINT64_MAX : static_cast<uint64_t>(d);
}
double D(const json& j, const char* key) { return json_fields::GetDouble(j, key, 0.0); }
std::string S(const json& j, const char* key) { return json_fields::GetString(j, key); }
bool Has(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

class Out {
 public:
  template <typename... Args>
  void Line(fmt::format_string<Args...> f, Args&&... args) {
    std::string s = fmt::format(f, std::forward<Args>(args)...);
    while (!s.empty() && s.back() == ' ') s.pop_back();
    text_ += s;
    text_ += '\n';
  }
  void Section(const std::string& title) {
    if (!text_.empty()) text_ += '\n';
    text_ += title;
    text_ += '\n';
  }
  std::string Take() { return std::move(text_); }

 private:
  std::string text_;
};

std::string Bar(double share, int width) {
  int n = static_cast<int>(std::lround(std::clamp(share, 0.0, 1.0) * width));
  return std::string(static_cast<size_t>(n), '#');
}

// "128 KiB = 93.7% of ops, 98.1% of bytes" for a sizes block with a dominant entry.
std::string DominantLine(const json& z) {
  if (!Has(z, "dominant")) return "no requests";
  const json& d = z["dominant"];
  std::string s = fmt::format("{} = {} of ops, {} of bytes", FormatBytes(D(d, "size")),
                              FormatPercent(D(d, "ops_share")), FormatPercent(D(d, "bytes_share")));
  if (z.contains("exact") && !z["exact"].get<bool>()) s += " (approximate)";
  return s;
}

void SizeHistogramRows(Out& out, const json& z, const std::string& indent) {
  uint64_t ops = U(z, "ops"), bytes = U(z, "bytes");
  out.Line("{}{:>10} {:>12} {:>7} {:>7}  {}", indent, "size <=", "ops", "ops%", "bytes%", "");
  for (const json& row : z["histogram"]) {
    double os = ops ? static_cast<double>(U(row, "count")) / static_cast<double>(ops) : 0;
    double bs = bytes ? static_cast<double>(U(row, "bytes")) / static_cast<double>(bytes) : 0;
    out.Line("{}{:>10} {:>12} {:>7} {:>7}  {}", indent, FormatBytes(D(row, "le")),
             FormatCount(U(row, "count")), FormatPercent(os), FormatPercent(bs), Bar(os, 30));
  }
}

std::string TopSizes(const json& z, size_t n) {
  std::string s;
  size_t i = 0;
  for (const json& t : z["top"]) {
    if (i++ == n) break;
    if (!s.empty()) s += ", ";
    s += fmt::format("{} {}", FormatBytes(D(t, "size")), FormatPercent(D(t, "ops_share")));
  }
  return s;
}

std::string LatencyCells(const json& l) {
  return fmt::format("{:>9} {:>9} {:>9} {:>9}", FormatDuration(D(l, "p50")),
                     FormatDuration(D(l, "p90")), FormatDuration(D(l, "p99")),
                     FormatDuration(D(l, "max")));
}

std::string PatternCells(const json& p) {
  return fmt::format("{:>7} {:>7} {:>7}", FormatPercent(D(p, "sequential_share")),
                     FormatPercent(D(p, "strided_share")), FormatPercent(D(p, "random_share")));
}

std::string SeekLabel(int64_t from) {
  if (from == 0) return "0";
  double mag = std::fabs(static_cast<double>(from));
  return fmt::format("{}{}", from < 0 ? "-" : "+", FormatBytes(mag));
}

std::string FileName(const json& f) {
  if (f.contains("names") && !f["names"].empty()) {
    std::string n = f["names"][0].get<std::string>();
    if (f["names"].size() > 1 || U(f, "more_names"))
      n += fmt::format(" (+{})", f["names"].size() - 1 + U(f, "more_names"));
    return n;
  }
  return fmt::format("<dev {}:{} ino {}>", U(f, "dev") >> 20, U(f, "dev") & 0xfffff, U(f, "ino"));
}

void CaptureSection(Out& out, const json& m) {
  const json& c = m["capture"];
  const json& t = m["trace"];
  out.Section("CAPTURE");
  if (Has(t, "path"))
    out.Line("  trace      {}  ({}, format {})", Truncate(S(t, "path"), 64), FormatBytes(D(t, "size_bytes")),
             S(t, "format"));
  if (Has(c, "host")) {
    const json& h = c["host"];
    std::string host = S(h, "hostname");
    if (Has(h, "kernel")) host += "  linux " + S(h, "kernel");
    if (Has(h, "arch")) host += "  " + S(h, "arch");
    if (Has(h, "cpus")) host += fmt::format("  {} CPUs", U(h, "cpus"));
    if (Has(h, "page_size")) host += "  page " + FormatBytes(D(h, "page_size"));
    out.Line("  host       {}", host);
  }
  if (const json* command = json_fields::Array(c, "command")) {
    std::string cmd;
    for (const json& a : *command) {
      if (!cmd.empty()) cmd += ' ';
      cmd += a.is_string() ? a.get<std::string>() : a.dump();
    }
    out.Line("  command    {}", Truncate(cmd, 86));
  }
  std::string dur = FormatDuration(D(c, "duration_ns"));
  if (json_fields::GetBool(c, "complete", false)) {
    std::string stop = S(c, "stop_reason");
    if (Has(c, "exit_status")) stop += fmt::format(", exit status {}", c["exit_status"].dump());
    out.Line("  duration   {}  (complete{}{})", dur, stop.empty() ? "" : "; stop: ", stop);
  } else {
    out.Line("  duration   {}  (INCOMPLETE: the trace has no footer)", dur);
  }
  if (const json* layers = json_fields::Object(c, "layers")) {
    std::vector<std::string> parts;
    for (const auto& [name, l] : layers->items()) {
      bool on = json_fields::GetBool(l, "enabled", false);
      std::string reason = json_fields::GetString(l, "reason");
      parts.push_back(on ? name + " on" : name + " off" + (reason.empty() ? "" : " (" + reason + ")"));
    }
    std::string line;
    for (const std::string& p : parts) {
      if (!line.empty() && line.size() + p.size() + 2 > 86) {
        out.Line("  {:<10} {}", "layers", line);
        line.clear();
      }
      line += line.empty() ? p : ", " + p;
    }
    if (!line.empty()) out.Line("  {:<10} {}", "layers", line);
  }
  std::string lost;
  uint64_t lost_total = 0;
  if (const json* lost_by_source = json_fields::Object(c, "lost")) {
    for (const auto& [src, n] : lost_by_source->items()) {
      uint64_t v = json_fields::AsUint(n, 0);
      lost_total = SaturatingAdd(lost_total, v);
      if (v) lost += fmt::format("{}{} {}", lost.empty() ? "" : ", ", src, FormatCount(v));
    }
  }
  out.Line("  lost       {}", lost_total ? lost + "  (statistics undercount)" : "none");
  if (const json* names = json_fields::Object(c, "strings_over_budget")) {
    out.Line("  names      past the writer's string budget: {} stored as prefix + digest, {} "
             "given one shared name (their calls are skipped as unknown_path)",
             FormatCount(U(*names, "digested")), FormatCount(U(*names, "shared")));
  }
  if (json_fields::Object(c, "replay"))
    out.Line("  replay     of {}, pace {}",
             Truncate(json_fields::GetString(c, "replay/source"), 64),
             json_fields::GetString(c, "replay/pace"));
  if (const json* recorded = json_fields::Object(c, "scope")) {
    out.Line("  recorded   with scope {}", json_fields::GetString(*recorded, "description"));
    if (const json* d = json_fields::Object(c, "scope_dropped"))
      out.Line("             left out {} records ({} calls, {}, {} page faults)",
               FormatCount(U(*d, "records")), FormatCount(U(*d, "calls")),
               FormatBytes(static_cast<double>(U(*d, "bytes"))), FormatCount(U(*d, "faults")));
  }
  if (Has(m, "filter")) out.Line("  filter     {}", Truncate(m["filter"].dump(), 86));
  if (Has(m, "scope")) {
    const json& sc = m["scope"];
    out.Line("  scope      {}", S(sc, "description"));  // whole: it says what was left out
    const json& lo = sc["left_out"];
    out.Line("             left out {} calls ({}), {} async requests ({}), {} page faults",
             FormatCount(U(lo, "calls")), FormatBytes(static_cast<double>(U(lo, "call_bytes"))),
             FormatCount(U(lo, "async")), FormatBytes(static_cast<double>(U(lo, "async_bytes"))),
             FormatCount(U(lo, "faults")));
  }
  if (Has(t, "damage")) out.Line("  damage     {}", Truncate(S(t, "damage"), 86));
}

// How the storage bytes moved: by calls (system calls and async requests) or through mappings.
void ViaLines(Out& out, const json& totals) {
  const char* label = "via";
  for (const char* dir : {"read", "write"}) {
    const json& d = totals[dir];
    const uint64_t calls = U(d, "syscall_ops") + U(d, "async_ops"), faults = U(d, "mmap_ops");
    std::string line;
    if (calls)
      line = fmt::format("{} by {} {}", FormatBytes(D(d, "syscall_bytes") + D(d, "async_bytes")),
                         FormatCount(calls), calls == 1 ? "call" : "calls");
    if (faults)
      line += fmt::format("{}{} mapped ({} {})", line.empty() ? "" : ", ",
                          FormatBytes(D(d, "mmap_bytes")), FormatCount(faults),
                          faults == 1 ? "fault" : "faults");
    if (line.empty()) continue;
    out.Line("  {:<6} {:<6} {}", label, std::string(dir) + "s", line);
    label = "";
  }
}

// Pipes, sockets, devices and pseudo files: apart from the storage figures above.
void NonStorageLines(Out& out, const json& m) {
  const json* kinds = json_fields::Object(m, "non_storage");
  if (!kinds || kinds->empty()) return;
  std::vector<std::string> parts;
  for (const auto& [key, k] : kinds->items()) {
    if (!U(k, "read_ops") && !U(k, "write_ops")) continue;  // opened or closed, no data
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', ' ');
    parts.push_back(fmt::format("{} {} read, {} written ({} ops)", name,
                                FormatBytes(D(k, "read_bytes")), FormatBytes(D(k, "write_bytes")),
                                FormatCount(U(k, "read_ops") + U(k, "write_ops"))));
  }
  if (parts.empty()) return;
  std::string line;
  const char* label = "other";
  for (const std::string& p : parts) {
    if (!line.empty() && line.size() + p.size() + 2 > 88) {
      out.Line("  {:<6} {}", label, line);
      label = "";
      line.clear();
    }
    line += line.empty() ? p : "; " + p;
  }
  out.Line("  {:<6} {}", label, line);
  out.Line("  {:<6} (not storage: left out of the figures above and of FILES)", "");
}

void SummarySection(Out& out, const json& m) {
  const json& t = m["totals"];
  out.Section("SUMMARY");
  for (const char* dir : {"read", "write"}) {
    const json& d = t[dir];
    std::string async = U(d, "async_ops") ? fmt::format("  incl. {} async", FormatCount(U(d, "async_ops"))) : "";
    out.Line("  {:<6} {:>12} ops {:>11}  {:>10} IOPS {:>12}/s{}", std::string(dir) + "s",
             FormatCount(U(d, "ops")), FormatBytes(D(d, "bytes")),
             fmt::format("{:.1f}", D(d, "iops")), FormatBytes(D(d, "bytes_per_s")), async);
  }
  ViaLines(out, t);
  const json& mix = t["mix"];
  out.Line("  mix    reads are {} of ops, {} of bytes", FormatPercent(D(mix, "read_ops_share")),
           FormatPercent(D(mix, "read_bytes_share")));
  NonStorageLines(out, m);
  auto n = [](uint64_t v, const char* one, const char* many) {
    return FormatCount(v) + " " + (v == 1 ? one : many);
  };
  out.Line("  calls  {} ({} failed); {}, {}, {}", n(U(t, "syscalls"), "system call", "system calls"),
           FormatCount(U(t, "errors")), n(U(m["processes"], "total"), "process", "processes"),
           n(U(m["threads"], "total"), "thread", "threads"), n(U(m["files"], "total"), "file", "files"));
  if (U(t, "direct_ops")) out.Line("  O_DIRECT  {} data ops", FormatCount(U(t, "direct_ops")));
  if (U(t, "filtered_out"))
    out.Line("  filter left out {} records", FormatCount(U(t, "filtered_out")));
}

void OpsSection(Out& out, const json& m) {
  if (m["ops"].empty()) return;
  out.Section("OPERATIONS                                                  latency");
  out.Line("  {:<16} {:>11} {:>7} {:>11} {:>9} {:>9} {:>9} {:>9} {:>9}", "op", "count", "errors",
           "bytes", "time", "p50", "p90", "p99", "max");
  for (const json& o : m["ops"]) {
    out.Line("  {:<16} {:>11} {:>7} {:>11} {:>9} {}", S(o, "op"), FormatCount(U(o, "count")),
             FormatCount(U(o, "errors")), U(o, "bytes") ? FormatBytes(D(o, "bytes")) : "-",
             FormatDuration(D(o, "io_ns")), LatencyCells(o["latency_ns"]));
  }
}

void SizesSection(Out& out, const json& m) {
  if (m["sizes"].empty()) return;
  out.Section("REQUEST SIZES (dominant size per op)");
  for (const json& z : m["sizes"])
    out.Line("  {:<9} {}  ({} {})", S(z, "op") + ":", DominantLine(z), FormatCount(U(z, "ops")),
             U(z, "ops") == 1 ? "op" : "ops");
  for (const json& z : m["sizes"]) {
    out.Line("");
    out.Line("  {}  top: {}", S(z, "op"), TopSizes(z, 5));
    SizeHistogramRows(out, z, "  ");
  }
}

void PatternSection(Out& out, const json& m) {
  const json& p = m["pattern"];
  if (U(p["read"], "first") + U(p["write"], "first") == 0) return;
  out.Section("ACCESS PATTERN (per thread and file; first request of each stream not classified)");
  out.Line("  {:<6} {:>12} {:>12} {:>7} {:>7} {:>7}", "", "streams", "classified", "seq", "strided",
           "random");
  for (const char* dir : {"read", "write"}) {
    const json& d = p[dir];
    uint64_t classified = U(d, "sequential") + U(d, "strided") + U(d, "random");
    if (!U(d, "first")) continue;
    out.Line("  {:<6} {:>12} {:>12} {}", dir, FormatCount(U(d, "first")), FormatCount(classified),
             PatternCells(d));
  }
  for (const char* dir : {"read", "write"}) {
    const json& h = p[dir]["seek_histogram"];
    if (h.empty()) continue;
    uint64_t total = 0;
    for (const json& r : h) total += U(r, "count");
    out.Line("  {} seek distances (offset - previous end):", dir);
    std::string line;
    for (const json& r : h) {
      double share = static_cast<double>(U(r, "count")) / static_cast<double>(total);
      std::string cell = fmt::format("{} {}", SeekLabel(r["from"].get<int64_t>()),
                                     share < 0.001 ? "<0.1%" : FormatPercent(share));
      if (line.size() + cell.size() + 3 > 96) {
        out.Line("    {}", line);
        line.clear();
      }
      line += line.empty() ? cell : " | " + cell;
    }
    if (!line.empty()) out.Line("    {}", line);
  }
}

void TimeSection(Out& out, const json& m) {
  const json& ts = m["timeseries"];
  if (!ts.contains("read_ops")) return;
  size_t n = ts["read_ops"].size();
  if (n == 0) return;
  uint64_t width = U(ts, "bucket_ns");
  // At most 20 rows: merge neighbouring buckets.
  size_t per_row = (n + 19) / 20;
  double row_s = static_cast<double>(width) * static_cast<double>(per_row) / 1e9;
  out.Section(fmt::format("THROUGHPUT OVER TIME ({} per row)", FormatDuration(row_s * 1e9)));
  out.Line("  {:>9} {:>11} {:>12} {:>11} {:>12}  {}", "from s", "read IOPS", "read/s", "write IOPS",
           "write/s", "bytes/s");
  std::vector<double> rows[4];
  double peak = 0;
  // Calls and mapped I/O (faults) together, as in SUMMARY.
  const char* keys[4] = {"read_ops", "read_bytes", "write_ops", "write_bytes"};
  const char* mmap_keys[4] = {"mmap_read_ops", "mmap_read_bytes", "mmap_write_ops",
                              "mmap_write_bytes"};
  for (size_t r = 0; r * per_row < n; r++) {
    for (int k = 0; k < 4; k++) {
      uint64_t sum = 0;
      const json* mapped = json_fields::Array(ts, mmap_keys[k]);
      for (size_t b = r * per_row; b < std::min(n, (r + 1) * per_row); b++) {
        sum += json_fields::AsUint(ts[keys[k]][b], 0);
        if (mapped && b < mapped->size()) sum += json_fields::AsUint((*mapped)[b], 0);
      }
      rows[k].push_back(static_cast<double>(sum) / row_s);
    }
    peak = std::max(peak, rows[1].back() + rows[3].back());
  }
  for (size_t r = 0; r < rows[0].size(); r++) {
    out.Line("  {:>9.3f} {:>11.1f} {:>12} {:>11.1f} {:>12}  {}", static_cast<double>(r) * row_s,
             rows[0][r], FormatBytes(rows[1][r]), rows[2][r], FormatBytes(rows[3][r]),
             Bar(peak > 0 ? (rows[1][r] + rows[3][r]) / peak : 0, 30));
  }
}

void TaskSections(Out& out, const json& m) {
  const json& p = m["processes"];
  if (!p["rows"].empty()) {
    out.Section(fmt::format("PROCESSES ({} of {}, by bytes)", p["rows"].size(), U(p, "total")));
    out.Line("  {:>8} {:<16} {:>7} {:>11} {:>11} {:>11} {:>10} {:>8}", "tgid", "comm", "threads",
             "ops", "read", "written", "I/O time", "faults");
    for (const json& r : p["rows"])
      out.Line("  {:>8} {:<16} {:>7} {:>11} {:>11} {:>11} {:>10} {:>8}", U(r, "tgid"),
               S(r, "comm"), U(r, "threads"), FormatCount(U(r, "ops")),
               FormatBytes(D(r, "read_bytes")), FormatBytes(D(r, "write_bytes")),
               FormatDuration(D(r, "io_ns")), FormatCount(U(r, "faults")));
  }
  const json& t = m["threads"];
  if (!t["rows"].empty()) {
    out.Section(fmt::format("THREADS ({} of {}, by bytes)", t["rows"].size(), U(t, "total")));
    out.Line("  {:>8} {:>8} {:<16} {:>11} {:>11} {:>11} {:>10} {:>9}", "tid", "tgid", "comm",
             "ops", "read", "written", "I/O time", "first op");
    for (const json& r : t["rows"])
      out.Line("  {:>8} {:>8} {:<16} {:>11} {:>11} {:>11} {:>10} {:>9}", U(r, "tid"),
               U(r, "tgid"), S(r, "comm"), FormatCount(U(r, "ops")),
               FormatBytes(D(r, "read_bytes")), FormatBytes(D(r, "write_bytes")),
               FormatDuration(D(r, "io_ns")), FormatDuration(D(r, "first_op_ns")));
  }
}

void FilesSection(Out& out, const json& m) {
  const json& f = m["files"];
  if (f["rows"].empty()) return;
  out.Section(fmt::format(
      "FILES ({} of {} storage files, by bytes; via: by calls or mmap; seq% of reads/writes)",
      f["rows"].size(), U(f, "total")));
  out.Line("  {:<30} {:>8} {:>10} {:>5} {:>8} {:>10} {:>6} {:>6} {:>7}", "file", "reads", "read",
           "via", "writes", "written", "rseq%", "wseq%", "faults");
  for (const json& r : f["rows"]) {
    const json& rd = r["read"];
    const json& wr = r["write"];
    auto seq = [](const json& d) {
      const json& p = d["pattern"];
      return U(p, "sequential") + U(p, "strided") + U(p, "random")
                 ? fmt::format("{:.0f}%", D(p, "sequential_share") * 100)
                 : std::string("-");
    };
    // Calls and mapped bytes; "via" says which carried the file's bytes.
    auto via = [](const json& d) {
      const bool calls = D(d, "bytes") + D(d, "async_bytes") > 0, mapped = D(d, "mmap_bytes") > 0;
      return calls && mapped ? "both" : mapped ? "mmap" : calls ? "call" : "-";
    };
    std::string how = via(rd);
    if (how == "-") how = via(wr);
    else if (via(wr) != std::string("-") && via(wr) != how) how = "both";
    out.Line("  {:<30} {:>8} {:>10} {:>5} {:>8} {:>10} {:>6} {:>6} {:>7}",
             Truncate(FileName(r), 30), FormatCount(U(rd, "ops") + U(rd, "async_ops")),
             FormatBytes(D(rd, "bytes") + D(rd, "async_bytes") + D(rd, "mmap_bytes")), how,
             FormatCount(U(wr, "ops") + U(wr, "async_ops")),
             FormatBytes(D(wr, "bytes") + D(wr, "async_bytes") + D(wr, "mmap_bytes")), seq(rd),
             seq(wr), Has(r, "faults") ? FormatCount(U(r["faults"], "total")) : "-");
  }
}

void MemorySection(Out& out, const json& m) {
  if (!Has(m, "memory")) return;
  const json& mem = m["memory"];
  out.Section("MEMORY (mapped-file faults, page cache, write-back)");
  const json& f = mem["faults"];
  out.Line("  faults       {} ({} major, {} minor, {} write), {} pages mapped",
           FormatCount(U(f, "total")), FormatCount(U(f, "major")), FormatCount(U(f, "minor")),
           FormatCount(U(f, "write")), FormatCount(U(f, "pages")));
  if (Has(mem, "fault_hit_ratio"))
    out.Line("               {} of faults were minor (as the kernel counts them: ru_minflt)",
             FormatPercent(D(mem, "fault_hit_ratio")));
  const json& pc = mem["page_cache"];
  out.Line("  page cache   {} pages added, {} removed; readahead {} windows, {} pages",
           FormatCount(U(pc, "added_pages")), FormatCount(U(pc, "deleted_pages")),
           FormatCount(U(pc, "readahead_windows")), FormatCount(U(pc, "readahead_pages")));
  if (Has(m["capture"], "untouched_removed_pages"))
    out.Line("  left out     {} pages removed from files the workload never touched (its "
             "drop_caches, reclaim)",
             FormatCount(U(m["capture"], "untouched_removed_pages")));
  if (Has(mem, "read_hit_ratio")) {
    const json& mi = mem["misses"];
    out.Line("  hit ratio    {} of {} pages read were cached; missed: {} by calls, {} by faults",
             FormatPercent(D(mem, "read_hit_ratio")),
             FormatCount(U(mi, "read_pages") + U(mi, "mapped_pages") + U(mi, "exec_pages")),
             FormatCount(U(mi, "missed_call_pages")), FormatCount(U(mi, "missed_fault_pages")));
  }
  const json& wb = mem["writeback"];
  out.Line("  write-back   {} pages dirtied, {} written back, {} flusher runs, {} waits",
           FormatCount(U(wb, "dirtied_pages")), FormatCount(U(wb, "written_pages")),
           FormatCount(U(wb, "flusher_works")), FormatCount(U(wb, "waits")));
  if (Has(mem, "cache_at_start")) {
    const json& cs = mem["cache_at_start"];
    out.Line("  at start     {} files: {} of {} pages resident", FormatCount(U(cs, "files")),
             FormatCount(U(cs, "resident_pages")), FormatCount(U(cs, "total_pages")));
  }
  // Files with faults or page-cache traffic.
  bool header = false;
  for (const json& r : m["files"]["rows"]) {
    if (!Has(r, "faults") && !Has(r, "page_cache") && !Has(r, "writeback")) continue;
    if (!header) {
      out.Line("  {:<40} {:>8} {:>8} {:>9} {:>9} {:>9} {:>7}", "file", "major", "minor",
               "pc added", "ra pages", "wb pages", "hit");
      header = true;
    }
    const json& fa = r.contains("faults") ? r["faults"] : json::object();
    const json& p = r.contains("page_cache") ? r["page_cache"] : json::object();
    const json& w = r.contains("writeback") ? r["writeback"] : json::object();
    out.Line("  {:<40} {:>8} {:>8} {:>9} {:>9} {:>9} {:>7}", Truncate(FileName(r), 40),
             FormatCount(U(fa, "major")), FormatCount(U(fa, "minor")),
             FormatCount(U(p, "added_pages")), FormatCount(U(p, "readahead_pages")),
             FormatCount(U(w, "written_pages")),
             Has(r, "hit_ratio") ? FormatPercent(D(r, "hit_ratio")) : "-");
  }
}

// Requests in flight per device, time-weighted (iostat's aqu-sz), and requeues: a requeued
// request counts once among the requests above.
void QueueDepthLines(Out& out, const json& devices) {
  bool header = false;
  for (const json& d : devices) {
    if (!Has(d, "queue_depth")) continue;
    const json& q = d["queue_depth"];
    if (!header) {
      out.Line("  {:<10} {:>9} {:>5} {:>5} {:>13} {:>5} {:>9}", "in flight", "average", "p99",
               "max", "on device avg", "max", "requeues");
      header = true;
    }
    out.Line("  {:<10} {:>9.2f} {:>5} {:>5} {:>13.2f} {:>5} {:>9}", S(d, "name"), D(q, "average"),
             U(q, "p99"), U(q, "max"), D(q["device"], "average"), U(q["device"], "max"),
             FormatCount(U(d, "requeues")));
  }
}

void BlockSection(Out& out, const json& m) {
  if (!Has(m, "block")) return;
  const json& b = m["block"];
  out.Section("BLOCK LAYER (requests as issued to the driver, D)");
  // The shares are of reads and writes only: flushes and discards are requests too.
  out.Line("  requests     {}; reads are {} of reads and writes, {} of their bytes",
           FormatCount(U(b, "requests")), FormatPercent(D(b["mix"], "read_ops_share")),
           FormatPercent(D(b["mix"], "read_bytes_share")));
  for (const char* dir : {"read", "write"}) {
    const json& z = b[dir];
    if (!U(z, "ops")) continue;
    out.Line("  {:<6} {:>10} reqs {:>11}  {}", dir, FormatCount(U(z, "ops")),
             FormatBytes(D(z, "bytes")), DominantLine(z));
    out.Line("  {:<6} pattern seq {} strided {} random {}; top: {}", "",
             FormatPercent(D(z["pattern"], "sequential_share")),
             FormatPercent(D(z["pattern"], "strided_share")),
             FormatPercent(D(z["pattern"], "random_share")), TopSizes(z, 4));
  }
  if (!b["latency_ns"].empty()) {
    out.Line("  {:<6} {:>11} {:>9} {:>9} {:>9} {:>9}", "btt", "count", "p50", "p90", "p99", "max");
    for (const auto& [name, l] : b["latency_ns"].items())
      out.Line("  {:<6} {:>11} {}", name, FormatCount(U(l, "count")), LatencyCells(l));
  }
  out.Line("  {:<10} {:>9} {:>9} {:>11} {:>11} {:>7} {:>7} {:>7} {:>7}", "device", "requests",
           "queued", "read", "written", "merges", "splits", "flushes", "errors");
  for (const json& d : b["devices"])
    out.Line("  {:<10} {:>9} {:>9} {:>11} {:>11} {:>7} {:>7} {:>7} {:>7}", S(d, "name"),
             FormatCount(U(d, "requests")), FormatCount(U(d, "queued")),
             FormatBytes(D(d["read"], "bytes")), FormatBytes(D(d["write"], "bytes")),
             FormatCount(U(d, "merges")), FormatCount(U(d, "splits")),
             FormatCount(U(d, "flushes")), FormatCount(U(d, "errors")));
  QueueDepthLines(out, b["devices"]);
}

void AmplificationSection(Out& out, const json& m) {
  if (!Has(m, "amplification")) return;
  const json& a = m["amplification"];
  out.Section("AMPLIFICATION (block bytes / bytes the program moved by calls and mappings)");
  for (const char* dir : {"read", "write"}) {
    const std::string d = dir;
    if (!Has(a, dir)) continue;
    const double calls = D(a, ("app_" + d + "_bytes").c_str());
    const double mapped = D(a, ("fault_" + d + "_bytes").c_str());
    const std::string split = mapped > 0 ? fmt::format(" ({} by calls, {} mapped)",
                                                       FormatBytes(calls), FormatBytes(mapped))
                                         : std::string();
    const double block = D(a, ("block_" + d + "_bytes").c_str());
    out.Line("  {:<6} {} block / {}{} = {:.2f}x", dir, FormatBytes(block),
             FormatBytes(calls + mapped), split, D(a, dir));
  }
}

void AsyncSection(Out& out, const json& m) {
  if (!Has(m, "async")) return;
  const json& a = m["async"];
  out.Section(fmt::format("ASYNC I/O ({} requests, {} completions without submission)",
                          FormatCount(U(a, "requests")), FormatCount(U(a, "unpaired_completions"))));
  out.Line("  {:<18} {:>9} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9}", "engine op", "count", "errors",
           "bytes", "p50", "p90", "p99", "max");
  for (const json& r : a["rows"]) {
    out.Line("  {:<18} {:>9} {:>6} {:>10} {}", S(r, "engine") + " " + S(r, "name"),
             FormatCount(U(r, "count")), FormatCount(U(r, "errors")),
             FormatBytes(D(r, "bytes_done")), LatencyCells(r["latency_ns"]));
    out.Line("  {:<18} size {}", "", DominantLine(r));
  }
  // Queue depth per ring or context (the 8 with the most requests), time-weighted.
  if (!Has(a, "contexts") || a["contexts"].empty()) return;
  std::vector<const json*> rings;
  for (const json& c : a["contexts"]) rings.push_back(&c);
  std::stable_sort(rings.begin(), rings.end(), [](const json* x, const json* y) {
    return U(*x, "requests") > U(*y, "requests");
  });
  out.Line("  {:<26} {:>9} {:>9} {:>5} {:>5}", "ring / context in flight", "requests",
           "average", "p99", "max");
  for (size_t i = 0; i < rings.size() && i < 8; i++) {
    const json& c = *rings[i];
    out.Line("  {:<26} {:>9} {:>9.2f} {:>5} {:>5}", S(c, "engine") + " " + S(c, "ctx"),
             FormatCount(U(c, "requests")), D(c["queue_depth"], "average"),
             U(c["queue_depth"], "p99"), U(c["queue_depth"], "max"));
  }
}

void IntentSection(Out& out, const json& m) {
  if (!Has(m, "intents")) return;
  const json& in = m["intents"];
  out.Section("INTENT MARKERS (time between begin and end, I/O issued by the marking thread)");
  out.Line("  {:<28} {:>9} {:>10} {:>10} {:>10} {:>9} {:>10}", "label", "intervals", "total",
           "mean", "max", "ops", "bytes");
  for (const json& r : in["rows"]) {
    std::string label = Truncate(S(r, "label"), 28);
    if (U(r, "instants")) label = Truncate(label + fmt::format(" ({}x)", U(r, "instants")), 28);
    out.Line("  {:<28} {:>9} {:>10} {:>10} {:>10} {:>9} {:>10}", label,
             FormatCount(U(r, "intervals")), FormatDuration(D(r, "total_ns")),
             FormatDuration(D(r, "mean_ns")), FormatDuration(D(r, "max_ns")),
             FormatCount(U(r, "ops")), FormatBytes(D(r, "bytes")));
  }
  if (U(in, "unmatched_ends")) out.Line("  {} end markers without a begin", U(in, "unmatched_ends"));
}

// "p50/p99" of a phase's calls in one direction; "-" without any.
std::string PhaseLatency(const json& p, const char* dir, uint64_t calls) {
  if (!calls) return "-";
  return FormatDuration(D(p, fmt::format("{}_p50_ns", dir).c_str())) + "/" +
         FormatDuration(D(p, fmt::format("{}_p99_ns", dir).c_str()));
}

// One row per phase (docs/report.md, "Phases"); a nested phase is indented under its parent.
void PhaseSection(Out& out, const json& m) {
  if (!Has(m, "intents") || !m["intents"].contains("phases") || m["intents"]["phases"].empty())
    return;
  const json& phases = m["intents"]["phases"];
  out.Section("PHASES (calls, latency, faults: the marking thread's, nested phases included; "
              "device: block requests issued while open)");
  constexpr const char* kRow =
      "  {:<22} {:>9} {:>9} {:>7} {:>9} {:>9} {:>17} {:>17} {:>8} {:>9} {:>9} {:>9} {:>6}";
  out.Line(kRow, "phase", "start", "duration", "calls", "read", "written", "read p50/p99",
           "write p50/p99", "dev reqs", "dev read", "dev write", "mapped", "major");
  constexpr size_t kRows = 50;
  size_t shown = 0;
  for (const json& p : phases) {
    if (shown++ == kRows) break;
    std::string label = std::string(2 * std::min<uint64_t>(U(p, "depth"), 4), ' ') + S(p, "label");
    if (p.value("open", false)) label += " (open)";
    const uint64_t reads = U(p, "read_calls"), writes = U(p, "write_calls");
    out.Line(kRow, Truncate(label, 22), FormatDuration(D(p, "start_ns")),
             FormatDuration(D(p, "duration_ns")), FormatCount(reads + writes),
             FormatBytes(D(p, "read_bytes")), FormatBytes(D(p, "write_bytes")),
             PhaseLatency(p, "read", reads), PhaseLatency(p, "write", writes),
             FormatCount(U(p, "device_read_requests") + U(p, "device_write_requests")),
             FormatBytes(D(p, "device_read_bytes")), FormatBytes(D(p, "device_write_bytes")),
             FormatBytes(D(p, "mapped_bytes")), FormatCount(U(p, "major_faults")));
  }
  if (phases.size() > kRows) out.Line("  ... {} more phases in --json", phases.size() - kRows);
  const uint64_t dropped = U(m["intents"], "phases_dropped");
  if (dropped) {
    out.Line("  {} phases past the first {} not tracked (the labels above count them)", dropped,
             phases.size());
  }
}

}  // namespace

std::string FormatCount(uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); i++) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string FormatBytes(double v) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  double x = v;
  while (x >= 1024 && u < 6) {
    x /= 1024;
    u++;
  }
  if (u == 0) return fmt::format("{:.0f} B", x);
  if (x == std::floor(x)) return fmt::format("{:.0f} {}", x, kUnits[u]);
  return fmt::format("{:.1f} {}", x, kUnits[u]);
}

std::string FormatDuration(double ns) {
  if (ns < 1e3) return fmt::format("{:.0f}ns", ns);
  if (ns < 1e6) return fmt::format("{:.1f}us", ns / 1e3);
  if (ns < 1e9) return fmt::format("{:.2f}ms", ns / 1e6);
  return fmt::format("{:.3f}s", ns / 1e9);
}

std::string FormatPercent(double share) { return fmt::format("{:.1f}%", share * 100); }

std::string Truncate(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  if (width <= 3) return s.substr(s.size() - width);
  return "..." + s.substr(s.size() - (width - 3));
}

std::string RenderText(const nlohmann::json& model) {
  Out out;
  out.Line("iotwin report");
  CaptureSection(out, model);
  SummarySection(out, model);
  OpsSection(out, model);
  SizesSection(out, model);
  PatternSection(out, model);
  TimeSection(out, model);
  TaskSections(out, model);
  FilesSection(out, model);
  MemorySection(out, model);
  BlockSection(out, model);
  AmplificationSection(out, model);
  AsyncSection(out, model);
  IntentSection(out, model);
  PhaseSection(out, model);
  // Names, comms, labels and header strings come from the trace as bytes: the report is escaped
  // as a whole, so none of them can put a control sequence on the terminal.
  return LinesToText(out.Take());
}

}  // namespace iotwin::analysis
