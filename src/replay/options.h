// Options of a replay, as the CLI (src/cli/cmd_replay.cc) parses them and the library uses them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "model/scope.h"

namespace iotwin::replay {

enum class PaceMode { kOriginal, kGaps, kFast };
enum class CacheMode { kAsCaptured, kCold, kWarm };
enum class FillKind { kZero, kRandom, kCompressible };
enum class Layer { kSyscall, kBlock };
enum class BackendKind { kSync, kNull };
enum class AsyncKind { kNative, kSync, kNull };  // native: io_uring for io_uring, libaio for libaio

struct FillSpec {
  FillKind kind = FillKind::kRandom;
  double ratio = 1.0;  // compressible: compressed size is 1/ratio of the data
  std::string ToString() const;
};

struct ReplayOptions {
  std::string trace;
  std::string root;
  std::vector<std::pair<std::string, std::string>> maps;  // recorded prefix -> target
  bool prepare_only = false;
  bool dry_run = false;
  bool force = false;
  bool sparse = false;
  bool keep_modes = false;  // apply recorded group/other write (set-id bits never; modes.h)
  bool strict = false;
  bool json = false;
  bool progress = true;  // shown only when stderr is a terminal
  FillSpec fill;
  CacheMode cache = CacheMode::kAsCaptured;
  PaceMode pace = PaceMode::kOriginal;
  double speed = 1.0;
  // --raw-gaps: keep the recorded think time as it is, with what the capture added to each call
  // (the trace header's capture.cost; pacer.h); by default gaps and original take it out.
  bool raw_gaps = false;
  int amplify = 1;
  BackendKind backend = BackendKind::kSync;
  AsyncKind async = AsyncKind::kNative;
  uint64_t spin_ns = 50'000;  // busy-wait this close to a deadline instead of sleeping
  // SCHED_FIFO priority of the worker threads (0: the normal scheduler). On a busy machine the
  // p99 of the schedule error is time spent waiting for a CPU, which only a real-time class
  // removes (docs/replay.md "Pacing").
  int rt_priority = 0;
  std::string record_out;     // --record
  std::string iotwin_bin;     // path of the iotwin binary (for --record)
  // Device-level replay.
  Layer layer = Layer::kSyscall;
  std::string device;
  bool allow_device = false;
  uint64_t device_offset = 0;
  bool wrap = false;
  int max_examples = 5;  // mismatch examples kept per kind
  // --max-threads: the most threads the replay may start (0: thread_limit.h's default ceiling;
  // the machine's limits apply either way).
  uint64_t max_threads = 0;
  // --max-write: the most bytes the replay's calls may write (0: no budget but free space).
  uint64_t max_write = 0;
  // Files left out (model::ModelOptions::scope): not prepared, their ops skipped.
  model::Scope scope;
  // One host of a merged trace to replay (format/hosts.h; `--mpi`: each rank its host's part).
  std::optional<uint32_t> host;
  // Called once every engine is set up and the recorder runs, right before the start time is
  // taken (`--mpi`: the barrier all ranks leave together). Its error stops the replay.
  std::function<Status()> start_gate;
};

Result<PaceMode> ParsePace(const std::string& s);
Result<CacheMode> ParseCache(const std::string& s);
Result<FillSpec> ParseFill(const std::string& s);
Result<std::pair<std::string, std::string>> ParseMap(const std::string& s);
const char* PaceName(PaceMode m);
const char* CacheName(CacheMode m);

}  // namespace iotwin::replay
