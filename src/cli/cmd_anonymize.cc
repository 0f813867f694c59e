#include "cli/commands.h"
namespace iotwin::cli {
CommandSpec SetupAnonymize(CLI::App& p) { return NotImplemented(p, "anonymize", "wip", "issue 7"); }
}
