// `iotwin export`: a trace as fio iologs + job file, Chrome trace JSON (Perfetto), or CSV/JSONL
// tables (src/interop, docs/interop.md).
#include <unistd.h>

#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/bytes_text.h"
#include "base/units.h"
#include "cli/commands.h"
#include "cli/stdout_output.h"
#include "cli/scope_options.h"
#include "interop/block_text.h"
#include "interop/exporters.h"
#include "interop/table_export.h"

namespace iotwin::cli {
namespace {

struct ExportArgs {
  std::string trace;
  std::string fio_dir, fio_root, layer = "syscall", fio_direct = "auto";
  std::vector<std::string> fio_devices;
  bool fio_faults = false;
  bool json = false;
  std::string chrome, csv, jsonl;
  std::string table;  // --csv - / --jsonl -: the one table written to standard output
  ScopeArgs scope;  // --fio only
};

// --fio; adds its result to `summary`. Returns an exit status.
int ExportFioJob(const ExportArgs& a, const model::Scope& scope, nlohmann::json* summary) {
  interop::FioExportOptions fo;
  fo.scope = scope;
  fo.dir = a.fio_dir;
  fo.fio_root = a.fio_root;
  fo.block_layer = a.layer == "block";
  fo.faults = a.fio_faults;
  fo.direct = a.fio_direct == "auto" ? -1 : a.fio_direct == "1" ? 1 : 0;
  for (const auto& d : a.fio_devices) {
    size_t eq = d.find('=');
    auto dev = eq == std::string::npos ? std::nullopt : interop::ParseDevT(d.substr(0, eq));
    if (!dev) {
      fmt::print(stderr, "iotwin export: --fio-device wants MAJ:MIN=PATH, got '{}'\n", d);
      return kExitError;
    }
    fo.device_paths[*dev] = d.substr(eq + 1);
  }
  auto r = interop::ExportFio(a.trace, fo);
  if (!r.ok()) {
    fmt::print(stderr, "iotwin export: {}\n", r.status().message());
    return kExitError;
  }
  fmt::print(stderr,
             "fio: {} jobs, {} reads ({} B), {} writes ({} B), {} trims, {} syncs, {} files -> {}\n",
             r->jobs, r->reads, r->read_bytes, r->writes, r->write_bytes, r->trims, r->syncs,
             r->files, r->job_file);
  if (!fo.scope.IsAll()) fmt::print(stderr, "  scope: {}\n", fo.scope.Describe());
  for (const auto& [why, n] : r->files_left_out) {
    fmt::print(stderr, "  files left out: {} x {}\n", n, why);
  }
  for (const auto& [why, n] : r->skipped) fmt::print(stderr, "  not replayed: {} x {}\n", n, why);
  // fio writes every prepared file in full: a stand-in for a whole disk fills the disk.
  constexpr uint64_t kLargePrepare = uint64_t{4} << 30;
  if (r->largest_prepare_bytes > kLargePrepare) {
    fmt::print(stderr,
               "  warning: the job's preparation writes {} before replaying (largest: {}, {}); "
               "a device's stand-in is as large as its traced extent: replay a device onto one "
               "of your own with --fio-device MAJ:MIN=PATH\n",
               units::HumanBytes(r->prepare_bytes), BytesToText(r->largest_prepare),
               units::HumanBytes(r->largest_prepare_bytes));
  }
  (*summary)["fio"] = r->ToJson();
  return kExitOk;
}

int ExportChromeJson(const ExportArgs& a, nlohmann::json* summary) {
  std::string output = a.chrome;  // "-": written whole, then copied to standard output
  auto to_stdout = StdoutOutput::For(&output, "--chrome", /*binary=*/true);
  if (!to_stdout.ok()) {
    fmt::print(stderr, "iotwin export: {}\n", to_stdout.status().message());
    return kExitError;
  }
  auto r = interop::ExportChrome(a.trace, output);
  if (!r.ok()) {
    fmt::print(stderr, "iotwin export: {}\n", r.status().message());
    return kExitError;
  }
  if (*to_stdout) {
    Status copied = (*to_stdout)->CopyToStdout();
    if (!copied.ok()) {
      fmt::print(stderr, "iotwin export: --chrome -: {}\n", copied.message());
      return kExitError;
    }
  }
  fmt::print(stderr,
             "chrome: {} events ({} syscall slices, {} async pairs, {} device slices, {} flows, "
             "{} instants, {} clipped) -> {}\n",
             r->events, r->slices, r->async_pairs, r->device_slices, r->flows, r->instants,
             r->clipped, a.chrome);
  for (const auto& [what, n] : r->skipped) fmt::print(stderr, "  not shown: {} x {}\n", n, what);
  (*summary)["chrome"] = {{"output", BytesToText(a.chrome)}, {"events", r->events},
                          {"slices", r->slices},         {"async_pairs", r->async_pairs},
                          {"device_slices", r->device_slices}, {"flows", r->flows},
                          {"instants", r->instants},     {"clipped", r->clipped},
                          {"skipped", r->skipped}};
  return kExitOk;
}

int ExportTableDir(const std::string& trace, const std::string& dir, interop::TableFormat format,
                   const char* key, nlohmann::json* summary) {
  auto r = interop::ExportTables(trace, dir, format);
  if (!r.ok()) {
    fmt::print(stderr, "iotwin export: {}\n", r.status().message());
    return kExitError;
  }
  for (const auto& [table, rows] : r->rows) fmt::print(stderr, "{}: {:<14} {} rows\n", dir, table, rows);
  for (const auto& name : r->removed) {
    fmt::print(stderr, "{}: removed {} (a table this trace does not have)\n", dir, BytesToText(name));
  }
  nlohmann::json removed = nlohmann::json::array();
  for (const auto& name : r->removed) removed.push_back(BytesToText(name));
  (*summary)[key] = {{"dir", BytesToText(dir)}, {"rows", r->rows}, {"removed", removed}};
  return kExitOk;
}

// `--csv -` / `--jsonl -`: table `a.table` to standard output.
int ExportTableToStdout(const ExportArgs& a, interop::TableFormat format) {
  auto r = interop::ExportTable(a.trace, a.table, format, STDOUT_FILENO);
  if (!r.ok()) {
    fmt::print(stderr, "iotwin export: {}\n", r.status().message());
    return kExitError;
  }
  fmt::print(stderr, "standard output: {:<14} {} rows\n", a.table, *r);
  return kExitOk;
}

// The checks of `--csv -` / `--jsonl -` and --table; an error message, or "".
std::string StdoutTableProblem(const ExportArgs& a) {
  const bool csv = a.csv == "-", jsonl = a.jsonl == "-";
  std::string names;
  for (std::string_view t : interop::TableNames()) {
    names += fmt::format("{}{}", names.empty() ? "" : ", ", t);
  }
  if (a.fio_dir == "-") return "--fio writes a job directory (iologs and replay.fio): give one";
  const int to_stdout = int{csv} + int{jsonl} + int{a.chrome == "-"};
  if (to_stdout > 1) return "several outputs given as - would share standard output; choose one";
  if (a.chrome == "-" && a.json) return "--json prints on standard output, which --chrome - writes";
  if (!csv && !jsonl) {
    if (!a.table.empty()) return "--table chooses the table that --csv - or --jsonl - writes";
    return "";
  }
  const char* opt = csv ? "--csv -" : "--jsonl -";
  if (a.table.empty()) {
    return fmt::format("{} writes one table to standard output: choose it with --table ({})", opt,
                       names);
  }
  const auto tables = interop::TableNames();
  if (std::find(tables.begin(), tables.end(), a.table) == tables.end()) {
    return fmt::format("--table: no table '{}' (tables: {})", BytesToText(a.table), names);
  }
  if (a.json) return fmt::format("--json prints on standard output, which {} writes", opt);
  // As every `-` output (docs/user-guide.md): a table is meant for a pipe or a file.
  if (isatty(STDOUT_FILENO)) {
    return fmt::format("{}: standard output is a terminal; pipe or redirect it", opt);
  }
  return "";
}

int RunExport(const ExportArgs& a) {
  if (a.fio_dir.empty() && a.chrome.empty() && a.csv.empty() && a.jsonl.empty()) {
    fmt::print(stderr, "iotwin export: choose at least one of --fio, --chrome, --csv, --jsonl\n");
    return kExitError;
  }
  auto scope = a.scope.Parse();
  if (!scope.ok()) {
    fmt::print(stderr, "iotwin export: {}\n", scope.status().message());
    return kExitError;
  }
  if (const std::string problem = StdoutTableProblem(a); !problem.empty()) {
    fmt::print(stderr, "iotwin export: {}\n", problem);
    return kExitError;
  }
  const bool tables = !a.chrome.empty() || !a.csv.empty() || !a.jsonl.empty();
  if (!scope->IsAll() && tables) {
    fmt::print(stderr, "iotwin export: --scope, --include and --exclude apply to --fio "
                       "only; export --chrome, --csv and --jsonl without them\n");
    return kExitError;
  }
  if (!scope->IsAll() && a.layer == "block") {
    fmt::print(stderr, "iotwin export: --scope, --include and --exclude choose files; "
                       "--layer block replays devices\n");
    return kExitError;
  }
  nlohmann::json summary = {{"schema", "iotwin-export/1"}, {"trace", BytesToText(a.trace)}};
  int rc = kExitOk;
  if (!a.fio_dir.empty()) rc = ExportFioJob(a, *scope, &summary);
  if (rc == kExitOk && !a.chrome.empty()) rc = ExportChromeJson(a, &summary);
  if (rc == kExitOk && !a.csv.empty()) {
    rc = a.csv == "-" ? ExportTableToStdout(a, interop::TableFormat::kCsv)
                      : ExportTableDir(a.trace, a.csv, interop::TableFormat::kCsv, "csv", &summary);
  }
  if (rc == kExitOk && !a.jsonl.empty()) {
    rc = a.jsonl == "-"
             ? ExportTableToStdout(a, interop::TableFormat::kJsonl)
             : ExportTableDir(a.trace, a.jsonl, interop::TableFormat::kJsonl, "jsonl", &summary);
  }
  if (rc == kExitOk && a.json) {
    fmt::print("{}\n", summary.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  return rc;
}

}  // namespace

CommandSpec SetupExport(CLI::App& parent) {
  auto opt = std::make_shared<ExportArgs>();
  CLI::App* sub = parent.add_subcommand(
      "export", "Export a trace: fio iolog + job file, Chrome trace JSON, CSV or JSONL tables");
  sub->add_option("trace", opt->trace, "trace file")->required();
  sub->add_option("--fio", opt->fio_dir,
                  "write fio iolog v3 files (one per thread, or per device with --layer block) "
                  "and DIR/replay.fio");
  sub->add_option("--layer", opt->layer, "fio: syscall (default) or block")
      ->check(CLI::IsMember({"syscall", "block"}));
  sub->add_option("--fio-root", opt->fio_root,
                  "fio: directory holding the replayed files (default DIR/files); a relative "
                  "one is resolved by fio against its working directory (each fio server's own)");
  sub->add_option("--fio-device", opt->fio_devices,
                  "fio --layer block: MAJ:MIN=PATH replays that device's requests onto PATH "
                  "(a device node or file) instead of a prepared stand-in file");
  sub->add_flag("--fio-faults", opt->fio_faults,
                "fio: also replay major page faults on mapped files as page reads");
  sub->add_option("--fio-direct", opt->fio_direct,
                  "fio: direct=1 per job: auto (from O_DIRECT opens; block layer: on), 0, 1")
      ->check(CLI::IsMember({"auto", "0", "1"}));
  AddScopeOptions(sub, opt->scope);
  sub->add_option("--chrome", opt->chrome,
                  "write Chrome trace-event JSON for Perfetto UI ('-': to stdout)");
  sub->add_option("--csv", opt->csv,
                  "write one CSV table per record type, and files.csv, into DIR (docs/tables.md); "
                  "- writes the --table one to standard output");
  sub->add_option("--jsonl", opt->jsonl,
                  "write one JSON-lines table per record type, and files.jsonl, into DIR "
                  "(docs/tables.md); - writes the --table one to standard output");
  sub->add_option("--table", opt->table,
                  "--csv - / --jsonl -: the one table written to standard output (syscalls, "
                  "files, ...)");
  sub->add_flag("--json", opt->json,
                "print what was exported as one JSON object on stdout (schema iotwin-export/1)");
  return {sub, [opt] { return RunExport(*opt); }};
}

}  // namespace iotwin::cli
