#include "replay/replay.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "base/bytes_text.h"
#include "base/mutex.h"
#include "model/trace_model.h"
#include "replay/block_replay.h"
#include "replay/engine.h"
#include "replay/interrupt.h"
#include "replay/modes.h"
#include "replay/pacer.h"
#include "replay/plan.h"
#include "replay/prepare.h"
#include "replay/recorder.h"
#include "replay/thread_limit.h"
#include "replay/write_budget.h"

namespace iotwin::replay {

namespace {

nlohmann::json HistJson(const Histogram& h) {
  return {{"count", h.count()},          {"p50", h.Quantile(0.50)}, {"p90", h.Quantile(0.90)},
          {"p99", h.Quantile(0.99)},     {"max", h.max()},          {"mean", h.mean()}};
}

std::string Us(uint64_t ns) { return fmt::format("{:.1f}", static_cast<double>(ns) / 1e3); }

// Checks that make a trace unfit for this replay. Warnings go to `warn`; hard failures return.
Status CheckTrace(const model::TraceModel& m, const TraceDamage& damage, const ReplayOptions& o,
                  std::vector<std::string>* warn) {
  if (damage.truncated) {
    std::string w = fmt::format("{} is truncated at byte {} ({}): the capture did not finish; "
                                "replaying what it holds", o.trace, damage.truncated_at,
                                damage.truncated_detail);
    if (o.strict) return Status::Error(Status::Code::kTruncated, w + " (refused: --strict)");
    warn->push_back(w);
  }
  if (m.stats().lost_events > 0) {
    std::string w = fmt::format("the capture lost {} events: the replay misses those operations "
                                "and descriptors opened by them count as unknown",
                                m.stats().lost_events);
    if (o.strict) return Status::Invalid("{} (refused: --strict)", w);
    warn->push_back(w);
  }
  const auto& meta = m.meta();
  auto layer_enabled = [&](const char* name) -> int {  // -1 unknown
    if (!meta.contains("layers") || !meta["layers"].is_object()) return -1;
    const auto& l = meta["layers"];
    if (!l.contains(name)) return 0;
    if (l[name].is_object()) {
      // The header is the trace's word: a value of another type is "not said", never a throw.
      const auto it = l[name].find("enabled");
      return it != l[name].end() && it->is_boolean() && it->get<bool>() ? 1 : 0;
    }
    if (l[name].is_boolean()) return l[name].get<bool>() ? 1 : 0;
    return -1;
  };
  if (o.layer == Layer::kSyscall) {
    if (layer_enabled("syscall") == 0 || (m.stats().syscalls == 0 && m.stats().page_faults == 0 &&
                                          m.stats().async_requests == 0)) {
      if (damage.truncated) {
        return Status::Invalid("{} is truncated at byte {} ({}) and holds no system call before "
                               "that: nothing to replay", o.trace, damage.truncated_at,
                               damage.truncated_detail);
      }
      return Status::Invalid("{} holds no system-call layer: nothing to replay at file level{}",
                             o.trace, m.block_requests().empty()
                                          ? ""
                                          : " (it has block records: try --layer block)");
    }
    bool maps = m.stats().ops_by_kind[IOT_OP_MMAP] > 0;
    if (maps && layer_enabled("memory") == 0) {
      warn->push_back("the trace has mmap calls but no memory layer: mappings are recreated, "
                      "page faults through them are not replayed");
    }
  } else {
    if (layer_enabled("block") == 0 || m.block_requests().empty()) {
      return Status::Invalid("{} holds no block layer (no block requests issued): device-level "
                             "replay needs a capture with the block layer", o.trace);
    }
  }
  if (meta.contains("host") && meta["host"].is_object()) {
    const auto& host = meta["host"];
    long page = sysconf(_SC_PAGESIZE);
    if (host.contains("page_size") && host["page_size"].is_number_integer() &&
        host["page_size"].get<long>() != page && m.stats().page_faults > 0) {
      std::string w = fmt::format("the trace was captured with {}-byte pages, this machine uses "
                                  "{}: page-fault offsets would not line up",
                                  host["page_size"].get<long>(), page);
      if (!o.force) return Status::Invalid("{} (use --force to replay anyway)", w);
      warn->push_back(w);
    }
    utsname u{};
    uname(&u);
    if (host.contains("arch") && host["arch"].is_string() && host["arch"] != u.machine) {
      std::string w = fmt::format("the trace comes from a {} machine, this one is {}: operations "
                                  "are architecture-neutral and replay as recorded",
                                  BytesToText(host["arch"].get<std::string>()), u.machine);
      if (o.strict) return Status::Invalid("{} (refused: --strict)", w);
      warn->push_back(w);
    }
  }
  return Status::Ok();
}

std::string SummaryText(const nlohmann::json& s) {
  std::string t;
  t += fmt::format("replayed {} ({} pacing, speed {}{})\n", s["trace"].get<std::string>(),
                   s["pace"].get<std::string>(), s["speed"].get<double>(),
                   s["amplify"].get<int>() > 1 ? fmt::format(", {} copies", s["amplify"].get<int>())
                                               : std::string());
  if (s.contains("scope")) {
    t += fmt::format("  scope      {} (their ops: skipped, out_of_scope)\n",
                     s["scope"]["description"].get<std::string>());
  }
  t += fmt::format("  duration   {:.3f} s, first to last call issued {:.3f} s\n",
                   s["duration_s"].get<double>(), s["window_s"].get<double>());
  t += fmt::format("  ops        {} ({:.0f} ops/s), {} bytes ({:.1f} MB/s)\n", s["ops"].get<uint64_t>(),
                   s["iops"].get<double>(), s["bytes"].get<uint64_t>(),
                   s["throughput_mb_s"].get<double>());
  if (s.contains("schedule_error_ns") && s["schedule_error_ns"]["count"].get<uint64_t>() > 0) {
    const auto& e = s["schedule_error_ns"];
    t += fmt::format("  schedule   issue - target: p50 {} us, p99 {} us, max {} us\n",
                     Us(e["p50"]), Us(e["p99"]), Us(e["max"]));
  }
  t += "  latency (us)          count      p50      p90      p99      max   errors\n";
  for (auto& [name, o] : s["per_op"].items()) {
    const auto& l = o["latency_ns"];
    t += fmt::format("    {:<18} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}\n", name,
                     o["count"].get<uint64_t>(), Us(l["p50"]), Us(l["p90"]), Us(l["p99"]),
                     Us(l["max"]), o["errors"].get<uint64_t>());
  }
  uint64_t skipped = s["skipped"]["total"].get<uint64_t>();
  if (skipped) {
    t += fmt::format("  skipped    {} ops\n", skipped);
    for (auto& [reason, ops] : s["skipped"]["by_reason"].items()) {
      uint64_t n = 0;
      for (auto& [op, c] : ops.items()) n += c.get<uint64_t>();
      t += fmt::format("    {:<18} {}\n", reason, n);
    }
  }
  if (s.contains("modes")) t += ModeChangesText(s["modes"]);
  uint64_t mm = s["mismatches"]["total"].get<uint64_t>();
  t += fmt::format("  mismatches {} results differ from the trace\n", mm);
  for (auto& [kind, ops] : s["mismatches"]["by_kind"].items()) {
    for (auto& [op, c] : ops.items()) t += fmt::format("    {:<18} {:<14} {}\n", kind, op, c.get<uint64_t>());
  }
  for (auto& [kind, exs] : s["mismatches"]["examples"].items()) {
    for (const auto& e : exs) {
      t += fmt::format("    e.g. {} {} of tid {} (op {}) {}: recorded {}, replay {}\n", kind,
                       e["op"].get<std::string>(), e["tid"].get<uint32_t>(),
                       e["index"].get<uint32_t>(), BytesToText(e["path"].get<std::string>()),
                       e["recorded"].get<int64_t>(), e["live"].get<int64_t>());
    }
  }
  return t;
}

// --layer block: the device replay's outcome, its warnings after the trace's.
ReplayOutcome BlockOutcome(const BlockReplayOutcome& block, ReplayOutcome out) {
  out.summary = block.summary;
  out.text = block.text;
  out.exit_code = block.exit_code;
  if (block.summary.contains("warnings") && block.summary["warnings"].is_array()) {
    for (const auto& w : block.summary["warnings"]) {
      if (w.is_string()) out.warnings.push_back(w.get<std::string>());
    }
  }
  out.summary["warnings"] = out.warnings;
  return out;
}

// The sandbox root: canonical and existing (except for a dry run, which writes nothing).
Status ResolveRoot(ReplayOptions* o) {
  if (o->dry_run) {
    if (o->root.empty()) o->root = "/nonexistent-dry-run-root";
    if (o->root[0] != '/') {
      char cwd[4096];
      if (getcwd(cwd, sizeof cwd)) o->root = std::string(cwd) + "/" + o->root;
    }
    return Status::Ok();
  }
  IOTWIN_ASSIGN_OR_RETURN(o->root, CanonicalRoot(o->root));
  return Status::Ok();
}

// --record OUT is made absolute and its directory checked before anything runs: the replay's
// workers change directory as the workload did, and a recording that cannot be written must
// stop the replay before it starts, not be found missing after it.
Status ResolveRecordOutput(ReplayOptions* o) {
  if (o->record_out.empty()) return Status::Ok();
  IOTWIN_ASSIGN_OR_RETURN(o->record_out, ResolveRecordPath(o->record_out));
  return Status::Ok();
}

// One plan per --amplify copy, each under its own suffix of the root.
Result<std::vector<ReplayPlan>> BuildPlans(const model::TraceModel& model, const ReplayOptions& o) {
  IOTWIN_ASSIGN_OR_RETURN(PathMapper mapper, PathMapper::Create(o.root, o.maps));
  std::vector<ReplayPlan> plans;
  for (int k = 0; k < o.amplify; k++) {
    PathMapper m = o.amplify > 1 ? mapper.WithSuffix(fmt::format("/copy-{}", k)) : mapper;
    IOTWIN_ASSIGN_OR_RETURN(ReplayPlan plan, BuildPlan(model, m, o.speed));
    plans.push_back(std::move(plan));
  }
  return plans;
}

// --prepare-only: what was written.
ReplayOutcome PreparedOutcome(const ReplayPlan& plan, const PrepareReport& prep,
                              const ReplayOptions& o, ReplayOutcome out) {
  out.summary = {{"trace", o.trace}, {"root", o.root}, {"prepare", prep.ToJson()},
                 {"files", plan.initial_files * o.amplify},
                 {"bytes", plan.initial_bytes * o.amplify}, {"warnings", out.warnings}};
  out.text = fmt::format(
      "prepared {} for {}: {} files written ({} bytes), {} reused, {} directories created, {} "
      "names cleared; cache {}\n",
      o.root, o.trace, prep.files_written, prep.bytes_written, prep.files_reused,
      prep.dirs_created, prep.names_cleared, CacheName(o.cache));
  return out;
}

using Engines = std::vector<std::unique_ptr<ReplayEngine>>;

// A progress line on stderr, redrawn until `finished`.
std::thread StartProgress(const Engines& engines, const std::atomic<bool>& finished) {
  return std::thread([&engines, &finished] {
    uint64_t total = 0;
    for (auto& e : engines) total += e->ops_total();
    while (!finished.load()) {
      uint64_t done = 0, mism = 0;
      int64_t lag = 0;
      for (auto& e : engines) {
        done += e->ops_done();
        mism += e->mismatches_so_far();
        lag = std::max(lag, e->lag_ns());
      }
      std::fprintf(stderr, "\r[iotwin replay] %llu/%llu ops  lag %.1f ms  mismatches %llu   ",
                   static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
                   static_cast<double>(lag) / 1e6, static_cast<unsigned long long>(mism));
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    std::fprintf(stderr, "\r%*s\r", 70, "");
  });
}

// Which worker replayed which traced thread (for comparing a recorded replay op by op).
nlohmann::json ThreadMap(const model::TraceModel& model, const Engines& engines) {
  nlohmann::json tmap = nlohmann::json::array();
  for (size_t k = 0; k < engines.size(); k++) {
    auto wt = engines[k]->WorkerTids();
    auto windows = engines[k]->WorkerWindows();
    for (size_t i = 0; i < wt.size() && i < model.threads().size(); i++) {
      const auto& th = model.threads()[i];
      tmap.push_back({{"copy", k}, {"recorded_tid", th.tid}, {"recorded_tgid", th.tgid},
                      {"worker_tid", wt[i]}, {"ops", windows[i].ops},
                      {"window_s", static_cast<double>(windows[i].window_ns) / 1e9}});
    }
  }
  return tmap;
}

// What the replay measured, as --json prints it.
nlohmann::json StatsJson(const ReplayStats& stats, double secs, const ReplayOptions& o) {
  nlohmann::json s;
  s["duration_s"] = secs;
  s["ops"] = stats.ops();
  s["iops"] = secs > 0 ? static_cast<double>(stats.ops()) / secs : 0.0;
  s["bytes"] = stats.bytes();
  s["throughput_mb_s"] = secs > 0 ? static_cast<double>(stats.bytes()) / secs / 1e6 : 0.0;
  if (o.pace != PaceMode::kFast) s["schedule_error_ns"] = HistJson(stats.schedule());
  nlohmann::json per_op = nlohmann::json::object();
  for (const auto& [name, os] : stats.by_op()) {
    per_op[name] = {{"count", os.count}, {"errors", os.errors}, {"bytes", os.bytes},
                    {"latency_ns", HistJson(os.latency)}};
  }
  s["per_op"] = per_op;
  s["skipped"] = {{"total", stats.skipped()}, {"by_reason", stats.skipped_by_reason()}};
  nlohmann::json examples = nlohmann::json::object();
  for (const auto& [kind, exs] : stats.all_examples()) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& e : exs) {
      arr.push_back({{"op", e.op}, {"tid", e.tid}, {"index", e.index}, {"path", e.path},
                     {"recorded", e.recorded}, {"live", e.live}});
    }
    examples[kind] = arr;
  }
  s["mismatches"] = {{"total", stats.mismatches()}, {"by_kind", stats.mismatch_counts()},
                     {"examples", examples}};
  return s;
}

}  // namespace

