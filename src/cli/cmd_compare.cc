// `iotwin compare`: judge how faithfully a replay reproduces the original trace.
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/compare.h"
#include "analysis/compare_block.h"
#include "base/json_fields.h"
#include "cli/commands.h"
#include "cli/scope_options.h"
#include "cli/unit_options.h"

namespace iotwin::cli {

CommandSpec SetupCompare(CLI::App& parent) {
  struct Options {
    std::string original, replay;
    std::vector<std::string> thresholds;
    bool json = false;
    size_t top = 10;
    size_t max_sequence_ops = 50'000'000;
    bool salvage = false;
    bool no_progress = false;
    bool all_calls = false;
    double iat_resolution_us = 50;
    ScopeArgs scope;
    std::string host;
    std::string layer = "auto";
    std::string target_device = "auto";
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = parent.add_subcommand(
      "compare",
      "Judge a replay's fidelity against the original: sequence match, op counts, IOPS and "
      "throughput, size/offset/inter-arrival distributions, block streams. Exit 0 within "
      "thresholds, 1 outside, 2 on bad input");
  sub->add_option("original", opt->original, "the original trace")->required();
  sub->add_option("replay", opt->replay, "the trace to judge (e.g. from iotwin replay --record)")
      ->required();
  std::string help = "set a measure's threshold (NAME=VALUE, or NAME=off to stop judging it); "
                     "measures and defaults:";
  for (const auto& m : analysis::Measures()) {
    help += fmt::format("\n  {} {} {}{}{}: {}", m.name, m.at_least ? ">=" : "<=",
                        m.default_threshold, m.timing ? " [timing]" : "",
                        m.enabled ? "" : " [off by default]", m.what);
  }
  help += "\n device-level (--layer block):";
  for (const auto& m : analysis::BlockStreamMeasures()) {
    help += fmt::format("\n  {} {} {}{}{}: {}", m.name, m.at_least ? ">=" : "<=",
                        m.default_threshold, m.timing ? " [timing]" : "",
                        m.enabled ? "" : " [off by default]", m.what);
  }
  sub->add_option("--threshold", opt->thresholds, help);
  sub->add_option("--layer", opt->layer,
                  "auto (block requests when the replay is a device-level replay, else system "
                  "calls), syscall, or block (the block requests of one device)")
      ->check(CLI::IsMember({"auto", "syscall", "block"}))
      ->capture_default_str();
  sub->add_option("--target-device", opt->target_device,
                  "device-level: was the replay made onto another device? other: judge the issue "
                  "stream the replayer controls and report queue depth, latency and the device's "
                  "splits and merges as its answer; same: judge everything; auto: other when the "
                  "D2C latencies differ by 1.5x or the queue limits differ (docs/replay.md)")
      ->check(CLI::IsMember({"auto", "same", "other"}))
      ->capture_default_str();
  sub->add_flag("--json", opt->json, "print the comparison as JSON");
  sub->add_option("--top", opt->top, "thread rows shown, worst first (0: all)")
      ->check(Count())
      ->capture_default_str();
  sub->add_option("--max-sequence-ops", opt->max_sequence_ops,
                  "operations kept per trace for sequence matching (8 bytes each)")
      ->check(Count())
      ->capture_default_str();
  sub->add_flag("--all-calls", opt->all_calls,
                "judge every system call; by default only the storage calls a replay re-issues "
                "(not an inherited stdout, anonymous memory, /proc, ...) are compared");
  sub->add_option("--iat-resolution-us", opt->iat_resolution_us,
                  "iat-ks: inter-arrival times below this count as this (the replay's timing "
                  "resolution)")
      ->transform(DurationUnits(1e3, "us"))
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  AddScopeOptions(sub, opt->scope);
  sub->add_option("--host", opt->host,
                  "judge one host of merged traces: both traces' records of the other hosts are "
                  "left out (docs/multi-host.md)");
  sub->add_flag("--salvage", opt->salvage, "skip damaged chunks instead of failing");
  sub->add_flag("--no-progress", opt->no_progress, "no progress bar on stderr");
  sub->footer(
      "Timing measures are judged only when the replay's header names pace 'original' or 'gaps' "
      "(or when the second trace is not a replay); they are always reported. Block-layer "
      "measures are judged only when at least 99% of the original's bytes moved (by calls and "
      "async requests) were O_DIRECT. Rates and time series use each trace's active window, "
      "first to last judged call issued. A FAIL says why: likely causes with hints, the most "
      "diverged stretch of the run, the largest stall, per-op latency. See docs/report.md.");
  return {sub, [opt] {
            analysis::CompareOptions o;
            for (const std::string& t : opt->thresholds) {
              Status st = analysis::ParseThreshold(t, &o);
              if (!st.ok()) {
                fmt::print(stderr, "iotwin compare: {}\n", st.message());
                return kExitError;
              }
            }
            auto scope = opt->scope.Parse();
            if (!scope.ok()) {
              fmt::print(stderr, "iotwin compare: {}\n", scope.status().message());
              return kExitError;
            }
            o.files = *scope;
            o.host = opt->host;
            o.layer = opt->layer;
            o.target_device = opt->target_device;
            o.top = opt->top;
            o.max_sequence_ops = opt->max_sequence_ops;
            o.salvage = opt->salvage;
            o.storage_calls_only = !opt->all_calls;
            o.iat_resolution_ns = static_cast<uint64_t>(opt->iat_resolution_us * 1000);
            o.progress = !opt->no_progress && isatty(STDERR_FILENO);
            if (opt->original == "-" && opt->replay == "-") {
              fmt::print(stderr, "iotwin compare: only one of the two traces can be read from "
                                 "standard input\n");
              return kExitError;
            }
            auto result = analysis::CompareTraces(opt->original, opt->replay, o);
            if (!result.ok()) {
              fmt::print(stderr, "iotwin compare: {}\n", result.status().message());
              return kExitError;
            }
            for (const char* side : {"original", "replay"}) {
              const nlohmann::json* damage =
                  json_fields::Find(*result, std::string(side) + "/damage");
              if (damage && damage->is_string()) {
                fmt::print(stderr, "iotwin compare: warning: the {} is damaged, compared as far "
                           "as it could be read: {}\n", side, damage->get<std::string>());
              }
            }
            // A scoped replay re-issued only the files in its scope: judged against the whole
            // original, everything else shows as missing.
            const nlohmann::json* replayed_scope = json_fields::Find(*result, "replay/replay/scope");
            if (replayed_scope && o.files.IsAll()) {
              fmt::print(stderr, "iotwin compare: note: the replay was made with a data scope "
                         "({}); give compare the same --scope/--include/--exclude to judge the "
                         "files it replayed\n",
                         json_fields::GetString(*replayed_scope, "description"));
            }
            (*result)["schema"] = "iotwin-compare/1";
            if (opt->json) {
              fmt::print("{}\n", result->dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
            } else {
              fmt::print("{}", analysis::RenderCompareText(*result));
            }
            return (*result)["verdict"] == "pass" ? kExitOk : kExitNegative;
          }};
}

}  // namespace iotwin::cli
