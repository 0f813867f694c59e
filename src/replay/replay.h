// RunReplay: `iotwin replay` as a library call. Loads the trace into a model, checks that it can
// be replayed (damage, lost events, layers, page size), plans the sandbox, prepares the file set
// (or only prints the plan), runs one engine per --amplify copy, and reports.
#pragma once

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

}  // namespace iotwin::replay
