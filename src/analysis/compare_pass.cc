#include "analysis/compare_pass.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "format/records.h"
#include "model/program_images.h"

namespace iotwin::analysis {
namespace {

constexpr size_t kRecordLogBlockBytes = size_t{1} << 20;

}  // namespace

size_t RecordLog::StoredSize(const iot_rec_hdr* rec) {
  const size_t size = std::max<size_t>(rec->size, RecordFixedSize(rec->type));
  return std::max<size_t>((size + 7) & ~size_t{7}, sizeof(iot_rec_hdr));
}

void RecordLog::Append(const iot_rec_hdr* rec) {
  // What the reader returned holds at least the fixed part (zero-extended) and `size` bytes.
  const size_t have = std::max<size_t>(rec->size, RecordFixedSize(rec->type));
  const size_t need = StoredSize(rec);
  if (blocks_.empty() || blocks_.back().capacity - blocks_.back().used < need) {
    Block b;
    b.capacity = std::max(kRecordLogBlockBytes, need);
    b.words = std::make_unique<uint64_t[]>(b.capacity / 8);
    blocks_.push_back(std::move(b));
  }
  Block& b = blocks_.back();
  auto* dst = reinterpret_cast<uint8_t*>(b.words.get()) + b.used;
  std::memcpy(dst, rec, have);
  if (need > have) std::memset(dst + have, 0, need - have);
  b.used += need;
  ++records_;
}

Result<TracePass> ReadTraceOnce(const std::string& path, std::unique_ptr<TraceReader> reader,
                                const TracePassOptions& options) {
  TracePass pass;
  pass.path = path;
  model::ModelBuilder builder(options.model);
  builder.SetMeta(reader->meta());
  builder.ReadStringsFrom(reader.get());
  if (options.query_reads) pass.queries.emplace(options.query_markers);
  ProgressBar bar(options.progress, "reading", reader->file_size());
  uint64_t n = 0;
  for (;;) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* rec, reader->Next());
    if (rec == nullptr) break;
    IOTWIN_RETURN_IF_ERROR(builder.Add(rec).WithContext(path));
    pass.records.Append(rec);
    if (pass.queries) pass.queries->Add(rec, *reader);
    if ((++n & 0xffff) == 0) bar.Update(reader->offset(), n);
  }
  bar.Finish();
  if (pass.queries) pass.queries->Finish();
  IOTWIN_ASSIGN_OR_RETURN(pass.model, builder.Finish());
  pass.reader = std::move(reader);
  return pass;
}

TraceAnalysis AnalyzeRecords(const TracePass& pass, const TraceAnalysisOptions& options) {
  AnalyzerOptions ao = options.analyzer;
  if (!ao.filter.scope.AdmitsProgramImages() && !ao.filter.program_images) {
    // What AnalyzeTraceFile's first pass finds, here from the records in memory.
    model::ProgramImages images;
    pass.records.ForEach([&](const iot_rec_hdr* rec) { images.Add(rec); });
    ao.filter.program_images =
        std::make_shared<const std::set<model::ProgramImages::Key>>(images.Images());
  }
  const TraceReader& reader = *pass.reader;
  TraceAnalysis out;
  out.meta = reader.meta();
  out.analyzer = std::make_unique<Analyzer>(std::move(ao));
  out.analyzer->SetMeta(reader.meta());
  pass.records.ForEach([&](const iot_rec_hdr* rec) { out.analyzer->Consume(rec); });
  out.model = out.analyzer->Model(reader.summary(), TraceFacts(pass.path, reader));
  return out;
}

}  // namespace iotwin::analysis
