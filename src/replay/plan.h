// ReplayPlan: a model resolved against a sandbox: the target path of every recorded path, the
// directories and files to create before replay, the names the workload creates (cleared before
// a repeated replay), and the figures --dry-run prints.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "model/trace_model.h"
#include "replay/options.h"
#include "replay/path_mapper.h"
#include "replay/sandbox.h"
#include "replay/thread_limit.h"

namespace iotwin::replay {

struct PlannedFile {
  uint32_t file = model::kNone;  // model::TraceModel::files() index
  std::string recorded;
  std::string target;
  uint64_t size = 0;
  bool dir = false;
};

struct ReplayPlan {
  const model::TraceModel* model = nullptr;
  PathMapper mapper;
  // Where every path operation is resolved; opened by PrepareSandbox (none for a dry run).
  std::shared_ptr<const Sandbox> sandbox;
  // Per PathId: "" for strings that are not absolute paths and for names no system call can
  // carry (a NUL byte inside).
  std::vector<std::string> targets;
  // Per PathId: the recorded path, normalised ("" where `targets` is ""): what a worker confined
  // to its base (Sandbox::ConfineThread) hands the kernel.
  std::vector<std::string> confined;
  uint64_t unrepresentable_paths = 0;  // recorded names holding a NUL byte
  std::vector<PlannedFile> initial;  // parents before children
  std::vector<std::string> created;  // targets the workload creates (deepest first)
  uint64_t initial_bytes = 0;
  uint64_t initial_files = 0;
  uint64_t initial_dirs = 0;
  uint64_t replayable_ops = 0;
  uint64_t skipped_ops = 0;
  uint64_t threads_with_ops = 0;
  // What the replay's calls write (write_budget.h PlanWrite): calls, bytes at most, and the
  // bytes files grow by past their prepared sizes (with the bytes of writes whose file the
  // model does not know), in all and per sandbox base (what the free-space check counts).
  uint64_t write_calls = 0;
  uint64_t write_bytes = 0;
  uint64_t growth_bytes = 0;
  std::map<std::string, uint64_t> growth_by_base;
  // The threads the replay starts, and the limit (thread_limit.h; set by RunReplay).
  uint64_t threads_needed = 0;
  ThreadLimit thread_limit;
  // Duration estimates, ns.
  uint64_t est_original = 0;  // recorded span / speed
  uint64_t est_gaps = 0;      // longest thread: gaps / speed + recorded durations
  uint64_t est_fast = 0;      // longest thread: recorded durations only
};

Result<ReplayPlan> BuildPlan(const model::TraceModel& model, const PathMapper& mapper,
                             double speed);

// The plan as --dry-run shows it (JSON; the CLI also renders it as text).
nlohmann::json PlanToJson(const ReplayPlan& plan, const ReplayOptions& options);
std::string PlanToText(const ReplayPlan& plan, const ReplayOptions& options);

// Name of an op for reports: "pread64", "page_fault", "uring:read", "libaio:pwrite", ...
std::string OpLabel(const model::Op& op);

}  // namespace iotwin::replay
