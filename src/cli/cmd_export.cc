// `iotwin export`: a trace as fio iologs + job file, Chrome trace JSON (Perfetto), or CSV/JSONL
// tables (src/interop, docs/interop.md).
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/scope_options.h"
#include "interop/block_text.h"
#include "interop/exporters.h"

namespace iotwin::cli {

CommandSpec SetupExport(CLI::App& parent) {
  struct Options {
    std::string trace;
    std::string fio_dir, fio_root, layer = "syscall", fio_direct = "auto";
    std::vector<std::string> fio_devices;
    bool fio_faults = false;
    std::string chrome, csv, jsonl;
    ScopeArgs scope;  // --fio only
  };
  auto opt = std::make_shared<Options>();
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
  sub->add_option("--chrome", opt->chrome, "write Chrome trace-event JSON for Perfetto UI");
  sub->add_option("--csv", opt->csv, "write one CSV table per record type into DIR");
  sub->add_option("--jsonl", opt->jsonl, "write one JSON-lines table per record type into DIR");
  return {sub, [opt] {
            if (opt->fio_dir.empty() && opt->chrome.empty() && opt->csv.empty() &&
                opt->jsonl.empty()) {
              fmt::print(stderr, "iotwin export: choose at least one of --fio, --chrome, --csv, --jsonl\n");
              return kExitError;
            }
            auto scope = opt->scope.Parse();
            if (!scope.ok()) {
              fmt::print(stderr, "iotwin export: {}\n", scope.status().message());
              return kExitError;
            }
            const bool tables = !opt->chrome.empty() || !opt->csv.empty() || !opt->jsonl.empty();
            if (!scope->IsAll() && tables) {
              fmt::print(stderr, "iotwin export: --scope, --include and --exclude apply to --fio "
                                 "only; export --chrome, --csv and --jsonl without them\n");
              return kExitError;
            }
            if (!scope->IsAll() && opt->layer == "block") {
              fmt::print(stderr, "iotwin export: --scope, --include and --exclude choose files; "
                                 "--layer block replays devices\n");
              return kExitError;
            }
            if (!opt->fio_dir.empty()) {
              interop::FioExportOptions fo;
              fo.scope = *scope;
              fo.dir = opt->fio_dir;
              fo.fio_root = opt->fio_root;
              fo.block_layer = opt->layer == "block";
              fo.faults = opt->fio_faults;
              fo.direct = opt->fio_direct == "auto" ? -1 : opt->fio_direct == "1" ? 1 : 0;
              for (const auto& d : opt->fio_devices) {
                size_t eq = d.find('=');
                auto dev = eq == std::string::npos ? std::nullopt
                                                   : interop::ParseDevT(d.substr(0, eq));
                if (!dev) {
                  fmt::print(stderr, "iotwin export: --fio-device wants MAJ:MIN=PATH, got '{}'\n", d);
                  return kExitError;
                }
                fo.device_paths[*dev] = d.substr(eq + 1);
              }
              auto r = interop::ExportFio(opt->trace, fo);
              if (!r.ok()) {
                fmt::print(stderr, "iotwin export: {}\n", r.status().message());
                return kExitError;
              }
              fmt::print(stderr,
                         "fio: {} jobs, {} reads ({} B), {} writes ({} B), {} trims, {} syncs, "
                         "{} files -> {}\n",
                         r->jobs, r->reads, r->read_bytes, r->writes, r->write_bytes, r->trims,
                         r->syncs, r->files, r->job_file);
              if (!fo.scope.IsAll()) fmt::print(stderr, "  scope: {}\n", fo.scope.Describe());
              for (const auto& [why, n] : r->files_left_out) {
                fmt::print(stderr, "  files left out: {} x {}\n", n, why);
              }
              for (const auto& [why, n] : r->skipped) fmt::print(stderr, "  not replayed: {} x {}\n", n, why);
            }
            if (!opt->chrome.empty()) {
              auto r = interop::ExportChrome(opt->trace, opt->chrome);
              if (!r.ok()) {
                fmt::print(stderr, "iotwin export: {}\n", r.status().message());
                return kExitError;
              }
              fmt::print(stderr,
                         "chrome: {} events ({} syscall slices, {} async pairs, {} device slices, "
                         "{} flows, {} instants, {} clipped) -> {}\n",
                         r->events, r->slices, r->async_pairs, r->device_slices, r->flows,
                         r->instants, r->clipped, opt->chrome);
              for (const auto& [what, n] : r->skipped) fmt::print(stderr, "  not shown: {} x {}\n", n, what);
            }
            for (const auto& [dir, format] :
                 {std::pair{opt->csv, interop::TableFormat::kCsv},
                  std::pair{opt->jsonl, interop::TableFormat::kJsonl}}) {
              if (dir.empty()) continue;
              auto r = interop::ExportTables(opt->trace, dir, format);
              if (!r.ok()) {
                fmt::print(stderr, "iotwin export: {}\n", r.status().message());
                return kExitError;
              }
              for (const auto& [table, rows] : r->rows) {
                fmt::print(stderr, "{}: {:<14} {} rows\n", dir, table, rows);
              }
            }
            return kExitOk;
          }};
}

}  // namespace iotwin::cli
