#include "analysis/compare_block.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "analysis/compare.h"
#include "analysis/compare_device.h"
#include "analysis/distance.h"
#include "analysis/histogram.h"
#include "analysis/report_text.h"
#include "base/checked_math.h"
#include "base/json_fields.h"
#include "format/dev_number.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "model/trace_model.h"

namespace iotwin::analysis {

namespace {

using nlohmann::json;

constexpr uint64_t kSector = 512;
constexpr size_t kLbaBins = 256;     // start-LBA distribution: equal-width bins over the extent
constexpr size_t kMaxDepthBin = 1024;  // queue depths at or above share the last bin

// One trace's requests on one device, as compare sees them.
struct Stream {
  std::string path;
  uint32_t dev = 0;
  uint64_t offset = 0;  // bytes the replay added to every request (--device-offset)
  uint64_t requests = 0, reads = 0, writes = 0, flushes = 0, fua = 0, discards = 0;
  uint64_t bytes = 0;
  LogLinearHistogram sizes[2];  // read, write
  std::vector<uint32_t> size_values[2];  // the same, exact (medians in what a FAIL says)
  std::vector<uint64_t> starts;  // byte offset of each ranged request, less `offset`
  LogLinearHistogram iat, d2c;
  std::vector<uint64_t> depth_ns;  // time spent at each queue depth (index: depth)
  std::vector<uint64_t> depth_at_issue;  // requests by the depth they found (themselves included)
  uint64_t first_ts = 0, last_ts = 0;
  std::vector<uint64_t> issue_ts;  // every request's issue time, in issue order
  std::string pace;        // the replay's header; empty when not a replay
  std::string source_dev;  // the replay's header: the device it replayed ("MAJ:MIN")
  bool wrapped = false;
  // NVMe commands sent for the device's requests (NVME SETUP records on an I/O queue of the
  // namespace `dev`), when the trace has the NVMe layer.
  bool nvme_layer = false;
  uint64_t nvme_commands = 0;
  std::map<uint8_t, uint64_t> nvme_opcodes;  // opcode -> commands
  LogLinearHistogram nvme_sizes;             // data bytes of each command that moves data
  std::vector<IssuedIo> issued;  // its requests as issued (ISSUE records), in issue order
  std::vector<IssuedIo> bios;    // the bios queued on the device (QUEUE records), when recorded
  DeviceFacts device;            // the header's queue limits of `dev`
};


// The device whose requests are compared: `wanted` when the trace has requests on it, else the
// one with the most requests (the one `replay --layer block` replays).
uint32_t PickDevice(const model::TraceModel& m, std::optional<uint32_t> wanted) {
  std::map<uint32_t, uint64_t> per_dev;
  for (const auto& r : m.block_requests()) per_dev[r.dev]++;
  if (wanted && per_dev.count(*wanted)) return *wanted;
  uint32_t best_dev = 0;
  uint64_t best = 0;
  for (const auto& [d, n] : per_dev) {
    if (n > best) {
      best = n;
      best_dev = d;
    }
  }
  return best_dev;
}

// Time at each queue depth: +1 at issue, -1 at completion (requests with a known completion).
std::vector<uint64_t> DepthOverTime(const std::vector<const model::BlockRequest*>& reqs) {
  std::vector<std::pair<uint64_t, int>> events;
  for (const auto* r : reqs) {
    if (r->end <= r->ts) continue;
    events.emplace_back(r->ts, 1);
    events.emplace_back(r->end, -1);
  }
  // Completions first at equal times: a slot freed and reused at once is not a deeper queue.
  std::sort(events.begin(), events.end());
  std::vector<uint64_t> ns(1, 0);
  int64_t depth = 0;
  for (size_t i = 0; i < events.size(); i++) {
    depth = std::max<int64_t>(0, depth + events[i].second);
    if (i + 1 == events.size()) break;
    const size_t bin = std::min<size_t>(static_cast<size_t>(depth), kMaxDepthBin);
    if (ns.size() <= bin) ns.resize(bin + 1, 0);
    ns[bin] = SaturatingAdd(ns[bin], events[i + 1].first - events[i].first);
  }
  return ns;
}

// NVMe commands of one device: NVME SETUP records on an I/O queue of its namespace (admin
// commands, nsid 0, are not the device's).
struct NvmeTally {
  uint64_t commands = 0;
  std::map<uint8_t, uint64_t> opcodes;
  LogLinearHistogram sizes;
};

// One pass over a trace: its model and, when the header says the NVMe layer ran (the model keeps
// no NVMe records), each device's NVMe commands (which device is compared is known only once the
// model has every request).
struct StreamPass {
  std::unique_ptr<model::TraceModel> model;
  bool nvme_layer = false;
  std::map<uint32_t, NvmeTally> nvme;  // by device
  std::map<uint32_t, std::vector<IssuedIo>> bios;  // QUEUE records by device (offset in bytes)
};

Result<StreamPass> ReadStreamTrace(const std::string& path, std::unique_ptr<TraceReader> reader) {
  model::ModelOptions mo;
  mo.compute_dependencies = false;
  model::ModelBuilder builder(mo);
  builder.SetMeta(reader->meta());
  builder.ReadStringsFrom(reader.get());
  StreamPass pass;
  const json* enabled = json_fields::Find(reader->meta(), "layers/nvme/enabled");
  pass.nvme_layer = enabled && enabled->is_boolean() && enabled->get<bool>();
  while (true) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* rec, reader->Next());
    if (!rec) break;
    IOTWIN_RETURN_IF_ERROR(builder.Add(rec).WithContext(path));
    if (rec->type == IOT_REC_BLOCK && rec->size >= sizeof(iot_block)) {
      const iot_block q = As<iot_block>(rec);
      if (q.phase == IOT_BLK_QUEUE) {
        pass.bios[q.dev].push_back({q.ts, SaturatingMul(q.sector, kSector), q.bytes, q.flags});
      }
      continue;
    }
    if (!pass.nvme_layer || rec->type != IOT_REC_NVME || rec->size < sizeof(iot_nvme)) continue;
    const iot_nvme n = As<iot_nvme>(rec);
    if (n.phase != IOT_NVME_SETUP || n.nsid == 0) continue;
    NvmeTally& t = pass.nvme[n.dev];
    t.commands++;
    t.opcodes[n.opcode]++;
    if (n.nlb > 0 && n.lba_size > 0) t.sizes.Add(uint64_t{n.nlb} * n.lba_size);
  }
  IOTWIN_ASSIGN_OR_RETURN(pass.model, builder.Finish());
  return pass;
}