int GrowDescriptorTable() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < 2) return 0;
  const uint64_t limit = rl.rlim_cur == RLIM_INFINITY ? kMaxGrownDescriptors
                                                      : std::min<uint64_t>(rl.rlim_cur, kMaxGrownDescriptors);
  const int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, static_cast<int>(limit - 1));
  if (fd < 0) return 0;
  close(fd);
  return static_cast<int>(limit);
}

namespace {

// The directories whose free space the write budget watches: every base of every copy (none
// for the null back end, which writes nothing).
std::vector<std::string> WatchedBases(const std::vector<ReplayPlan>& plans, const ReplayOptions& o) {
  std::vector<std::string> bases;
  if (o.backend == BackendKind::kNull) return bases;
  for (const auto& plan : plans) {
    for (const auto& base : plan.mapper.Bases()) bases.push_back(base);
  }
  return bases;
}

// Sets up one engine per plan, records them when asked, runs them to the end and reports.
Result<ReplayOutcome> RunEngines(const model::TraceModel& model, std::vector<ReplayPlan>& plans,
                                 const PrepareReport& prep, const ReplayOptions& o,
                                 ReplayOutcome out) {
  std::unique_ptr<Backend> backend =
      o.backend == BackendKind::kNull ? MakeNullBackend() : MakeSyncBackend(o.keep_modes);
  // One set of buffer pages and one write budget for all copies.
  PayloadPools pools;
  if (o.backend != BackendKind::kNull) {
    IOTWIN_ASSIGN_OR_RETURN(pools, PayloadPools::Create(o.fill));
  }
  WriteBudget budget(o.max_write, WatchedBases(plans, o));
  Engines engines;
  // Guards engines while they are made (the watcher aborts them): this thread adds to it under
  // the lock and, as its only writer, reads it without the lock. (A local: GUARDED_BY cannot
  // name it.)
  Mutex engines_mu;
  InterruptWatcher interrupts([&](const char* why) {
    MutexLock l(&engines_mu);
    for (auto& e : engines) e->Abort(why);
  });
  for (auto& plan : plans) {
    {
      MutexLock made(&engines_mu);
      engines.push_back(std::make_unique<ReplayEngine>(plan, o, backend.get()));
    }
    engines.back()->UsePayload(pools);
    engines.back()->UseWriteBudget(&budget);
    IOTWIN_RETURN_IF_ERROR(engines.back()->Setup());
    if (std::string note = engines.back()->ConfinementNote(); !note.empty()) {
      out.warnings.push_back(note);
    }
  }
  std::vector<pid_t> tids;
  for (auto& e : engines) {
    for (pid_t t : e->WorkerTids()) tids.push_back(t);
  }
  // Engines made after a signal came are stopped too.
  if (interrupts.signal() != 0) {
    for (auto& e : engines) e->Abort("interrupted by a signal");
  }
  if (o.backend != BackendKind::kNull) GrowDescriptorTable();

  std::unique_ptr<ReplayRecorder> recorder;
  if (!o.record_out.empty()) {
    recorder = MakeSubprocessRecorder(o.iotwin_bin, o.record_out);
    Status st = recorder->Start();
    if (!st.ok()) {
      for (auto& e : engines) e->Abort("recorder failed");
      for (auto& e : engines) e->Start(NowNs());
      for (auto& e : engines) e->Wait();
      for (auto& e : engines) e->Release();
      return st.WithContext("--record");
    }
  }

  if (o.start_gate) {
    Status st = o.start_gate();
    if (!st.ok()) {
      for (auto& e : engines) e->Abort("the start gate failed");
      for (auto& e : engines) e->Start(NowNs());
      for (auto& e : engines) e->Wait();
      for (auto& e : engines) e->Release();
      return st;
    }
  }
  // Start slightly in the future so every worker is waiting when time 0 arrives.
  uint64_t live_start = NowNs() + 2'000'000;
  for (auto& e : engines) e->Start(live_start);
  std::atomic<bool> finished{false};
  std::thread progress;
  if (o.progress && !o.json && isatty(STDERR_FILENO)) progress = StartProgress(engines, finished);
  for (auto& e : engines) e->Wait();
  finished.store(true);
  if (progress.joinable()) progress.join();

  ReplayStats stats;
  uint64_t end = live_start;
  std::string abort_reason;
  const WorkerFailure* failure = nullptr;
  uint32_t fifo_workers = 0;
  uint64_t first_issue = 0, last_issue = 0;
  for (auto& e : engines) {
    stats.Merge(e->stats(), o.max_examples);
    end = std::max(end, e->live_end());
    if (e->first_issue() != 0) {
      first_issue = first_issue == 0 ? e->first_issue() : std::min(first_issue, e->first_issue());
      last_issue = std::max(last_issue, e->last_issue());
    }
    if (e->aborted() && abort_reason.empty()) abort_reason = e->abort_reason();
    if (e->failure() && !failure) failure = e->failure();
    fifo_workers += e->fifo_workers();
  }
  // Paced workers wait for live_start; fast ones go as soon as the gate opens, before it.
  const uint64_t begin = first_issue != 0 ? std::min(live_start, first_issue) : live_start;
  nlohmann::json s = StatsJson(stats, static_cast<double>(end - begin) / 1e9, o);
  // First to last call issued: the window compare measures on a recording of this replay, without
  // the start gate and the workers' teardown that duration_s includes.
  s["window_s"] = static_cast<double>(last_issue - first_issue) / 1e9;
  s["trace"] = o.trace;
  s["root"] = o.root;
  if (!o.scope.IsAll()) s["scope"] = o.scope.ToJson();
  s["pace"] = PaceName(o.pace);
  s["rt_priority"] = o.rt_priority;
  s["fifo_threads"] = fifo_workers;
  s["speed"] = o.speed;
  s["amplify"] = o.amplify;
  s["backend"] = backend->name();
  s["threads"] = tids.size();
  s["thread_map"] = ThreadMap(model, engines);
  s["model"] = {{"unknown_fds", model.stats().unknown_fds},
                {"lost_events", model.stats().lost_events},
                {"dependencies", model.stats().deps}};
  s["prepare"] = prep.ToJson();
  s["write_budget"] = {{"max_write", o.max_write}, {"admitted_bytes", budget.admitted()},
                       {"stopped", budget.stopped()}};
  s["modes"] = ModeChangesJson(model, o.keep_modes);

  if (recorder) {
    nlohmann::json rm = {{"source", o.trace}, {"pace", PaceName(o.pace)}, {"speed", o.speed},
                         {"amplify", o.amplify}, {"root", o.root},
                         {"thread_map", s["thread_map"]}};
    if (!o.scope.IsAll()) rm["scope"] = o.scope.ToJson();
    Status st = recorder->Finish(tids, rm);
    for (auto& e : engines) e->Release();
    if (!st.ok()) {
      // The replay ran but the recording asked for is missing: a failure, not a warning.
      out.warnings.push_back("--record: " + st.ToString());
      s["record"] = {{"ok", false}, {"error", st.ToString()}};
      out.exit_code = 1;
    } else {
      s["record"] = {{"ok", true}, {"path", o.record_out}};
    }
  }
  if (failure) {
    // What could not be replayed, and where (engine.h).
    s["failure"] = {{"op", failure->op}, {"args", failure->args}, {"path", failure->path},
                    {"recorded_tid", failure->tid}, {"worker", failure->worker},
                    {"op_index", failure->index}, {"ts_ns", failure->ts_ns},
                    {"error", failure->error}};
  }
  if (!abort_reason.empty()) {
    s["aborted"] = abort_reason;
    // A replay stopped short of filling its file system failed for want of room, not on a
    // mismatch.
    out.exit_code = budget.stopped() ? 2 : 1;
  }
  s["warnings"] = out.warnings;
  out.summary = s;
  out.text = SummaryText(s);
  if (!abort_reason.empty()) out.text += "  stopped: " + abort_reason + "\n";
  if (recorder && out.exit_code != 0 && !s["record"]["ok"].get<bool>()) {
    out.text += "  --record failed: " + s["record"]["error"].get<std::string>() + "\n";
  }
  return out;
}

}  // namespace

