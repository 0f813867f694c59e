// iotwin replay: replay a captured trace into a sandbox directory, or its block stream onto a
// device (docs/replay.md).
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/scope_options.h"
#include "cli/unit_options.h"
#include "replay/mpi_job.h"
#include "replay/mpi_replay.h"
#include "replay/replay.h"

namespace iotwin::cli {

namespace {
struct ReplayArgs {
  replay::ReplayOptions o;
  std::vector<std::string> maps;
  std::string pace = "original", cache = "as-captured", fill = "random", layer = "syscall";
  std::string backend = "sync", async = "native";
  double spin_us = 50;
  bool quiet = false;
  ScopeArgs scope;
  bool mpi = false;
  std::vector<std::string> mpi_hosts;
};

std::string SelfPath() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "iotwin";
  buf[n] = 0;
  return buf;
}
void PrintReplaySummary(const replay::ReplayOutcome& r, bool json, const char* schema) {
  if (json) {
    nlohmann::json summary = r.summary;
    summary["schema"] = schema;
    // Names are bytes: a name that is not UTF-8 shows with U+FFFD, never aborts.
    std::printf("%s\n",
                summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fputs(r.text.c_str(), stdout);
  }
}

// --mpi: this process is one rank of an MPI job (replay/mpi_replay.h). Rank 0 prints the job's
// summary; a rank that fails stops the whole job, which would otherwise wait for it.
int RunAsMpiRank(ReplayArgs& args) {
  auto job = replay::JoinMpiJob();
  if (!job.ok()) {
    std::fprintf(stderr, "iotwin replay: %s\n", job.status().ToString().c_str());
    return kExitError;
  }
  replay::MpiReplayOptions mo;
  mo.replay = args.o;
  mo.replay.progress = false;  // one terminal, many ranks
  mo.hosts = args.mpi_hosts;
  auto r = replay::RunMpiReplay(mo, **job);
  if (!r.ok()) {
    std::fprintf(stderr, "iotwin replay: rank %d of %d: %s\n", (*job)->rank(), (*job)->size(),
                 r.status().ToString().c_str());
    std::fflush(stderr);
    (*job)->Abort(kExitError);
  }
  for (const auto& w : r->warnings)
    std::fprintf(stderr, "iotwin replay: rank %d: warning: %s\n", (*job)->rank(), w.c_str());
  if ((*job)->rank() == 0) PrintReplaySummary(*r, args.o.json, "iotwin-replay-mpi/1");
  std::fflush(stdout);
  return r->exit_code;
}
}  // namespace

CommandSpec SetupReplay(CLI::App& parent) {
  auto args = std::make_shared<ReplayArgs>();
  replay::ReplayOptions& o = args->o;
  CLI::App* sub = parent.add_subcommand(
      "replay", "Replay a trace into a sandbox directory, or its block stream onto a device");
  sub->add_option("trace", o.trace, "Trace file (.iotwin)")->required();
  sub->add_option("--root", o.root, "Sandbox directory every traced path is re-rooted under");
  sub->add_option("--map", args->maps, "Send a recorded tree elsewhere: /orig/prefix=/new/prefix "
                                       "(repeatable; longest prefix wins)");
  sub->add_flag("--prepare-only", o.prepare_only, "Build the initial file set and manifest, then stop");
  sub->add_flag("--dry-run", o.dry_run, "Print the plan (threads, files, ops, estimated time); write nothing");
  sub->add_flag("--force", o.force, "Use a root that is not empty or was prepared for another trace");
  sub->add_flag("--sparse", o.sparse, "Create pre-existing files sparse (no data blocks)");
  sub->add_flag("--keep-modes", o.keep_modes,
                "Create files and directories with the recorded group/other write bits "
                "(set-user-ID and set-group-ID are never applied)");
  sub->add_option("--fill", args->fill, "Payload: zero, random or compressible:RATIO")
      ->capture_default_str();
  sub->add_option("--cache", args->cache, "Initial page cache: as-captured, cold or warm")
      ->capture_default_str();
  sub->add_option("--pace", args->pace, "original (recorded times), gaps (think times), fast")
      ->check(OneOf({"original", "gaps", "fast"}))
      ->capture_default_str();
  sub->add_flag("--raw-gaps", o.raw_gaps,
                "Keep the recorded think time with what the capture added to each call (by "
                "default gaps and original pacing take the cost measured at record time out)");
  sub->add_option("--speed", o.speed, "Compress waiting N-fold")
      ->check(Number(false, "2, 0.5"))
      ->capture_default_str();
  sub->add_option("--amplify", o.amplify, "Run K independent copies, each on its own file set")
      ->check(Number(true, "1, 4"))
      ->capture_default_str();
  sub->add_option("--max-threads", o.max_threads,
                  "Most threads the replay may start (default 4096; the machine's limits apply)")
      ->check(Number(true, "512, 20000"));
  sub->add_option("--max-write", o.max_write,
                  "Stop the replay once its calls would write more than this (or 10G)")
      ->transform(SizeUnits());
  sub->add_flag("--strict", o.strict, "Any result mismatch, lost event or damage is fatal");
  sub->add_flag("--json", o.json, "Print the summary as JSON");
  sub->add_flag("-q,--quiet", args->quiet, "No progress line");
  sub->add_option("--record", o.record_out, "Capture the replay itself into this trace");
  sub->add_option("--backend", args->backend, "sync (real calls) or null (nothing executed)")
      ->check(OneOf({"sync", "null"}))
      ->capture_default_str();
  sub->add_option("--async", args->async,
                  "Async requests: native (io_uring/libaio as recorded), sync or null")
      ->check(OneOf({"native", "sync", "null"}))
      ->capture_default_str();
  sub->add_option("--spin-us", args->spin_us, "Busy-wait this close to a deadline (us)")
      ->transform(DurationUnits(1e3, "us"))
      ->capture_default_str();
  sub->add_option("--rt-priority", o.rt_priority,
                  "Run the replay threads SCHED_FIFO at this priority (1-99; root): "
                  "schedule accuracy on a busy machine")
      ->check(Number(true, "1, 50"))
      ->check(CLI::Range(1, 99));
  sub->add_option("--layer", args->layer, "syscall (file-level) or block (device-level)")
      ->check(OneOf({"syscall", "block"}))
      ->capture_default_str();
  sub->add_option("--device", o.device, "Block device for --layer block");
  sub->add_flag("--allow-device", o.allow_device, "Allow writing to --device");
  sub->add_option("--device-offset", o.device_offset, "Byte offset added to every request (or 1G)")
      ->transform(SizeUnits());
  sub->add_flag("--wrap", o.wrap, "Wrap requests beyond the end of a smaller device");
  AddScopeOptions(sub, args->scope, true);
  sub->add_flag("--mpi", args->mpi,
                "Run as one rank of an MPI job (mpirun -np N iotwin replay JOB --mpi): rank R "
                "replays recorded host R (a trace of one host: a whole copy), under ROOT/rank-R "
                "({rank} in a --map target is R), all ranks starting together; --record merges "
                "every rank's recording (docs/multi-host.md)");
  sub->add_option("--mpi-hosts", args->mpi_hosts,
                  "With --mpi: the recorded host each rank replays, in rank order (default: host "
                  "R for rank R)")
      ->delimiter(',')
      ->type_name("HOST,...");
  return {sub, [args] {
            replay::ReplayOptions& o = args->o;
            auto fail = [&](const Status& st) {
              std::fprintf(stderr, "iotwin replay: %s\n", st.ToString().c_str());
              return kExitError;
            };
            auto pace = replay::ParsePace(args->pace);
            if (!pace.ok()) return fail(pace.status());
            o.pace = *pace;
            if (o.rt_priority > 0 && o.pace == replay::PaceMode::kFast) {
              // Real-time workers that never sleep would hold their CPUs until throttled.
              return fail(Status::Invalid(
                  "--rt-priority is for --pace original or gaps, not fast (the replay threads "
                  "would never leave the CPU)"));
            }
            auto cache = replay::ParseCache(args->cache);
            if (!cache.ok()) return fail(cache.status());
            o.cache = *cache;
            auto fill = replay::ParseFill(args->fill);
            if (!fill.ok()) return fail(fill.status());
            o.fill = *fill;
            for (const auto& m : args->maps) {
              auto p = replay::ParseMap(m);
              if (!p.ok()) return fail(p.status());
              o.maps.push_back(*p);
            }
            if (args->layer == "syscall") o.layer = replay::Layer::kSyscall;
            else if (args->layer == "block") o.layer = replay::Layer::kBlock;
            else return fail(Status::Invalid("--layer {}: expected syscall or block", args->layer));
            if (args->backend == "sync") o.backend = replay::BackendKind::kSync;
            else if (args->backend == "null") o.backend = replay::BackendKind::kNull;
            else return fail(Status::Invalid("--backend {}: expected sync or null", args->backend));
            if (args->async == "native") o.async = replay::AsyncKind::kNative;
            else if (args->async == "sync") o.async = replay::AsyncKind::kSync;
            else if (args->async == "null") o.async = replay::AsyncKind::kNull;
            else return fail(Status::Invalid("--async {}: expected native, sync or null", args->async));
            if (args->spin_us < 0) return fail(Status::Invalid("--spin-us must be >= 0"));
            o.spin_ns = static_cast<uint64_t>(args->spin_us * 1000);
            o.progress = !args->quiet;
            auto scope = args->scope.Parse();
            if (!scope.ok()) return fail(scope.status());
            o.scope = *scope;
            // The tracer for --record: this binary, unless IOTWIN_RECORD_BIN names another.
            const char* rec_bin = std::getenv("IOTWIN_RECORD_BIN");
            o.iotwin_bin = rec_bin && *rec_bin ? rec_bin : SelfPath();
            if (o.layer == replay::Layer::kSyscall && o.root.empty() && !o.dry_run) {
              return fail(Status::Invalid("--root DIR is required (the sandbox to replay into)"));
            }
            if (!args->mpi_hosts.empty() && !args->mpi)
              return fail(Status::Invalid("--mpi-hosts is for --mpi"));
            if (args->mpi) return RunAsMpiRank(*args);
            auto r = replay::RunReplay(o);
            if (!r.ok()) return fail(r.status());
            for (const auto& w : r->warnings) std::fprintf(stderr, "iotwin replay: warning: %s\n", w.c_str());
            PrintReplaySummary(*r, o.json, "iotwin-replay/1");
            return r->exit_code;
          }};
}

}  // namespace iotwin::cli
