// Running an Analyzer over a trace file: one streaming pass with a progress bar on a terminal.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "analysis/analyzer.h"
#include "base/status.h"
#include "format/trace_reader.h"

namespace iotwin::analysis {

// A progress bar on stderr for a pass over a trace (drawn only when `enabled`: a terminal).
class ProgressBar {
 public:
  ProgressBar(bool enabled, std::string label, uint64_t total);
  ~ProgressBar() { Finish(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `done` bytes of `total` read, `records` records so far; redrawn at most ten times a second.
  void Update(uint64_t done, uint64_t records);
  void Finish();

 private:
  bool enabled_;
  std::string label_;
  uint64_t total_;
  double start_;
  double last_ = 0;
  bool drawn_ = false;
};

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

// The facts of the trace `reader` read (from `path`), at its end: the model's "trace" (path, size,
// format, damage, unknown records).
nlohmann::json TraceFacts(const std::string& path, const TraceReader& reader);

// The report pass(es): the analysis, plus for `heatmaps` > 0 a second pass that collects the
// offset heat maps and offset-over-time samples of the busiest files (model["heatmaps"]).
Result<nlohmann::json> BuildReportModel(const std::string& path, const TraceAnalysisOptions& options,
                                        size_t heatmaps);

}  // namespace iotwin::analysis
