// Subcommands whose implementation has not landed yet. Each moves to its own cmd_*.cc when built.
#include "cli/commands.h"

namespace iotwin::cli {

CommandSpec SetupReplay(CLI::App& p) {
  return NotImplemented(p, "replay", "Replay a trace into a sandbox or onto a device", "issue 6");
}
CommandSpec SetupReport(CLI::App& p) {
  return NotImplemented(p, "report", "Characterise a workload from its trace", "issue 7");
}
CommandSpec SetupCompare(CLI::App& p) {
  return NotImplemented(p, "compare", "Judge a replay's fidelity against the original", "issue 7");
}

}  // namespace iotwin::cli
