// Trace format kernels: writer (append + zstd) and reader (decompress + iterate) throughput.
// Run: build/bench/iotwin_bench --benchmark_filter=Trace
#include <unistd.h>

#include <cstdio>
#include <string>

#include <benchmark/benchmark.h>

#include "format/records.h"
#include "format/trace_reader.h"
#include "format/trace_writer.h"

namespace iotwin {
namespace {

iot_syscall PreadRecord(uint64_t i) {
  iot_syscall s{};
  InitRecord(&s, IOT_REC_SYSCALL);
  s.op = IOT_OP_PREAD64;
  s.cpu = static_cast<uint16_t>(i & 1);
  // Realistic jitter: ~2 us apart, durations vary in the low bits.
  s.ts = 5'000'000'000 + i * 2000 + (i * 2654435761u) % 700;
  s.dur = 900 + (i * 40503u) % 400;
  s.tgid = 4242;
  s.tid = 4242;
  s.ret = 4096;
  s.fd = 3;
  s.fd2 = -1;
  s.offset = (i % 16384) * 4096;
  s.length = 4096;
  s.ino = 1234567;
  s.fsize = 64 << 20;
  s.dev = (254u << 20) | 1;
  s.ftype = 8;
  return s;
}

std::string TempPath() {
  return std::string("/tmp/iotwin-bench-") + std::to_string(getpid()) + ".iotwin";
}

void BM_TraceWriterAppend(benchmark::State& state) {
  const std::string path = TempPath();
  TraceWriterOptions o;
  o.zstd_level = static_cast<int>(state.range(0));
  // Arg 1: the chunk codec (3, the default; 2, format 1.1's, to compare).
  o.packed_layout = state.range(1) == 2 ? PackedLayout::kPrevious : PackedLayout::kShaped;
  uint64_t n = 0, bytes = 0;
  for (auto _ : state) {
    auto w = TraceWriter::Create(path, {{"tool", "bench"}}, o);
    for (uint64_t i = 0; i < 1'000'000; i++) (void)(*w)->Append(PreadRecord(i));
    (void)(*w)->Finish({});
    n += 1'000'000;
    bytes = (*w)->bytes_written();
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate);
  state.counters["bytes/event"] = static_cast<double>(bytes) / 1e6;
  std::remove(path.c_str());
}
BENCHMARK(BM_TraceWriterAppend)->ArgsProduct({{1, 3}, {3, 2}})->Unit(benchmark::kMillisecond);

void BM_TraceReaderIterate(benchmark::State& state) {
  const std::string path = TempPath();
  {
    auto w = TraceWriter::Create(path, {{"tool", "bench"}});
    for (uint64_t i = 0; i < 1'000'000; i++) (void)(*w)->Append(PreadRecord(i));
    (void)(*w)->Finish({});
  }
  uint64_t n = 0;
  for (auto _ : state) {
    auto r = TraceReader::Open(path);
    uint64_t sum = 0;
    for (auto rec = (*r)->Next(); rec.ok() && *rec; rec = (*r)->Next()) {
      sum += RecordTimestamp(*rec);
      n++;
    }
    benchmark::DoNotOptimize(sum);
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate);
  std::remove(path.c_str());
}
BENCHMARK(BM_TraceReaderIterate)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace iotwin