Result<ReplayOutcome> RunReplay(const ReplayOptions& in) {
  ReplayOptions o = in;
  ReplayOutcome out;
  if (o.amplify < 1 || o.amplify > 1024) return Status::Invalid("--amplify must be 1..1024");
  if (!(o.speed > 0)) return Status::Invalid("--speed must be positive");

  TraceDamage damage;
  model::ModelOptions mo;
  mo.compute_dependencies = o.layer == Layer::kSyscall;
  if (o.layer == Layer::kBlock && !o.scope.IsAll()) {
    return Status::Invalid("--layer block replays device requests, which name no file: "
                           "--include, --exclude and --scope apply to files");
  }
  mo.scope = o.scope;
  mo.host = o.host;
  IOTWIN_ASSIGN_OR_RETURN(auto model, model::LoadTraceModel(o.trace, mo, &damage));
  IOTWIN_RETURN_IF_ERROR(CheckTrace(*model, damage, o, &out.warnings));
  // What the model had to assume (a name used both as a file and as a directory, ...).
  for (const auto& w : model->warnings()) out.warnings.push_back(w.message);

  if (o.layer == Layer::kBlock) {
    IOTWIN_ASSIGN_OR_RETURN(auto block, RunBlockReplay(*model, o));
    return BlockOutcome(block, std::move(out));
  }
  IOTWIN_RETURN_IF_ERROR(ResolveRoot(&o));
  IOTWIN_RETURN_IF_ERROR(ResolveRecordOutput(&o));
  IOTWIN_ASSIGN_OR_RETURN(std::vector<ReplayPlan> plans, BuildPlans(*model, o));
  const ThreadLimit thread_limit = ReplayThreadLimit(o.max_threads);
  for (auto& plan : plans) {
    plan.threads_needed = ReplayThreadsNeeded(*model, o.amplify);
    plan.thread_limit = thread_limit;
  }
  if (o.dry_run) {
    out.summary = PlanToJson(plans[0], o);
    out.summary["modes"] = ModeChangesJson(*model, o.keep_modes);
    out.summary["warnings"] = out.warnings;
    out.text = PlanToText(plans[0], o) + ModeChangesText(out.summary["modes"]);
    return out;
  }
  // Before anything is written.
  IOTWIN_RETURN_IF_ERROR(CheckThreadLimit(plans[0].threads_needed, thread_limit));
  IOTWIN_ASSIGN_OR_RETURN(PrepareReport prep, PrepareSandbox(plans, o));
  for (const auto& n : prep.notes) out.warnings.push_back(n);
  if (o.prepare_only) return PreparedOutcome(plans[0], prep, o, std::move(out));
  return RunEngines(*model, plans, prep, o, std::move(out));
}

}  // namespace iotwin::replay
