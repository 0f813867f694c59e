// Subcommands whose implementation has not landed yet. Each moves to its own cmd_*.cc when built.
#include "cli/commands.h"

namespace iotwin::cli {

CommandSpec SetupRecord(CLI::App& p) {
  return NotImplemented(p, "record", "Record a workload's I/O with eBPF", "issue 3");
}
CommandSpec SetupReport(CLI::App& p) {
  return NotImplemented(p, "report", "Characterise a workload from its trace", "issue 7");
}
CommandSpec SetupCompare(CLI::App& p) {
  return NotImplemented(p, "compare", "Judge a replay's fidelity against the original", "issue 7");
}
CommandSpec SetupExport(CLI::App& p) {
  return NotImplemented(p, "export", "Export a trace (fio iolog, Chrome JSON, CSV, JSONL)",
                        "issue 7");
}
CommandSpec SetupImport(CLI::App& p) {
  return NotImplemented(p, "import", "Import strace, ftrace, blkparse, bpftrace CSV, fio iolog",
                        "issue 7");
}
CommandSpec SetupAnonymize(CLI::App& p) {
  return NotImplemented(p, "anonymize", "Replace names in a trace by keyed hashes", "issue 7");
}
CommandSpec SetupCheck(CLI::App& p) {
  return NotImplemented(p, "check", "Report which capture layers this kernel supports", "issue 2");
}

}  // namespace iotwin::cli
