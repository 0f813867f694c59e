// Man pages and shell completion written from the CLI definition itself, so that they list the
// options the binary really has. Run at build time by `iotwin --generate KIND DIR` (hidden).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace iotwin::cli {

// Writes the KIND of documents for `app` into `dir`: "man" (iotwin.1 and iotwin-SUB.1 for each
// visible subcommand), "bash" (iotwin) or "zsh" (_iotwin). Returns the exit status.
int GenerateDocs(const CLI::App& app, const std::string& kind, const std::string& dir);

// roff for iotwin(1) (sub == nullptr) or iotwin-SUB(1).
std::string ManPage(const CLI::App& app, const CLI::App* sub);
std::string BashCompletion(const CLI::App& app);
// The words an option takes when it takes one of a fixed set (CLI::IsMember, OneOf, a
// CLI::CheckedTransformer), in order; empty otherwise.
std::vector<std::string> ValueChoices(const CLI::Option& opt);
// Whether the option's value is a number (INT, UINT, FLOAT; with a unit: SIZE, DURATION).
bool TakesNumber(const CLI::Option& opt);
std::string ZshCompletion(const CLI::App& app);

}  // namespace iotwin::cli
