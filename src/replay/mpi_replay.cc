#include "replay/mpi_replay.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "base/bytes_text.h"
#include "base/json_fields.h"
#include "format/hosts.h"
#include "format/merge.h"
#include "format/trace_reader.h"
#include "replay/prepare.h"
#include "replay/recorder.h"

namespace iotwin::replay {
namespace {

using json = nlohmann::json;

constexpr int kClockRounds = 20;  // ping-pongs per rank; the shortest round trip measures

// What one rank replays.
struct RankPart {
  std::optional<uint32_t> host;  // the model's host filter; none: the whole trace (one host)
  uint32_t host_index = 0;
  std::string host_name;
};

// The recorded host of `rank`, checked against the trace's host table.
Result<RankPart> PlanRankPart(const std::string& trace, const std::vector<std::string>& hosts,
                              int rank, int size) {
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(trace));
  const json& meta = reader->meta();
  const std::vector<std::string> names = HostNames(meta);
  const bool merged = meta.is_object() && meta.contains("hosts") && meta["hosts"].is_array();
  if (merged && names.empty()) return Status::Corrupt("{}: its host table is empty", trace);
  RankPart part;
  if (!hosts.empty()) {
    if (hosts.size() != static_cast<size_t>(size)) {
      return Status::Invalid("--mpi-hosts names {} hosts for {} ranks: one per rank, in rank order",
                             hosts.size(), size);
    }
    const std::string& want = hosts[static_cast<size_t>(rank)];
    auto it = std::find(names.begin(), names.end(), want);
    if (it == names.end()) {
      return Status::Invalid("--mpi-hosts {}: no such host in {} (hosts: {})", BytesToText(want),
                             trace, BytesToText(fmt::format("{}", fmt::join(names, ", "))));
    }
    part.host_index = static_cast<uint32_t>(it - names.begin());
  } else if (merged) {
    if (names.size() != static_cast<size_t>(size)) {
      return Status::Invalid(
          "{} holds {} hosts ({}) and the job has {} ranks: start one rank per host, or name "
          "each rank's host with --mpi-hosts",
          trace, names.size(), BytesToText(fmt::format("{}", fmt::join(names, ", "))), size);
    }
    part.host_index = static_cast<uint32_t>(rank);
  }
  if (part.host_index >= names.size()) {
    return Status::Invalid("rank {}: host {} is not in {} ({} hosts)", rank, part.host_index, trace,
                           names.size());
  }
  if (merged) part.host = part.host_index;
  part.host_name = names[part.host_index];
  return part;
}

// ROOT/rank-R and OUT.rank-R: each rank's own file set and recording; "{rank}" in a --map
// target is the rank's number (a target without it is shared by every rank).
Status PlaceRank(ReplayOptions* o, int rank) {
  for (auto& [from, to] : o->maps) {
    for (size_t at = to.find("{rank}"); at != std::string::npos; at = to.find("{rank}", at))
      to.replace(at, 6, std::to_string(rank));
  }
  if (!o->root.empty() && !o->dry_run) {
    IOTWIN_ASSIGN_OR_RETURN(std::string root, CanonicalRoot(o->root));
    o->root = fmt::format("{}/rank-{}", root, rank);
  }
  if (!o->record_out.empty()) {
    IOTWIN_ASSIGN_OR_RETURN(std::string out, ResolveRecordPath(o->record_out));
    o->record_out = fmt::format("{}.rank-{}", out, rank);
  }
  return Status::Ok();
}

// The host names of the merged recording, one per rank: the recorded host's, unless two ranks
// replayed the same host (a trace of one host): then NAME.rank-R.
std::vector<std::string> RecordingHostNames(const std::vector<json>& ranks) {
  std::map<std::string, int> uses;
  for (const json& r : ranks) uses[json_fields::GetString(r, "host_name")]++;
  std::vector<std::string> names;
  for (const json& r : ranks) {
    std::string name = json_fields::GetString(r, "host_name");
    if (uses[name] > 1 || name.empty())
      name = fmt::format("{}{}rank-{}", name, name.empty() ? "" : ".", r["rank"].get<int>());
    names.push_back(std::move(name));
  }
  return names;
}

// The merged recording's `replay` object: rank R's workers are host R of the merged trace, so
// their tids are folded as merge folds them (format/hosts.h). A trace of one host has a
// counterpart for rank 0's copy only; the other ranks' rows are later copies.
json JobReplayMeta(const std::vector<json>& ranks, const ReplayOptions& o, const json& job) {
  json map = json::array();
  int copies = std::max(o.amplify, 1);
  for (const json& r : ranks) {
    const int rank = r["rank"].get<int>();
    const bool whole = !r.contains("host") || r["host"].is_null();
    const json* rows = json_fields::Array(r, "summary/thread_map");
    if (!rows) continue;
    for (json row : *rows) {
      const uint64_t worker = json_fields::GetUint(row, "worker_tid", 0);
      if (worker == 0 || worker >= kHostPidLimit) continue;
      row["worker_tid"] = worker + (uint64_t{static_cast<uint32_t>(rank)} << kHostPidBits);
      if (whole) {
        row["copy"] = json_fields::GetUint(row, "copy", 0) +
                      static_cast<uint64_t>(rank) * static_cast<uint64_t>(copies);
      }
      map.push_back(std::move(row));
    }
  }
  return {{"source", o.trace},    {"pace", PaceName(o.pace)}, {"speed", o.speed},
          {"amplify", o.amplify}, {"root", o.root},           {"mpi", job},
          {"thread_map", map}};
}

// Rank 0: the ranks' recordings merged into OUT, which then replaces them.
json MergeRecordings(const std::vector<json>& ranks, const ReplayOptions& o, const json& job,
                     const std::vector<ClockOffset>& offsets) {
  MergeOptions mo;
  mo.output = o.record_out;
  const std::vector<std::string> names = RecordingHostNames(ranks);
  for (size_t i = 0; i < ranks.size(); i++) {
    if (!json_fields::GetBool(ranks[i], "summary/record/ok", false)) {
      return {{"ok", false},
              {"error", fmt::format("rank {} has no recording: {}", i,
                                    json_fields::GetString(ranks[i], "summary/record/error"))}};
    }
    mo.inputs.push_back({json_fields::GetString(ranks[i], "summary/record/path"), names[i]});
    // Rank 0's recording is the reference; the others' clocks as measured against it.
    if (i > 0 && offsets.size() == ranks.size())
      mo.offsets.push_back({names[i], offsets[i].offset_ns, offsets[i].error_ns});
  }
  mo.replay = JobReplayMeta(ranks, o, job);
  auto merged = MergeTraces(mo);
  if (!merged.ok()) {
    return {{"ok", false},
            {"error", "merging the ranks' recordings: " + merged.status().ToString()}};
  }
  for (const MergeInput& in : mo.inputs) std::filesystem::remove(in.path);
  return {{"ok", true}, {"path", o.record_out}, {"hosts", names}, {"records", merged->records}};
}

double Num(const json& j, const char* key) { return json_fields::GetDouble(j, key, 0.0); }

// The start: each rank's barrier exit as its clock read it, and moved onto rank 0's clock by
// the offsets measured at launch (on one machine the two agree within the offsets' errors).
json StartJson(const std::vector<json>& ranks, const std::vector<ClockOffset>& offsets) {
  json starts = json::array(), offs = json::array(), errs = json::array();
  const bool measured = offsets.size() == ranks.size();
  uint64_t first = UINT64_MAX, last = 0, max_err = 0;
  __int128 first_on0 = 0, last_on0 = 0;
  bool any = false;
  for (size_t i = 0; i < ranks.size(); i++) {
    const uint64_t start = json_fields::GetUint(ranks[i], "start_realtime_ns", 0);
    starts.push_back(start);
    if (measured) {
      offs.push_back(offsets[i].offset_ns);
      errs.push_back(offsets[i].error_ns);
    }
    if (start == 0) continue;
    first = std::min(first, start);
    last = std::max(last, start);
    if (!measured) continue;
    const __int128 on0 = static_cast<__int128>(start) - offsets[i].offset_ns;
    first_on0 = any ? std::min(first_on0, on0) : on0;
    last_on0 = any ? std::max(last_on0, on0) : on0;
    max_err = std::max(max_err, offsets[i].error_ns);
    any = true;
  }
  json start = {{"skew_ns", first <= last ? json(last - first) : json(nullptr)},
                {"barrier_exit_realtime_ns", starts},
                {"how", "CLOCK_REALTIME read by each rank right after MPI_Barrier; max - min"}};
  if (measured && any) {
    start["clock_offset_ns"] = offs;
    start["clock_offset_error_ns"] = errs;
    start["skew_on_rank0_clock_ns"] = static_cast<uint64_t>(last_on0 - first_on0);
    start["skew_on_rank0_clock_error_ns"] = 2 * max_err;
  }
  return start;
}

// Rank 0: the job's summary from every rank's.
json JobSummary(const std::vector<json>& ranks, const ReplayOptions& o,
               const std::vector<ClockOffset>& offsets) {
  json hosts = json::array(), summaries = json::array();
  uint64_t ops = 0, bytes = 0, mismatches = 0, skipped = 0;
  double duration = 0;
  for (const json& r : ranks) {
    const json& s = r["summary"];
    const uint64_t n = json_fields::GetUint(s, "ops", 0),
                   mm = json_fields::GetUint(s, "mismatches/total", 0);
    ops += n;
    bytes += json_fields::GetUint(s, "bytes", 0);
    mismatches += mm;
    skipped += json_fields::GetUint(s, "skipped/total", 0);
    duration = std::max(duration, Num(s, "duration_s"));
    hosts.push_back({{"rank", r["rank"]},
                     {"host", r["host"]},
                     {"host_name", r["host_name"]},
                     {"root", s.value("root", json())},
                     {"ops", n},
                     {"bytes", s.value("bytes", json(0))},
                     {"iops", Num(s, "iops")},
                     {"duration_s", Num(s, "duration_s")},
                     {"window_s", Num(s, "window_s")},
                     {"mismatches", mm},
                     {"skipped", json_fields::GetUint(s, "skipped/total", 0)},
                     {"exit_code", r["exit_code"]}});
    summaries.push_back(s);
  }
  return {{"trace", o.trace},
          {"root", o.root},
          {"pace", PaceName(o.pace)},
          {"speed", o.speed},
          {"ranks", ranks.size()},
          {"start", StartJson(ranks, offsets)},
          {"hosts", hosts},
          {"total",
           {{"ops", ops},
            {"bytes", bytes},
            {"mismatches", mismatches},
            {"skipped", skipped},
            {"duration_s", duration},
            {"iops", duration > 0 ? static_cast<double>(ops) / duration : 0.0},
            {"throughput_mb_s", duration > 0 ? static_cast<double>(bytes) / duration / 1e6 : 0.0}}},
          {"rank_summaries", summaries}};
}

std::string JobText(const json& s) {
  std::string t = fmt::format("replayed {} on {} MPI ranks ({} pacing, speed {})\n",
                              s["trace"].get<std::string>(), s["ranks"].get<size_t>(),
                              s["pace"].get<std::string>(), s["speed"].get<double>());
  const json& skew = s["start"]["skew_ns"];
  t += skew.is_null() ? "  start skew  not measured (nothing was started)\n"
                      : fmt::format(
                            "  start skew  {:.1f} us (CLOCK_REALTIME after MPI_Barrier, "
                            "max - min over ranks)\n",
                            static_cast<double>(skew.get<uint64_t>()) / 1e3);
  if (const json* on0 = json_fields::Find(s, "start/skew_on_rank0_clock_ns")) {
    t += fmt::format("{:14}{:.1f} +- {:.1f} us on rank 0's clock (offsets by MPI ping-pong)\n", "",
                     static_cast<double>(on0->get<uint64_t>()) / 1e3,
                     json_fields::GetDouble(s, "start/skew_on_rank0_clock_error_ns", 0) / 1e3);
  }
  t += "  rank host                   ops      ops/s          bytes  mismatches  duration s\n";
  for (const json& h : s["hosts"]) {
    t += fmt::format("  {:>4} {:<16} {:>10} {:>10.0f} {:>14} {:>11} {:>11.3f}\n",
                     h["rank"].get<int>(), BytesToText(h["host_name"].get<std::string>()),
                     h["ops"].get<uint64_t>(), h["iops"].get<double>(), h["bytes"].get<uint64_t>(),
                     h["mismatches"].get<uint64_t>(), h["duration_s"].get<double>());
  }
  const json& tot = s["total"];
  t += fmt::format("  job  {:<16} {:>10} {:>10.0f} {:>14} {:>11} {:>11.3f}\n", "",
                   tot["ops"].get<uint64_t>(), tot["iops"].get<double>(),
                   tot["bytes"].get<uint64_t>(), tot["mismatches"].get<uint64_t>(),
                   tot["duration_s"].get<double>());
  if (s.contains("record")) {
    const json& r = s["record"];
    t += json_fields::GetBool(r, "ok", false)
             ? fmt::format("  recorded   {} ({} hosts, one per rank)\n",
                           r["path"].get<std::string>(), r["hosts"].size())
             : fmt::format("  --record failed: {}\n", json_fields::GetString(r, "error"));
  }
  return t;
}

// --dry-run, --prepare-only: each rank's plan or preparation, one after the other.
std::string RankTexts(const std::vector<json>& ranks) {
  std::string t;
  for (const json& r : ranks) {
    t += fmt::format("rank {} (host {}):\n", json_fields::GetUint(r, "rank", 0),
                     BytesToText(json_fields::GetString(r, "host_name")));
    t += json_fields::GetString(r, "text");
  }
  return t;
}

}  // namespace

