// RunReplay: `iotwin replay` as a library call. Loads the trace into a model, checks that it can
// be replayed (damage, lost events, layers, page size), plans the sandbox, prepares the file set
// (or only prints the plan), runs one engine per --amplify copy, and reports.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "replay/options.h"

namespace iotwin::replay {

struct ReplayOutcome {
  int exit_code = 0;       // 0 done; 1 --strict stopped on a mismatch; 2 bad input / error
  nlohmann::json summary;  // what --json prints
  std::string text;        // the human summary
  std::vector<std::string> warnings;
};

// Runs everything `options` asks for. Errors of input or environment come back as a Status
// (the CLI prints it and exits 2); a replay that ran returns its outcome.
Result<ReplayOutcome> RunReplay(const ReplayOptions& options);

// Grows this process's descriptor table to RLIMIT_NOFILE (at most kMaxGrownDescriptors) before
// the replay starts. The replay maps a recorded dup2/dup3 target without a live descriptor to a
// number far above what the kernel hands out; the first such call would grow the table, and a
// process with several threads waits for an RCU grace period there (10-14 ms measured on a
// 2-core VM: one late call in original pacing, a longer run in gaps pacing). Returns the size
// asked for, 0 when it could not grow.
inline constexpr uint64_t kMaxGrownDescriptors = uint64_t{1} << 17;
int GrowDescriptorTable();

}  // namespace iotwin::replay