// The counts, sizes, start offsets and issue times of `ios` (a stream's requests, or the bios a
// replayer queued), replacing what `s` held.
void TallyIssues(const std::vector<IssuedIo>& ios, Stream* s) {
  s->requests = s->reads = s->writes = s->flushes = s->fua = s->discards = s->bytes = 0;
  s->sizes[0] = s->sizes[1] = LogLinearHistogram();
  s->size_values[0].clear();
  s->size_values[1].clear();
  s->starts.clear();
  s->iat = LogLinearHistogram();
  s->issue_ts.clear();
  s->first_ts = s->last_ts = 0;
  uint64_t prev_ts = 0;
  for (const IssuedIo& r : ios) {
    s->requests++;
    const bool discard = r.flags & (IOT_BLKF_DISCARD | IOT_BLKF_SECURE_ERASE | IOT_BLKF_WRITE_ZEROES);
    if (r.flags & (IOT_BLKF_FLUSH | IOT_BLKF_PREFLUSH)) s->flushes++;
    if (r.flags & IOT_BLKF_FUA) s->fua++;
    if (discard) s->discards++;
    if (r.bytes > 0) s->starts.push_back(r.offset);
    if (!discard && r.bytes > 0 && (r.flags & (IOT_BLKF_READ | IOT_BLKF_WRITE))) {
      const int dir = r.flags & IOT_BLKF_WRITE ? 1 : 0;
      (dir ? s->writes : s->reads)++;
      s->sizes[dir].Add(r.bytes);
      s->size_values[dir].push_back(r.bytes);
      s->bytes = SaturatingAdd(s->bytes, r.bytes);
    }
    if (s->requests > 1) s->iat.Add(r.ts >= prev_ts ? r.ts - prev_ts : 0);
    prev_ts = r.ts;
    s->issue_ts.push_back(r.ts);
    if (s->first_ts == 0) s->first_ts = r.ts;
    s->last_ts = std::max(s->last_ts, r.ts);
  }
}

// `reader`: the trace opened on `path`, or null to open it here (skipping damaged chunks with
// `salvage`).
Result<Stream> LoadStream(const std::string& path, std::unique_ptr<TraceReader> reader,
                          bool salvage, std::optional<uint32_t> wanted_dev) {
  if (!reader) {
    TraceReaderOptions ro;
    ro.salvage = salvage;
    IOTWIN_ASSIGN_OR_RETURN(reader, TraceReader::Open(path, ro));
  }
  IOTWIN_ASSIGN_OR_RETURN(StreamPass pass, ReadStreamTrace(path, std::move(reader)));
  const std::unique_ptr<model::TraceModel>& m = pass.model;
  Stream s;
  s.path = path;
  const json& meta = m->meta();
  s.pace = json_fields::GetString(meta, "replay/pace");
  s.source_dev = json_fields::GetString(meta, "replay/source_dev");
  if (const json* off = json_fields::Find(meta, "replay/device_offset");
      off && off->is_number_unsigned()) {
    s.offset = off->get<uint64_t>();
  }
  if (const json* w = json_fields::Find(meta, "replay/wrapped"); w && w->is_boolean()) {
    s.wrapped = w->get<bool>();
  }
  s.dev = PickDevice(*m, wanted_dev);
  std::vector<const model::BlockRequest*> reqs;
  for (const auto& r : m->block_requests()) {
    if (r.dev == s.dev) reqs.push_back(&r);
  }
  auto less_offset = [&](uint64_t at) { return at >= s.offset ? at - s.offset : 0; };
  for (const auto* r : reqs) {
    s.issued.push_back({r->ts, less_offset(SaturatingMul(r->sector, kSector)), r->bytes, r->flags});
    // Device time from the last issue (a requeued request's wait is not the device's).
    const uint64_t issued = std::max(r->ts, r->last_issue);
    if (r->end > issued) s.d2c.Add(r->end - issued);
    const size_t depth = std::min<size_t>(r->inflight, kMaxDepthBin);
    if (s.depth_at_issue.size() <= depth) s.depth_at_issue.resize(depth + 1, 0);
    s.depth_at_issue[depth]++;
  }
  TallyIssues(s.issued, &s);
  if (auto it = pass.bios.find(s.dev); it != pass.bios.end()) {
    s.bios = std::move(it->second);
    for (IssuedIo& io : s.bios) io.offset = less_offset(io.offset);
  }
  s.device = DeviceFactsOf(meta, s.dev);
  s.depth_ns = DepthOverTime(reqs);
  s.nvme_layer = pass.nvme_layer;
  if (auto it = pass.nvme.find(s.dev); it != pass.nvme.end()) {
    s.nvme_commands = it->second.commands;
    s.nvme_opcodes = std::move(it->second.opcodes);
    s.nvme_sizes = std::move(it->second.sizes);
  }
  return s;
}

