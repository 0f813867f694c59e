// bash and zsh completion from the CLI11 definition, and `iotwin --generate`, which writes them
// and the man pages (cli_docs.cc) at build time.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/cli_docs.h"
#include "cli/commands.h"

namespace iotwin::cli {
namespace cli_completion_internal {  // named: the CLI sources are a unity build

std::vector<const CLI::App*> CompletedSubcommands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* sub) { return !sub->get_group().empty(); });
}

std::vector<const CLI::Option*> NamedOptions(const CLI::App& app) {
  return app.get_options([](const CLI::Option* opt) {
    return !opt->get_group().empty() && !opt->get_positional();
  });
}

std::string OptionWords(const CLI::App& app) {
  std::string words;
  for (const CLI::Option* opt : NamedOptions(app)) {
    for (const std::string& s : opt->get_snames()) words += (words.empty() ? "-" : " -") + s;
    for (const std::string& l : opt->get_lnames()) words += (words.empty() ? "--" : " --") + l;
  }
  return words;
}

// A string inside zsh single quotes; `in_brackets`: also safe inside an _arguments
// [description], which ends at an unescaped ']' and has its backslashes removed.
std::string ZshQuoted(std::string_view text, bool in_brackets) {
  std::string out;
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else if (in_brackets && (c == '[' || c == ']' || c == ':' || c == '\\')) {
      out += '\\';
      out += c;
    } else if (c == '\n' || c == '\t') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

// What completes an option's value in zsh: its words, nothing for a number (a single space: the
// message alone), else a file name.
std::string ZshValueAction(const CLI::Option& opt) {
  std::vector<std::string> words = ValueChoices(opt);
  if (!words.empty()) return ZshQuoted(fmt::format("({})", fmt::join(words, " ")), false);
  return TakesNumber(opt) ? " " : "_files";
}

// The names of an option ("-o --output") joined as bash case patterns ('record -o'|...).
std::string BashCasePatterns(const CLI::App& sub, const CLI::Option& opt) {
  std::string out;
  for (const std::string& s : opt.get_snames()) {
    out += fmt::format("{}'{} -{}'", out.empty() ? "" : "|", sub.get_name(), s);
  }
  for (const std::string& l : opt.get_lnames()) {
    out += fmt::format("{}'{} --{}'", out.empty() ? "" : "|", sub.get_name(), l);
  }
  return out;
}

// bash: the case branches that complete the value after an option, keyed by "SUBCOMMAND
// OPTION": an option's words, or nothing for a number; other values fall through to files.
std::string BashValueCases(const CLI::App& app) {
  std::string out;
  for (const CLI::App* sub : CompletedSubcommands(app)) {
    for (const CLI::Option* opt : NamedOptions(*sub)) {
      if (opt->get_expected_max() == 0) continue;
      std::vector<std::string> words = ValueChoices(*opt);
      if (!words.empty()) {
        out += fmt::format("      {}) words=\"{}\" ;;\n", BashCasePatterns(*sub, *opt),
                           fmt::join(words, " "));
      } else if (TakesNumber(*opt)) {
        out += fmt::format("      {}) return ;;\n", BashCasePatterns(*sub, *opt));
      }
    }
  }
  return out;
}

// _arguments specs of one subcommand: every option name, its help, a file for a value.
std::string ZshArguments(const CLI::App& sub) {
  std::string out = "      _arguments -s";
  for (const CLI::Option* opt : NamedOptions(sub)) {
    std::string help = ZshQuoted(opt->get_description(), true);
    std::string repeat = opt->get_expected_max() > 1 || opt->get_multi_option_policy() ==
                                                            CLI::MultiOptionPolicy::TakeAll
                             ? "*"
                             : "";
    std::string value = opt->get_expected_max() != 0 ? ":value:" + ZshValueAction(*opt) : "";
    std::vector<std::string> names;
    for (const std::string& s : opt->get_snames()) names.push_back("-" + s);
    for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
    // Once one name of an option is given, its other names are not offered (unless repeatable).
    std::string exclusive;
    if (repeat.empty() && names.size() > 1) {
      for (const std::string& name : names) exclusive += (exclusive.empty() ? "(" : " ") + name;
      exclusive += ")";
    }
    for (const std::string& name : names) {
      out += fmt::format(" \\\n        '{}{}{}[{}]{}'", exclusive, repeat, name, help, value);
    }
  }
  return out + " \\\n        '*:file:_files'\n";
}

}  // namespace cli_completion_internal

using namespace cli_completion_internal;

