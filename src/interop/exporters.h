// Exporters: an iotwin trace as fio iologs plus a job file, as Chrome trace-event JSON for
// Perfetto, and as CSV / JSON-lines tables. All stream the trace (two passes where a decision
// needs the whole trace first) and keep memory bounded by what is in flight or per file/thread,
// never by the number of events. Formats and limits: docs/interop.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "model/scope.h"

namespace iotwin::interop {

// ---- fio -------------------------------------------------------------------------------------
struct FioExportOptions {
  std::string dir;       // output directory (created)
  // Where replayed files live; default <dir>/files. A relative root stays relative in the job:
  // fio resolves it against its working directory (each server's own in client/server mode).
  std::string fio_root;
  bool block_layer = false;  // --layer block: device request stream instead of system calls
  bool faults = false;       // also export major page faults on file mappings as page reads
  // --layer block: dev_t -> path to replay onto (a device node or a file); default a file
  // <fio_root>/blk-MAJ-MIN prepared at the traced size.
  std::map<uint32_t, std::string> device_paths;
  int direct = -1;  // -1: per job from the trace (O_DIRECT opens; block layer: 1); 0/1: forced
  // Files out of scope are left out (syscall layer; counted in files_left_out and skipped).
  model::Scope scope;
};

// One file the trace names, as the export treats it.
struct FioFileResult {
  std::string fio_name, original;
  uint64_t extent = 0;                             // largest offset + length of its I/O
  uint64_t reads = 0, writes = 0, trims = 0, syncs = 0;  // I/O lines written for it
  uint64_t read_bytes = 0, write_bytes = 0;
  std::string left_out;  // why the job leaves it out; empty when replayed
};

struct FioExportResult {
  std::string job_file;
  uint64_t jobs = 0;
  uint64_t reads = 0, writes = 0, trims = 0, syncs = 0;  // I/O lines written
  uint64_t read_bytes = 0, write_bytes = 0;
  uint64_t files = 0;  // files the job replays (and prepares, unless given as a device path)
  // Files opened or mapped without I/O fio can replay: fio would fail to open them, as nothing
  // creates them. By reason.
  std::map<std::string, uint64_t> files_left_out;
  std::vector<FioFileResult> per_file;      // every file, in index order (files.tsv)
  std::map<std::string, uint64_t> skipped;  // what fio cannot express, by reason
  // What the preparation jobs write before the replay (fio lays out each file in full), and the
  // largest such file: a device stand-in is as large as the device's traced extent.
  uint64_t prepare_bytes = 0;
  std::string largest_prepare;
  uint64_t largest_prepare_bytes = 0;
  nlohmann::json scope;  // the scope's ToJson(), null for all files
  nlohmann::json ToJson() const;
};

Result<FioExportResult> ExportFio(const std::string& trace, const FioExportOptions& options);

// ---- Chrome trace-event JSON ------------------------------------------------------------------
struct ChromeExportResult {
  uint64_t events = 0;
  uint64_t slices = 0, async_pairs = 0, device_slices = 0, flows = 0, instants = 0;
  uint64_t clipped = 0;  // syscall slices shortened so that a thread's slices nest
  std::map<std::string, uint64_t> skipped;
};

Result<ChromeExportResult> ExportChrome(const std::string& trace, const std::string& output);

// ---- tables -----------------------------------------------------------------------------------
// `dir`/<table>.csv or .jsonl per record type present, `dir`/files.* and `dir`/trace_info.json;
// schema and directory rules: docs/tables.md.
enum class TableFormat { kCsv, kJsonl };

struct TableExportResult {
  std::map<std::string, uint64_t> rows;  // per table (file stem), `files` included
  std::vector<std::string> removed;      // tables of another trace removed from the directory
};

Result<TableExportResult> ExportTables(const std::string& trace, const std::string& dir,
                                       TableFormat format);

}  // namespace iotwin::interop