uint32_t Median(std::vector<uint32_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Both sides' start offsets in the same equal-width bins over their joint extent.
std::pair<std::vector<uint64_t>, std::vector<uint64_t>> LbaBins(const Stream& a, const Stream& b) {
  uint64_t hi = 1;
  for (uint64_t v : a.starts) hi = std::max(hi, v);
  for (uint64_t v : b.starts) hi = std::max(hi, v);
  auto bin = [&](const Stream& s) {
    std::vector<uint64_t> out(kLbaBins, 0);
    const long double width = (static_cast<long double>(hi) + 1) / kLbaBins;
    for (uint64_t v : s.starts) {
      out[std::min<size_t>(kLbaBins - 1, static_cast<size_t>(static_cast<long double>(v) / width))]++;
    }
    return out;
  };
  return {bin(a), bin(b)};
}

// Percentile of a distribution over depths (time or requests at each depth).
uint64_t DepthPercentile(const std::vector<uint64_t>& ns, double p) {
  uint64_t total = 0;
  for (uint64_t v : ns) total = SaturatingAdd(total, v);
  if (total == 0) return 0;
  long double want = static_cast<long double>(total) * p / 100, seen = 0;
  for (size_t d = 0; d < ns.size(); d++) {
    seen += static_cast<long double>(ns[d]);
    if (seen >= want) return d;
  }
  return ns.size() - 1;
}

// Share of the time spent at each depth, to 4 places.
json DepthShares(const std::vector<uint64_t>& ns) {
  long double total = 0;
  for (uint64_t v : ns) total += static_cast<long double>(v);
  json out = json::array();
  for (uint64_t v : ns) {
    out.push_back(total > 0 ? std::round(static_cast<double>(v / total) * 1e4) / 1e4 : 0.0);
  }
  return out;
}

double Rate(uint64_t n, uint64_t first, uint64_t last) {
  return last > first ? static_cast<double>(n) * 1e9 / static_cast<double>(last - first) : 0.0;
}

double Pct(double reference, double value) {
  return reference != 0 ? (value - reference) / reference * 100 : 0.0;
}

// "read=120 write=80 flush=2": the NVM command set's names of its three commonest I/O opcodes
// (NVM Command Set Specification, "Opcodes for NVM Commands"), others in hex.
std::string OpcodeMix(const Stream& s) {
  std::string out;
  for (const auto& [opcode, n] : s.nvme_opcodes) {
    const std::string name = opcode == 0x00   ? "flush"
                             : opcode == 0x01 ? "write"
                             : opcode == 0x02 ? "read"
                                              : fmt::format("{:#04x}", opcode);
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", name, n);
  }
  return out.empty() ? "none" : out;
}

json SideJson(const Stream& s) {
  return {{"path", s.path},
          {"dev", FormatDev(s.dev)},
          {"device_offset", s.offset},
          {"requests", s.requests},
          {"reads", s.reads},
          {"writes", s.writes},
          {"bytes", s.bytes},
          {"flushes", s.flushes},
          {"fua", s.fua},
          {"discards", s.discards},
          {"iops", Rate(s.requests, s.first_ts, s.last_ts)},
          {"span_ns", s.last_ts - s.first_ts},
          {"queue_depth", {{"time_share", DepthShares(s.depth_ns)},
                           {"p50", DepthPercentile(s.depth_ns, 50)},
                           {"p99", DepthPercentile(s.depth_ns, 99)},
                           {"max", s.depth_ns.empty() ? 0 : s.depth_ns.size() - 1}}},
          {"iat_ns", {{"p50", s.iat.Percentile(50)}, {"p99", s.iat.Percentile(99)}}},
          {"d2c_ns", {{"p50", s.d2c.Percentile(50)}, {"p99", s.d2c.Percentile(99)}}},
          {"size", {{"read_p50", Median(s.size_values[0])},
                    {"write_p50", Median(s.size_values[1])}}},
          {"nvme", s.nvme_layer ? json{{"commands", s.nvme_commands}, {"opcodes", OpcodeMix(s)}}
                                : json(nullptr)}};
}

struct Value {
  double value = 0;
  json original, replay;
  std::string differed;  // what a FAIL says
  bool applicable = true;  // false: the traces lack what the measure needs (not judged)
};

double Round6(double v) { return std::round(v * 1e6) / 1e6; }

// NVMe commands of the two sides (judged when both traces have the NVMe layer and commands on
// their device): how many, the share of each opcode, the data size of each command.
void AddNvmeMeasures(const Stream& a, const Stream& b, std::map<std::string, Value>* v) {
  const bool both = a.nvme_commands > 0 && b.nvme_commands > 0;
  const std::string missing =
      both ? ""
           : fmt::format("no NVMe commands on the device in the {}",
                         a.nvme_commands == 0 ? "original" : "replay");
  auto fd = [](uint64_t x) { return static_cast<double>(x); };
  (*v)["dev-nvme-commands-rel-err"] = {
      RelativeError(fd(a.nvme_commands), fd(b.nvme_commands)), a.nvme_commands,
      b.nvme_commands,
      fmt::format("the replay sent {} NVMe commands, the original {} ({:+.1f}%)",
                  b.nvme_commands, a.nvme_commands,
                  Pct(fd(a.nvme_commands), fd(b.nvme_commands))),
      both};
  double worst = 0;
  std::map<uint8_t, uint64_t> opcodes = a.nvme_opcodes;
  opcodes.insert(b.nvme_opcodes.begin(), b.nvme_opcodes.end());
  for (const auto& entry : opcodes) {
    const uint8_t opcode = entry.first;  // a copy: clang 14 cannot capture a structured binding
    auto share = [&](const Stream& s) {
      auto it = s.nvme_opcodes.find(opcode);
      return it == s.nvme_opcodes.end() || s.nvme_commands == 0
                 ? 0.0
                 : fd(it->second) / fd(s.nvme_commands);
    };
    worst = std::max(worst, std::fabs(share(a) - share(b)));
  }
  (*v)["dev-nvme-opcode-diff"] = {
      worst, nullptr, nullptr,
      fmt::format("NVMe opcodes: {} in the replay, {} in the original", OpcodeMix(b), OpcodeMix(a)),
      both};
  (*v)["dev-nvme-size-ks"] = {
      KsDistance(a.nvme_sizes, b.nvme_sizes), a.nvme_sizes.Percentile(50),
      b.nvme_sizes.Percentile(50),
      fmt::format("NVMe command sizes: p50 {} bytes in the replay vs {}, max {} vs {}",
                  b.nvme_sizes.Percentile(50), a.nvme_sizes.Percentile(50), b.nvme_sizes.max(),
                  a.nvme_sizes.max()),
      both};
  if (!both) {
    for (const char* name : {"dev-nvme-commands-rel-err", "dev-nvme-opcode-diff",
                             "dev-nvme-size-ks"}) {
      (*v)[name].differed = missing;
    }
  }
}

std::map<std::string, Value> ComputeMeasures(const Stream& a, const Stream& b,
                                             const CompareOptions& o) {
  std::map<std::string, Value> v;
  auto fd = [](double x) { return static_cast<double>(x); };
  v["dev-requests-rel-err"] = {
      RelativeError(fd(a.requests), fd(b.requests)), a.requests, b.requests,
      fmt::format("the replay issued {} requests, the original {} ({:+.1f}%)", b.requests,
                  a.requests, Pct(fd(a.requests), fd(b.requests)))};
  v["dev-bytes-rel-err"] = {
      RelativeError(fd(a.bytes), fd(b.bytes)), a.bytes, b.bytes,
      fmt::format("the replay moved {} bytes, the original {} ({:+.1f}%)", b.bytes, a.bytes,
                  Pct(fd(a.bytes), fd(b.bytes)))};
  v["dev-size-ks"] = {
      std::max(KsDistance(a.sizes[0], b.sizes[0]), KsDistance(a.sizes[1], b.sizes[1])), nullptr,
      nullptr,
      fmt::format("request sizes (p50): reads {} in the replay vs {}, writes {} vs {}",
                  Median(b.size_values[0]), Median(a.size_values[0]), Median(b.size_values[1]),
                  Median(a.size_values[1]))};
  auto [lba_a, lba_b] = LbaBins(a, b);
  v["dev-lba-ks"] = {KsDistance(lba_a, lba_b), nullptr, nullptr,
                     "start LBAs (less --device-offset) are distributed differently over the "
                     "device"};
  v["dev-lba-js"] = {JsDistance(lba_a, lba_b), nullptr, nullptr, "start LBAs differ"};
  const double share_a = a.requests ? fd(a.reads) / fd(a.requests) : 0;
  const double share_b = b.requests ? fd(b.reads) / fd(b.requests) : 0;
  v["dev-read-share-diff"] = {
      std::fabs(share_a - share_b), Round6(share_a), Round6(share_b),
      fmt::format("reads are {:.1f}% of the replay's requests, {:.1f}% of the original's",
                  share_b * 100, share_a * 100)};
  const double flags_err = std::max({RelativeError(fd(a.flushes), fd(b.flushes)),
                                     RelativeError(fd(a.fua), fd(b.fua)),
                                     RelativeError(fd(a.discards), fd(b.discards))});
  v["dev-flags-rel-err"] = {
      flags_err, nullptr, nullptr,
      fmt::format("flush {} vs {}, FUA {} vs {}, discard {} vs {} (replay vs original)",
                  b.flushes, a.flushes, b.fua, a.fua, b.discards, a.discards)};
  // Queue depth, at each issue and weighted by time: the KS distance, both medians, and the
  // medians and 99th percentiles in words.
  auto depth = [](const std::vector<uint64_t>& da, const std::vector<uint64_t>& db,
                  const char* what) -> Value {
    return {KsDistance(da, db), DepthPercentile(da, 50), DepthPercentile(db, 50),
            fmt::format("{}: p50 {} in the replay vs {}, p99 {} vs {}", what,
                        DepthPercentile(db, 50), DepthPercentile(da, 50), DepthPercentile(db, 99),
                        DepthPercentile(da, 99))};
  };
  v["dev-qd-ks"] = depth(a.depth_at_issue, b.depth_at_issue, "queue depth at issue");
  v["dev-qd-time-ks"] = depth(a.depth_ns, b.depth_ns, "queue depth over time");
  v["dev-iat-ks"] = {
      KsDistanceFrom(a.iat, b.iat, o.iat_resolution_ns), a.iat.Percentile(50),
      b.iat.Percentile(50),
      fmt::format("inter-arrival times: p50 {} in the replay vs {}, p99 {} vs {}",
                  FormatDuration(fd(b.iat.Percentile(50))), FormatDuration(fd(a.iat.Percentile(50))),
                  FormatDuration(fd(b.iat.Percentile(99))), FormatDuration(fd(a.iat.Percentile(99))))};
  const double iops_a = Rate(a.requests, a.first_ts, a.last_ts);
  const double iops_b = Rate(b.requests, b.first_ts, b.last_ts);
  v["dev-iops-rel-err"] = {
      RelativeError(iops_a, iops_b), Round6(iops_a), Round6(iops_b),
      fmt::format("{:.0f} requests/s in the replay, {:.0f} in the original (first to last issue)",
                  iops_b, iops_a)};
  v["dev-d2c-ks"] = {
      KsDistance(a.d2c, b.d2c), a.d2c.Percentile(50), b.d2c.Percentile(50),
      fmt::format("device time D2C: p50 {} on the replay's device vs {}",
                  FormatDuration(fd(b.d2c.Percentile(50))), FormatDuration(fd(a.d2c.Percentile(50))))};
  AddNvmeMeasures(a, b, &v);
  return v;
}

// How far from its place in the original's timeline each request was issued: request i of the
// replay at (its issue - the replay's first issue) against request i of the original at (its
// issue - the original's first issue). Only when both issued the same number of requests (then
// the i-th of each are the same request); null otherwise.
json ScheduleOffsets(const Stream& a, const Stream& b) {
  if (a.issue_ts.size() != b.issue_ts.size() || a.issue_ts.empty()) return nullptr;
  LogLinearHistogram late, early;
  for (size_t i = 0; i < a.issue_ts.size(); i++) {
    const uint64_t at_a = a.issue_ts[i] - a.issue_ts[0], at_b = b.issue_ts[i] - b.issue_ts[0];
    if (at_b >= at_a) late.Add(at_b - at_a);
    else early.Add(at_a - at_b);
  }
  LogLinearHistogram both = late;
  both.Merge(early);
  return {{"requests", a.issue_ts.size()},
          {"late", late.total()},
          {"early", early.total()},
          {"p50", both.Percentile(50)},
          {"p99", both.Percentile(99)},
          {"max", both.max()}};
}


// ---- a device replay onto another device -------------------------------------------------------

// How much slower (> 1) or faster (< 1) the target's D2C is than the original's at which a
// device counts as another device: a replay's own noise on one shared machine stays within it
// (loop devices on 2 busy cores: p50 within 1.3x), a different device does not.
constexpr double kSpeedRatio = 1.5;

// What the target device is to the original's, and so what compare judges: on another device
// the issue stream (what the replayer controls) is judged and queue depth and latency are the
// device's answer.
struct TargetDevice {
  bool other = false;
  std::string decided_by;  // "auto" or "--target-device"
  std::string why;         // what made it another device
  std::string speed;       // "slower", "faster", "about as fast", "unknown" (no completions)
  std::string limits_differ;  // QueueLimitDifferences
  bool stream_is_bios = false;  // the replay's issue stream is its bios (QUEUE records)
  // Issued I/Os the device split into several requests or merged into one (its answer).
  uint64_t device_requests = 0, split = 0, split_pieces = 0, merged = 0, merged_parts = 0;
  std::string attribution;  // the split/merge difference in words, "" when none
};

std::string SpeedOf(const Stream& a, const Stream& b) {
  if (a.d2c.total() == 0 || b.d2c.total() == 0) return "unknown";
  auto ratio = [](uint64_t target, uint64_t original) {
    return static_cast<double>(std::max<uint64_t>(target, 1)) /
           static_cast<double>(std::max<uint64_t>(original, 1));
  };
  const double r50 = ratio(b.d2c.Percentile(50), a.d2c.Percentile(50));
  const double r99 = ratio(b.d2c.Percentile(99), a.d2c.Percentile(99));
  if (r50 >= kSpeedRatio || (r50 > 1 / kSpeedRatio && r99 >= 2 * kSpeedRatio)) return "slower";
  if (r50 <= 1 / kSpeedRatio || (r50 < kSpeedRatio && r99 <= 1 / (2 * kSpeedRatio))) {
    return "faster";
  }
  return "about as fast";
}

// The replay's bios are its issue stream when they hold every byte its requests moved (a trace
// recorded with the block layer's bio events: `replay --record` does).
bool BiosHoldTheStream(const Stream& b) {
  if (b.bios.empty()) return false;
  uint64_t bytes = 0;
  for (const IssuedIo& io : b.bios) {
    if (io.flags & (IOT_BLKF_READ | IOT_BLKF_WRITE) &&
        !(io.flags & (IOT_BLKF_DISCARD | IOT_BLKF_SECURE_ERASE | IOT_BLKF_WRITE_ZEROES))) {
      bytes = SaturatingAdd(bytes, io.bytes);
    }
  }
  return bytes == b.bytes;
}

// The split/merge difference of the device's requests against the issued I/Os, in words.
std::string Attribution(const TargetDevice& t, const Stream& b) {
  if (t.split == 0 && t.merged == 0 && t.limits_differ.empty()) return "";
  std::string what;
  if (t.split) what += fmt::format("{} issued I/Os split into {} requests", t.split, t.split_pieces);
  if (t.merged) {
    what += fmt::format("{}{} requests merged from {} issued I/Os", what.empty() ? "" : ", ",
                        t.merged, t.merged_parts);
  }
  if (what.empty()) what = "request counts and sizes";
  return fmt::format("{} by the target's queue limits ({}){}", what,
                     t.limits_differ.empty() ? QueueLimitsText(b.device)
                                             : t.limits_differ + ", target vs original",
                     t.stream_is_bios ? "" : "; bytes compared instead of counts");
}

Result<TargetDevice> DecideTarget(const Stream& a, const Stream& b, const CompareOptions& o) {
  TargetDevice t;
  t.speed = SpeedOf(a, b);
  t.limits_differ = QueueLimitDifferences(a.device, b.device);
  const bool models_differ = a.device.known && b.device.known && a.device.model != b.device.model;
  if (o.target_device == "auto") {
    t.decided_by = "auto";
    if (t.speed == "slower" || t.speed == "faster") {
      t.why = fmt::format("its D2C latency differs, the target is {}", t.speed);
    } else if (!t.limits_differ.empty()) {
      t.why = "its queue limits differ: " + t.limits_differ;
    } else if (models_differ) {
      t.why = fmt::format("its model differs: {} vs {}", b.device.model, a.device.model);
    }
    t.other = !t.why.empty();
  } else if (o.target_device == "other" || o.target_device == "same") {
    t.decided_by = "--target-device";
    t.other = o.target_device == "other";
    t.why = t.other ? "--target-device other" : "";
  } else {
    return Status::Invalid("--target-device {}: expected auto, same or other", o.target_device);
  }
  t.device_requests = b.requests;
  if (!t.other) return t;
  t.stream_is_bios = BiosHoldTheStream(b);
  if (t.stream_is_bios) {
    const IssueMatch device = MatchIssues(b.bios, b.issued);
    t.split = device.split;
    t.split_pieces = device.split_pieces;
    t.merged = device.merged;
    t.merged_parts = device.merged_parts;
  }
  return t;
}

enum class Role { kJudged, kDeviceAnswer, kReported };

// On another device queue depth, latency and what the device made of the stream (NVMe commands
// where the queue limits differ; request counts and sizes when the stream is its requests and
// was split or merged) are its answer; the issue order and lateness are judged there, where they
// take the queue depth's place.
Role RoleOf(const std::string& name, const TargetDevice& t, const std::string& pace) {
  const bool issue_measure = name == "dev-issue-order" || name == "dev-schedule-p99-us";
  if (!t.other) return issue_measure ? Role::kReported : Role::kJudged;
  if (name == "dev-schedule-p99-us" && pace != "original") return Role::kReported;
  if (name == "dev-qd-ks" || name == "dev-qd-time-ks" || name == "dev-d2c-ks") {
    return Role::kDeviceAnswer;
  }
  // The driver cuts requests into commands by the controller's limits: the same limits, the
  // same commands, however fast the device.
  if (name.rfind("dev-nvme-", 0) == 0 && !t.limits_differ.empty()) return Role::kDeviceAnswer;
  if (!t.stream_is_bios && !t.attribution.empty() &&
      (name == "dev-requests-rel-err" || name == "dev-size-ks")) {
    return Role::kDeviceAnswer;
  }
  return Role::kJudged;
}

void AddIssueMeasures(const IssueMatch& m, std::map<std::string, Value>* v) {
  (*v)["dev-issue-order"] = {
      m.OrderError(), m.reference, m.other,
      fmt::format("of {} original requests and {} issued I/Os, {} issued out of order, {} missing, "
                  "{} extra", m.reference, m.other, m.out_of_order, m.missing, m.extra)};
  auto us = [](uint64_t ns) { return Round6(static_cast<double>(ns) / 1e3); };
  (*v)["dev-schedule-p99-us"] = {
      us(m.late_ns.Percentile(99)), nullptr, us(m.late_ns.Percentile(50)),
      fmt::format("issued late against the original's timeline: p50 {}, p99 {}, max {}",
                  FormatDuration(static_cast<double>(m.late_ns.Percentile(50))),
                  FormatDuration(static_cast<double>(m.late_ns.Percentile(99))),
                  FormatDuration(static_cast<double>(m.late_ns.max())))};
}

json MatchJson(const IssueMatch& m, bool bios) {
  return {{"issued_as", bios ? "bios" : "requests"},
          {"original_requests", m.reference},
          {"issued", m.other},
          {"paired", m.paired},
          {"out_of_order", m.out_of_order},
          {"missing", m.missing},
          {"extra", m.extra},
          {"split", m.split},
          {"merged", m.merged},
          {"late_ns", {{"p50", m.late_ns.Percentile(50)},
                       {"p99", m.late_ns.Percentile(99)},
                       {"max", m.late_ns.max()}}}};
}

json TargetJson(const Stream& a, const Stream& b, const TargetDevice& t) {
  auto pcts = [](const LogLinearHistogram& h) {
    return json{{"p50", h.Percentile(50)}, {"p99", h.Percentile(99)}};
  };
  auto depth = [](const Stream& s) {
    return json{{"p50", DepthPercentile(s.depth_at_issue, 50)},
                {"p99", DepthPercentile(s.depth_at_issue, 99)}};
  };
  return {{"another_device", t.other},
          {"decided_by", t.decided_by},
          {"why", t.why},
          {"speed", t.speed},
          {"d2c_ns", {{"original", pcts(a.d2c)}, {"replay", pcts(b.d2c)}}},
          {"queue_depth_at_issue", {{"original", depth(a)}, {"replay", depth(b)}}},
          {"issue_stream", t.stream_is_bios ? "bios" : "requests"},
          {"device_requests", t.device_requests},
          {"split", t.split},
          {"split_pieces", t.split_pieces},
          {"merged", t.merged},
          {"merged_parts", t.merged_parts},
          {"attribution", t.attribution},
          {"queue_limits", {{"original", a.device.ToJson()},
                            {"replay", b.device.ToJson()},
                            {"differ", t.limits_differ}}}};
}

}  // namespace

