// `iotwin layers`: the cross-layer report of a trace (src/correlate/layers_report.h,
// docs/block-layer.md): what each application I/O became on the way down, per-request per-layer
// latency, splits and amplification, software share, dependent chains, interference. The same
// section can be added to `iotwin report` by calling LayersReport/RenderLayersText.
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/unit_options.h"
#include "correlate/layers_report.h"

namespace iotwin::cli {

CommandSpec SetupLayers(CLI::App& parent) {
  struct Options {
    std::string path;
    bool json = false;
    bool all_requests = false;
    correlate::LayersOptions layers;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = parent.add_subcommand(
      "layers",
      "Cross-layer report: each request linked to its system call, file, bios and NVMe command, "
      "with per-layer latency (btt terms), splits, amplification, software share, dependent "
      "I/O chains and interference");
  sub->add_option("trace", opt->path, "trace file (.iotwin)")->required();
  sub->add_flag("--json", opt->json, "print the report as JSON");
  sub->add_option("--requests", opt->layers.max_request_rows,
                  "rows of the per-request table (0: all)")
      ->capture_default_str();
  sub->add_flag("--all-requests", opt->all_requests, "list every request");
  sub->add_option("--top", opt->layers.top, "rows of the other tables")->capture_default_str();
  sub->add_option("--dependent-gap-ns", opt->layers.dependent_gap_ns,
                  "a batch of reads this soon (ns, or 1ms) after the previous batch of its "
                  "thread completed continues its dependent chain")
      ->transform(DurationUnits(1, "ns", true))
      ->capture_default_str();
  sub->add_option("--chain-query-marker", opt->layers.chain_query_marker,
                  "intent label whose phases are one dependent chain each (empty: ignore markers)")
      ->capture_default_str();
  sub->add_option("--chain-hop-marker", opt->layers.chain_hop_marker,
                  "intent label whose phases are one batch (hop) of a chain each (empty: ignore)")
      ->capture_default_str();
  return {sub, [opt] {
            if (opt->all_requests) opt->layers.max_request_rows = 0;
            auto report = correlate::LayersReportForTrace(opt->path, opt->layers);
            if (!report.ok()) {
              fmt::print(stderr, "iotwin layers: {}\n", report.status().message());
              return kExitError;
            }
            if (opt->json) {
              fmt::print("{}\n",
                         report->dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
            } else {
              fmt::print("{}", correlate::RenderLayersText(*report));
            }
            return kExitOk;
          }};
}

}  // namespace iotwin::cli