Result<ReplayOutcome> RunMpiReplay(const MpiReplayOptions& options, MpiJob& job) {
  ReplayOptions o = options.replay;
  const ReplayOptions job_options = o;
  if (o.layer != Layer::kSyscall)
    return Status::Invalid("--mpi replays system calls (--layer syscall)");
  IOTWIN_ASSIGN_OR_RETURN(RankPart part,
                          PlanRankPart(o.trace, options.hosts, job.rank(), job.size()));
  o.host = part.host;
  IOTWIN_RETURN_IF_ERROR(PlaceRank(&o, job.rank()));
  IOTWIN_ASSIGN_OR_RETURN(std::vector<ClockOffset> offsets,
                          job.MeasureClockOffsets(kClockRounds));
  uint64_t started = 0;
  o.start_gate = [&job, &started]() -> Status {
    IOTWIN_ASSIGN_OR_RETURN(started, job.Barrier());
    return Status::Ok();
  };
  IOTWIN_ASSIGN_OR_RETURN(ReplayOutcome out, RunReplay(o));
  json mine = {
      {"rank", job.rank()},          {"host", part.host ? json(*part.host) : json(nullptr)},
      {"host_name", part.host_name}, {"start_realtime_ns", started},
      {"exit_code", out.exit_code},  {"summary", out.summary}};
  // A plan or a preparation is each rank's own to read; a replay's figures are summed.
  if (o.dry_run || o.prepare_only) mine["text"] = out.text;
  IOTWIN_ASSIGN_OR_RETURN(
      std::vector<std::string> gathered,
      job.GatherToRoot(mine.dump(-1, ' ', false, json::error_handler_t::replace)));
  if (job.rank() != 0) {
    out.text.clear();
    return out;
  }
  std::vector<json> ranks;
  int exit_code = 0;
  for (const std::string& g : gathered) {
    ranks.push_back(json::parse(g, nullptr, false));
    if (ranks.back().is_discarded() || !ranks.back().is_object())
      return Status::Internal("rank {}'s summary is not JSON", ranks.size() - 1);
    exit_code = std::max(exit_code, ranks.back().value("exit_code", 2));
  }
  json s = JobSummary(ranks, job_options, offsets);
  if (!job_options.record_out.empty() && !o.dry_run && !o.prepare_only) {
    IOTWIN_ASSIGN_OR_RETURN(std::string out_path, ResolveRecordPath(job_options.record_out));
    ReplayOptions merged_options = job_options;
    merged_options.record_out = out_path;
    s["record"] =
        MergeRecordings(ranks, merged_options, {{"ranks", ranks.size()}, {"start", s["start"]}},
                        offsets);
    if (!s["record"]["ok"].get<bool>()) exit_code = std::max(exit_code, 1);
  }
  s["warnings"] = out.warnings;
  out.summary = std::move(s);
  out.text = o.dry_run || o.prepare_only ? RankTexts(ranks) : JobText(out.summary);
  out.exit_code = exit_code;
  return out;
}

}  // namespace iotwin::replay
