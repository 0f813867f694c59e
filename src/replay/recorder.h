// The --record seam: capturing the replay itself with iotwin's own tracer.
//
// The replayer starts `iotwin record --pid <self> -o <tmp>` before its workers are released,
// waits until the tracer is attached, runs the replay, stops the tracer (SIGINT: it drains and
// finishes the trace), then rewrites the capture into OUT keeping only the workers' records
// (their system calls, faults, async requests and process events; strings, clocks, losses and
// device-level records stay) and adding "replay": {"source", "pace", ...} to the header. The
// replayer's own bookkeeping (reading the trace, preparing files, descriptor copies at fork,
// progress output) happens on other threads and is dropped.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace iotwin::replay {

class ReplayRecorder {
 public:
  virtual ~ReplayRecorder() = default;
  // Starts tracing this process; returns once events of the calling process are being captured.
  virtual Status Start() = 0;
  // Stops tracing and writes `output`: records of `worker_tids` only, header meta extended by
  // `replay_meta` under "replay".
  virtual Status Finish(const std::vector<pid_t>& worker_tids, const nlohmann::json& replay_meta) = 0;
};

// Spawns `iotwin_bin record --pid <getpid()> [record_options...]`; `output` is the final trace
// path.
std::unique_ptr<ReplayRecorder> MakeSubprocessRecorder(
    const std::string& iotwin_bin, const std::string& output,
    const std::vector<std::string>& record_options = {});

// --record OUT, absolute, once its directory is known to exist and be writable: a recording that
// cannot be written stops the replay before it starts, instead of being found missing after it.
Result<std::string> ResolveRecordPath(const std::string& record_out);

// Rewrites trace `in` into `out` keeping only the records of `tids` (plus strings, clocks,
// losses, snapshots and device-level records) and adding meta["replay"] = replay_meta.
Status FilterTraceToThreads(const std::string& in, const std::string& out,
                            const std::vector<pid_t>& tids, const nlohmann::json& replay_meta);

}  // namespace iotwin::replay
