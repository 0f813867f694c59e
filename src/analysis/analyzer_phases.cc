// Analyzer: intent markers and the phases they mark, and their part of the report model
// ("intents"). A phase is one begin..end interval of a label on one thread (docs/report.md,
// "Phases"). What a phase holds:
//  - calls, call bytes and call latency, faults, mapped pages and major faults: those of the
//    thread that marked it, while the phase is open on that thread's stack; a phase begun inside
//    another is part of it, so the outer phase's figures include the inner one's;
//  - device requests and bytes: the block requests issued (first issue, requeues not again)
//    while the phase was open, whoever issued them: the device's own view of the phase window,
//    what /proc/diskstats read at the phase's boundaries shows. Block requests are issued by
//    write-back threads, kernel workers and whichever task plugged them, rarely by the thread
//    whose reads or writes caused them, so the issuing thread says little about the phase.
// Cost: with no phase open every hook is one test of open_intents_.
#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "analysis/analyzer.h"
#include "analysis/analyzer_internal.h"
#include "base/checked_math.h"

namespace iotwin::analysis {

using nlohmann::json;

std::vector<Analyzer::PhaseDevice> Analyzer::DeviceTotals() const {
  std::vector<PhaseDevice> out;
  out.reserve(block_devs_.size());
  for (const auto& [dev, d] : block_devs_)
    out.push_back({.dev = dev, .ops = d.ops, .bytes = d.bytes});
  return out;  // by device number: block_devs_ is ordered
}

namespace {

// What each device did between `before` and `now` (both by device number); devices that did
// nothing are left out.
template <typename Device>
std::vector<Device> DeviceDelta(const std::vector<Device>& before, const std::vector<Device>& now) {
  std::vector<Device> out;
  size_t b = 0;
  for (const Device& n : now) {
    while (b < before.size() && before[b].dev < n.dev) b++;
    Device d = n;
    if (b < before.size() && before[b].dev == n.dev) {
      for (size_t dir = 0; dir < 2; dir++) {
        d.ops[dir] = n.ops[dir] >= before[b].ops[dir] ? n.ops[dir] - before[b].ops[dir] : 0;
        d.bytes[dir] =
            n.bytes[dir] >= before[b].bytes[dir] ? n.bytes[dir] - before[b].bytes[dir] : 0;
      }
    }
    if (d.ops[0] || d.ops[1] || d.bytes[0] || d.bytes[1]) out.push_back(d);
  }
  return out;
}

}  // namespace

void Analyzer::OnIntent(const iot_intent& r) {
  if (!TimeAllowed(r.ts) || !TaskAllowed(r.tgid, r.tid)) {
    ++filtered_out_;
    return;
  }
  switch (r.kind) {
    case IOT_INTENT_INSTANT: ++labels_[r.label_id].instants; break;
    case IOT_INTENT_BEGIN: {
      std::vector<OpenIntent>& stack = intent_stacks_[r.tid];
      OpenIntent e{.label = r.label_id, .ts = r.ts, .phase = UINT32_MAX};
      if (phases_.size() < kMaxPhases) {
        e.phase = static_cast<uint32_t>(phases_.size());
        PhaseStats& p = phases_.emplace_back();
        p.label = r.label_id;
        p.tgid = r.tgid;
        p.tid = r.tid;
        p.depth = static_cast<uint32_t>(std::min<size_t>(stack.size(), UINT32_MAX));
        p.begin_ts = r.ts;
        p.devices = DeviceTotals();
      } else {
        ++phases_dropped_;
      }
      stack.push_back(e);
      ++open_intents_;
      break;
    }
    case IOT_INTENT_END: {
      auto found = intent_stacks_.find(r.tid);
      if (found == intent_stacks_.end()) {
        ++intents_unmatched_;
        break;
      }
      std::vector<OpenIntent>& stack = found->second;
      for (size_t i = stack.size(); i-- > 0;) {
        if (stack[i].label != r.label_id) continue;
        const uint64_t dur = r.ts >= stack[i].ts ? r.ts - stack[i].ts : 0;
        LabelStats& l = labels_[r.label_id];
        ++l.count;
        l.total_ns = SaturatingAdd(l.total_ns, dur);
        l.max_ns = std::max(l.max_ns, dur);
        // The end closes the phase and every phase begun inside it and left open.
        const std::vector<PhaseDevice> now = DeviceTotals();
        for (size_t j = i; j < stack.size(); j++) {
          if (stack[j].phase == UINT32_MAX) continue;
          PhaseStats& p = phases_[stack[j].phase];
          p.end_ts = std::max(r.ts, p.begin_ts);
          p.open = false;
          p.devices = DeviceDelta(p.devices, now);
        }
        open_intents_ -= std::min<uint64_t>(open_intents_, stack.size() - i);
        stack.erase(stack.begin() + static_cast<long>(i), stack.end());
        return;
      }
      ++intents_unmatched_;
      break;
    }
    default: break;
  }
}

void Analyzer::NotePhaseCall(const iot_syscall& r, int dir, uint64_t bytes) {
  auto it = intent_stacks_.find(r.tid);
  if (it == intent_stacks_.end() || it->second.empty()) return;
  // The label's own figures are those of its innermost open interval.
  LabelStats& l = labels_[it->second.back().label];
  ++l.ops;
  l.bytes = SaturatingAdd(l.bytes, bytes);
  const size_t d = static_cast<size_t>(dir);
  for (const OpenIntent& e : it->second) {
    if (e.phase == UINT32_MAX) continue;
    PhaseStats& p = phases_[e.phase];
    ++p.calls[d];
    p.call_bytes[d] = SaturatingAdd(p.call_bytes[d], bytes);
    if (!p.latency[d]) p.latency[d] = std::make_unique<LogLinearHistogram>();
    p.latency[d]->Add(r.dur);
  }
}

void Analyzer::NotePhaseFault(uint32_t tid, uint64_t mapped_pages, bool major) {
  auto it = intent_stacks_.find(tid);
  if (it == intent_stacks_.end()) return;
  for (const OpenIntent& e : it->second) {
    if (e.phase == UINT32_MAX) continue;
    PhaseStats& p = phases_[e.phase];
    ++p.faults;
    if (major) ++p.faults_major;
    p.mapped_pages = SaturatingAdd(p.mapped_pages, mapped_pages);
  }
}

namespace {

std::string LabelText(const std::unordered_map<uint32_t, std::string>& strings, uint32_t id) {
  auto it = strings.find(id);
  return it != strings.end() ? it->second : fmt::format("<{}>", id);
}

// Each phase, in the order begun: times from the trace's start (ns) and on its clock (`*_ts_ns`,
// the records' ts_ns), its figures per direction. A phase still open at the end of the trace
// ends at its last record (`open`: true).
template <typename Phase, typename Device>
json PhaseJson(const Phase& p, const std::vector<Device>& devices, uint64_t start, uint64_t end_ts,
               uint64_t page_size, const std::string& label) {
  const auto rel = [start](uint64_t ts) { return ts >= start ? ts - start : 0; };
  json row = {{"label", label},
              {"tgid", p.tgid},
              {"tid", p.tid},
              {"depth", p.depth},
              {"open", p.open},
              {"begin_ts_ns", p.begin_ts},
              {"end_ts_ns", end_ts},
              {"start_ns", rel(p.begin_ts)},
              {"end_ns", rel(end_ts)},
              {"duration_ns", end_ts - p.begin_ts},
              {"read_calls", p.calls[0]},
              {"write_calls", p.calls[1]},
              {"read_bytes", p.call_bytes[0]},
              {"write_bytes", p.call_bytes[1]},
              {"faults", p.faults},
              {"major_faults", p.faults_major},
              {"mapped_bytes", SaturatingMul(p.mapped_pages, page_size)}};
  // All devices, then each device that did anything ("M:m" as the block section names it).
  std::array<uint64_t, 2> ops{}, bytes{};
  json per_device = json::array();
  for (const Device& d : devices) {
    per_device.push_back({{"name", fmt::format("{}:{}", d.dev >> 20, d.dev & 0xfffff)},
                          {"read_requests", d.ops[0]},
                          {"write_requests", d.ops[1]},
                          {"read_bytes", d.bytes[0]},
                          {"write_bytes", d.bytes[1]}});
    for (size_t dir = 0; dir < 2; dir++) {
      ops[dir] = SaturatingAdd(ops[dir], d.ops[dir]);
      bytes[dir] = SaturatingAdd(bytes[dir], d.bytes[dir]);
    }
  }
  row["device_read_requests"] = ops[0];
  row["device_write_requests"] = ops[1];
  row["device_read_bytes"] = bytes[0];
  row["device_write_bytes"] = bytes[1];
  row["devices"] = std::move(per_device);
  static constexpr const char* kDir[2] = {"read", "write"};
  for (size_t d = 0; d < 2; d++) {
    const LogLinearHistogram* h = p.latency[d].get();
    row[fmt::format("{}_p50_ns", kDir[d])] = h ? h->Percentile(50) : 0;
    row[fmt::format("{}_p99_ns", kDir[d])] = h ? h->Percentile(99) : 0;
  }
  return row;
}

}  // namespace

// Intent labels by total time inside them (`open`: intervals never ended), and the phases.
json Analyzer::IntentsModel() const {
  if (labels_.empty() && !intents_unmatched_ && phases_.empty()) return nullptr;
  std::vector<std::pair<uint32_t, const LabelStats*>> ls;
  for (const auto& [id, l] : labels_) ls.emplace_back(id, &l);
  std::sort(ls.begin(), ls.end(), [](const auto& a, const auto& b) {
    return a.second->total_ns != b.second->total_ns ? a.second->total_ns > b.second->total_ns
                                                    : a.first < b.first;
  });
  std::map<uint32_t, uint64_t> open;
  for (const auto& [tid, stack] : intent_stacks_)
    for (const OpenIntent& e : stack) open[e.label]++;
  json rows = json::array();
  for (const auto& [id, l] : ls) {
    rows.push_back({{"label", LabelText(strings_, id)},
                    {"intervals", l->count},
                    {"instants", l->instants},
                    {"total_ns", l->total_ns},
                    {"mean_ns", l->count ? l->total_ns / l->count : 0},
                    {"max_ns", l->max_ns},
                    {"open", open.count(id) ? open.at(id) : 0},
                    {"ops", l->ops},
                    {"bytes", l->bytes}});
  }
  const std::vector<PhaseDevice> now = DeviceTotals();
  json phases = json::array();
  for (const PhaseStats& p : phases_) {
    const std::string label = LabelText(strings_, p.label);
    if (!p.open) {
      phases.push_back(PhaseJson(p, p.devices, start_, p.end_ts, page_size_, label));
    } else {
      // Still open: it ends at the trace's last record, with what the devices did until then.
      phases.push_back(PhaseJson(p, DeviceDelta(p.devices, now), start_,
                                 std::max(last_ts_, p.begin_ts), page_size_, label));
    }
  }
  return {{"rows", rows},
          {"unmatched_ends", intents_unmatched_},
          {"phases", phases},
          {"phases_dropped", phases_dropped_}};
}

}  // namespace iotwin::analysis
