// The subcommands of the iotwin binary: each Setup* adds its subcommand to the parent app and
// returns what to run when the user selected it (its result is the process exit status).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace iotwin::cli {

struct CommandSpec {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// Exit statuses shared by all subcommands.
inline constexpr int kExitOk = 0;
inline constexpr int kExitNegative = 1;  // ran fine, answer is "no" (compare out of threshold)
inline constexpr int kExitError = 2;     // bad input or usage error

CommandSpec SetupRecord(CLI::App& parent);
CommandSpec SetupReplay(CLI::App& parent);
CommandSpec SetupReport(CLI::App& parent);
CommandSpec SetupCompare(CLI::App& parent);
CommandSpec SetupExport(CLI::App& parent);
CommandSpec SetupImport(CLI::App& parent);
CommandSpec SetupAnonymize(CLI::App& parent);
CommandSpec SetupCheck(CLI::App& parent);
CommandSpec SetupDemo(CLI::App& parent);
CommandSpec SetupDump(CLI::App& parent);
CommandSpec SetupLayers(CLI::App& parent);
CommandSpec SetupMerge(CLI::App& parent);

}  // namespace iotwin::cli
