// `iotwin layers`: the cross-layer report of a trace (src/correlate/layers_report.h,
// docs/block-layer.md): what each application I/O became on the way down, per-request per-layer
// latency, splits and amplification, software share, dependent chains, interference. The same
// section can be added to `iotwin report` by calling LayersReport/RenderLayersText.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/json_fields.h"
#include "cli/commands.h"
#include "cli/scope_options.h"
#include "cli/unit_options.h"
#include "correlate/layers_report.h"
#include "format/hosts.h"
#include "format/trace_reader.h"
#include "model/trace_model.h"

namespace iotwin::cli {
namespace {

// Predicate of the requests on files in `scope`: the model resolves the trace's names (relative
// and dirfd opens, descriptors held at attach) and says which files the scope leaves out; a
// request on a file the model does not know is judged as a file without a path.
Result<std::function<bool(const correlate::Request&)>> RequestsInScope(const std::string& path,
                                                                        const model::Scope& scope) {
  model::ModelOptions mo;
  mo.compute_dependencies = false;
  mo.scope = scope;
  IOTWIN_ASSIGN_OR_RETURN(auto model, model::LoadTraceModel(path, mo));
  auto in_scope = std::make_shared<std::map<std::pair<uint32_t, uint64_t>, bool>>();
  for (const model::FileInfo& f : model->files()) {
    if (f.ino == 0 || f.is_dir) continue;
    bool& in = (*in_scope)[{f.dev, f.ino}];  // one name in scope puts the file in
    in = in || !f.out_of_scope;
  }
  const bool unknown_in = scope.Admits({}, model::FileKind::kStorage);
  return std::function<bool(const correlate::Request&)>([in_scope, unknown_in](
                                                            const correlate::Request& q) {
    auto it = in_scope->find({q.ino_dev, q.ino});
    return it != in_scope->end() ? it->second : unknown_in;
  });
}

// The layers report of the requests on files in `scope` and, for a merged trace, submitted on
// one of `host_names` (format/hosts.h: the submitter's tgid names its host).
Result<nlohmann::json> FilteredLayersReport(const std::string& path,
                                            const correlate::LayersOptions& options,
                                            const model::Scope& scope,
                                            const std::vector<std::string>& host_names) {
  if (scope.IsAll() && host_names.empty()) return correlate::LayersReportForTrace(path, options);
  std::vector<uint32_t> hosts;
  if (!host_names.empty()) {
    IOTWIN_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, TraceReader::Open(path));
    IOTWIN_ASSIGN_OR_RETURN(hosts, ResolveHostNames(reader->meta(), host_names));
  }
  std::function<bool(const correlate::Request&)> in_scope;
  if (!scope.IsAll()) {
    IOTWIN_ASSIGN_OR_RETURN(in_scope, RequestsInScope(path, scope));
  }
  IOTWIN_ASSIGN_OR_RETURN(correlate::Correlation c, correlate::CorrelateTrace(path));
  const size_t left_out = correlate::KeepRequests(&c, [&](const correlate::Request& q) {
    if (!hosts.empty() &&
        std::find(hosts.begin(), hosts.end(), HostOfPid(q.tgid)) == hosts.end()) {
      return false;
    }
    return !in_scope || in_scope(q);
  });
  nlohmann::json report = correlate::LayersReport(c, options);
  if (!scope.IsAll()) report["scope"] = scope.ToJson();
  if (!host_names.empty()) report["hosts"] = {{"kept", host_names}};
  report[scope.IsAll() ? "hosts" : "scope"]["left_out"] = {{"requests", left_out}};
  return report;
}

}  // namespace

CommandSpec SetupLayers(CLI::App& parent) {
  struct Options {
    std::string path;
    bool json = false;
    bool all_requests = false;
    correlate::LayersOptions layers;
    ScopeArgs scope;
    std::vector<std::string> hosts;
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
      ->check(Count())
      ->capture_default_str();
  sub->add_flag("--all-requests", opt->all_requests, "list every request");
  sub->add_option("--top", opt->layers.top, "rows of the other tables")
      ->check(Count())
      ->capture_default_str();
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
  AddScopeOptions(sub, opt->scope);
  sub->add_option("--host", opt->hosts,
                  "keep only the requests submitted on these hosts of a merged trace "
                  "(NAME[,NAME]; docs/multi-host.md)")
      ->delimiter(',');
  return {sub, [opt] {
            if (opt->all_requests) opt->layers.max_request_rows = 0;
            auto scope = opt->scope.Parse();
            if (!scope.ok()) {
              fmt::print(stderr, "iotwin layers: {}\n", scope.status().message());
              return kExitError;
            }
            auto report = FilteredLayersReport(opt->path, opt->layers, *scope, opt->hosts);
            if (!report.ok()) {
              fmt::print(stderr, "iotwin layers: {}\n", report.status().message());
              return kExitError;
            }
            if (report->contains("damage")) {
              fmt::print(stderr, "iotwin layers: warning: {}\n",
                         json_fields::GetString(*report, "damage"));
            }
            if (opt->json) {
              (*report)["schema"] = "iotwin-layers/1";
              fmt::print("{}\n",
                         report->dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
            } else {
              fmt::print("{}", correlate::RenderLayersText(*report));
            }
            return kExitOk;
          }};
}

}  // namespace iotwin::cli