const std::vector<MeasureSpec>& BlockStreamMeasures() {
  // name, threshold, at_least, timing, enabled, what.
  static const std::vector<MeasureSpec> kMeasures = {
      {"dev-requests-rel-err", 0.01, false, false, true,
       "relative error of the device requests issued (block layer, one device)"},
      {"dev-bytes-rel-err", 0.01, false, false, true, "relative error of the bytes read + written"},
      {"dev-size-ks", 0.05, false, false, true,
       "Kolmogorov-Smirnov distance of request sizes (worst of read/write)"},
      {"dev-lba-ks", 0.05, false, false, true,
       "Kolmogorov-Smirnov distance of start LBAs (256 equal bins over the extent)"},
      {"dev-lba-js", 0.10, false, false, false, "Jensen-Shannon distance of start LBAs (same bins)"},
      {"dev-read-share-diff", 0.02, false, false, true,
       "absolute difference of the share of requests that are reads"},
      {"dev-flags-rel-err", 0.01, false, false, true,
       "largest relative error of the flush, FUA and discard counts"},
      {"dev-qd-ks", 0.15, false, true, true,
       "Kolmogorov-Smirnov distance of the queue depth each request found at issue (itself "
       "included)"},
      {"dev-qd-time-ks", 0.25, false, true, false,
       "Kolmogorov-Smirnov distance of the queue depth over time (time-weighted: depth = rate x "
       "the device's latency, information)"},
      {"dev-iat-ks", 0.15, false, true, true,
       "Kolmogorov-Smirnov distance of inter-arrival times (below --iat-resolution-us: one "
       "class)"},
      {"dev-iops-rel-err", 0.05, false, true, true,
       "relative error of requests/s, first to last issue"},
      {"dev-d2c-ks", 0.25, false, true, false,
       "Kolmogorov-Smirnov distance of D2C device times (the target device's: information)"},
      {"dev-issue-order", 0.01, false, false, true,
       "share of the original's requests issued out of order, missing or extra (judged on "
       "another device, where the issue stream is what the replayer controls)"},
      {"dev-schedule-p99-us", 1000, false, true, true,
       "99th percentile of how late each request was issued against the original's timeline, "
       "in us (judged on another device with pace original)"},
      {"dev-nvme-commands-rel-err", 0.01, false, false, true,
       "relative error of the NVMe commands sent for the device's requests (both traces with the "
       "NVMe layer)"},
      {"dev-nvme-opcode-diff", 0.01, false, false, true,
       "largest difference of one NVMe opcode's share of the commands"},
      {"dev-nvme-size-ks", 0.05, false, false, true,
       "Kolmogorov-Smirnov distance of NVMe command data sizes (blocks x LBA size)"},
  };
  return kMeasures;
}

