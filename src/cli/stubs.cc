// Subcommands whose implementation has not landed yet. Each moves to its own cmd_*.cc when built.
#include "cli/commands.h"

namespace iotwin::cli {

CommandSpec SetupReplay(CLI::App& p) {
  return NotImplemented(p, "replay", "Replay a trace into a sandbox or onto a device", "issue 6");
}

}  // namespace iotwin::cli
