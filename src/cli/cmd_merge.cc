// `iotwin merge`: one trace of a job from the traces of its hosts (src/format/merge.h,
// docs/multi-host.md).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "format/merge.h"

namespace iotwin::cli {

CommandSpec SetupMerge(CLI::App& parent) {
  struct Options {
    std::vector<std::string> inputs;
    std::vector<std::string> names;
    std::vector<std::string> offsets;
    std::string output;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = parent.add_subcommand(
      "merge",
      "Join the traces of a job's hosts into one trace: records carry their host, clocks aligned");
  sub->add_option("traces", opt->inputs,
                  "the hosts' traces; the first is the reference whose clock the job runs on")
      ->required();
  sub->add_option("-o,--output", opt->output, "the merged trace")->required();
  sub->add_option("--name", opt->names,
                  "the host name of each input, in order (default: the hostname in its header)");
  sub->add_option("--offset", opt->offsets,
                  "HOST=NS[:ERR]: HOST's realtime clock minus the reference's, measured at launch, "
                  "and the measurement's error (ns)");
  sub->add_flag("--json", opt->json, "print the merged trace's header and counts as JSON");
  sub->footer(
      "Example: iotwin merge node1.iotwin node2.iotwin -o job.iotwin --offset node2=-1200:40\n"
      "See docs/multi-host.md for how records name their host and how clocks are aligned.");
  return {sub, [opt] {
            if (!opt->names.empty() && opt->names.size() != opt->inputs.size()) {
              fmt::print(stderr, "iotwin merge: {} --name for {} traces: give one per trace, in "
                         "order\n", opt->names.size(), opt->inputs.size());
              return kExitError;
            }
            MergeOptions mo;
            mo.output = opt->output;
            for (size_t i = 0; i < opt->inputs.size(); i++) {
              if (opt->inputs[i] == opt->output) {
                fmt::print(stderr, "iotwin merge: output must differ from input {}\n",
                           opt->inputs[i]);
                return kExitError;
              }
              mo.inputs.push_back({opt->inputs[i], opt->names.empty() ? "" : opt->names[i]});
            }
            for (const std::string& spec : opt->offsets) {
              auto offset = ParseMergeOffset(spec);
              if (!offset.ok()) {
                fmt::print(stderr, "iotwin merge: {}\n", offset.status().message());
                return kExitError;
              }
              mo.offsets.push_back(*offset);
            }
            auto merged = MergeTraces(mo);
            if (!merged.ok()) {
              fmt::print(stderr, "iotwin merge: {}\n", merged.status().message());
              return kExitError;
            }
            const nlohmann::json& merge = merged->meta["merge"];
            if (opt->json) {
              nlohmann::json out = {{"schema", "iotwin-merge/1"},
                                    {"output", opt->output},
                                    {"records", merged->records},
                                    {"records_per_host", merged->records_per_host},
                                    {"hosts", merged->meta["hosts"]},
                                    {"merge", merge}};
              fmt::print("{}\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
              return kExitOk;
            }
            const nlohmann::json& hosts = merged->meta["hosts"];
            for (size_t i = 0; i < hosts.size(); i++) {
              fmt::print(stderr, "  host {} {}: {} records, clock shifted by {} ns\n", i,
                         hosts[i]["name"].get<std::string>(), merged->records_per_host[i],
                         hosts[i]["clock_shift_ns"].get<int64_t>());
            }
            const nlohmann::json& u = merge["uncertainty_ns"];
            fmt::print(stderr, "iotwin merge: {} hosts into {} ({} records); clock uncertainty: {}\n",
                       hosts.size(), opt->output, merged->records,
                       u.is_null() ? std::string("not measured (the hosts' realtime clocks are "
                                                 "taken to agree; --offset gives measured ones)")
                                   : fmt::format("{} ns", u.get<uint64_t>()));
            return kExitOk;
          }};
}

}  // namespace iotwin::cli
