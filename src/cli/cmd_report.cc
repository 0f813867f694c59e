// `iotwin report`: characterise a workload from its trace (text tables, --json, --html).
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "analysis/filter_spec.h"
#include "analysis/report_html.h"
#include "analysis/report_text.h"
#include "analysis/trace_analysis.h"
#include "base/output_file.h"
#include "cli/commands.h"
#include "cli/report_hosts.h"
#include "cli/scope_options.h"
#include "cli/stdout_output.h"
#include "cli/unit_options.h"

namespace iotwin::cli {
namespace {

// Writes the page through an OutputFile (base/output_file.h): a private temporary renamed over
// the name when whole, so that a failed write never leaves a page that looks complete and a
// planted symlink is never written through.
Status WriteHtmlFile(const std::string& path, const std::string& html) {
  IOTWIN_ASSIGN_OR_RETURN(OutputFile out, OutputFile::Create(path));
  IOTWIN_RETURN_IF_ERROR(out.Write(html));
  return out.Commit();
}

}  // namespace

CommandSpec SetupReport(CLI::App& parent) {
  struct Options {
    std::string path;
    bool json = false;
    std::string html;
    size_t top = 20;
    size_t heatmaps = 8;
    bool salvage = false;
    bool no_progress = false;
    std::vector<std::string> filters;
    std::vector<std::string> hosts;
    std::optional<double> from, to;
    ScopeArgs scope;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = parent.add_subcommand(
      "report",
      "Characterise a workload from its trace: capture facts, operations, request sizes, access "
      "patterns, throughput over time, latency, processes/threads/files, memory, block, async I/O");
  sub->add_option("trace", opt->path, "trace file (.iotwin)")->required();
  sub->add_flag("--json", opt->json, "print the report model as JSON instead of text tables");
  sub->add_option("--html", opt->html,
                  "also write a self-contained HTML report with plots (opens offline; '-': "
                  "only the page, to stdout)");
  sub->add_option("--top", opt->top, "rows in the process/thread/file tables (0: all)")
      ->check(Count())
      ->capture_default_str();
  sub->add_option("--heatmaps", opt->heatmaps,
                  "HTML: files with an offset heat map and offset-over-time plot")
      ->check(Count())
      ->capture_default_str();
  sub->add_flag("--salvage", opt->salvage, "skip damaged chunks instead of failing");
  sub->add_flag("--no-progress", opt->no_progress, "no progress bar on stderr");
  sub->add_option("--filter", opt->filters,
                  "keep only matching records: tgid=N[,N] (or pid=), tid=N[,N], file=GLOB, "
                  "op=NAME[,NAME] (op=reads / op=writes for all reads / writes)");
  sub->add_option("--host", opt->hosts,
                  "keep only these hosts of a merged trace (NAME[,NAME]; docs/multi-host.md)")
      ->delimiter(',');
  sub->add_option("--from", opt->from, "ignore records before this long from the start (seconds, or 500ms)")
      ->transform(DurationUnits(1e9, "s"));
  sub->add_option("--to", opt->to, "ignore records after this long from the start (seconds, or 2m)")
      ->transform(DurationUnits(1e9, "s"));
  AddScopeOptions(sub, opt->scope);
  sub->footer(
      "Filters combine (AND); repeat --filter or separate values with commas:\n"
      "  --filter tgid=1234 --filter tid=1235,1236 --filter 'file=/data/*.bin' --filter op=pread64\n"
      "  --filter op=reads (every read op) / op=writes; --from 2.5 --to 10 (seconds from the start)\n"
      "  --scope data --include '/data/*' --exclude '*.tmp' (the header says what was left out)\n"
      "See docs/report.md for the fields of --json and how each number is computed.");
  return {sub, [opt] {
            analysis::TraceAnalysisOptions o;
            auto filter = analysis::ParseFilterSpecs(opt->filters, opt->from, opt->to);
            if (!filter.ok()) {
              fmt::print(stderr, "iotwin report: {}\n", filter.status().message());
              return kExitError;
            }
            o.analyzer.filter = *filter;
            for (const std::string& h : opt->hosts) o.analyzer.filter.host_names.push_back(h);
            if (Status hosts = CheckHostNames(opt->path, o.analyzer.filter.host_names);
                !hosts.ok()) {
              fmt::print(stderr, "iotwin report: {}\n", hosts.message());
              return kExitError;
            }
            auto scope = opt->scope.Parse();
            if (!scope.ok()) {
              fmt::print(stderr, "iotwin report: {}\n", scope.status().message());
              return kExitError;
            }
            o.analyzer.filter.scope = *scope;
            o.analyzer.top = opt->top;
            o.salvage = opt->salvage;
            o.progress = !opt->no_progress && isatty(STDERR_FILENO);
            auto model = analysis::BuildReportModel(opt->path, o, opt->html.empty() ? 0 : opt->heatmaps);
            if (!model.ok()) {
              fmt::print(stderr, "iotwin report: {}\n", model.status().message());
              return kExitError;
            }
            if (auto hosts = HostFigures(opt->path, o); !hosts.ok()) {
              fmt::print(stderr, "iotwin report: {}\n", hosts.status().message());
              return kExitError;
            } else if (!hosts->is_null()) {
              (*model)["hosts"] = std::move(*hosts);
            }
            if (model->contains("trace") && (*model)["trace"].contains("damage"))
              fmt::print(stderr, "iotwin report: warning: {}\n",
                         (*model)["trace"]["damage"].get<std::string>());
            if (!opt->html.empty()) {
              auto html = analysis::RenderHtml(*model);
              if (!html.ok()) {
                fmt::print(stderr, "iotwin report: {}\n", html.status().message());
                return kExitError;
              }
              if (opt->html == "-" && opt->json) {
                fmt::print(stderr, "iotwin report: --html - writes the page to standard output: "
                           "no --json there\n");
                return kExitError;
              }
              std::string html_path = opt->html;
              auto to_stdout = StdoutOutput::For(&html_path, "--html", /*binary=*/true);
              Status written = to_stdout.ok() ? WriteHtmlFile(html_path, *html) : to_stdout.status();
              if (written.ok() && *to_stdout) written = (*to_stdout)->CopyToStdout();
              if (!written.ok()) {
                fmt::print(stderr, "iotwin report: {}\n", written.message());
                return kExitError;
              }
              if (*to_stdout) return kExitOk;  // the page is the output
            }
            if (opt->json) {
              (*model)["schema"] = "iotwin-report/1";
              fmt::print("{}\n", model->dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
            } else {
              fmt::print("{}{}", analysis::RenderText(*model), RenderHostsText(*model));
            }
            return kExitOk;
          }};
}

}  // namespace iotwin::cli
