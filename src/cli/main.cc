// iotwin: capture the storage I/O of a workload once, replay it faithfully elsewhere.
#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli_docs.h"
#include "cli/commands.h"
#include "format/layout.h"

namespace {

// Levenshtein distance, for "did you mean" on a mistyped subcommand.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// argv[1] when it names no subcommand (and is not an option): the message that says so.
std::string UnknownSubcommand(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  std::string_view word = argv[1];
  std::string best;
  size_t best_distance = 3;  // suggest only near misses
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == word) return "";
    size_t d = EditDistance(word, sub->get_name());
    if (d < best_distance) best_distance = d, best = sub->get_name();
  }
  std::string msg = fmt::format("iotwin: unknown subcommand '{}'", word);
  if (!best.empty()) msg += fmt::format(" (did you mean '{}'?)", best);
  return msg + "; `iotwin --help` lists them";
}

// The subcommand the user was in when parsing failed, for the "iotwin SUBCOMMAND:" prefix.
std::string ParsedSubcommand(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->parsed()) return " " + sub->get_name();
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace iotwin::cli;
  CLI::App app{"iotwin: capture AI workloads' storage I/O with eBPF and replay it faithfully", "iotwin"};
  app.require_subcommand(1);
  app.set_version_flag("-V,--version", fmt::format("iotwin 0.1.0 (trace format {}.{})",
                                                     iotwin::layout::kMajor, iotwin::layout::kMinor));
  std::vector<CommandSpec> commands = {
      SetupRecord(app),  SetupReplay(app), SetupReport(app),    SetupCompare(app),
      SetupExport(app),  SetupImport(app), SetupAnonymize(app), SetupCheck(app),
      SetupDemo(app),    SetupDump(app),   SetupLayers(app),    SetupMerge(app),
  };
  std::string help_topic;
  CLI::App* help = app.add_subcommand("help", "Show the help of iotwin or of one subcommand");
  help->add_option("subcommand", help_topic, "the subcommand to explain");

  // Hidden, run by the build: man pages and shell completion written from this definition.
  if (argc == 4 && std::string_view(argv[1]) == "--generate") {
    return GenerateDocs(app, argv[2], argv[3]);
  }
  if (std::string unknown = UnknownSubcommand(app, argc, argv); !unknown.empty()) {
    std::fprintf(stderr, "%s\n", unknown.c_str());
    return kExitError;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string where = ParsedSubcommand(app);
    std::fprintf(stderr, "iotwin%s: %s\nRun `iotwin%s --help` for the options.\n", where.c_str(),
                 e.what(), where.c_str());
    return kExitError;
  }
  if (help->parsed()) {
    // The formatter directly: App::help() would describe the selected subcommand, `help`.
    auto formatter = app.get_formatter();
    if (help_topic.empty()) {
      std::fputs(formatter->make_help(&app, "iotwin", CLI::AppFormatMode::Normal).c_str(), stdout);
      return kExitOk;
    }
    for (const CLI::App* sub : app.get_subcommands({})) {
      if (sub->get_name() == help_topic) {
        std::fputs(sub->help("iotwin").c_str(), stdout);
        return kExitOk;
      }
    }
    std::fprintf(stderr, "iotwin help: unknown subcommand '%s'; `iotwin --help` lists them\n",
                 help_topic.c_str());
    return kExitError;
  }
  for (auto& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  std::fprintf(stderr, "iotwin: no subcommand\n");
  return kExitError;
}
