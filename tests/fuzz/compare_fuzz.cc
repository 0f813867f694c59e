// libFuzzer target: `iotwin compare` (analysis::CompareTraces, then the text and JSON
// renderings) on two checksum-valid traces whose records, headers and footers are the fuzzer's
// (trace_fuzz_util.h; an "end of trace" item starts the second). With one trace, it is compared
// with itself, and must then pass: a trace reproduces itself exactly. It must never crash, hang
// or allocate beyond what the traces hold. Options byte: bit 0 salvage; bit 1 every call (not
// only storage calls); bit 2 at most 3 sequence ops per trace; bit 3 every thread row;
// bits 4-5 the inter-arrival resolution. Seeds: tests/fuzz/seeds/compare_fuzz/.
#include <cstdint>
#include <cstdio>
#include <string>

#include "analysis/compare.h"
#include "trace_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t opts = data[0];
  iotwin::fuzz::ByteStream in(data + 1, size - 1);
  auto traces = iotwin::fuzz::DecodeTraces(in, 2);
  iotwin::fuzz::MemTrace original, replay;
  if (!iotwin::fuzz::WriteTrace(traces[0], original)) __builtin_trap();
  const bool self = traces.size() == 1;
  if (!self && !iotwin::fuzz::WriteTrace(traces[1], replay)) __builtin_trap();

  iotwin::analysis::CompareOptions o;
  o.salvage = opts & 1;
  o.storage_calls_only = !(opts & 2);
  if (opts & 4) o.max_sequence_ops = 3;
  o.top = (opts & 8) ? 0 : 3;
  static const uint64_t kResolution[] = {0, 1, 50'000, UINT64_MAX};
  o.iat_resolution_ns = kResolution[(opts >> 4) & 3];
  const std::string& second = self ? original.path() : replay.path();
  auto result = iotwin::analysis::CompareTraces(original.path(), second, o);
  if (!result.ok()) return 0;
  (void)iotwin::analysis::RenderCompareText(*result);
  std::string json = result->dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  if (self && (*result)["verdict"] != "pass") {
    std::fprintf(stderr, "compare_fuzz: a trace compared with itself does not pass:\n%s\n",
                 json.c_str());
    __builtin_trap();
  }
  return 0;
}
