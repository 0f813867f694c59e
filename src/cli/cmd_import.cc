// `iotwin import`: turn strace logs, ftrace/blkparse block traces, bpftrace CSV and fio iologs
// into an iotwin trace (src/interop, docs/interop.md).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/bytes_text.h"
#include "cli/commands.h"
#include "cli/stdout_output.h"
#include "cli/unit_options.h"
#include "interop/block_text.h"
#include "interop/importer.h"

namespace iotwin::cli {

CommandSpec SetupImport(CLI::App& parent) {
  struct Options {
    std::string format = "auto";
    std::vector<std::string> inputs;
    std::string output;
    bool strict = false;
    bool json = false;
    std::string dev;
    uint32_t pid = 0;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* sub = parent.add_subcommand(
      "import", "Import strace, ftrace block, blkparse, bpftrace CSV or fio iolog text as a trace");
  sub->add_option("--format,-f", opt->format,
                  "strace | ftrace-block | blkparse | bpftrace-csv | fio-iolog | auto")
      ->check(CLI::IsMember({"auto", "strace", "ftrace-block", "blkparse", "bpftrace-csv",
                             "fio-iolog"}));
  sub->add_option("input", opt->inputs,
                  "input files ('-' for stdin); several: strace -ff files or several iologs, "
                  "merged by time")
      ->required();
  sub->add_option("-o,--output", opt->output, "trace file to write ('-' for stdout)")->required();
  sub->add_flag("--strict", opt->strict, "fail on the first line that cannot be read");
  sub->add_flag("--json", opt->json,
                "print the import's summary as one JSON object on stdout (schema iotwin-import/1)");
  sub->add_option("--dev", opt->dev,
                  "MAJ:MIN of the device, for block inputs that do not name it (bpftrace CSV)");
  sub->add_option("--pid", opt->pid,
                  "strace: pid of the first task when the log does not show it (stderr output)")
      ->check(Number(true, "1234"));
  return {sub, [opt] {
            interop::ImportRequest req;
            req.format = *interop::ImportFormatFromName(opt->format);
            req.inputs = opt->inputs;
            req.output = opt->output;
            req.options.strict = opt->strict;
            req.options.pid = opt->pid;
            if (!opt->dev.empty()) {
              auto dev = interop::ParseDevT(opt->dev);
              if (!dev) {
                fmt::print(stderr, "iotwin import: --dev wants MAJ:MIN, got '{}'\n", opt->dev);
                return kExitError;
              }
              req.options.dev = *dev;
            }
            auto to_stdout = StdoutOutput::For(&req.output, "-o", /*binary=*/true);
            if (!to_stdout.ok() || (*to_stdout && opt->json)) {
              fmt::print(stderr, "iotwin import: {}\n",
                         to_stdout.ok() ? "-o - writes the trace to standard output: no --json there"
                                        : to_stdout.status().message());
              return kExitError;
            }
            auto result = interop::RunImport(req);
            if (!result.ok()) {
              fmt::print(stderr, "iotwin import: {}\n", result.status().message());
              return kExitError;
            }
            if (*to_stdout) {
              Status copied = (*to_stdout)->CopyToStdout();
              if (!copied.ok()) {
                fmt::print(stderr, "iotwin import: -o -: {}\n", copied.message());
                return kExitError;
              }
            }
            const auto& st = result->stats;
            uint64_t records = 0;
            for (const auto& [type, n] : result->records) records += n;
            if (opt->json) {
              nlohmann::json inputs = nlohmann::json::array();
              for (const auto& in : opt->inputs) inputs.push_back(BytesToText(in));
              nlohmann::json j = {{"schema", "iotwin-import/1"},
                                  {"inputs", inputs},
                                  {"format", interop::ImportFormatName(result->format)},
                                  {"output", BytesToText(opt->output)},
                                  {"records", result->records},
                                  {"stats", st.ToJson()}};
              fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
            }
            fmt::print(stderr, "iotwin import: {} ({}): {} lines -> {} records in {}\n",
                       BytesToText(fmt::format("{}", fmt::join(opt->inputs, " "))),
                       interop::ImportFormatName(result->format),
                       st.lines, records, opt->output);
            for (const auto& [type, n] : result->records) {
              fmt::print(stderr, "  {:<12} {}\n", type, n);
            }
            if (st.unknown_lines > 0) {
              fmt::print(stderr, "  {} unknown lines (kept out of the trace; listed in its footer)\n",
                         st.unknown_lines);
              for (const auto& e : st.unknown_examples) {
                fmt::print(stderr, "    {}:{} (byte {}): {}: {}\n", BytesToText(e.source), e.line, e.offset,
                           e.reason, e.text);
              }
            }
            // Conditions that make records approximate or incomplete (counters in the footer).
            static constexpr std::pair<const char*, const char*> kFlagged[] = {
                {"names_truncated", "names longer than 4096 bytes, cut and flagged truncated"},
                {"length_from_result",
                 "vectored calls whose iovecs strace did not print: length = result (approximate)"},
                {"length_unknown", "failed vectored calls whose iovecs strace did not print: length 0"},
                {"names_with_nul", "names holding a NUL byte: left out, flagged unreadable"}};
            for (const auto& [key, what] : kFlagged) {
              auto it = st.counters.find(key);
              if (it != st.counters.end() && it->second > 0) {
                fmt::print(stderr, "  {} {} ({})\n", it->second, what, key);
              }
            }
            uint64_t skipped = 0;
            for (const auto& [name, n] : st.skipped) skipped += n;
            if (skipped > 0) {
              fmt::print(stderr, "  {} recognised lines with no iotwin record (see footer 'skipped')\n",
                         skipped);
            }
            return kExitOk;
          }};
}

}  // namespace iotwin::cli
