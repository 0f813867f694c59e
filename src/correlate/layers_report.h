// The cross-layer report of a trace (docs/block-layer.md, "The layers report"): per-request
// per-layer latency with distributions per layer, operation and file; the btt table; splits,
// merges and amplification; kernel software share of synchronous I/O; dependent I/O chains;
// interference; write-back attribution; and how many requests are linked to a cause.
//
// LayersReport() builds the JSON model (the --json output, stable keys documented in
// docs/block-layer.md); RenderLayersText() (layers_text.cc) prints it as text tables. `iotwin
// layers TRACE` uses both; `iotwin report` can add the same section by calling them (see
// docs/block-layer.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "correlate/correlate.h"

namespace iotwin::correlate {

struct LayersOptions {
  size_t max_request_rows = 40;  // rows of the per-request table (0: all)
  size_t top = 10;               // rows of the other "top" tables
  // Per-layer latencies of a request must sum to its call's duration within
  // max(tolerance_ns, tolerance_fraction * duration).
  uint64_t tolerance_ns = 2000;
  double tolerance_fraction = 0.01;
  // Dependent read chains (chains.h): without query markers, a batch of reads issued at most
  // this long after the thread's previous batch completed depends on it. 1 ms: on a busy machine
  // a searcher loses 100 us and more to preemption between two hops of one query.
  uint64_t dependent_gap_ns = 1'000'000;
  size_t min_chain_reads = 3;
  // Intent-marker labels of one query (a chain) and one hop (a batch); empty: not used.
  std::string chain_query_marker = "query";
  std::string chain_hop_marker = "hop";
  // Consecutive sequential calls of one thread on one file, each smaller than the device's
  // max_sectors_kb, at least this many in a row: an application-side pre-split.
  size_t presplit_min_calls = 4;
};

nlohmann::json LayersReport(const Correlation& c, const LayersOptions& options = {});
std::string RenderLayersText(const nlohmann::json& report);

// Convenience: correlate the trace at `path` and build its report.
Result<nlohmann::json> LayersReportForTrace(const std::string& path,
                                            const LayersOptions& options = {});

}  // namespace iotwin::correlate
