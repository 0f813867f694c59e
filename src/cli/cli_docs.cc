// Man pages (roff) and bash/zsh completion from the CLI11 definition: the option lists, help
// strings and defaults are the ones the binary parses with, so the documents cannot drift.
#include "cli/cli_docs.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"

namespace iotwin::cli {
// A named namespace: the CLI sources are compiled as a unity build, where anonymous-namespace
// helpers of different files would meet.
namespace cli_docs_internal {

// Visible subcommands (CLI11 hides those with an empty group).
std::vector<const CLI::App*> VisibleSubcommands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* sub) { return !sub->get_group().empty(); });
}

std::vector<const CLI::Option*> VisibleOptions(const CLI::App& app) {
  return app.get_options([](const CLI::Option* opt) { return !opt->get_group().empty(); });
}

// "-o, --output" style names of a non-positional option.
std::vector<std::string> OptionNames(const CLI::Option& opt) {
  std::vector<std::string> names;
  for (const std::string& s : opt.get_snames()) names.push_back("-" + s);
  for (const std::string& l : opt.get_lnames()) names.push_back("--" + l);
  return names;
}

// Appends one UTF-8 sequence starting at text[i] as a roff \[uXXXX] glyph; advances i.
void AppendRoffCodepoint(std::string_view text, size_t& i, std::string& out) {
  auto byte = static_cast<unsigned char>(text[i]);
  size_t length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 0;
  if (length == 0 || i + length > text.size()) {
    out += '?';  // a stray continuation byte or a cut sequence: no glyph to name
    ++i;
    return;
  }
  uint32_t code = byte & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) {
    auto next = static_cast<unsigned char>(text[i + k]);
    if ((next & 0xC0) != 0x80) {
      out += '?';
      ++i;
      return;
    }
    code = (code << 6) | (next & 0x3F);
  }
  out += fmt::format("\\[u{:04X}]", code);
  i += length;
}

// Text for inside a roff line: backslashes, hyphens (\- keeps option names copyable) and
// non-ASCII characters escaped.
std::string RoffEscape(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      AppendRoffCodepoint(text, i, out);
      continue;
    }
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else if (c == '\t') {
      out += ' ';
    } else if (c >= 0x20 || c == '\n') {
      out += c;
    }
    ++i;
  }
  return out;
}

// Free text as roff lines: each line escaped, a control character at the start of a line
// ('.' or '\'') guarded with \&, blank lines as paragraph breaks.
std::string RoffText(std::string_view text) {
  std::string out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    size_t first = line.find_first_not_of(' ');
    if (first == std::string_view::npos) {
      if (!out.empty()) out += ".PP\n";
    } else {
      line.remove_prefix(first);
      if (line[0] == '.' || line[0] == '\'') out += "\\&";
      out += RoffEscape(line) + "\n";
    }
    start = end + 1;
  }
  return out;
}

// The value's name in CLI11's type string ("FLOAT:DURATION", "INT:DURATION:INT in [1 - 10000]",
// "ENUM:value in {...}"): its last all-capitals part, e.g. DURATION.
std::string ValueName(const CLI::Option& opt) {
  std::string type = opt.get_type_name();
  std::string name = "VALUE";
  size_t start = 0;
  while (start <= type.size()) {
    size_t end = std::min(type.find(':', start), type.size());
    std::string part = type.substr(start, end - start);
    bool capitals = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
      return (c >= 'A' && c <= 'Z') || c == '_';
    });
    if (capitals) name = part;
    start = end + 1;
  }
  return name;
}

