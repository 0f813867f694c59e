// compare: how faithfully one trace (a replay) reproduces another (the original).
//
// Each measure is a number with a threshold. Structural measures (sequence match, operation
// counts, bytes, request-size and offset distributions, block request stream) are always
// judged. Timing measures (IOPS, throughput, their time series, inter-arrival times) are judged
// only when the replay's pacing mode promises timing ("original", "gaps"), or when the second
// trace is not a replay at all; otherwise they are reported but not judged.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "model/scope.h"

namespace iotwin::analysis {

struct MeasureSpec {
  const char* name;
  double default_threshold;
  bool at_least;      // true: value must be >= threshold; false: value must be <= threshold
  bool timing;        // judged only where the pacing promises timing
  bool enabled;       // judged by default (false: reported only, until --threshold sets it)
  const char* what;   // one-line description for --help and docs
  bool block = false; // block layer: judged only for direct-I/O originals (or an explicit threshold)
};

// Every measure compare computes, with its default threshold.
const std::vector<MeasureSpec>& Measures();

struct CompareOptions {
  // Overrides from --threshold NAME=VALUE; nullopt disables judging (NAME=off).
  std::map<std::string, std::optional<double>> thresholds;
  size_t top = 10;                       // thread rows in the output
  size_t max_sequence_ops = 50'000'000;  // per trace
  bool progress = false;
  bool salvage = false;
  // Judge only the calls a replay re-issues (model::Op::skip == kReplayable) in both traces;
  // false: every system call.
  bool storage_calls_only = true;
  // Inter-arrival times below this are one class for iat-ks. A replay issues a call a few
  // microseconds after its predecessor at best (wake-up, descriptor and mapping lookup), and tens
  // of microseconds on a busy machine (replay busy-waits only the last --spin-us, 50 us, before
  // a deadline), so differences below it measure the replayer, not the workload's think time.
  uint64_t iat_resolution_ns = 50'000;
  // The data scope: calls on files it leaves out are not judged in either trace (a replay's
  // paths are judged below its sandbox root, model::ModelOptions::scope).
  model::Scope files;
  // "auto": the block streams of one device (analysis/compare_block.h) when the replay's header
  // says it is a device-level replay; "block": always; "syscall": never.
  std::string layer = "auto";
  // compare --layer block: "other" judges a device replay as one onto another device (the issue
  // stream the replayer controls is judged; queue depth, latency and the device's splits and
  // merges are reported as its answer), "same" as one onto an equal device (all judged), "auto"
  // decides from the two traces' D2C latencies and queue limits (analysis/compare_block.cc).
  std::string target_device = "auto";
  // One host of merged traces (docs/multi-host.md): both traces' records of other hosts are left
  // out, by the host's name in each trace's host table; "": the whole job.
  std::string host;
};

// Parses "NAME=VALUE" or "NAME=off" into options->thresholds.
Status ParseThreshold(const std::string& spec, CompareOptions* options);

// Compares two trace files. Errors (unreadable or corrupt input) name the file and byte offset.
// The result holds "verdict" ("pass"/"fail"), "measures", "ops", "threads", "block", ...
Result<nlohmann::json> CompareTraces(const std::string& original, const std::string& replay,
                                     const CompareOptions& options);

std::string RenderCompareText(const nlohmann::json& result);
// The parts of the text both comparisons (calls, block streams) print: the measures table
// (rows of `result["measures"]`) and the VERDICT line.
std::string RenderMeasuresTable(const nlohmann::json& measures);
std::string RenderVerdictLine(const nlohmann::json& result);

}  // namespace iotwin::analysis
