#include "correlate/layers_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "base/checked_math.h"
#include "base/json_fields.h"
#include "correlate/chains.h"
#include "correlate/device_time.h"
#include "correlate/nvme_decode.h"
#include "format/dev_number.h"
#include "format/op_info.h"
#include "format/records.h"
#include "model/block_requests.h"

namespace iotwin::correlate {
namespace {

using nlohmann::json;

// ---- small helpers ---------------------------------------------------------------------------

std::string OpClass(uint32_t flags) {
  if (flags & IOT_BLKF_READ) return "read";
  if (flags & IOT_BLKF_WRITE) return "write";
  if (flags & IOT_BLKF_FLUSH) return "flush";
  if (flags & IOT_BLKF_DISCARD) return "discard";
  if (flags & IOT_BLKF_WRITE_ZEROES) return "write_zeroes";
  return "other";
}

// blktrace's RWBS letters for the flags.
std::string Rwbs(uint32_t f) {
  std::string s;
  if (f & IOT_BLKF_PREFLUSH) s += 'F';
  if (f & IOT_BLKF_WRITE) s += 'W';
  else if (f & IOT_BLKF_READ) s += 'R';
  else if (f & IOT_BLKF_FLUSH) s += 'F';
  else if (f & IOT_BLKF_DISCARD) s += 'D';
  else if (f & IOT_BLKF_SECURE_ERASE) s += "DE";
  else if (f & IOT_BLKF_WRITE_ZEROES) s += "WZ";
  else s += 'N';
  if (f & IOT_BLKF_FUA) s += 'F';
  if (f & IOT_BLKF_READAHEAD) s += 'A';
  if (f & IOT_BLKF_SYNC) s += 'S';
  if (f & IOT_BLKF_META) s += 'M';
  return s;
}

std::string DevName(uint32_t dev) { return FormatDev(dev); }

// Summary statistics of a set of durations (ns).
struct Dist {
  std::vector<int64_t> v;
  void Add(int64_t x) {
    if (x >= 0) v.push_back(x);
  }
  json ToJson() {
    json j;
    j["n"] = v.size();
    if (v.empty()) return j;
    std::sort(v.begin(), v.end());
    // Sums saturate: a forged trace can hold durations near INT64_MAX, and a
    // double that large does not convert back to int64_t.
    int64_t sum = 0;
    for (int64_t x : v) sum = SaturatingAdd(sum, x);
    auto pct = [&](double p) {
      size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
      return v[std::min(i, v.size() - 1)];
    };
    // The mean of non-negative values lies within [min, max], so it fits.
    long double mean = 0;
    for (int64_t x : v) mean += static_cast<long double>(x);
    mean /= static_cast<long double>(v.size());
    j["mean_ns"] = std::clamp(static_cast<int64_t>(std::min<long double>(
                                  mean, static_cast<long double>(v.back()))),
                              v.front(), v.back());
    j["min_ns"] = v.front();
    j["p50_ns"] = pct(0.50);
    j["p90_ns"] = pct(0.90);
    j["p99_ns"] = pct(0.99);
    j["max_ns"] = v.back();
    j["sum_ns"] = sum;
    return j;
  }
};

// The per-request layers shown in the latency tables, in path order.
struct LayerDef {
  const char* key;
  const char* title;
};
constexpr LayerDef kLayers[] = {
    {"syscall_fs", "syscall + file system (entry -> Q)"},
    {"block_queue", "block layer (Q -> D)"},
    {"driver_device", "driver + device (D -> C)"},
    {"nvme_device", "  of which NVMe command (setup -> complete)"},
    {"completion", "completion to the application (C -> exit)"},
    {"total", "the application I/O (entry -> exit)"},
};

struct LayerSet {
  std::map<std::string, Dist> d;
  void Add(const RequestLayers& l) {
    d["syscall_fs"].Add(l.app_to_q);
    if (l.q2d >= 0) d["block_queue"].Add(l.q2d);
    if (l.d2c >= 0) d["driver_device"].Add(l.d2c);
    if (l.nvme >= 0) d["nvme_device"].Add(l.nvme);
    d["completion"].Add(l.c_to_app);
    d["total"].Add(l.total);
  }
  json ToJson() {
    json arr = json::array();
    for (const LayerDef& def : kLayers) {
      auto it = d.find(def.key);
      if (it == d.end() || it->second.v.empty()) continue;
      json j = it->second.ToJson();
      j["layer"] = def.key;
      j["title"] = def.title;
      arr.push_back(std::move(j));
    }
    return arr;
  }
};

// The device limits header meta "block_devices" recorded, by kernel dev_t.
struct DeviceLimits {
  std::string name;
  uint32_t max_sectors_kb = 0, max_segments = 0, max_segment_size = 0, lbs = 0;
};
std::map<uint32_t, DeviceLimits> Limits(const json& meta) {
  std::map<uint32_t, DeviceLimits> out;
  const json* devices = json_fields::Object(meta, "block_devices");
  if (!devices) return out;
  for (const auto& [name, d] : devices->items()) {
    const std::optional<uint32_t> dev = ParseDev(json_fields::GetString(d, "dev"));
    if (!dev) continue;
    DeviceLimits l;
    l.name = name;
    l.max_sectors_kb = json_fields::GetUint32(d, "max_sectors_kb", 0);
    l.max_segments = json_fields::GetUint32(d, "max_segments", 0);
    l.max_segment_size = json_fields::GetUint32(d, "max_segment_size", 0);
    l.lbs = json_fields::GetUint32(d, "logical_block_size", 0);
    out[*dev] = l;
  }
  return out;
}

// Why the kernel cut a bio into a piece of `bytes` on a device with these limits.
std::string SplitReason(uint64_t bytes, const DeviceLimits* l) {
  if (!l) return "device limits unknown";
  uint64_t max_bytes = static_cast<uint64_t>(l->max_sectors_kb) * 1024;
  if (max_bytes && SaturatingAdd(bytes, 4096) > max_bytes) {
    return fmt::format("max_sectors_kb ({} KiB)", l->max_sectors_kb);
  }
  // Below max_sectors_kb, the piece was cut where the segment table was full: each physically
  // contiguous run of the buffer is one segment of at most max_segment_size bytes.
  if (l->max_segments) {
    return fmt::format("max_segments ({} segments of at most {} KiB: the buffer's pages are not "
                       "physically contiguous)",
                       l->max_segments, l->max_segment_size / 1024);
  }
  return "alignment or boundary (chunk_sectors, virtual boundary, atomic or zone limits)";
}

std::string SyscallJsonOp(const Syscall& s) { return std::string(OpName(s.op)); }

json SyscallJson(const Syscall& s) {
  return {{"op", SyscallJsonOp(s)}, {"ts", s.ts},         {"dur_ns", s.dur},
          {"tgid", s.tgid},         {"tid", s.tid},       {"fd", s.fd},
          {"offset", s.offset},     {"length", s.length}, {"ret", s.ret}};
}

// ---- sections ----------------------------------------------------------------------------------

json RequestJson(const Correlation& c, size_t ri) {
  const Request& q = c.requests[ri];
  json j;
  j["id"] = q.id;
  j["dev"] = DevName(q.dev);
  j["sector"] = q.sector;
  j["bytes"] = q.bytes;
  j["op"] = OpClass(q.flags);
  j["rwbs"] = Rwbs(q.flags);
  j["cause"] = CauseName(q.cause);
  if (!q.why.empty()) j["why"] = q.why;
  if (q.tid) {
    j["tid"] = q.tid;
    j["tgid"] = q.tgid;
  }
  if (!q.comm.empty()) j["comm"] = q.comm;
  if (q.ino) j["file"] = c.FileName(q.ino_dev, q.ino);
  if (q.syscall != kNone) j["syscall"] = SyscallJson(c.syscalls[q.syscall]);
  if (q.async != kNone) {
    const AsyncRequest& a = c.asyncs[q.async];
    j["async"] = {{"engine", AsyncEngineName(a.engine)},
                  {"opcode", a.opcode},
                  {"user_data", a.user_data},
                  {"submit_ts", a.submit_ts},
                  {"complete_ts", a.complete_ts},
                  {"length", a.length}};
  }
  if (q.fault != kNone) {
    const PageFault& f = c.faults[q.fault];
    j["page_fault"] = {{"ts", f.ts}, {"pgoff", f.pgoff}, {"file", c.FileName(f.dev, f.ino)}};
  }
  if (!q.dirtied_by_calls.empty() || !q.dirtied_by_faults.empty()) {
    j["dirtied_by"] = {{"calls", q.dirtied_by_calls.size()},
                       {"faults", q.dirtied_by_faults.size()}};
    if (!q.dirtied_by_calls.empty()) {
      j["dirtied_by"]["last_call"] = SyscallJson(c.syscalls[q.dirtied_by_calls.back()]);
    }
  }
  j["bios"] = q.bios.size();
  json phases;
  for (auto [name, t] : {std::pair<const char*, uint64_t>{"Q", q.q_ts},
                         {"G", q.g_ts},
                         {"I", q.i_ts},
                         {"D", q.d_ts},
                         {"C", q.c_ts}}) {
    if (t) phases[name] = t;
  }
  j["phases"] = phases;
  const RequestLayers& l = q.layers;
  json lat;
  auto put = [&](const char* k, int64_t v) {
    if (v >= 0) lat[k] = v;
  };
  put("Q2G", l.q2g);
  put("G2I", l.g2i);
  put("I2D", l.i2d);
  put("Q2D", l.q2d);
  put("D2C", l.d2c);
  put("Q2C", l.q2c);
  put("nvme", l.nvme);
  if (l.has_app) {
    lat["syscall_fs"] = l.app_to_q;
    lat["completion"] = l.c_to_app;
    lat["total"] = l.total;
    lat["deviation"] = l.deviation;
  }
  j["latency_ns"] = lat;
  if (!q.nvme.empty()) {
    json cmds = json::array();
    for (const NvmeCommand& n : q.nvme) {
      NvmeDecoded d = DecodeNvme(n.opcode, n.qid, n.cdw10, n.cdw11, n.cdw12, n.lba_size);
      json cj = {{"op", d.name},          {"opcode", n.opcode},      {"qid", n.qid},
                 {"cid", n.cid},          {"nsid", n.nsid},          {"lba_size", n.lba_size},
                 {"status", n.status},    {"setup_ts", n.setup_ts},  {"complete_ts", n.complete_ts}};
      if (d.has_range) {
        cj["slba"] = d.slba;
        cj["nlb"] = d.nlb;
        cj["bytes"] = d.bytes;
      }
      if (!d.detail.empty()) cj["detail"] = d.detail;
      cmds.push_back(std::move(cj));
    }
    j["nvme"] = cmds;
  }
  if (q.interference.intervals) {
    const Interference& in = q.interference;
    j["interference_ns"] = {{"offcpu_blocked", in.offcpu_blocked_ns},
                            {"offcpu_preempted", in.offcpu_preempted_ns},
                            {"hardirq", in.hardirq_ns},
                            {"softirq", in.softirq_ns}};
  }
  if (q.error) j["error"] = q.error;
  if (q.requeues) j["requeues"] = q.requeues;
  return j;
}

json Coverage(const Correlation& c) {
  json j;
  std::map<std::string, uint64_t> causes, reasons;
  uint64_t total = 0, unattributed = 0;
  for (const Request& q : c.requests) {
    if (q.merged_away && !q.completed) continue;  // counted in the request it merged into
    total++;
    causes[CauseName(q.cause)]++;
    if (q.cause == Cause::kUnattributed) {
      unattributed++;
      reasons[q.why]++;
    }
  }
  uint64_t nvme = 0;
  for (const Request& q : c.requests) nvme += q.nvme.size();
  j["requests"] = total;
  j["linked"] = total - unattributed;
  j["unattributed"] = unattributed;
  j["by_cause"] = causes;
  j["unattributed_reasons"] = reasons;
  j["bios"] = c.bios.size();
  j["nvme_commands"] = nvme;
  j["nvme_unjoined"] = c.nvme_unjoined;
  j["lost"] = {{"block", c.lost_block}, {"nvme", c.lost_nvme}, {"sched", c.lost_sched}};
  return j;
}

json Latency(const Correlation& c, const LayersOptions& o) {
  json j;
  LayerSet all;
  std::map<std::string, LayerSet> by_op;
  std::map<std::pair<uint32_t, uint64_t>, LayerSet> by_file;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> file_requests;
  uint64_t n = 0, within = 0;
  int64_t max_dev = 0;
  for (const Request& q : c.requests) {
    if (!q.layers.has_app) continue;
    n++;
    // total is negative when the call's end precedes its start in the trace; a negative or
    // out-of-range double does not convert to uint64_t.
    const double frac = o.tolerance_fraction * static_cast<double>(q.layers.total);
    const uint64_t frac_ns = frac <= 0 ? 0
                             : frac >= 18446744073709551616.0 ? UINT64_MAX
                                                              : static_cast<uint64_t>(frac);
    uint64_t tol = std::max<uint64_t>(o.tolerance_ns, frac_ns);
    if (static_cast<uint64_t>(q.layers.deviation) <= tol) within++;
    max_dev = std::max(max_dev, q.layers.deviation);
    all.Add(q.layers);
    by_op[OpClass(q.flags)].Add(q.layers);
    uint32_t dev = q.ino_dev;
    uint64_t ino = q.ino;
    if (!ino && q.syscall != kNone) {
      dev = c.syscalls[q.syscall].dev;
      ino = c.syscalls[q.syscall].ino;
    }
    if (ino) {
      by_file[{dev, ino}].Add(q.layers);
      file_requests[{dev, ino}]++;
    }
  }
  j["requests"] = n;
  j["tolerance"] = {{"ns", o.tolerance_ns}, {"fraction", o.tolerance_fraction}};
  j["within_tolerance"] = within;
  j["max_deviation_ns"] = max_dev;
  j["layers"] = all.ToJson();
  json ops = json::object();
  for (auto& [op, s] : by_op) ops[op] = s.ToJson();
  j["by_op"] = ops;
  std::vector<std::pair<uint64_t, std::pair<uint32_t, uint64_t>>> files;
  for (auto& [k, cnt] : file_requests) files.push_back({cnt, k});
  std::sort(files.rbegin(), files.rend());
  json fj = json::array();
  for (size_t i = 0; i < files.size() && i < o.top; i++) {
    auto key = files[i].second;
    fj.push_back({{"file", c.FileName(key.first, key.second)},
                  {"requests", files[i].first},
                  {"layers", by_file[key].ToJson()}});
  }
  j["by_file"] = fj;
  return j;
}

json Btt(const Correlation& c) {
  std::map<std::string, Dist> d;
  std::map<uint32_t, std::vector<uint64_t>> q_by_dev;
  for (const Bio& b : c.bios) {
    if (b.queued) q_by_dev[b.dev].push_back(b.q_ts);
    if (b.merged && b.m_ts >= b.q_ts && b.q_ts) d["Q2M"].Add(SignedDelta(b.q_ts, b.m_ts));
  }
  for (auto& [dev, v] : q_by_dev) {
    std::sort(v.begin(), v.end());
    for (size_t i = 1; i < v.size(); i++) d["Q2Q"].Add(SignedDelta(v[i - 1], v[i]));
  }
  for (const Request& q : c.requests) {
    const RequestLayers& l = q.layers;
    d["Q2G"].Add(l.q2g);
    d["G2I"].Add(l.g2i);
    if (q.q_ts && q.i_ts >= q.q_ts && q.i_ts) d["Q2I"].Add(SignedDelta(q.q_ts, q.i_ts));
    d["I2D"].Add(l.i2d);
    d["Q2D"].Add(l.q2d);
    d["D2C"].Add(l.d2c);
    d["Q2C"].Add(l.q2c);
  }
  double q2c_mean = 0;
  if (!d["Q2C"].v.empty()) {
    double s = 0;
    for (int64_t x : d["Q2C"].v) s += static_cast<double>(x);
    q2c_mean = s / static_cast<double>(d["Q2C"].v.size());
  }
  json arr = json::array();
  for (const char* m : {"Q2Q", "Q2G", "G2I", "Q2M", "Q2I", "I2D", "Q2D", "D2C", "Q2C"}) {
    Dist& x = d[m];
    if (x.v.empty()) continue;
    json e = x.ToJson();
    e["metric"] = m;
    if (q2c_mean > 0 && std::string(m) != "Q2Q") {
      e["pct_of_q2c"] = 100.0 * e["mean_ns"].get<double>() / q2c_mean;
    }
    arr.push_back(std::move(e));
  }
  return arr;
}

// The block layer's splits: pieces and why, and the calls that became several requests.
void KernelSplits(const Correlation& c, const LayersOptions& o,
                  const std::map<uint32_t, DeviceLimits>& limits, json& j) {
  // kernel splits: X pieces, and why
  std::map<std::string, uint64_t> reasons;
  uint64_t pieces = 0;
  for (const Bio& b : c.bios) {
    if (b.queued) continue;
    pieces++;
    auto l = limits.find(b.dev);
    reasons[SplitReason(b.bytes, l == limits.end() ? nullptr : &l->second)]++;
  }
  j["kernel_split_pieces"] = pieces;
  j["kernel_split_reasons"] = reasons;
  // per call: bios built by the file system, pieces split by the block layer, requests issued
  json calls = json::array();
  uint64_t calls_split = 0, max_requests = 0;
  std::vector<std::pair<size_t, size_t>> order;  // (requests, syscall)
  for (size_t si = 0; si < c.syscalls.size(); si++) {
    if (c.syscalls[si].requests.size() > 1) order.push_back({c.syscalls[si].requests.size(), si});
  }
  std::sort(order.rbegin(), order.rend());
  for (auto [nreq, si] : order) {
    const Syscall& s = c.syscalls[si];
    calls_split++;
    max_requests = std::max<uint64_t>(max_requests, nreq);
    if (calls.size() >= o.top) continue;
    std::set<size_t> roots, split_pieces;
    std::map<std::string, uint64_t> why;
    uint64_t max_bytes = 0, min_bytes = UINT64_MAX;
    for (size_t ri : s.requests) {
      const Request& q = c.requests[ri];
      max_bytes = std::max(max_bytes, q.bytes);
      min_bytes = std::min(min_bytes, q.bytes);
      for (size_t bi : q.bios) {
        const Bio& b = c.bios[bi];
        if (b.queued) {
          roots.insert(bi);
        } else {
          split_pieces.insert(bi);
          auto l = limits.find(b.dev);
          why[SplitReason(b.bytes, l == limits.end() ? nullptr : &l->second)]++;
        }
      }
    }
    json cj = SyscallJson(s);
    cj["requests"] = nreq;
    cj["bios_built_by_fs"] = roots.size();
    cj["kernel_split_pieces"] = split_pieces.size();
    cj["request_bytes_min"] = min_bytes;
    cj["request_bytes_max"] = max_bytes;
    cj["split_reasons"] = why;
    if (roots.size() > 1) {
      cj["fs_note"] = "the file system built several bios (a bio holds at most 256 pages, or "
                      "one extent)";
    }
    auto dev = c.requests[s.requests.front()].dev;
    if (auto l = limits.find(dev); l != limits.end()) {
      cj["device"] = l->second.name;
      cj["max_sectors_kb"] = l->second.max_sectors_kb;
      cj["max_segments"] = l->second.max_segments;
    }
    calls.push_back(std::move(cj));
  }
  j["calls_split"] = calls_split;
  j["max_requests_per_call"] = max_requests;
  j["calls"] = calls;
}

// Runs of sequential same-file calls, each below the device limit, that one call would do.
void AppPresplit(const Correlation& c, const LayersOptions& o,
                 const std::map<uint32_t, DeviceLimits>& limits, json& j) {
  // application-side pre-split: runs of sequential same-file calls, each below the device limit
  json runs = json::array();
  uint64_t run_count = 0, run_calls = 0;
  std::map<std::tuple<uint32_t, int32_t, bool>, std::vector<size_t>> streams;
  for (size_t si = 0; si < c.syscalls.size(); si++) {
    const Syscall& s = c.syscalls[si];
    if ((OpIsRead(s.op) || OpIsWrite(s.op)) && s.ret > 0) {
      streams[{s.tid, s.fd, OpIsRead(s.op)}].push_back(si);
    }
  }
  uint64_t limit_bytes = 0;
  for (auto& [dev, l] : limits) limit_bytes = std::max<uint64_t>(limit_bytes, l.max_sectors_kb * 1024ull);
  if (!limit_bytes) limit_bytes = 512 * 1024;
  for (auto& [key, v] : streams) {
    size_t i = 0;
    while (i < v.size()) {
      size_t k = i + 1;
      while (k < v.size()) {
        const Syscall& p = c.syscalls[v[k - 1]];
        const Syscall& n = c.syscalls[v[k]];
        // Contiguous: the next call starts where this one ended (an end past 2^64 is not).
        std::optional<uint64_t> p_end = CheckedAdd(p.offset, static_cast<uint64_t>(p.ret));
        if (n.ino != p.ino || !p_end || n.offset != *p_end ||
            static_cast<uint64_t>(n.ret) >= limit_bytes || static_cast<uint64_t>(p.ret) >= limit_bytes) {
          break;
        }
        k++;
      }
      if (k - i >= o.presplit_min_calls) {
        run_count++;
        run_calls += k - i;
        if (runs.size() < o.top) {
          const Syscall& f = c.syscalls[v[i]];
          const Syscall& l = c.syscalls[v[k - 1]];
          uint64_t bytes = SaturatingAdd(l.offset, static_cast<uint64_t>(l.ret)) - f.offset;
          runs.push_back({{"tid", f.tid},
                          {"op", SyscallJsonOp(f)},
                          {"file", c.FileName(f.dev, f.ino)},
                          {"calls", k - i},
                          {"call_bytes", f.ret},
                          {"offset", f.offset},
                          {"bytes", bytes},
                          {"span_ns", l.end() - f.ts},
                          {"suggestion", fmt::format("{} calls of {} bytes: one call of {} bytes "
                                                     "(or fewer, up to the device's limit) would do",
                                                     k - i, f.ret, bytes)}});
        }
      }
      i = k;
    }
  }
  j["app_presplit_runs"] = run_count;
  j["app_presplit_calls"] = run_calls;
  j["app_presplit"] = runs;
}

json Merges(const Correlation& c) {
  uint64_t merged = 0, multi = 0, rq_merges = 0;
  for (const Bio& b : c.bios) merged += b.merged;
  for (const Request& q : c.requests) {
    multi += q.bios.size() > 1;
    rq_merges += q.merged_away;
  }
  return json{{"bios_merged", merged},
              {"requests_with_several_bios", multi},
              {"requests_merged_into_others", rq_merges}};
}

json Splits(const Correlation& c, const LayersOptions& o) {
  const auto limits = Limits(c.meta);
  json j;
  KernelSplits(c, o, limits, j);
  AppPresplit(c, o, limits, j);
  j["merges"] = Merges(c);
  return j;
}

json Amplification(const Correlation& c) {
  uint64_t app_r = 0, app_w = 0;
  for (const Syscall& s : c.syscalls) {
    // bytes of files and block devices (not pipes, sockets, /dev/null)
    if (s.ret <= 0 || (s.ftype != 8 && s.ftype != 6)) continue;
    if (OpIsRead(s.op)) app_r = SaturatingAdd(app_r, static_cast<uint64_t>(s.ret));
    if (OpIsWrite(s.op)) app_w = SaturatingAdd(app_w, static_cast<uint64_t>(s.ret));
  }
  for (const AsyncRequest& a : c.asyncs) {
    if (a.res <= 0) continue;
    const AsyncKind kind = AsyncOp(a.engine, a.opcode).kind;
    if (kind == AsyncKind::kRead) app_r = SaturatingAdd(app_r, static_cast<uint64_t>(a.res));
    if (kind == AsyncKind::kWrite) app_w = SaturatingAdd(app_w, static_cast<uint64_t>(a.res));
  }
  uint64_t bio_r = 0, bio_w = 0;
  for (const Bio& b : c.bios) {
    if (!b.queued) continue;
    if (b.flags & IOT_BLKF_READ) bio_r = SaturatingAdd(bio_r, b.bytes);
    if (b.flags & IOT_BLKF_WRITE) bio_w = SaturatingAdd(bio_w, b.bytes);
  }
  uint64_t dev_r = 0, dev_w = 0, nvme_r = 0, nvme_w = 0;
  for (const Request& q : c.requests) {
    if (q.merged_away && !q.completed) continue;
    uint64_t b = q.completed_bytes ? q.completed_bytes : q.bytes;
    if (q.flags & IOT_BLKF_READ) dev_r = SaturatingAdd(dev_r, b);
    if (q.flags & IOT_BLKF_WRITE) dev_w = SaturatingAdd(dev_w, b);
    for (const NvmeCommand& n : q.nvme) {
      uint64_t nb = static_cast<uint64_t>(n.nlb) * n.lba_size;
      if (n.opcode == 0x02) nvme_r = SaturatingAdd(nvme_r, nb);
      if (n.opcode == 0x01) nvme_w = SaturatingAdd(nvme_w, nb);
    }
  }
  json j;
  j["read"] = {{"application", app_r}, {"block_bios", bio_r}, {"device_requests", dev_r}};
  j["write"] = {{"application", app_w}, {"block_bios", bio_w}, {"device_requests", dev_w}};
  if (c.nvme_layer) {
    j["read"]["nvme_commands"] = nvme_r;
    j["write"]["nvme_commands"] = nvme_w;
  }
  if (c.memory_layer) j["read"]["page_cache_inserted"] = c.page_cache_added_pages * 4096;
  if (app_r) j["read_amplification"] = static_cast<double>(dev_r) / static_cast<double>(app_r);
  if (app_w) j["write_amplification"] = static_cast<double>(dev_w) / static_cast<double>(app_w);
  j["note"] = "device bytes are those of the followed requests: the workload's own I/O, the "
              "write-back and readahead of its files and the journal I/O of its fsync calls";
  return j;
}

// Kernel software share of synchronous calls: call duration minus device time, over the call.
json SoftwareShare(const Correlation& c) {
  Dist share_pm;  // per mille, to reuse Dist
  std::map<std::string, Dist> by_op, by_size;
  uint64_t n = 0;
  double sum = 0;
  for (const Syscall& s : c.syscalls) {
    if (!(OpIsRead(s.op) || OpIsWrite(s.op)) || s.requests.empty() || !s.dur) continue;
    std::vector<std::pair<uint64_t, uint64_t>> iv;
    bool inside = true;
    for (size_t ri : s.requests) {
      const Request& q = c.requests[ri];
      if (q.cause != Cause::kSyscall || !q.c_ts || q.c_ts > s.end() || q.q_ts < s.ts) {
        inside = false;
        break;
      }
      auto d = DeviceIntervals(q);
      iv.insert(iv.end(), d.begin(), d.end());
    }
    if (!inside || iv.empty()) continue;
    uint64_t device = UnionWithin(iv, s.ts, s.end());
    double share = 1.0 - static_cast<double>(device) / static_cast<double>(s.dur);
    int64_t pm = static_cast<int64_t>(std::lround(share * 1000));
    n++;
    sum += share;
    share_pm.Add(pm);
    by_op[std::string(OpName(s.op))].Add(pm);
    uint64_t len = static_cast<uint64_t>(s.ret > 0 ? s.ret : 0);
    const char* bucket = len <= 4096 ? "<=4KiB" : len <= 65536 ? "<=64KiB" : len <= (1 << 20) ? "<=1MiB" : ">1MiB";
    by_size[bucket].Add(pm);
  }
  auto pct = [](Dist& d) {
    json j = d.ToJson();
    json out;
    out["calls"] = j["n"];
    if (d.v.empty()) return out;
    for (const char* k : {"p50", "p90", "min", "max"}) {
      out[std::string(k) + "_pct"] = j[std::string(k) + "_ns"].get<double>() / 10.0;
    }
    out["mean_pct"] = j["mean_ns"].get<double>() / 10.0;
    return out;
  };
  json j;
  j["calls"] = n;
  if (n) j["mean_pct"] = 100.0 * sum / static_cast<double>(n);
  j["distribution"] = pct(share_pm);
  json ops = json::object(), sizes = json::object();
  for (auto& [k, d] : by_op) ops[k] = pct(d);
  for (auto& [k, d] : by_size) sizes[k] = pct(d);
  j["by_op"] = ops;
  j["by_size"] = sizes;
  j["device_time"] = c.nvme_layer ? "NVMe setup -> complete where recorded, else D -> C"
                                  : "D -> C (driver and device: no NVMe layer in this trace)";
  j["reference"] = "BPF for storage (HotOS'21): 48.6% software on a 512 B O_DIRECT read on an "
                   "Optane P5800X, Linux 5.8";
  return j;
}

json InterferenceJson(const Correlation& c, const LayersOptions& o) {
  json j;
  j["recorded"] = c.sched_layer;
  uint64_t followed = 0, disturbed = 0, pre = 0, hard = 0, soft = 0, blocked = 0;
  std::vector<std::pair<uint64_t, size_t>> top;
  for (size_t ri = 0; ri < c.requests.size(); ri++) {
    const Request& q = c.requests[ri];
    if (!q.tid || !q.c_ts) continue;
    followed++;
    const Interference& in = q.interference;
    pre = SaturatingAdd(pre, in.offcpu_preempted_ns);
    hard = SaturatingAdd(hard, in.hardirq_ns);
    soft = SaturatingAdd(soft, in.softirq_ns);
    blocked = SaturatingAdd(blocked, in.offcpu_blocked_ns);
    if (in.disturbed_ns()) {
      disturbed++;
      top.push_back({in.disturbed_ns(), ri});
    }
  }
  std::sort(top.rbegin(), top.rend());
  j["requests_of_traced_threads"] = followed;
  j["requests_disturbed"] = disturbed;
  j["total_ns"] = {{"preempted", pre}, {"hardirq", hard}, {"softirq", soft},
                   {"blocked_waiting", blocked}};
  json tj = json::array();
  for (size_t i = 0; i < top.size() && i < o.top; i++) {
    const Request& q = c.requests[top[i].second];
    tj.push_back({{"request", q.id},
                  {"tid", q.tid},
                  {"op", OpClass(q.flags)},
                  {"bytes", q.bytes},
                  {"q2c_ns", q.layers.q2c},
                  {"preempted_ns", q.interference.offcpu_preempted_ns},
                  {"hardirq_ns", q.interference.hardirq_ns},
                  {"softirq_ns", q.interference.softirq_ns}});
  }
  j["top"] = tj;
  j["pmu"] = "unavailable unless the header's layers.pmu says otherwise";
  if (json_fields::Object(c.meta, "layers/pmu"))
    j["pmu"] = json_fields::GetString(c.meta, "layers/pmu/reason");
  return j;
}

json Writeback(const Correlation& c, const LayersOptions& o) {
  struct Agg {
    uint64_t requests = 0, bytes = 0, readahead = 0, during_sync = 0;
    std::set<size_t> calls, faults;
    uint64_t unknown = 0;
  };
  std::map<std::pair<uint32_t, uint64_t>, Agg> files;
  for (const Request& q : c.requests) {
    if (q.cause != Cause::kWriteback && q.cause != Cause::kReadahead) continue;
    Agg& a = files[{q.ino_dev, q.ino}];
    a.requests++;
    a.bytes = SaturatingAdd(a.bytes, q.bytes);
    a.readahead += q.cause == Cause::kReadahead;
    a.during_sync += q.syscall != kNone;
    a.calls.insert(q.dirtied_by_calls.begin(), q.dirtied_by_calls.end());
    a.faults.insert(q.dirtied_by_faults.begin(), q.dirtied_by_faults.end());
    a.unknown += q.cause == Cause::kWriteback && q.dirtied_by_calls.empty() &&
                 q.dirtied_by_faults.empty();
  }
  json arr = json::array();
  for (auto& [k, a] : files) {
    if (arr.size() >= o.top) break;
    arr.push_back({{"file", c.FileName(k.first, k.second)},
                   {"requests", a.requests},
                   {"bytes", a.bytes},
                   {"readahead_requests", a.readahead},
                   {"during_traced_sync_call", a.during_sync},
                   {"dirtying_calls", a.calls.size()},
                   {"dirtying_faults", a.faults.size()},
                   {"requests_with_unknown_dirtier", a.unknown}});
  }
  return arr;
}

}  // namespace

// Requests in flight per device, time-weighted as iostat's aqu-sz (model/block_requests.h):
// from each request's start (its first get-request, insert or issue) to its completion, and on
// the device from its last issue; over the block requests' own span, from the first start to
// the last completion. Requests never completed count up to the span's end.
json QueueDepths(const Correlation& c) {
  std::map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> queue, device;
  // A request's start, 0 for one that counts nowhere (merged into another, or never seen begun).
  auto start_of = [](const Request& q) {
    uint64_t start = 0;
    if (q.merged_away && !q.completed) return start;
    for (uint64_t t : {q.g_ts, q.i_ts, q.d_ts}) {
      if (t && (!start || t < start)) start = t;
    }
    return start;
  };
  uint64_t first = UINT64_MAX, last = 0;
  for (const Request& q : c.requests) {
    const uint64_t start = start_of(q);
    if (!start) continue;
    first = std::min(first, start);
    last = std::max({last, start, q.c_ts});
  }
  for (const Request& q : c.requests) {
    const uint64_t start = start_of(q);
    if (!start) continue;
    const uint64_t end = q.completed && q.c_ts >= start ? q.c_ts : last;
    queue[q.dev].emplace_back(start, end);
    if (q.d_ts) device[q.dev].emplace_back(q.d_ts, std::max(end, q.d_ts));
  }
  auto depth_json = [](const model::QueueDepth& d) {
    return json{{"average", std::round(d.average * 1e4) / 1e4}, {"p99", d.p99}, {"max", d.max},
                {"in_flight_ns", d.in_flight_ns}};
  };
  json out = json::object();
  for (auto& [dev, intervals] : queue) {
    json dj = depth_json(model::QueueDepthOf(intervals, first, last));
    dj["device"] = depth_json(model::QueueDepthOf(device[dev], first, last));
    dj["window_ns"] = last - first;
    out[DevName(dev)] = std::move(dj);
  }
  return out;
}

json LayersReport(const Correlation& c, const LayersOptions& o) {
  json j;
  json layers = json::object();
  for (const char* k : {"block", "nvme", "sched", "pmu", "memory"}) {
    const json* layer = json_fields::Find(c.meta, std::string("layers/") + k);
    if (layer) layers[k] = *layer;
  }
  j["layers"] = layers;
  if (!c.damage.empty()) j["damage"] = c.damage;
  j["coverage"] = Coverage(c);
  j["latency"] = Latency(c, o);
  j["btt"] = Btt(c);
  j["queue_depth"] = QueueDepths(c);
  j["splits"] = Splits(c, o);
  j["amplification"] = Amplification(c);
  j["software_share"] = SoftwareShare(c);
  ChainOptions chain_options;
  chain_options.gap_ns = o.dependent_gap_ns;
  chain_options.min_reads = o.min_chain_reads;
  chain_options.query_marker = o.chain_query_marker;
  chain_options.hop_marker = o.chain_hop_marker;
  j["dependent_chains"] = DependentChainsJson(c, chain_options, o.top);
  j["interference"] = InterferenceJson(c, o);
  j["writeback"] = Writeback(c, o);
  json rows = json::array();
  size_t shown = 0;
  for (size_t ri = 0; ri < c.requests.size(); ri++) {
    if (c.requests[ri].merged_away && !c.requests[ri].completed) continue;
    if (o.max_request_rows && shown >= o.max_request_rows) break;
    rows.push_back(RequestJson(c, ri));
    shown++;
  }
  j["requests"] = rows;
  j["requests_total"] = j["coverage"]["requests"];
  return j;
}

Result<json> LayersReportForTrace(const std::string& path, const LayersOptions& options) {
  IOTWIN_ASSIGN_OR_RETURN(Correlation c, CorrelateTrace(path));
  return LayersReport(c, options);
}

}  // namespace iotwin::correlate
