// Man pages and shell completion written from the CLI definition itself, so that they list the
// options the binary really has. Run at build time by `iotwin --generate KIND DIR` (hidden).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace iotwin::cli {

// Writes the KIND of documents for `app` into `dir`: "man" (iotwin.1 and iotwin-SUB.1 for each
// visible subcommand), "bash" (iotwin) or "zsh" (_iotwin). Returns the exit status.
int GenerateDocs(const CLI::App& app, const std::string& kind, const std::string& dir);

// roff for iotwin(1) (sub == nullptr) or iotwin-SUB(1).
std::string ManPage(const CLI::App& app, const CLI::App* sub);
std::string BashCompletion(const CLI::App& app);
std::string ZshCompletion(const CLI::App& app);

}  // namespace iotwin::cli