bool IsBlockStreamMeasure(const std::string& name) {
  const auto& m = BlockStreamMeasures();
  return std::any_of(m.begin(), m.end(), [&](const MeasureSpec& s) { return name == s.name; });
}

Result<bool> WantsBlockStreamCompare(const std::string& replay, const CompareOptions& options,
                                     std::unique_ptr<TraceReader>* opened) {
  if (options.layer == "block") return true;
  if (options.layer == "syscall") return false;
  if (options.layer != "auto") {
    return Status::Invalid("--layer {}: expected auto, syscall or block", options.layer);
  }
  TraceReaderOptions ro;
  ro.salvage = options.salvage;
  IOTWIN_ASSIGN_OR_RETURN(*opened, TraceReader::Open(replay, ro));
  return json_fields::GetString((*opened)->meta(), "replay/layer") == "block";
}

Result<json> CompareBlockStreams(const std::string& original, const std::string& replay,
                                 const CompareOptions& options,
                                 std::unique_ptr<TraceReader> opened_replay) {
  IOTWIN_ASSIGN_OR_RETURN(Stream b, LoadStream(replay, std::move(opened_replay), options.salvage, std::nullopt));
  IOTWIN_ASSIGN_OR_RETURN(Stream a, LoadStream(original, nullptr, options.salvage, ParseDev(b.source_dev)));
  if (a.requests == 0 || b.requests == 0) {
    return Status::Invalid("{} holds no block requests: compare --layer block needs the block "
                           "layer in both traces", a.requests == 0 ? original : replay);
  }
  IOTWIN_ASSIGN_OR_RETURN(TargetDevice target, DecideTarget(a, b, options));
  if (target.stream_is_bios) TallyIssues(b.bios, &b);
  const IssueMatch match = MatchIssues(a.issued, target.stream_is_bios ? b.bios : b.issued);
  if (!target.stream_is_bios) {
    target.split = match.split;
    target.split_pieces = match.split_pieces;
    target.merged = match.merged;
    target.merged_parts = match.merged_parts;
  }
  if (target.other) target.attribution = Attribution(target, b);
  const bool timing_judged = b.pace.empty() || b.pace == "original" || b.pace == "gaps";
  std::map<std::string, Value> values = ComputeMeasures(a, b, options);
  AddIssueMeasures(match, &values);
  json measures = json::array(), failed = json::array(), differences = json::array();
  for (const MeasureSpec& spec : BlockStreamMeasures()) {
    Value& v = values.at(spec.name);
    std::optional<double> threshold;
    if (spec.enabled) threshold = spec.default_threshold;
    auto o = options.thresholds.find(spec.name);
    if (o != options.thresholds.end()) threshold = o->second;
    // Folded ranges (--wrap) land elsewhere by design.
    const bool lba = std::string(spec.name).rfind("dev-lba", 0) == 0;
    const Role role = RoleOf(spec.name, target, b.pace);
    if (role == Role::kDeviceAnswer && !target.attribution.empty() &&
        (std::string(spec.name) == "dev-requests-rel-err" ||
         std::string(spec.name) == "dev-size-ks")) {
      v.differed += "; " + target.attribution;
    }
    const bool judged = threshold.has_value() && (!spec.timing || timing_judged) &&
                        !(lba && (a.wrapped || b.wrapped)) && v.applicable &&
                        role == Role::kJudged;
    const double value = Round6(v.value);
    const bool pass = !threshold || (spec.at_least ? value >= *threshold - 1e-12
                                                   : value <= *threshold + 1e-12);
    json m = {{"name", spec.name}, {"value", value}, {"original", v.original},
              {"replay", v.replay}, {"kind", spec.timing ? "timing" : "structural"},
              {"threshold", threshold ? json(*threshold) : json(nullptr)},
              {"condition", spec.at_least ? ">=" : "<="}, {"judged", judged},
              {"pass", pass}, {"detail", v.differed}};
    if (role == Role::kDeviceAnswer && v.applicable) m["device_answer"] = true;
    measures.push_back(std::move(m));
    if (judged && !pass) {
      failed.push_back(spec.name);
      differences.push_back(fmt::format("{}: {}", spec.name, v.differed));
    }
  }
  return json{{"layer", "block"},
              {"original", SideJson(a)},
              {"replay", SideJson(b)},
              {"pace", b.pace.empty() ? json(nullptr) : json(b.pace)},
              {"timing_judged", timing_judged},
              {"target_device", TargetJson(a, b, target)},
              {"issue_match", MatchJson(match, target.stream_is_bios)},
              {"measures", measures},
              {"failed", failed},
              {"differences", differences},
              {"schedule_offset_ns", ScheduleOffsets(a, b)},
              {"verdict", failed.empty() ? "pass" : "fail"}};
}