// The words of an option with a fixed set, from its type string: "TEXT:{a,b}" (CLI::IsMember,
// OneOf) or "ENUM:value in {kill->1,leave->2} OR {1,2}" (CLI::CheckedTransformer), as (word,
// value) pairs, the value being the word itself for a plain set; empty for other options.
std::vector<std::pair<std::string, std::string>> EnumChoices(const CLI::Option& opt) {
  std::vector<std::pair<std::string, std::string>> choices;
  std::string type = opt.get_type_name();
  size_t open = type.find('{');
  size_t close = type.find('}', open);
  if (open == std::string::npos || close == std::string::npos) return choices;
  std::string list = type.substr(open + 1, close - open - 1);
  size_t start = 0;
  while (start < list.size()) {
    size_t end = std::min(list.find(',', start), list.size());
    std::string item = list.substr(start, end - start);
    size_t arrow = item.find("->");
    if (arrow == std::string::npos) {
      choices.emplace_back(item, item);
    } else {
      choices.emplace_back(item.substr(0, arrow), item.substr(arrow + 2));
    }
    start = end + 1;
  }
  return choices;
}

// "Default: X." and "One of: a, b." for an option, when CLI11 knows them.
std::string DefaultAndChoices(const CLI::Option& opt) {
  std::string out;
  std::string default_value = opt.get_default_str();
  auto choices = EnumChoices(opt);
  if (!choices.empty()) {
    std::string words;
    for (const auto& [word, value] : choices) {
      words += (words.empty() ? "" : ", ") + word;
      if (value == default_value) default_value = word;  // the word, not its internal number
    }
    out += fmt::format(" One of: {}.", words);
  }
  if (!default_value.empty()) out += fmt::format(" Default: {}.", default_value);
  if (opt.get_required()) out += " Required.";
  return out;
}

// The OPTIONS entries of one app: names, value type, help, default.
std::string RoffOptions(const CLI::App& app) {
  std::string out;
  for (const CLI::Option* opt : VisibleOptions(app)) {
    out += ".TP\n";
    if (opt->get_positional()) {
      out += fmt::format("\\fI{}\\fR\n", RoffEscape(opt->get_name(true)));
    } else {
      std::string names;
      for (const std::string& name : OptionNames(*opt)) {
        names += (names.empty() ? "" : ", ") + fmt::format("\\fB{}\\fR", RoffEscape(name));
      }
      if (opt->get_expected_max() != 0) names += fmt::format(" \\fI{}\\fR", RoffEscape(ValueName(*opt)));
      out += names + "\n";
    }
    std::string help = opt->get_description();
    if (help.empty()) help = "(no description)";
    if (help.back() != '.') help += '.';
    out += RoffText(help + DefaultAndChoices(*opt));
  }
  return out;
}

// The SYNOPSIS line of a subcommand: required options, [OPTIONS], positionals.
std::string RoffSynopsis(const CLI::App& sub) {
  std::string out = fmt::format(".B iotwin {}\n", RoffEscape(sub.get_name()));
  std::string positionals;
  for (const CLI::Option* opt : VisibleOptions(sub)) {
    std::string value = fmt::format("\\fI{}\\fR", RoffEscape(opt->get_positional()
                                                                  ? opt->get_name(true)
                                                                  : ValueName(*opt)));
    if (opt->get_positional()) {
      if (opt->get_expected_max() > 1) value += "\\ .\\|.\\|.";
      positionals += opt->get_required() ? value + "\n" : "[" + value + "]\n";
    } else if (opt->get_required()) {
      out += fmt::format("\\fB{}\\fR {}\n", RoffEscape(OptionNames(*opt).front()), value);
    }
  }
  return out + "[\\fIOPTIONS\\fR]\n" + positionals;
}

