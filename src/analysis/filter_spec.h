// Parsing `--filter KEY=VALUE` options into an AnalysisFilter.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analysis/analyzer.h"
#include "base/status.h"

namespace iotwin::analysis {

// Keys: tgid (or pid), tid, file (glob, model::GlobMatch, on the names a file was opened by, as
// recorded or resolved to absolute paths), op (names
// as OpName prints them, or "reads"/"writes" for every read/write op), host (a merged trace's
// host by name, docs/multi-host.md). Values may be
// comma-separated; repeated keys accumulate. `from`/`to` are seconds from the trace start.
Result<AnalysisFilter> ParseFilterSpecs(const std::vector<std::string>& specs,
                                        std::optional<double> from, std::optional<double> to);

}  // namespace iotwin::analysis