bool IsBlockStreamResult(const json& result) {
  return result.is_object() && result.value("layer", "") == "block";
}

namespace {

// What the target device was to the original's and what that made compare judge.
template <typename Line>
void TargetLines(const json& r, const Line& line) {
  const json* t = json_fields::Object(r, "target_device");
  if (!t) return;
  auto u = [](const json& j, const char* p) { return json_fields::GetUint(j, p, 0); };
  auto dur = [&](const char* p) { return FormatDuration(static_cast<double>(u(*t, p))); };
  const bool other = json_fields::GetBool(*t, "another_device", false);
  const std::string speed = json_fields::GetString(*t, "speed");
  if (!other) {
    line(fmt::format("  target    the same device or an equal one ({}; {}, D2C p50 {} vs {}): "
                     "everything judged", json_fields::GetString(*t, "decided_by"),
                     speed == "unknown" ? "speed unknown" : speed, dur("d2c_ns/replay/p50"),
                     dur("d2c_ns/original/p50")));
    return;
  }
  line(fmt::format("  target    another device ({}: {})", json_fields::GetString(*t, "decided_by"),
                   json_fields::GetString(*t, "why")));
  line(fmt::format("            {}: D2C p50 {} vs {}, p99 {} vs {} (replay vs original)",
                   speed == "unknown" ? "speed unknown" : "the target is " + speed,
                   dur("d2c_ns/replay/p50"), dur("d2c_ns/original/p50"), dur("d2c_ns/replay/p99"),
                   dur("d2c_ns/original/p99")));
  line(fmt::format("            judged: the issue stream the replayer controls (its {}: order, "
                   "LBAs, sizes, flags, inter-arrival, lateness)",
                   json_fields::GetString(*t, "issue_stream")));
  line(fmt::format("            the device's answer, reported: queue depth at issue p50 {} vs {}, "
                   "p99 {} vs {}; {} requests on the device",
                   u(*t, "queue_depth_at_issue/replay/p50"),
                   u(*t, "queue_depth_at_issue/original/p50"),
                   u(*t, "queue_depth_at_issue/replay/p99"),
                   u(*t, "queue_depth_at_issue/original/p99"), u(*t, "device_requests")));
  const std::string attribution = json_fields::GetString(*t, "attribution");
  if (!attribution.empty()) line("            " + attribution);
  if (const json* m = json_fields::Object(r, "issue_match")) {
    line(fmt::format("  issued    {} of {} paired with the original's requests, {} out of order, "
                     "{} missing, {} extra; late against the schedule p50 {}, p99 {}, max {}",
                     u(*m, "paired"), u(*m, "issued"), u(*m, "out_of_order"), u(*m, "missing"),
                     u(*m, "extra"), FormatDuration(static_cast<double>(u(*m, "late_ns/p50"))),
                     FormatDuration(static_cast<double>(u(*m, "late_ns/p99"))),
                     FormatDuration(static_cast<double>(u(*m, "late_ns/max")))));
  }
}

}  // namespace

