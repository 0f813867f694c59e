// `iotwin check`: which capture layers and kernel features this machine supports, probed live.
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "capture/features.h"
#include "cli/commands.h"

namespace iotwin::cli {
namespace {

struct CheckOptions {
  bool json = false;
  bool mount_tracefs = false;
};

// Greedy word wrap of `text` to lines of at most `width` characters (longer words are cut).
std::vector<std::string> Wrap(std::string_view text, size_t width) {
  std::vector<std::string> lines;
  std::string line;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view word = text.substr(pos, end - pos);
    pos = end + 1;
    if (word.empty()) continue;
    while (word.size() > width) {
      if (!line.empty()) lines.push_back(std::move(line)), line.clear();
      lines.emplace_back(word.substr(0, width));
      word.remove_prefix(width);
    }
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      lines.push_back(std::move(line));
      line.clear();
    }
    if (!line.empty()) line += ' ';
    line += word;
  }
  if (!line.empty() || lines.empty()) lines.push_back(std::move(line));
  return lines;
}

// Prints rows of cells as columns of the given widths, wrapping each cell inside its column.
void PrintTable(std::FILE* out, const std::vector<size_t>& widths,
                const std::vector<std::vector<std::string>>& rows) {
  for (const auto& row : rows) {
    std::vector<std::vector<std::string>> cells;
    size_t height = 1;
    for (size_t c = 0; c < row.size(); c++) {
      cells.push_back(Wrap(row[c], widths[c]));
      height = std::max(height, cells.back().size());
    }
    for (size_t l = 0; l < height; l++) {
      std::string line;
      for (size_t c = 0; c < cells.size(); c++) {
        const std::string& part = l < cells[c].size() ? cells[c][l] : "";
        line += c + 1 < cells.size() ? fmt::format("{:<{}}  ", part, widths[c]) : part;
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      std::fprintf(out, "%s\n", line.c_str());
    }
  }
}

size_t TerminalWidth() {
  winsize ws{};
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 80) {
    return ws.ws_col;
  }
  return 120;
}

void PrintHuman(const capture::Features& features) {
  const capture::KernelFacts& f = features.facts();
  std::printf("iotwin check: Linux %s %s, euid %u, kernel config %s\n\n", f.release.c_str(),
              f.arch.c_str(), f.euid,
              f.config_source.empty() ? "not found" : ("from " + f.config_source).c_str());

  const size_t total = TerminalWidth();
  const std::vector<size_t> widths = {21, 3, 22, total - 21 - 3 - 22 - 6};
  std::vector<std::vector<std::string>> rows = {{"FEATURE", "OK", "USED BY", "DETAIL / REASON"}};
  std::vector<std::string> missing;
  for (const auto& st : features.all()) {
    std::string detail = st.detail;
    if (!st.supported) {
      detail += fmt::format(" -> instead: {}", st.fallback);
      missing.push_back(std::string(st.key));
    }
    rows.push_back({std::string(st.key), st.supported ? "yes" : "no", std::string(st.needed_by),
                    detail});
  }
  PrintTable(stdout, widths, rows);

  std::printf("\n");
  std::vector<std::vector<std::string>> layer_rows = {{"LAYER", "OK", "ATTACHED AS / WHY NOT"}};
  for (const auto& plan : features.layers()) {
    std::string how = plan.available ? plan.method : plan.reason;
    if (plan.available && !plan.reason.empty()) how += "; " + plan.reason;
    layer_rows.push_back({plan.name, plan.available ? "yes" : "no", how});
  }
  PrintTable(stdout, {21, 3, total - 21 - 3 - 4}, layer_rows);

  std::printf("\n%zu of %zu features supported", features.all().size() - missing.size(),
              features.all().size());
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    std::printf("; missing: %s", list.c_str());
  }
  std::printf("\n");
}

int RunCheck(const CheckOptions& options) {
  capture::ProbeOptions probe_options;
  probe_options.mount_tracefs = options.mount_tracefs;
  auto features = capture::Features::Probe(probe_options);
  if (!features.ok()) {
    std::fprintf(stderr, "iotwin check: %s\n", features.status().ToString().c_str());
    return kExitError;
  }
  try {
    if (options.json) {
      nlohmann::json j = features->ToJson();
      j["schema"] = "iotwin-check/1";
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      PrintHuman(*features);
    }
  } catch (const std::exception& e) {  // nlohmann::json throws on invalid UTF-8 in a detail
    std::fprintf(stderr, "iotwin check: cannot print the result: %s\n", e.what());
    return kExitError;
  }
  return kExitOk;
}

}  // namespace

CommandSpec SetupCheck(CLI::App& parent) {
  auto options = std::make_shared<CheckOptions>();
  CLI::App* sub = parent.add_subcommand(
      "check",
      "Report which capture layers this kernel supports (probed: programs are loaded, not "
      "guessed from the kernel version). Exit 0 when probing worked, even with features missing.");
  sub->add_flag("--json", options->json, "Print the result as JSON");
  sub->add_flag("--mount-tracefs", options->mount_tracefs,
                "Mount tracefs at /sys/kernel/tracing if it is not mounted (otherwise only tried "
                "in a private mount namespace)");
  return {sub, [options] { return RunCheck(*options); }};
}

}  // namespace iotwin::cli
