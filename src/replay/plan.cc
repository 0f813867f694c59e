#include "replay/plan.h"

#include <fcntl.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "base/checked_math.h"
#include "format/op_info.h"
#include "format/records.h"
#include "model/op_fields.h"
#include "model/path.h"
#include "replay/pacer.h"
#include "replay/write_budget.h"

namespace iotwin::replay {

using model::Op;
using model::OpKind;

namespace {
// Labels name the requests the async engines issue (async_engines.cc): reads, writes, syncs and
// io_uring's NOP; any other request is "other".
std::string AsyncLabel(uint8_t engine, uint8_t opcode) {
  const AsyncOpInfo i = AsyncOp(engine, opcode);
  const bool issued = i.kind != iotwin::AsyncKind::kOther || (i.nop && engine == IOT_AIO_ENGINE_URING);
  std::string label = issued ? std::string(i.name) : std::string("other");
  for (char& c : label) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return label;
}

bool CreatesName(const Op& op) {
  if (op.kind != OpKind::kSyscall) return false;
  const OpInfo& info = GetOpInfo(op.sc.op);
  if (info.names == NameEffect::kMakesDir) return true;
  return info.family == OpFamily::kOpen && (model::EffectiveOpenFlags(op.sc) & O_CREAT) != 0;
}
}  // namespace

std::string OpLabel(const Op& op) {
  switch (op.kind) {
    case OpKind::kSyscall: return std::string(OpName(op.sc.op));
    case OpKind::kPageFault: return (op.pf.flags & IOT_PFF_WRITE) ? "page_fault_write" : "page_fault";
    case OpKind::kAsyncSubmit:
      if (op.aio.engine == IOT_AIO_ENGINE_LIBAIO) {
        return "libaio:" + AsyncLabel(IOT_AIO_ENGINE_LIBAIO, op.aio.opcode);
      }
      return "uring:" + AsyncLabel(IOT_AIO_ENGINE_URING, op.aio.opcode);
    default: return std::string(model::OpKindName(op.kind));
  }
}

namespace {
// The write figures of a plan whose initial set is built: bytes written, and how far files grow
// past the sizes they are prepared with (per base: each base may be its own file system).
void PlanWrites(const model::TraceModel& m, ReplayPlan* plan) {
  std::map<uint32_t, uint64_t> prepared;  // file -> prepared size
  for (const auto& pf : plan->initial) prepared[pf.file] = pf.size;
  std::map<uint32_t, uint64_t> ends;  // file -> the furthest byte written
  const std::string& root = plan->mapper.root();
  auto grow = [&](const std::string& base, uint64_t bytes) {
    plan->growth_bytes = SaturatingAdd(plan->growth_bytes, bytes);
    uint64_t& b = plan->growth_by_base[base];
    b = SaturatingAdd(b, bytes);
  };
  for (const auto& th : m.threads()) {
    for (const auto& op : th.ops) {
      if (op.skip != model::Skip::kReplayable) continue;
      const PlannedWrite w = PlanWrite(m, op);
      if (w.bytes == 0) continue;
      plan->write_calls++;
      plan->write_bytes = SaturatingAdd(plan->write_bytes, w.bytes);
      if (w.file != model::kNone && w.file < m.files().size()) {
        uint64_t& end = ends[w.file];
        end = std::max(end, w.end);
      } else {
        grow(op.path != model::kNone ? plan->mapper.BaseOf(m.path(op.path)) : root, w.bytes);
      }
    }
  }
  for (const auto& [file, end] : ends) {
    auto it = prepared.find(file);
    const uint64_t have = it == prepared.end() ? 0 : it->second;
    if (end <= have) continue;
    const model::PathId path = m.files()[file].path;
    grow(path != model::kNone ? plan->mapper.BaseOf(m.path(path)) : root, end - have);
  }
}
}  // namespace

Result<ReplayPlan> BuildPlan(const model::TraceModel& m, const PathMapper& mapper, double speed) {
  ReplayPlan plan;
  plan.model = &m;
  plan.mapper = mapper;
  plan.targets.resize(m.paths().size());
  plan.confined.resize(m.paths().size());
  for (size_t i = 0; i < m.paths().size(); i++) {
    const std::string& p = m.paths()[i];
    if (p.empty() || p[0] != '/') continue;
    if (p.find('\0') != std::string::npos) {
      plan.unrepresentable_paths++;
      continue;
    }
    plan.confined[i] = model::NormalizePath(p);
    plan.targets[i] = mapper.Map(plan.confined[i]);
  }
  std::set<std::string> initial_targets;
  for (uint32_t f : m.InitialFileSet()) {
    const model::FileInfo& fi = m.files()[f];
    PlannedFile pf;
    pf.file = f;
    pf.recorded = m.path(fi.path);
    pf.target = plan.targets[fi.path];
    pf.dir = fi.is_dir;
    pf.size = fi.is_dir ? 0 : fi.initial_size;
    if (pf.target.empty()) continue;
    initial_targets.insert(pf.target);
    if (pf.dir) plan.initial_dirs++;
    else {
      plan.initial_files++;
      plan.initial_bytes += pf.size;
    }
    plan.initial.push_back(std::move(pf));
  }
  // Names the workload creates: every path an op creates, renames or links to, minus the
  // initial set (those are restored, not deleted).
  std::set<std::string> created;
  uint64_t longest_gaps = 0, longest_fast = 0;
  for (const auto& th : m.threads()) {
    bool any = false;
    uint64_t busy = 0, gaps = 0;
    uint64_t prev_end = th.start_ts;
    for (const auto& op : th.ops) {
      if (op.kind != OpKind::kSyscall && op.kind != OpKind::kPageFault &&
          op.kind != OpKind::kAsyncSubmit) {
        continue;
      }
      if (op.skip != model::Skip::kReplayable) {
        plan.skipped_ops++;
        continue;
      }
      plan.replayable_ops++;
      any = true;
      if (op.ts > prev_end) gaps = SaturatingAdd(gaps, op.ts - prev_end);
      uint64_t end = op.end == UINT64_MAX || op.end < op.ts ? op.ts : op.end;
      if (op.kind == OpKind::kSyscall) busy = SaturatingAdd(busy, end - op.ts);
      prev_end = std::max(prev_end, end);
      if (CreatesName(op) && op.path != model::kNone) created.insert(plan.targets[op.path]);
      // The second path of rename, link and symlink is the name they make.
      if (op.kind == OpKind::kSyscall && op.path2 != model::kNone &&
          GetOpInfo(op.sc.op).path2 == PathRole::kResolved) {
        created.insert(plan.targets[op.path2]);
      }
    }
    if (any) plan.threads_with_ops++;
    longest_gaps = std::max(longest_gaps, ScaledDue(busy, gaps, speed));
    longest_fast = std::max(longest_fast, busy);
  }
  for (const auto& c : created) {
    if (!c.empty() && !initial_targets.count(c)) plan.created.push_back(c);
  }
  // Deepest first, so files go before the directories holding them.
  std::sort(plan.created.begin(), plan.created.end(), [](const std::string& a, const std::string& b) {
    auto depth = [](const std::string& s) { return std::count(s.begin(), s.end(), '/'); };
    if (depth(a) != depth(b)) return depth(a) > depth(b);
    return a < b;
  });
  PlanWrites(m, &plan);
  uint64_t span = m.stats().last_ts > m.stats().first_ts ? m.stats().last_ts - m.stats().first_ts : 0;
  plan.est_original = ScaledDue(0, span, speed);
  plan.est_gaps = longest_gaps;
  plan.est_fast = longest_fast;
  return plan;
}

nlohmann::json PlanToJson(const ReplayPlan& plan, const ReplayOptions& o) {
  const model::TraceModel& m = *plan.model;
  nlohmann::json j;
  j["trace"] = o.trace;
  j["root"] = plan.mapper.root();
  nlohmann::json maps = nlohmann::json::array();
  for (const auto& [from, to] : plan.mapper.maps()) maps.push_back({{"from", from}, {"to", to}});
  j["maps"] = maps;
  j["pace"] = PaceName(o.pace);
  j["speed"] = o.speed;
  j["amplify"] = o.amplify;
  j["processes"] = m.processes().size();
  j["threads"] = plan.threads_with_ops;
  j["threads_total"] = m.threads().size();
  j["threads_needed"] = plan.threads_needed;
  j["thread_limit"] = {{"limit", plan.thread_limit.limit}, {"set_by", plan.thread_limit.why}};
  j["files"] = {{"preexisting_files", plan.initial_files},
                {"preexisting_dirs", plan.initial_dirs},
                {"preexisting_bytes", plan.initial_bytes},
                {"created_by_workload", plan.created.size()},
                {"fill", o.fill.ToString()},
                {"sparse", o.sparse},
                {"cache", CacheName(o.cache)}};
  nlohmann::json growth = nlohmann::json::object();
  for (const auto& [base, bytes] : plan.growth_by_base) growth[base] = bytes;
  j["writes"] = {{"calls", plan.write_calls}, {"bytes", plan.write_bytes},
                 {"growth_bytes", plan.growth_bytes}, {"growth_by_base", growth},
                 {"max_write", o.max_write}};
  std::map<std::string, uint64_t> by_kind, skipped;
  std::map<std::string, uint64_t> skip_reasons;
  for (const auto& th : m.threads()) {
    for (const auto& op : th.ops) {
      if (op.kind != OpKind::kSyscall && op.kind != OpKind::kPageFault &&
          op.kind != OpKind::kAsyncSubmit) {
        continue;
      }
      if (op.skip == model::Skip::kReplayable) by_kind[OpLabel(op)]++;
      else {
        skipped[OpLabel(op)]++;
        skip_reasons[std::string(model::SkipName(op.skip))]++;
      }
    }
  }
  j["ops"] = {{"replayable", plan.replayable_ops}, {"skipped", plan.skipped_ops},
              {"by_kind", by_kind}, {"skipped_by_kind", skipped},
              {"skipped_by_reason", skip_reasons}};
  j["unrepresentable_paths"] = plan.unrepresentable_paths;
  j["dependencies"] = m.stats().deps;
  j["unknown_fds"] = m.stats().unknown_fds;
  j["lost_events"] = m.stats().lost_events;
  j["page_faults"] = m.stats().page_faults;
  j["async_requests"] = m.stats().async_requests;
  j["block_requests"] = m.block_requests().size();
  uint64_t est = o.pace == PaceMode::kOriginal ? plan.est_original
                 : o.pace == PaceMode::kGaps   ? plan.est_gaps
                                               : plan.est_fast;
  j["estimated_duration_s"] = static_cast<double>(est) / 1e9;
  j["estimated_duration_basis"] =
      o.pace == PaceMode::kOriginal ? "recorded span / speed"
      : o.pace == PaceMode::kGaps   ? "longest thread: recorded gaps / speed + recorded call times"
                                    : "longest thread: recorded call times (target as fast as source)";
  return j;
}

std::string PlanToText(const ReplayPlan& plan, const ReplayOptions& o) {
  nlohmann::json j = PlanToJson(plan, o);
  std::string s;
  s += fmt::format("replay plan for {}\n", o.trace);
  s += fmt::format("  sandbox root     {}\n", plan.mapper.root());
  for (const auto& [from, to] : plan.mapper.maps()) s += fmt::format("  map              {} -> {}\n", from, to);
  s += fmt::format("  processes        {}\n", j["processes"].get<uint64_t>());
  s += fmt::format("  threads          {} with replayable ops ({} traced)\n", plan.threads_with_ops,
                   j["threads_total"].get<uint64_t>());
  s += fmt::format("  files to create  {} files ({} bytes), {} directories; fill {}{}\n",
                   plan.initial_files, plan.initial_bytes, plan.initial_dirs, o.fill.ToString(),
                   o.sparse ? ", sparse" : "");
  s += fmt::format("  workload creates {} names\n", plan.created.size());
  s += fmt::format("  writes           {} calls write up to {} bytes; files grow by up to {} bytes "
                   "past their prepared sizes{}\n",
                   plan.write_calls, plan.write_bytes, plan.growth_bytes,
                   o.max_write ? fmt::format("; --max-write {}", o.max_write) : std::string());
  s += fmt::format("  threads needed   {} (limit {}, set by {}){}\n", plan.threads_needed,
                   plan.thread_limit.limit, plan.thread_limit.why,
                   plan.threads_needed > plan.thread_limit.limit ? ": the replay would be refused"
                                                                 : "");
  s += fmt::format("  ops              {} replayable, {} skipped\n", plan.replayable_ops, plan.skipped_ops);
  for (auto& [k, v] : j["ops"]["by_kind"].items()) s += fmt::format("    {:<20} {}\n", k, v.get<uint64_t>());
  if (plan.skipped_ops) {
    s += "  skipped by reason\n";
    for (auto& [k, v] : j["ops"]["skipped_by_reason"].items()) {
      s += fmt::format("    {:<20} {}\n", k, v.get<uint64_t>());
    }
  }
  if (plan.unrepresentable_paths) {
    s += fmt::format("  unreplayable     {} names hold a NUL byte; calls on them are skipped\n",
                     plan.unrepresentable_paths);
  }
  s += fmt::format("  dependencies     {} cross-thread waits\n", j["dependencies"].get<uint64_t>());
  s += fmt::format("  lost events      {}\n", j["lost_events"].get<uint64_t>());
  s += fmt::format("  pacing           {} speed {} amplify {}\n", PaceName(o.pace), o.speed, o.amplify);
  s += fmt::format("  estimated time   {:.3f} s ({})\n", j["estimated_duration_s"].get<double>(),
                   j["estimated_duration_basis"].get<std::string>());
  return s;
}

}  // namespace iotwin::replay