// What running the subcommand costs, like the OVERHEAD sections of bcc's tools.
std::string CostText(std::string_view name) {
  if (name == "record") {
    return "Capture runs eBPF programs on the system-call, page-cache, block, NVMe and scheduler "
           "paths the traced processes take: each event costs CPU time in the traced thread and in "
           "the iotwin process that drains the ring buffer, and a full ring loses events, which are "
           "counted (LOST records, the trace footer). The layers left out with --no-memory, "
           "--no-block, --no-nvme, --no-sched and --no-async cost nothing.\n\n"
           "Measured slowdowns (cached pread loops, fio with page cache and O_DIRECT, next to "
           "strace, perf trace and bpftrace) and loss rates are in the section \"Overhead\" of "
           "docs/record.md and section 1, \"Capture overhead\", of docs/benchmarks.md in the "
           "iotwin sources.";
  }
  if (name == "replay") {
    return "Replay issues the recorded I/O against the sandbox directory or device: it costs what "
           "the recorded workload's I/O costs. With --record it is also captured, at the cost "
           "iotwin-record(1) describes.";
  }
  if (name == "check") {
    return "Loads small probe programs into the kernel and unloads them; traces nothing.";
  }
  if (name == "demo") {
    return "Runs a workload under iotwin-record(1) and replays it: the costs of iotwin-record(1) "
           "and iotwin-replay(1).";
  }
  if (name == "import") {
    return "Reads the text it imports and writes a trace: no probes, no cost to any other "
           "process.";
  }
  return "Reads the trace only (and writes its own output): no probes, no cost to any other "
         "process.";
}

// What exit statuses 0, 1 and 2 mean for one subcommand (docs/user-guide.md and each
// subcommand's reference); `name` empty: iotwin(1), the shared meaning.
std::string ExitStatusText(std::string_view name) {
  std::string success = "Success.";
  std::string negative;  // exit status 1, where the subcommand has one
  std::string error = "Bad input or usage: an unknown option or value, an unreadable or damaged "
                      "file, a failure.";
  if (name.empty()) {
    negative = "A negative answer: compare judged the replay out of its thresholds (and the "
               "subcommand-specific cases of each page).";
  } else if (name == "record") {
    success = "The recording worked and the command exited with 0 (with --pid or --cgroup: "
              "the recording worked). Any other exit status of the command is passed on (its "
              "exit code, or 128 + N when signal N killed it): iotwin record exits with the "
              "traced command's exit status.";
    negative = "With --fail-on-loss: events were lost and the command's status was 0.";
    error = "A setup error (bad option, no BPF, the command cannot run): no trace is written.";
  } else if (name == "replay") {
    success = "The replay ran (result mismatches are reported, not fatal).";
    negative = "--strict stopped on a result mismatch, SIGINT, SIGTERM or SIGHUP stopped the "
               "replay (its summary, --json and --record cover what ran), or --record failed "
               "at the end.";
    error = "Bad input, an unsafe target or an error: nothing was replayed.";
  } else if (name == "compare") {
    success = "Every judged measure is within its threshold (VERDICT: PASS).";
    negative = "The replay is out of the thresholds (the answer is \"no\"; compare itself "
               "worked).";
  } else if (name == "demo") {
    success = "Every step succeeded and compare's verdict is PASS.";
    negative = "compare judged the replay out of its thresholds.";
    error = "A step failed.";
  } else if (name == "dump") {
    success = "The trace is whole, or --salvage printed what could be read.";
    error = "Bad input or usage, or the trace is damaged or truncated (without --salvage).";
  } else if (name == "import") {
    error = "Bad input or usage, or an input that yields no record (the wrong --format, or no "
            "file I/O): no trace is written.";
  }
  std::string out = fmt::format(".TP\n{}\n{}", kExitOk, RoffText(success));
  if (!negative.empty()) out += fmt::format(".TP\n{}\n{}", kExitNegative, RoffText(negative));
  return out + fmt::format(".TP\n{}\n{}", kExitError, RoffText(error));
}

