// The hosts of a merged trace in `iotwin report` (docs/multi-host.md): one row per host, each
// from the same analysis run with that host's filter, so a host's row equals the report of its
// own trace.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/trace_analysis.h"
#include "base/status.h"

namespace iotwin::cli {

// model["hosts"] for the trace at `path`: null for a trace of one host. `options` are the
// report's (its filters apply to every row).
Result<nlohmann::json> HostFigures(const std::string& path,
                                   const analysis::TraceAnalysisOptions& options);

// An error naming the trace's hosts when one of `names` is not among them.
Status CheckHostNames(const std::string& path, const std::vector<std::string>& names);

// The "Hosts" table of the text report ("" without hosts).
std::string RenderHostsText(const nlohmann::json& model);

}  // namespace iotwin::cli
