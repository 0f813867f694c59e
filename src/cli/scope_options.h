// The data scope's options, the same for every subcommand that takes them: --include GLOB and
// --exclude GLOB (repeatable) and --scope data|all (model/scope.h).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/status.h"
#include "cli/unit_options.h"
#include "model/scope.h"

namespace iotwin::cli {

struct ScopeArgs {
  std::vector<std::string> include, exclude;
  std::string preset = "all";

  Result<model::Scope> Parse() const { return model::Scope::Parse(preset, include, exclude); }
};

// `capitalised`: help texts start with a capital letter (the style of `replay`'s options).
inline void AddScopeOptions(CLI::App* sub, ScopeArgs& args, bool capitalised = false) {
  auto help = [capitalised](std::string text) {
    if (capitalised && !text.empty() && text[0] >= 'a' && text[0] <= 'z')
      text[0] = static_cast<char>(text[0] - 'a' + 'A');
    return text;
  };
  sub->add_option("--include", args.include,
                  help("keep only files whose resolved absolute path matches GLOB (repeatable; "
                       "'*' also matches '/': '/data/*' is the whole tree)"))
      ->type_name("GLOB");
  sub->add_option("--exclude", args.exclude,
                  help("leave out files whose resolved absolute path matches GLOB (repeatable)"))
      ->type_name("GLOB");
  sub->add_option("--scope", args.preset,
                  help("data: leave out programs, the loader's cache, shared libraries, "
                       "interpreter files, locale data and what is not storage (pseudo files, "
                       "pipes, sockets, devices); all: every file"))
      ->check(OneOf({"data", "all"}))
      ->capture_default_str();
}

}  // namespace iotwin::cli
