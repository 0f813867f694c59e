// iotwin record: capture a workload's file I/O with eBPF (src/capture/recorder.h, docs/record.md).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/bytes_text.h"
#include "base/units.h"
#include "capture/recorder.h"
#include "cli/commands.h"
#include "cli/scope_options.h"
#include "cli/unit_options.h"
#include "interop/record_sink.h"
#include "model/scope_filter.h"

namespace iotwin::cli {
namespace {

struct RecordArgs {
  capture::RecordOptions options;
  std::vector<std::string> pids;
  std::vector<std::string> uprobes;
  uint64_t ring_mb = 64;
  uint64_t wake_kb = 256;
  bool no_async = false;
  bool no_markers = false;
  bool status = false;
  bool no_status = false;
  bool json = false;
  std::string on_failure = "terminate";  // checked by OneOf: terminate, kill or leave
  // memory layer
  bool no_memory = false;
  std::string memory_parts;
  bool subpage = false;
  int subpage_interval_ms = 10;
  // block, NVMe and interference layers
  bool no_block = false;
  bool no_nvme = false;
  bool sched = false;
  bool no_sched = false;
  ScopeArgs scope;
};

// `-o -`: the trace goes to standard output (a pipe: `| ssh host 'cat > run.iotwin'`), written
// through a descriptor of its own; standard output itself then points at standard error, so the
// traced command's output (which it inherits) and anything printed cannot mix into the trace.
bool RedirectTraceToStdout(std::string* output) {
  if (isatty(STDOUT_FILENO)) {
    fprintf(stderr, "iotwin record: -o -: standard output is a terminal; pipe or redirect it\n");
    return false;
  }
  // The writer opens the descriptor again through /proc (with O_TRUNC): that works for a pipe
  // and a file opened for writing; a socket cannot be opened so, and an appended file would
  // hold something before the trace.
  struct stat st;
  int flags = fcntl(STDOUT_FILENO, F_GETFL);
  if (fstat(STDOUT_FILENO, &st) != 0 || flags < 0 ||
      !(S_ISFIFO(st.st_mode) || (S_ISREG(st.st_mode) && !(flags & O_APPEND)))) {
    fprintf(stderr, "iotwin record: -o -: standard output must be a pipe or a file opened for "
                    "writing (not a socket, a terminal or a file opened for appending)\n");
    return false;
  }
  int trace_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (trace_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    fprintf(stderr, "iotwin record: -o -: cannot set up standard output: %s\n", strerror(errno));
    return false;
  }
  *output = "/proc/self/fd/" + std::to_string(trace_fd);
  return true;
}

// With a scope, the capture writes every record to OUTPUT.unscoped and the trace is then written
// to OUTPUT without the records on files out of scope (model/scope_filter.h): the filter needs
// each name resolved, which only the trace interpreter can do. Both files are created
// exclusively (never through a planted symlink), and OUTPUT is written as OUTPUT.partial and
// renamed when whole.
int ApplyScope(interop::ExclusiveFile& unscoped, const std::string& output,
               const model::Scope& scope) {
  auto partial = interop::ExclusiveFile::Create(output + ".partial");
  if (!partial.ok()) {
    fprintf(stderr, "iotwin record: %s (the whole trace is in %s)\n",
            partial.status().message().c_str(), unscoped.path().c_str());
    return kExitError;
  }
  auto dropped = model::WriteScopedTrace(unscoped.writer_path(), partial->writer_path(), scope);
  if (dropped.ok() && ::rename(partial->path().c_str(), output.c_str()) != 0) {
    dropped = Status::FromErrno(errno, "cannot rename " + partial->path() + " to " + output);
  }
  if (!dropped.ok()) {
    partial->Remove();
    fprintf(stderr, "iotwin record: --scope/--include/--exclude: %s (the whole trace is in %s)\n",
            dropped.status().message().c_str(), unscoped.path().c_str());
    return kExitError;
  }
  unscoped.Remove();
  fprintf(stderr, "iotwin record: scope %s: left out %llu records (%llu calls, %llu bytes, %llu "
          "page faults)\n",
          scope.Describe().c_str(), static_cast<unsigned long long>(dropped->records),
          static_cast<unsigned long long>(dropped->calls),
          static_cast<unsigned long long>(dropped->bytes),
          static_cast<unsigned long long>(dropped->faults));
  return kExitOk;
}

// The capture's options from the command line's, checked; false (said on stderr) when one is
// not valid.
bool ResolveRecordOptions(RecordArgs& a) {
  capture::RecordOptions& o = a.options;
  for (const std::string& p : a.pids) {
    char* end = nullptr;
    errno = 0;
    long v = strtol(p.c_str(), &end, 10);
    if (p.empty() || *end != '\0' || errno == ERANGE || v <= 0 || v > INT32_MAX) {
      fprintf(stderr, "iotwin record: --pid '%s' is not a process id\n", p.c_str());
      return false;
    }
    o.pids.push_back(static_cast<pid_t>(v));
  }
  for (const std::string& u : a.uprobes) {
    auto spec = capture::ParseUprobeSpec(u);
    if (!spec.ok()) {
      fprintf(stderr, "iotwin record: %s\n", spec.status().message().c_str());
      return false;
    }
    o.uprobes.push_back(spec.value());
  }
  if (a.ring_mb == 0 || (a.ring_mb & (a.ring_mb - 1)) != 0 || a.ring_mb > 2048) {
    fprintf(stderr, "iotwin record: --ring-mb must be a power of two between 1 and 2048\n");
    return false;
  }
  if (a.no_memory && !a.memory_parts.empty()) {
    fprintf(stderr, "iotwin record: give either --no-memory or --memory\n");
    return false;
  }
  if (!a.memory_parts.empty()) {
    auto parts = capture::ParseMemoryParts(a.memory_parts, o.memory);
    if (!parts.ok()) {
      fprintf(stderr, "iotwin record: %s\n", parts.status().message().c_str());
      return false;
    }
    o.memory = parts.value();
  } else if (a.no_memory) {
    o.memory.faults = o.memory.cache = o.memory.writeback = o.memory.state = false;
    o.memory.off_reason = "switched off by --no-memory";
  }
  if (a.subpage_interval_ms < 1 || a.subpage_interval_ms > 60000) {
    fprintf(stderr, "iotwin record: --subpage-interval-ms must be between 1 and 60000\n");
    return false;
  }
  o.memory.subpage = a.subpage;
  o.memory.subpage_interval_ms = a.subpage_interval_ms;
  o.ring_bytes = a.ring_mb << 20;
  o.wake_bytes = a.wake_kb << 10;
  o.async = !a.no_async;
  o.on_failure = a.on_failure == "kill"    ? capture::OnFailure::kKill
                 : a.on_failure == "leave" ? capture::OnFailure::kLeave
                                           : capture::OnFailure::kTerminate;
  o.markers = !a.no_markers;
  if (a.sched && a.no_sched) {
    fprintf(stderr, "iotwin record: give either --sched or --no-sched\n");
    return false;
  }
  o.block.block = !a.no_block;
  o.block.nvme = !a.no_nvme;
  o.block.sched = !a.no_sched;
  o.status_line = a.status      ? capture::StatusLine::kOn
                  : a.no_status ? capture::StatusLine::kOff
                                : capture::StatusLine::kAuto;
  return true;
}

int RunRecord(RecordArgs& a) {
  if (!ResolveRecordOptions(a)) return kExitError;
  capture::RecordOptions& o = a.options;
  auto scope = a.scope.Parse();
  if (!scope.ok()) {
    fprintf(stderr, "iotwin record: %s\n", scope.status().message().c_str());
    return kExitError;
  }
  const bool to_stdout = o.output == "-";
  if (to_stdout && a.json) {
    fprintf(stderr, "iotwin record: -o - writes the trace to standard output: no --json there\n");
    return kExitError;
  }
  if (to_stdout) {
    if (!scope->IsAll()) {
      fprintf(stderr, "iotwin record: -o -: --scope, --include and --exclude need a trace file; "
                      "apply them when reading (iotwin report - --scope data)\n");
      return kExitError;
    }
    if (!RedirectTraceToStdout(&o.output)) return kExitError;
  }
  const std::string output = o.output;
  std::optional<interop::ExclusiveFile> unscoped;
  if (!scope->IsAll()) {
    auto created = interop::ExclusiveFile::Create(output + ".unscoped");
    if (!created.ok()) {
      fprintf(stderr, "iotwin record: %s\n", created.status().message().c_str());
      return kExitError;
    }
    unscoped.emplace(std::move(*created));
    o.output = unscoped->writer_path();
  }
  auto started = std::chrono::steady_clock::now();
  auto r = capture::Record(o);
  if (!r.ok()) {
    fprintf(stderr, "iotwin record: %s\n", r.status().message().c_str());
    if (unscoped) unscoped->Remove();
    return kExitError;
  }
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  if (unscoped) {
    if (ApplyScope(*unscoped, output, *scope) != kExitOk) return kExitError;
    std::error_code ec;
    r->file_bytes = std::filesystem::file_size(output, ec);  // the scoped trace's size
  }
  // One summary line, terminal or not.
  fprintf(stderr, "iotwin record: %llu events, %llu lost, %s to %s in %.1f s (%s)\n",
          static_cast<unsigned long long>(r->events), static_cast<unsigned long long>(r->lost),
          units::HumanBytes(r->file_bytes).c_str(),
          to_stdout ? "standard output" : output.c_str(),
          took.count(), r->stop_reason.c_str());
  if (a.json) {
    // Printed after the command ended: the last line of standard output, which the command
    // shares.
    nlohmann::json j = {{"schema", "iotwin-record/1"},
                        {"output", BytesToText(output)},
                        {"events", r->events},
                        {"lost", r->lost},
                        {"file_bytes", r->file_bytes},
                        {"seconds", took.count()},
                        {"stop_reason", r->stop_reason},
                        {"exit_status", r->exit_status},
                        {"scope", scope->IsAll() ? nlohmann::json(nullptr)
                                                 : nlohmann::json(scope->Describe())}};
    fflush(stdout);
    printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  return r.value().exit_status;
}

}  // namespace

CommandSpec SetupRecord(CLI::App& parent) {
  auto args = std::make_shared<RecordArgs>();
  CLI::App* sub = parent.add_subcommand(
      "record",
      "Record a workload's file I/O with eBPF: iotwin record -o TRACE [options] -- CMD ARGS...");
  capture::RecordOptions& o = args->options;
  sub->add_option("-o,--output", o.output,
                  "Trace file to write ('-': standard output, which must be a pipe or a file)")
      ->required();
  sub->add_option("--pid", args->pids, "Attach to running processes (PID[,PID...])")
      ->delimiter(',');
  sub->add_option(
      "--cgroup", o.cgroup,
      "Trace every process of a cgroup v2 (absolute path, or relative to the cgroup2 mount)");
  sub->add_option("--duration", o.duration_s, "Stop recording after this long (seconds, or 500ms, 2m)")
      ->transform(DurationUnits(1e9, "s"));
  // For `iotwin replay --record`: a byte on this descriptor says the targets are traced.
  sub->add_option("--ready-fd", o.ready_fd,
                  "Write one byte to this descriptor once the targets are traced")
      ->group("");
  sub->add_option("--user", o.user, "Run the command as this user (name or uid)");
  sub->add_flag("--fail-on-loss", o.fail_on_loss, "Exit non-zero when any event was lost");
  sub->add_option("--on-failure", args->on_failure,
                  "When the recording fails under a running command: terminate it (SIGTERM, "
                  "SIGKILL 5 s later), kill it, or leave it running untraced")
      ->check(OneOf({"terminate", "kill", "leave"}))
      ->capture_default_str();
  sub->add_option("--uprobe", args->uprobes,
                  "Record calls of a function as intent: BINARY:FUNCTION[=label] (repeatable)");
  sub->add_option("--ring-mb", args->ring_mb, "Ring buffer size in MiB (power of two; or 64M)")
      ->transform(SizeUnits(1 << 20, "MiB"))
      ->capture_default_str();
  sub->add_option("--wake-kb", args->wake_kb,
                  "Wake the consumer once this many KiB wait in the ring (tuning)")
      ->transform(SizeUnits(1 << 10, "KiB"))
      ->capture_default_str();
  sub->add_option("--poll-ms", o.poll_ms, "Longest wait between ring checks in ms (tuning)")
      ->transform(DurationUnits(1e6, "ms", true))
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  sub->add_flag("--no-async", args->no_async, "Do not trace io_uring requests");
  sub->add_flag("--no-markers", args->no_markers,
                "Do not offer the IOTWIN_MARKER intent channel to the command");
  sub->add_flag("--status", args->status, "Show the live status line even when not on a terminal");
  sub->add_flag("--no-status", args->no_status, "Never show the live status line");
  sub->add_flag("--json", args->json,
                "At the end, print the summary as one JSON line on stdout (schema iotwin-record/1)");
  sub->add_flag("--no-memory", args->no_memory,
                "Do not capture the memory layer (page faults, page cache, write-back, cache state)");
  sub->add_option("--memory", args->memory_parts,
                  "Memory layer parts to capture: faults,cache,writeback,state (default all; or none)");
  sub->add_flag("--subpage", args->subpage,
                "Record which 8-byte words of pages stored to through shared file mappings changed");
  sub->add_option("--subpage-interval-ms", args->subpage_interval_ms,
                  "Sampling interval of --subpage in milliseconds")
      ->transform(DurationUnits(1e6, "ms", true))
      ->capture_default_str();
  sub->add_flag("--no-block", args->no_block,
                "Do not record block-layer events (bios and requests)");
  sub->add_flag("--no-nvme", args->no_nvme, "Do not record NVMe commands");
  sub->add_flag("--sched", args->sched,
                "Record off-CPU and interrupt intervals of threads with block I/O in flight "
                "(the default)");
  sub->add_flag("--no-sched", args->no_sched, "Do not record interference intervals");
  AddScopeOptions(sub, args->scope, true);
  sub->add_option("command", o.command, "The command to run and trace, after --");
  return {sub, [args] { return RunRecord(*args); }};
}

}  // namespace iotwin::cli
