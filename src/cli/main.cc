// iotwin: capture the storage I/O of a workload once, replay it faithfully elsewhere.
#include <cstdio>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "format/layout.h"

int main(int argc, char** argv) {
  using namespace iotwin::cli;
  CLI::App app{"iotwin: capture AI workloads' storage I/O with eBPF and replay it faithfully", "iotwin"};
  app.require_subcommand(1);
  app.set_version_flag("--version", fmt::format("iotwin 0.1.0 (trace format {}.{})",
                                                iotwin::layout::kMajor, iotwin::layout::kMinor));
  std::vector<CommandSpec> commands = {
      SetupRecord(app),  SetupReplay(app), SetupReport(app),    SetupCompare(app),
      SetupExport(app),  SetupImport(app), SetupAnonymize(app), SetupCheck(app),
      SetupDemo(app),    SetupDump(app),   SetupLayers(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kExitError;
  }
  for (auto& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  std::fprintf(stderr, "iotwin: no subcommand\n");
  return kExitError;
}
