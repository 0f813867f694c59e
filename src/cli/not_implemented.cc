#include <cstdio>

#include "cli/commands.h"

namespace iotwin::cli {

CommandSpec NotImplemented(CLI::App& parent, const char* name, const char* description,
                           const char* issue) {
  CLI::App* sub = parent.add_subcommand(name, std::string(description) + " (not implemented yet)");
  sub->allow_extras();
  sub->prefix_command();
  std::string cmd = name, iss = issue;
  return {sub, [cmd, iss] {
            std::fprintf(stderr, "iotwin %s: not implemented yet (tracked in %s)\n", cmd.c_str(),
                         iss.c_str());
            return kExitError;
          }};
}

}  // namespace iotwin::cli