std::string RenderBlockStreamText(const json& r) {
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  auto u = [](const json& j, const char* p) { return json_fields::GetUint(j, p, 0); };
  line("iotwin compare (device-level: block requests of one device)");
  for (const char* side : {"original", "replay"}) {
    const json& s = r[side];
    line(fmt::format("  {:<9} {}  (device {}, {} requests{})", side, s["path"].get<std::string>(),
                     s["dev"].get<std::string>(), FormatCount(u(s, "requests")),
                     u(s, "device_offset") ? fmt::format(", offset {}", u(s, "device_offset")) : ""));
  }
  line(fmt::format("  timing    {}", r["timing_judged"].get<bool>()
                                         ? "judged"
                                         : "reported, not judged (pace " +
                                               r["pace"].get<std::string>() + ")"));
  TargetLines(r, line);
  line("");
  out += RenderMeasuresTable(r["measures"]);
  line("");
  line(fmt::format("  {:<10} {:>9} {:>7} {:>7} {:>12} {:>6} {:>5} {:>8} {:>9} {:>10} {:>10}",
                   "", "requests", "reads", "writes", "bytes", "flush", "fua", "discard",
                   "qd p50", "iat p50", "d2c p50"));
  for (const char* side : {"original", "replay"}) {
    const json& s = r[side];
    line(fmt::format("  {:<10} {:>9} {:>7} {:>7} {:>12} {:>6} {:>5} {:>8} {:>9} {:>10} {:>10}",
                     side, u(s, "requests"), u(s, "reads"), u(s, "writes"), u(s, "bytes"),
                     u(s, "flushes"), u(s, "fua"), u(s, "discards"), u(s, "queue_depth/p50"),
                     FormatDuration(static_cast<double>(u(s, "iat_ns/p50"))),
                     FormatDuration(static_cast<double>(u(s, "d2c_ns/p50")))));
  }
  for (const char* side : {"original", "replay"}) {
    if (const json* n = json_fields::Object(r[side], "nvme")) {
      line(fmt::format("  {:<10} NVMe commands {} ({})", side, u(*n, "commands"),
                       (*n)["opcodes"].get<std::string>()));
    }
  }
  if (const json* off = json_fields::Object(r, "schedule_offset_ns")) {
    line(fmt::format("  schedule  request i issued at |(replay i - replay first) - (original i - "
                     "original first)|: p50 {}, p99 {}, max {} ({} late, {} early)",
                     FormatDuration(static_cast<double>(u(*off, "p50"))),
                     FormatDuration(static_cast<double>(u(*off, "p99"))),
                     FormatDuration(static_cast<double>(u(*off, "max"))), u(*off, "late"),
                     u(*off, "early")));
  }
  if (!r["differences"].empty()) {
    line("");
    line("  WHAT DIFFERED");
    for (const json& d : r["differences"]) line("    " + d.get<std::string>());
  }
  line("");
  line(RenderVerdictLine(r));
  return out;
}

}  // namespace iotwin::analysis
