// Running an Analyzer over a trace file: one streaming pass with a progress bar on a terminal.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "analysis/analyzer.h"
#include "base/status.h"

namespace iotwin::analysis {

struct TraceAnalysisOptions {
  AnalyzerOptions analyzer;
  bool progress = false;  // draw a progress bar on stderr
  bool salvage = false;   // skip damaged chunks instead of failing
};

struct TraceAnalysis {
  std::unique_ptr<Analyzer> analyzer;
  nlohmann::json model;   // Analyzer::Model() with the trace facts filled in
  nlohmann::json meta;    // the trace header
};

// One pass over `path`. Errors name the file and the byte offset (from TraceReader).
Result<TraceAnalysis> AnalyzeTraceFile(const std::string& path, const TraceAnalysisOptions& options);

// The report pass(es): the analysis, plus for `heatmaps` > 0 a second pass that collects the
// offset heat maps and offset-over-time samples of the busiest files (model["heatmaps"]).
Result<nlohmann::json> BuildReportModel(const std::string& path, const TraceAnalysisOptions& options,
                                        size_t heatmaps);

}  // namespace iotwin::analysis
