// libFuzzer target: `iotwin report` (analysis::BuildReportModel, then the text, JSON and HTML
// renderings) on checksum-valid traces whose records, header and footer are the fuzzer's
// (trace_fuzz_util.h). It must never crash, hang or allocate beyond what the trace holds.
// Options byte: bit 0 salvage; bit 1 heat maps (the second pass) and HTML; bit 2 every table
// row (top 0); bits 3-5 a filter; bits 6-7 a time window. Seeds: tests/fuzz/seeds/report_fuzz/.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/filter_spec.h"
#include "analysis/report_html.h"
#include "analysis/report_text.h"
#include "analysis/trace_analysis.h"
#include "trace_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t opts = data[0];
  iotwin::fuzz::ByteStream in(data + 1, size - 1);
  auto traces = iotwin::fuzz::DecodeTraces(in, 1);
  iotwin::fuzz::MemTrace file;
  if (!iotwin::fuzz::WriteTrace(traces[0], file)) __builtin_trap();  // the writer must take it

  static const std::vector<std::string> kFilters[] = {
      {}, {"op=reads"}, {"op=writes,pread64"}, {"tgid=1,100"}, {"tid=101"},
      {"file=/data/*"}, {"file=*", "op=reads"}, {"tgid=0", "tid=0,4294967295"}};
  std::optional<double> from, to;
  if (opts & 0x40) from = 0.001;
  if (opts & 0x80) to = from ? 0.002 : 1e-6;
  auto filter = iotwin::analysis::ParseFilterSpecs(kFilters[(opts >> 3) & 7], from, to);
  if (!filter.ok()) __builtin_trap();  // fixed, valid specs

  iotwin::analysis::TraceAnalysisOptions o;
  o.analyzer.filter = *filter;
  o.analyzer.top = (opts & 4) ? 0 : 3;
  o.salvage = opts & 1;
  const bool html = opts & 2;
  auto model = iotwin::analysis::BuildReportModel(file.path(), o, html ? 8 : 0);
  if (!model.ok()) return 0;
  (void)iotwin::analysis::RenderText(*model);
  (void)model->dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  if (html) (void)iotwin::analysis::RenderHtml(*model);
  return 0;
}
