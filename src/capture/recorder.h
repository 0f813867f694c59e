// Recorder: `iotwin record`, the whole capture of one workload from start to a finished trace.
//
// Order of work (docs/record.md): check privileges and kernel support; load and attach the BPF
// programs; create the trace; start the command stopped, add it to the traced set, let it exec
// (or add --pid targets and snapshot them from /proc); consume the ring until the command exits,
// a signal, or --duration; then detach, drain the ring completely, write loss and clock records
// and the footer.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "capture/block_options.h"
#include "capture/memory_options.h"

namespace iotwin::capture {

struct UprobeSpec {
  std::string binary;
  std::string function;
  std::string label;
};
// "BINARY:FUNCTION=label" (label defaults to FUNCTION).
Result<UprobeSpec> ParseUprobeSpec(const std::string& spec);

enum class StatusLine { kAuto, kOn, kOff };

// What becomes of a command iotwin started when the recording fails under it (a full disk, a
// ring error): never left running untraced without a word.
enum class OnFailure {
  kTerminate,  // SIGTERM, then SIGKILL after a grace period; reaped (the default)
  kKill,       // SIGKILL at once; reaped
  kLeave,      // left running untraced; the error names its pid
};

struct RecordOptions {
  std::string output;
  std::vector<std::string> command;  // run and trace this (with its descendants)
  std::vector<pid_t> pids;           // or attach to these running processes
  std::string cgroup;                // or trace everything in this cgroup (v2)
  double duration_s = 0;             // stop after this long (0: no limit)
  std::string user;                  // run the command as this user
  bool fail_on_loss = false;
  std::vector<UprobeSpec> uprobes;
  uint64_t ring_bytes = 64ull << 20;
  uint64_t wake_bytes = 256ull << 10;
  int poll_ms = 10;                  // longest sleep between ring checks
  int zstd_level = 1;                // trace chunk compression
  bool async = true;                 // io_uring per-request tracing
  bool markers = true;               // IOTWIN_MARKER channel for the command
  MemoryOptions memory;              // memory layer parts (docs/memory-layer.md)
  BlockOptions block;                // block, NVMe and interference layers (docs/block-layer.md)
  StatusLine status_line = StatusLine::kAuto;
  OnFailure on_failure = OnFailure::kTerminate;
  // Once every target is traced and its snapshot written, one byte is written here and the
  // descriptor closed (-1: none): a parent that must not run untraced waits for it.
  int ready_fd = -1;
};

struct RecordOutcome {
  int exit_status = 0;              // what iotwin should exit with
  std::optional<int> command_wait;  // the command's wait status, when it was reaped
  std::string stop_reason;
  uint64_t events = 0;
  uint64_t lost = 0;
  uint64_t file_bytes = 0;
};

// Runs the capture. Setup errors (no root, no BTF, bad pid, command cannot start) return an
// error and leave no output file. Errors after the trace began leave the file without its
// footer, which readers report as truncated.
Result<RecordOutcome> Record(const RecordOptions& options);

// The cgroup v2 id of a cgroup directory (absolute, or relative to the cgroup v2 mount point).
Result<uint64_t> CgroupId(const std::string& path);

}  // namespace iotwin::capture
