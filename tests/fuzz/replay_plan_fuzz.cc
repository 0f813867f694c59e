// libFuzzer target: `iotwin replay --dry-run` (replay::RunReplay with dry_run: the model, the
// trace checks, replay::BuildPlan per copy and PlanToJson / PlanToText) on checksum-valid traces
// whose records, header and footer are the fuzzer's (trace_fuzz_util.h). The sandbox root does
// not exist and nothing is ever executed or written. It must never crash, hang or allocate
// beyond what the trace holds. Options byte: bits 0-1 copies (--amplify 1-3); bits 2-3 pacing;
// bit 4 speed 1000 (else 0.5); bit 5 strict; bit 6 force; bit 7 a --map of /data.
// Seeds: tests/fuzz/seeds/replay_plan_fuzz/.
#include <cstdint>

#include "replay/replay.h"
#include "trace_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t opts = data[0];
  iotwin::fuzz::ByteStream in(data + 1, size - 1);
  auto traces = iotwin::fuzz::DecodeTraces(in, 1);
  iotwin::fuzz::MemTrace file;
  if (!iotwin::fuzz::WriteTrace(traces[0], file)) __builtin_trap();  // the writer must take it

  iotwin::replay::ReplayOptions o;
  o.trace = file.path();
  o.root = "/nonexistent-fuzz-root";
  o.dry_run = true;
  o.layer = iotwin::replay::Layer::kSyscall;  // never the device path
  o.backend = iotwin::replay::BackendKind::kNull;
  o.async = iotwin::replay::AsyncKind::kNull;
  o.progress = false;
  o.amplify = 1 + (opts & 3) % 3;
  static const iotwin::replay::PaceMode kPace[] = {
      iotwin::replay::PaceMode::kOriginal, iotwin::replay::PaceMode::kGaps,
      iotwin::replay::PaceMode::kFast, iotwin::replay::PaceMode::kOriginal};
  o.pace = kPace[(opts >> 2) & 3];
  o.speed = (opts & 0x10) ? 1000 : 0.5;
  o.strict = opts & 0x20;
  o.force = opts & 0x40;
  if (opts & 0x80) o.maps.push_back({"/data", "/nonexistent-fuzz-map/data"});
  auto r = iotwin::replay::RunReplay(o);
  if (!r.ok()) return 0;
  (void)r->summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  return 0;
}