// iotwin(1)'s CONVENTIONS: what every subcommand shares (docs/user-guide.md).
constexpr std::string_view kConventions =
    "Sizes take binary multiples as fio counts them: 4096, 4k, 4KiB, 1M, 2G, 1.5G (k, M, G, T, "
    "P, each optionally followed by B or iB, all powers of 1024). Durations take ns, us, ms, s, "
    "m (or min), h: 500ms, 10s, 2m. A number without a unit keeps the option's own unit "
    "(seconds for --duration, MiB for --ring-mb).\n\n"
    "A trace argument - reads the trace from standard input (ssh host cat run.iotwin | iotwin "
    "report -). record -o - writes the trace to standard output, a pipe or a file; import -o -, "
    "anonymize -o -, report --html - and export --csv - / --jsonl - (with --table) write to "
    "standard output. An output given as - is never a file named -.\n\n"
    "--json prints one JSON object on standard output whose schema key names its schema and "
    "version (iotwin-report/1, iotwin-record/1, ...); messages stay on standard error.\n\n"
    "Errors start with iotwin SUBCOMMAND: and name the option and an example of what it takes; a "
    "mistyped subcommand gets the nearest name. iotwin help [SUBCOMMAND] is --help; -V is "
    "--version.";

// NAME line text: the description without a leading "iotwin: ", up to its first ": ", ". "
// or " (".
std::string ShortDescription(std::string description) {
  if (description.rfind("iotwin: ", 0) == 0) description.erase(0, 8);
  size_t end = std::min({description.find(": "), description.find(". "), description.find(" (")});
  std::string text = description.substr(0, end);
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

}  // namespace cli_docs_internal

using namespace cli_docs_internal;

std::vector<std::string> ValueChoices(const CLI::Option& opt) {
  std::vector<std::string> words;
  for (const auto& [word, value] : EnumChoices(opt)) words.push_back(word);
  return words;
}

bool TakesNumber(const CLI::Option& opt) {
  std::string type = opt.get_type_name();
  std::string first = type.substr(0, type.find(':'));
  return first == "INT" || first == "UINT" || first == "FLOAT";
}

std::string ManPage(const CLI::App& app, const CLI::App* sub) {
  std::string title = sub ? "iotwin-" + sub->get_name() : std::string("iotwin");
  std::string upper = title;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const CLI::App& page = sub ? *sub : app;
  std::string out = fmt::format(".TH {} 1 \"\" \"iotwin\" \"iotwin Manual\"\n", RoffEscape(upper));
  out += ".SH NAME\n" + RoffEscape(title) + " \\- " +
         RoffEscape(ShortDescription(sub ? sub->get_description() : app.get_description())) + "\n";
  out += ".SH SYNOPSIS\n";
  out += sub ? RoffSynopsis(*sub) : ".B iotwin\n\\fISUBCOMMAND\\fR [\\fIOPTIONS\\fR]\n";
  out += ".SH DESCRIPTION\n" + RoffText(page.get_description());
  if (!page.get_footer().empty()) out += ".PP\n" + RoffText(page.get_footer());
  out += ".SH OPTIONS\n" + RoffOptions(page);
  if (!sub) {
    out += ".SH SUBCOMMANDS\n";
    for (const CLI::App* s : VisibleSubcommands(app)) {
      if (s->get_name() == "help") continue;
      out += fmt::format(".TP\n.BR iotwin\\-{} (1)\n", RoffEscape(s->get_name()));
      out += RoffText(ShortDescription(s->get_description()) + ".");
    }
  }
  if (!sub) out += ".SH CONVENTIONS\n" + RoffText(kConventions);
  out += ".SH EXIT STATUS\n" + ExitStatusText(sub ? sub->get_name() : "");
  out += ".SH OVERHEAD\n";
  out += sub ? RoffText(CostText(sub->get_name()))
             : RoffText("Only iotwin-record(1) (and replay --record, demo) probes the kernel; "
                        "each subcommand's page has an OVERHEAD section.");
  out += ".SH SEE ALSO\n";
  out += sub ? ".BR iotwin (1)\n" : RoffText("The iotwin-SUBCOMMAND(1) pages above; `iotwin help "
                                             "SUBCOMMAND`; docs/user-guide.md in the sources.");
  return out;
}

}  // namespace iotwin::cli