std::string BashCompletion(const CLI::App& app) {
  std::string subcommands;
  for (const CLI::App* sub : CompletedSubcommands(app)) {
    subcommands += (subcommands.empty() ? "" : " ") + sub->get_name();
  }
  std::string out =
      "# bash completion for iotwin, generated from its command-line definition.\n"
      "_iotwin() {\n"
      "  local cur=${COMP_WORDS[COMP_CWORD]} words\n"
      "  COMPREPLY=()\n"
      "  if (( COMP_CWORD > 1 )); then\n"
      "    # The value of an option: its words, or nothing for a number.\n"
      "    case \"${COMP_WORDS[1]} ${COMP_WORDS[COMP_CWORD-1]}\" in\n" +
      BashValueCases(app) +
      "      *) words= ;;\n"
      "    esac\n"
      "    if [[ -n $words ]]; then\n"
      "      mapfile -t COMPREPLY < <(compgen -W \"$words\" -- \"$cur\")\n"
      "      return\n"
      "    fi\n"
      "  fi\n"
      "  if (( COMP_CWORD == 1 )); then\n" +
      fmt::format("    words=\"{} {}\"\n", subcommands, OptionWords(app)) +
      "  else\n"
      "    case ${COMP_WORDS[1]} in\n";
  for (const CLI::App* sub : CompletedSubcommands(app)) {
    out += fmt::format("      {}) words=\"{}\" ;;\n", sub->get_name(), OptionWords(*sub));
  }
  out += "      *) words= ;;\n"
         "    esac\n"
         "  fi\n"
         "  if (( COMP_CWORD == 1 )) || [[ $cur == -* ]]; then\n"
         "    mapfile -t COMPREPLY < <(compgen -W \"$words\" -- \"$cur\")\n"
         "  elif [[ ${COMP_WORDS[1]} == help ]] && (( COMP_CWORD == 2 )); then\n" +
         fmt::format("    mapfile -t COMPREPLY < <(compgen -W \"{}\" -- \"$cur\")\n", subcommands) +
         "  else\n"
         "    mapfile -t COMPREPLY < <(compgen -f -- \"$cur\")\n"
         "  fi\n"
         "}\n"
         "complete -o filenames -F _iotwin iotwin\n";
  return out;
}

std::string ZshCompletion(const CLI::App& app) {
  std::string out =
      "#compdef iotwin\n"
      "# zsh completion for iotwin, generated from its command-line definition.\n"
      "_iotwin() {\n"
      "  local -a subcommands\n"
      "  subcommands=(\n";
  for (const CLI::App* sub : CompletedSubcommands(app)) {
    out += fmt::format("    '{}:{}'\n", sub->get_name(), ZshQuoted(sub->get_description(), false));
  }
  out += "  )\n"
         "  if (( CURRENT == 2 )); then\n"
         "    _describe -t commands 'iotwin subcommand' subcommands\n"
         "    return\n"
         "  fi\n"
         "  local cmd=$words[2]\n"
         "  shift words\n"
         "  (( CURRENT-- ))\n"
         "  curcontext=\"${curcontext%:*:*}:iotwin-$cmd:\"\n"
         "  case $cmd in\n"
         "    help)\n"
         "      _describe -t commands 'iotwin subcommand' subcommands ;;\n";
  for (const CLI::App* sub : CompletedSubcommands(app)) {
    if (sub->get_name() == "help") continue;
    out += fmt::format("    {})\n", sub->get_name()) + ZshArguments(*sub) + "      ;;\n";
  }
  out += "    *) _files ;;\n"
         "  esac\n"
         "}\n"
         "_iotwin \"$@\"\n";
  return out;
}

int GenerateDocs(const CLI::App& app, const std::string& kind, const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> files;  // name, content
  if (kind == "man") {
    files.emplace_back("iotwin.1", ManPage(app, nullptr));
    for (const CLI::App* sub : CompletedSubcommands(app)) {
      if (sub->get_name() != "help") files.emplace_back("iotwin-" + sub->get_name() + ".1", ManPage(app, sub));
    }
  } else if (kind == "bash") {
    files.emplace_back("iotwin", BashCompletion(app));
  } else if (kind == "zsh") {
    files.emplace_back("_iotwin", ZshCompletion(app));
  } else {
    std::fprintf(stderr, "iotwin --generate: unknown kind '%s' (man, bash or zsh)\n", kind.c_str());
    return kExitError;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  for (const auto& [name, content] : files) {
    std::filesystem::path path = std::filesystem::path(dir) / name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (!out) {
      std::fprintf(stderr, "iotwin --generate: cannot write %s\n", path.c_str());
      return kExitError;
    }
  }
  return kExitOk;
}

}  // namespace iotwin::cli
