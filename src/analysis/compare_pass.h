// compare reads each trace once. One loop over the file's records feeds the trace model (which
// calls a replay re-issues: the calls compare judges), the per-query reads, and an in-memory copy
// of the records, which the Analyzer (the measures) takes once the model has said which calls are
// judged. So the judged calls and the measures come from the same records, read once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/compare_query.h"
#include "analysis/trace_analysis.h"
#include "base/status.h"
#include "format/trace_reader.h"
#include "model/trace_model.h"

namespace iotwin::analysis {

// The records of a trace in file order, as TraceReader::Next() returned them (a record shorter
// than its type's fixed part is kept zero-extended, its header unchanged), 8-byte aligned.
class RecordLog {
 public:
  void Append(const iot_rec_hdr* rec);
  template <typename F>
  void ForEach(F&& f) const {
    for (const Block& b : blocks_) {
      for (size_t at = 0; at < b.used;) {
        const auto* rec = reinterpret_cast<const iot_rec_hdr*>(b.words.get() + at / 8);
        f(rec);
        at += StoredSize(rec);
      }
    }
  }
  uint64_t records() const { return records_; }
  void Clear() {
    blocks_.clear();
    records_ = 0;
  }

 private:
  struct Block {
    std::unique_ptr<uint64_t[]> words;
    size_t capacity = 0;  // bytes
    size_t used = 0;      // bytes
  };
  static size_t StoredSize(const iot_rec_hdr* rec);
  std::vector<Block> blocks_;
  uint64_t records_ = 0;
};

struct TracePassOptions {
  model::ModelOptions model;
  // Gather the reads for the per-query measures (with the query and hop markers: `query_markers`).
  bool query_reads = false;
  bool query_markers = false;
  bool progress = false;
};

// One trace, read once.
struct TracePass {
  std::string path;
  std::unique_ptr<TraceReader> reader;  // at the trace's end: header, summary, damage, names
  RecordLog records;
  std::unique_ptr<model::TraceModel> model;
  std::optional<QueryReads> queries;  // with TracePassOptions::query_reads
};

// Reads every record of `reader` (just opened on `path`) once. Errors name the file and offset.
Result<TracePass> ReadTraceOnce(const std::string& path, std::unique_ptr<TraceReader> reader,
                                const TracePassOptions& options);

// The Analyzer over the pass's records: what AnalyzeTraceFile computes, without reading the file.
TraceAnalysis AnalyzeRecords(const TracePass& pass, const TraceAnalysisOptions& options);

}  // namespace iotwin::analysis
