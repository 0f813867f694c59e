// libFuzzer target: `iotwin layers` (correlate::LayersReportForTrace: the cross-layer
// correlation and its report, then the text and JSON renderings) on checksum-valid traces whose
// records, header and footer are the fuzzer's (trace_fuzz_util.h). It must never crash, hang or
// allocate beyond what the trace holds. Options byte: bit 0 every request row; bits 1-2 rows of
// the other tables; bits 3-7 the dependent-read gap. Seeds: tests/fuzz/seeds/layers_fuzz/.
#include <cstdint>

#include "correlate/layers_report.h"
#include "trace_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t opts = data[0];
  iotwin::fuzz::ByteStream in(data + 1, size - 1);
  auto traces = iotwin::fuzz::DecodeTraces(in, 1);
  iotwin::fuzz::MemTrace file;
  if (!iotwin::fuzz::WriteTrace(traces[0], file)) __builtin_trap();  // the writer must take it

  iotwin::correlate::LayersOptions o;
  o.max_request_rows = (opts & 1) ? 0 : 5;
  o.top = (opts >> 1) & 3;
  o.dependent_gap_ns = (opts >> 3) == 31 ? UINT64_MAX : static_cast<uint64_t>(opts >> 3) * 10'000;
  auto report = iotwin::correlate::LayersReportForTrace(file.path(), o);
  if (!report.ok()) return 0;
  (void)iotwin::correlate::RenderLayersText(*report);
  (void)report->dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  return 0;
}
