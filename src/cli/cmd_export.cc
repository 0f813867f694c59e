#include "cli/commands.h"
namespace iotwin::cli {
CommandSpec SetupExport(CLI::App& p) { return NotImplemented(p, "export", "wip", "issue 7"); }
}
