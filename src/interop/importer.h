// Importers: turn text traces of other tools into iotwin records, streaming, line by line.
//
// Every importer reads lines in constant memory (state is per task or per in-flight request, never
// per line), names the input, line number and byte offset in every error, and counts what it could
// not read ("unknown lines"): they are reported in the footer summary ("import" object) and on
// stderr, never dropped silently; with `strict` the first one is an error.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "interop/record_sink.h"

namespace iotwin::interop {

enum class ImportFormat { kAuto, kStrace, kFtraceBlock, kBlkparse, kBpftraceCsv, kFioIolog };

std::string_view ImportFormatName(ImportFormat f);
std::optional<ImportFormat> ImportFormatFromName(std::string_view name);

// Guesses the format from the first bytes of an input; nullopt when nothing matches.
std::optional<ImportFormat> DetectFormat(std::string_view head);

struct ImportOptions {
  bool strict = false;  // an unknown line is an error
  // Block importers: dev_t (major << 20 | minor) for inputs that do not name the device (CSV).
  uint32_t dev = 0;
  // strace: pid for lines that carry no pid and whose task cannot be identified.
  uint32_t pid = 0;
};

// Position of a line in its input.
struct LinePos {
  std::string_view source;  // input name
  uint32_t source_index = 0;
  uint64_t line = 0;    // 1-based
  uint64_t offset = 0;  // byte offset of the line's first byte
};

struct ImportStats {
  uint64_t lines = 0;
  uint64_t blank_lines = 0;
  uint64_t comment_lines = 0;  // headers, summaries, notices: recognised and not data
  uint64_t unknown_lines = 0;
  uint64_t cut_lines = 0;  // longer than LineReader::kMaxLine
  struct Example {
    std::string source;  // the input's name, bytes
    // `text`: an Excerpt of the line (already text, see base/bytes_text.h).
    uint64_t line, offset;
    std::string reason, text;
  };
  std::vector<Example> unknown_examples;  // the first few
  // Recognised input that has no iotwin record (strace: syscalls that are not file I/O, ...).
  std::map<std::string, uint64_t> skipped;
  // Importer-specific counters (unfinished calls, lost events, ...).
  std::map<std::string, uint64_t> counters;

  nlohmann::json ToJson() const;
};

class Importer {
 public:
  Importer(RecordSink* sink, ImportOptions options) : sink_(sink), options_(options) {}
  virtual ~Importer() = default;

  // One line of input `pos.source_index` without its newline.
  virtual Status Line(std::string_view text, const LinePos& pos) = 0;
  // End of all inputs: emit what is still pending.
  virtual Status Finish() = 0;
  // Called before the lines of each input (several inputs: strace -ff files, several iologs).
  virtual Status BeginSource(uint32_t /*index*/, std::string_view /*name*/) {
    return Status::Ok();
  }
  // Time of a line, to merge several inputs in time order; nullopt when the line has none.
  virtual std::optional<uint64_t> MergeKey(std::string_view /*text*/) const { return std::nullopt; }
  // Header metadata keys this importer contributes (tool, host.clock, layers).
  virtual nlohmann::json Meta() const = 0;

  ImportStats& stats() { return stats_; }
  const ImportStats& stats() const { return stats_; }

 protected:
  // Counts (or, when strict, fails on) a line that could not be read.
  Status Unknown(const LinePos& pos, std::string_view text, std::string_view reason);
  // "FILE:LINE (byte N)".
  static std::string Where(const LinePos& pos);

  RecordSink* sink_;
  ImportOptions options_;
  ImportStats stats_;
};

std::unique_ptr<Importer> MakeImporter(ImportFormat format, RecordSink* sink,
                                       const ImportOptions& options);
std::unique_ptr<Importer> MakeStraceImporter(RecordSink* sink, const ImportOptions& options);
std::unique_ptr<Importer> MakeFtraceBlockImporter(RecordSink* sink, const ImportOptions& options);
std::unique_ptr<Importer> MakeBlkparseImporter(RecordSink* sink, const ImportOptions& options);
std::unique_ptr<Importer> MakeBpftraceCsvImporter(RecordSink* sink, const ImportOptions& options);
std::unique_ptr<Importer> MakeFioIologImporter(RecordSink* sink, const ImportOptions& options);

// Feeds `inputs` to `importer`: one input is read in order; several are merged by
// Importer::MergeKey (the earliest line first; lines without a key follow their predecessor).
Status FeedImporter(Importer* importer, std::vector<class LineReader>* inputs);

struct ImportRequest {
  ImportFormat format = ImportFormat::kAuto;
  std::vector<std::string> inputs;  // paths, "-" for stdin
  std::string output;
  ImportOptions options;
};

struct ImportResult {
  ImportFormat format = ImportFormat::kAuto;
  ImportStats stats;
  std::map<std::string, uint64_t> records;  // per record type
};

// Reads the inputs and writes the trace `request.output`.
Result<ImportResult> RunImport(const ImportRequest& request);

}  // namespace iotwin::interop
