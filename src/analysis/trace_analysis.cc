#include "analysis/trace_analysis.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "analysis/report_text.h"
#include "format/trace_reader.h"
#include "model/program_images.h"

namespace iotwin::analysis {
namespace {

double NowSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

}  // namespace

ProgressBar::ProgressBar(bool enabled, std::string label, uint64_t total)
    : enabled_(enabled), label_(std::move(label)), total_(total), start_(NowSeconds()) {}

void ProgressBar::Update(uint64_t done, uint64_t records) {
  if (!enabled_) return;
  double now = NowSeconds();
  if (now - last_ < 0.1) return;
  last_ = now;
  double frac = total_ ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total_)) : 0;
  int filled = static_cast<int>(frac * 30);
  double rate = static_cast<double>(records) / std::max(1e-9, now - start_);
  fmt::print(stderr, "\r{} [{}{}] {:5.1f}%  {} / {}  {:.1f} M records/s ", label_,
             std::string(static_cast<size_t>(filled), '#'),
             std::string(static_cast<size_t>(30 - filled), ' '), frac * 100,
             FormatBytes(static_cast<double>(done)), FormatBytes(static_cast<double>(total_)),
             rate / 1e6);
  drawn_ = true;
}

void ProgressBar::Finish() {
  if (drawn_) fmt::print(stderr, "\r{}\r", std::string(100, ' '));
  drawn_ = false;
}

namespace {

// The first pass of a scope that leaves program images out: which files they are.
Result<std::shared_ptr<const std::set<model::ProgramImages::Key>>> FindProgramImages(
    const std::string& path, const TraceReaderOptions& ro) {
  IOTWIN_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, TraceReader::Open(path, ro));
  model::ProgramImages images;
  for (;;) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* rec, reader->Next());
    if (!rec) break;
    images.Add(rec);
  }
  return std::make_shared<const std::set<model::ProgramImages::Key>>(images.Images());
}

}  // namespace

Result<TraceAnalysis> AnalyzeTraceFile(const std::string& path,
                                       const TraceAnalysisOptions& options) {
  TraceReaderOptions ro;
  ro.salvage = options.salvage;
  const model::Scope& scope = options.analyzer.filter.scope;
  if (!scope.AdmitsProgramImages() && !options.analyzer.filter.program_images) {
    TraceAnalysisOptions with_images = options;
    IOTWIN_ASSIGN_OR_RETURN(with_images.analyzer.filter.program_images,
                            FindProgramImages(path, ro));
    return AnalyzeTraceFile(path, with_images);
  }
  auto opened = TraceReader::Open(path, ro);
  if (!opened.ok()) return opened.status();
  TraceReader& reader = **opened;

  TraceAnalysis out;
  out.meta = reader.meta();
  out.analyzer = std::make_unique<Analyzer>(options.analyzer);
  out.analyzer->SetMeta(reader.meta());
  ProgressBar bar(options.progress, "analysing", reader.file_size());
  uint64_t n = 0;
  for (;;) {
    auto next = reader.Next();
    if (!next.ok()) return next.status();
    const iot_rec_hdr* rec = *next;
    if (!rec) break;
    out.analyzer->Consume(rec);
    if ((++n & 0xffff) == 0) bar.Update(reader.offset(), n);
  }
  bar.Finish();

  out.model = out.analyzer->Model(reader.summary(), TraceFacts(path, reader));
  return out;
}

nlohmann::json TraceFacts(const std::string& path, const TraceReader& reader) {
  const TraceDamage& d = reader.damage();
  nlohmann::json facts = {{"path", path},
                          {"size_bytes", reader.file_size()},
                          {"format", fmt::format("{}.{}", reader.format_major(), reader.format_minor())}};
  const std::string damage = d.Description();
  if (!damage.empty()) facts["damage"] = damage;
  if (d.unknown_records) facts["unknown_records"] = d.unknown_records;
  return facts;
}

Result<nlohmann::json> BuildReportModel(const std::string& path,
                                        const TraceAnalysisOptions& options, size_t heatmaps) {
  auto first = AnalyzeTraceFile(path, options);
  if (!first.ok()) return first.status();
  nlohmann::json model = std::move(first->model);
  if (heatmaps == 0) return model;

  // Second pass: heat maps of the busiest files (the model's file rows come sorted by volume).
  TraceAnalysisOptions second = options;
  second.analyzer.start_ns_override = first->analyzer->start_ns();
  // Heat maps place requests by their time from the trace's start (not from --from).
  const nlohmann::json& totals = model["totals"];
  const uint64_t last = totals["last_ts_ns"].get<uint64_t>();
  const uint64_t start = totals["start_ns"].get<uint64_t>();
  const uint64_t span = last > start ? last - start : 0;
  second.analyzer.heatmap_span_ns = std::max<uint64_t>(span, 1);
  for (const auto& f : model["files"]["rows"]) {
    if (second.analyzer.heatmaps.size() >= heatmaps) break;
    uint64_t requests = f["read"]["ops"].get<uint64_t>() + f["write"]["ops"].get<uint64_t>() +
                        f["read"]["async_ops"].get<uint64_t>() +
                        f["write"]["async_ops"].get<uint64_t>() +
                        (f.contains("faults") ? f["faults"]["total"].get<uint64_t>() : 0);
    if (requests == 0) continue;
    HeatmapTarget t;
    t.dev = f["dev"].get<uint32_t>();
    t.ino = f["ino"].get<uint64_t>();
    t.max_offset = std::max<uint64_t>(
        {f["max_end"].get<uint64_t>(), f["size"].get<uint64_t>(), uint64_t{1}});
    t.sample_every = std::max<uint64_t>(1, (requests + 1999) / 2000);  // ≤ 2000 points a file
    second.analyzer.heatmaps.push_back(t);
  }
  if (second.analyzer.heatmaps.empty()) return model;
  auto again = AnalyzeTraceFile(path, second);
  if (!again.ok()) return again.status();
  if (again->model.contains("heatmaps")) model["heatmaps"] = again->model["heatmaps"];
  return model;
}

}  // namespace iotwin::analysis
