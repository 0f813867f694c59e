// Benchmarks of the analysis behind `iotwin report` / `compare`: the histogram and aggregation
// kernels, the Analyzer over in-memory records (analysis cost alone), and the default text
// report end to end over a trace file (zstd decompression and record framing included).
// Target (docs/report.md): >= 10 million events/s per core for the default text report.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <random>

#include <benchmark/benchmark.h>

#include "../tests/unit/trace_builder.h"
#include "analysis/analyzer.h"
#include "analysis/flat_map.h"
#include "analysis/histogram.h"
#include "analysis/report_text.h"
#include "analysis/trace_analysis.h"
#include "format/record_packing.h"
#include "format/trace_reader.h"

namespace iotwin::analysis {
namespace {

constexpr uint32_t kDev = (8u << 20) | 1;

// A training-like mix: 8 loader threads reading 64 shard files (mostly 128 KiB pread64, some
// read() with tracked positions), a checkpoint writer, opens/closes/lseeks, mapped-file faults,
// page-cache insertions and block requests.
test::TraceBuilder MakeWorkload(size_t records) {
  test::TraceBuilder t(test::FullCaptureMeta());
  std::mt19937_64 rng(42);
  uint64_t ts = 1'000'000'000ULL;
  for (uint32_t tid = 100; tid < 110; tid++) t.ProcAt(IOT_PROC_THREAD, ts, 100, 100, "worker", 100, tid);
  std::vector<uint64_t> pos(64, 0);
  for (int f = 0; f < 64; f++)
    t.Open(100 + f % 8, ts += 1000, "/data/shard-" + std::to_string(f), 10 + f, kDev, 1000 + f, O_RDONLY, 100);
  t.Open(108, ts += 1000, "/ckpt/model.pt", 200, kDev, 5000, O_WRONLY | O_CREAT, 100);
  while (t.records().size() < records) {
    ts += 2000 + rng() % 2000;
    uint32_t r = rng() % 100;
    uint32_t tid = 100 + rng() % 8;
    int f = static_cast<int>(rng() % 64);
    if (r < 60) {
      uint64_t len = rng() % 10 ? 131072 : 4096;
      t.Io(IOT_OP_PREAD64, tid, ts, 30'000, 10 + f, kDev, 1000 + f, pos[f], len, static_cast<int64_t>(len), 100);
      pos[f] += len;
    } else if (r < 72) {
      t.Io(IOT_OP_READ, tid, ts, 25'000, 10 + f, kDev, 1000 + f, 0, 65536, 65536, 100);
    } else if (r < 78) {
      t.Io(IOT_OP_WRITE, 108, ts, 90'000, 200, kDev, 5000, 0, 1 << 20, 1 << 20, 100);
    } else if (r < 80) {
      t.LseekAt(tid, ts, 10 + f, kDev, 1000 + f, static_cast<int64_t>(rng() % (1 << 30)), SEEK_SET, 100);
    } else if (r < 88) {
      t.FaultAt(ts, tid, kDev, 1000 + f, rng() % 100000, rng() % 4 == 0, 1, 100);
    } else if (r < 92) {
      t.PageCacheAt(IOT_PC_ADD, ts, kDev, 1000 + f, rng() % 100000, 32);
    } else {
      uint64_t sector = rng() % (1ull << 30);
      uint64_t rq = 0xffff888000000000ULL + (rng() % 256) * 512;
      t.BlockAt(IOT_BLK_ISSUE, ts, 253u << 20, sector, 131072, IOT_BLKF_READ, rq);
      t.BlockAt(IOT_BLK_COMPLETE, ts + 80'000, 253u << 20, sector, 131072, IOT_BLKF_READ, rq);
    }
  }
  return t;
}

// Records laid out back to back and zero-extended, as TraceReader::Next() hands them out.
struct RecordBuffer {
  std::vector<uint8_t> bytes;
  std::vector<size_t> offsets;
};

RecordBuffer Flatten(const test::TraceBuilder& t) {
  RecordBuffer b;
  t.ForEach([&](const iot_rec_hdr* r) {
    size_t size = std::max<size_t>(r->size, RecordFixedSize(r->type));
    size = (size + 7) & ~size_t{7};
    b.offsets.push_back(b.bytes.size());
    const uint8_t* p = reinterpret_cast<const uint8_t*>(r);
    b.bytes.insert(b.bytes.end(), p, p + std::max<size_t>(r->size, RecordFixedSize(r->type)));
    b.bytes.resize(b.offsets.back() + size, 0);
  });
  return b;
}

const RecordBuffer& Workload() {
  static const RecordBuffer b = Flatten(MakeWorkload(2'000'000));
  return b;
}

void BM_AnalyzerConsume(benchmark::State& state) {
  const RecordBuffer& b = Workload();
  for (auto _ : state) {
    Analyzer a;
    a.SetMeta(test::FullCaptureMeta());
    for (size_t off : b.offsets) a.Consume(reinterpret_cast<const iot_rec_hdr*>(b.bytes.data() + off));
    benchmark::DoNotOptimize(a.records_seen());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * b.offsets.size()));
}
BENCHMARK(BM_AnalyzerConsume)->Unit(benchmark::kMillisecond);

void BM_AnalyzerConsumeWithModel(benchmark::State& state) {
  const RecordBuffer& b = Workload();
  for (auto _ : state) {
    Analyzer a;
    a.SetMeta(test::FullCaptureMeta());
    for (size_t off : b.offsets) a.Consume(reinterpret_cast<const iot_rec_hdr*>(b.bytes.data() + off));
    std::string text = RenderText(a.Model(std::nullopt));
    benchmark::DoNotOptimize(text.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * b.offsets.size()));
}
BENCHMARK(BM_AnalyzerConsumeWithModel)->Unit(benchmark::kMillisecond);

// The workload's records in 1 MiB chunks, as the writer frames them (raw), and packed in each
// layout (codec 2, codec 3).
struct PackedChunk {
  std::vector<uint8_t> raw;
  size_t records = 0;
  std::vector<uint8_t> packed_previous;
  std::vector<uint8_t> packed_shaped;
};

const std::vector<PackedChunk>& WorkloadChunks() {
  static const std::vector<PackedChunk> chunks = [] {
    const RecordBuffer& b = Workload();
    std::vector<PackedChunk> out;
    PackedChunk c;
    auto flush = [&] {
      c.packed_previous.resize(PackRecords(c.raw.data(), c.raw.size(), c.records,
                                           &c.packed_previous, PackedLayout::kPrevious,
                                           PackingKernel::kPortable));
      c.packed_shaped.resize(PackRecords(c.raw.data(), c.raw.size(), c.records, &c.packed_shaped,
                                         PackedLayout::kShaped, PackingKernel::kPortable));
      out.push_back(std::move(c));
      c = PackedChunk();
    };
    for (size_t i = 0; i < b.offsets.size(); i++) {
      // Each record whole, its size its padded slot (as the writer frames records).
      const size_t end = i + 1 < b.offsets.size() ? b.offsets[i + 1] : b.bytes.size();
      const size_t size = end - b.offsets[i];
      if (c.raw.size() + size > (1u << 20)) flush();
      const size_t at = c.raw.size();
      c.raw.insert(c.raw.end(), b.bytes.begin() + static_cast<ptrdiff_t>(b.offsets[i]),
                   b.bytes.begin() + static_cast<ptrdiff_t>(end));
      iot_rec_hdr h;
      std::memcpy(&h, c.raw.data() + at, sizeof h);
      h.size = static_cast<uint16_t>(size);
      std::memcpy(c.raw.data() + at, &h, sizeof h);
      c.records++;
    }
    if (c.records) flush();
    return out;
  }();
  return chunks;
}

// The packing kernel of a benchmark's arg 0 (0: portable, 1: AVX-512); none, and the benchmark
// skipped with an error, when this CPU lacks it. Arg 1 is the layout's codec (2 or 3).
std::optional<PackingKernel> KernelArg(benchmark::State& state) {
  const PackingKernel kernel = state.range(0) ? PackingKernel::kAvx512 : PackingKernel::kPortable;
  if (PackingKernelSupported(kernel)) return kernel;
  state.SkipWithError("this CPU lacks the kernel");
  return std::nullopt;
}

PackedLayout LayoutArg(benchmark::State& state) {
  return state.range(1) == 2 ? PackedLayout::kPrevious : PackedLayout::kShaped;
}

// Packing alone, per kernel (arg 0: portable, 1: AVX-512) and layout (arg 1: codec 2 or 3):
// what the recorder's writer does to each chunk before zstd.
void BM_PackRecords(benchmark::State& state) {
  const std::optional<PackingKernel> kernel = KernelArg(state);
  if (!kernel) return;
  const std::vector<PackedChunk>& chunks = WorkloadChunks();
  std::vector<uint8_t> out;
  uint64_t records = 0;
  for (auto _ : state) {
    uint64_t n = 0;
    for (const PackedChunk& c : chunks) {
      benchmark::DoNotOptimize(
          PackRecords(c.raw.data(), c.raw.size(), c.records, &out, LayoutArg(state), *kernel));
      n += c.records;
    }
    records = n;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * records));
}
BENCHMARK(BM_PackRecords)->ArgsProduct({{0, 1}, {2, 3}})->Unit(benchmark::kMillisecond);

// Unpacking alone, per kernel (arg 0: portable, 1: AVX-512) and layout (arg 1: codec 2 or 3).
void BM_UnpackRecords(benchmark::State& state) {
  const std::optional<PackingKernel> kernel = KernelArg(state);
  if (!kernel) return;
  const std::vector<PackedChunk>& chunks = WorkloadChunks();
  std::vector<uint8_t> out(2u << 20);
  uint64_t records = 0;
  for (auto _ : state) {
    uint64_t n = 0;
    for (const PackedChunk& c : chunks) {
      const PackedLayout layout = LayoutArg(state);
      const std::vector<uint8_t>& packed =
          layout == PackedLayout::kPrevious ? c.packed_previous : c.packed_shaped;
      auto got = UnpackRecords(packed.data(), packed.size(), layout, out.data(), c.raw.size(),
                               "bench", *kernel);
      if (!got.ok()) {
        state.SkipWithError(got.status().message().c_str());
        return;
      }
      n += *got;
    }
    benchmark::DoNotOptimize(out.data());
    records = n;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * records));
}
BENCHMARK(BM_UnpackRecords)->ArgsProduct({{0, 1}, {2, 3}})->Unit(benchmark::kMillisecond);

// The 2-million-record training-like trace file shared by the file benchmarks (written once).
const std::string& WorkloadFile() {
  static const std::string path = [] {
    char tmpl[] = "/tmp/iotwin-bench-XXXXXX";
    std::string dir = mkdtemp(tmpl);
    std::string p = dir + "/bench.iotwin";
    Status st = MakeWorkload(2'000'000).WriteFile(p, {{"stop_reason", "exited"}});
    if (!st.ok()) abort();
    return p;
  }();
  return path;
}

// The reader alone over that file (read + XXH3 verify + zstd decompression + record framing):
// the part of BM_TextReportFromFile that is not analysis.
void BM_ReadTraceFile(benchmark::State& state) {
  const std::string& path = WorkloadFile();
  uint64_t records = 0;
  for (auto _ : state) {
    auto r = TraceReader::Open(path);
    if (!r.ok()) {
      state.SkipWithError(r.status().message().c_str());
      return;
    }
    uint64_t n = 0, types = 0;
    for (;;) {
      auto rec = (*r)->Next();
      if (!rec.ok()) {
        state.SkipWithError(rec.status().message().c_str());
        return;
      }
      if (!*rec) break;
      types += (*rec)->type;  // touch each record, as a consumer would
      n++;
    }
    benchmark::DoNotOptimize(types);
    records = n;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * records));
}
BENCHMARK(BM_ReadTraceFile)->Unit(benchmark::kMillisecond);

// The default text report over a trace file: read + decompress + analyse + render.
void BM_TextReportFromFile(benchmark::State& state) {
  const std::string& path = WorkloadFile();
  uint64_t records = 0;
  for (auto _ : state) {
    TraceAnalysisOptions o;
    auto r = AnalyzeTraceFile(path, o);
    if (!r.ok()) {
      state.SkipWithError(r.status().message().c_str());
      return;
    }
    records = r->model["totals"]["records"].get<uint64_t>();
    std::string text = RenderText(r->model);
    benchmark::DoNotOptimize(text.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * records));
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) state.counters["file_MiB"] = static_cast<double>(st.st_size) / (1 << 20);
}
BENCHMARK(BM_TextReportFromFile)->Unit(benchmark::kMillisecond);

// ---- kernels ---------------------------------------------------------------------------

std::vector<uint64_t> Latencies() {
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> d(10.0, 1.2);
  std::vector<uint64_t> v(1 << 16);
  for (auto& x : v) x = static_cast<uint64_t>(d(rng));
  return v;
}

void BM_LogLinearAdd(benchmark::State& state) {
  auto v = Latencies();
  LogLinearHistogram h;
  size_t i = 0;
  for (auto _ : state) h.Add(v[i++ & 0xffff]);
  benchmark::DoNotOptimize(h.total());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_LogLinearAdd);

void BM_SizeHistogramAdd(benchmark::State& state) {
  auto v = Latencies();
  SizeHistogram h;
  size_t i = 0;
  for (auto _ : state) h.Add(v[i++ & 0xffff]);
  benchmark::DoNotOptimize(h.total());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_SizeHistogramAdd);

void BM_TopValuesAdd(benchmark::State& state) {
  // 90% one size (the fast path), the rest spread over 16 sizes.
  std::mt19937_64 rng(2);
  std::vector<uint64_t> v(1 << 16);
  for (auto& x : v) x = rng() % 10 ? 131072 : 4096 * (1 + rng() % 16);
  TopValues t;
  size_t i = 0;
  for (auto _ : state) t.Add(v[i++ & 0xffff]);
  benchmark::DoNotOptimize(t.total());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_TopValuesAdd);

void BM_FlatMapFind(benchmark::State& state) {
  FlatMap<uint64_t> m;
  const uint64_t n = static_cast<uint64_t>(state.range(0));
  for (uint64_t k = 0; k < n; k++) m.FindOrInsert(k * 0x9e3779b9) = k;
  std::mt19937_64 rng(3);
  std::vector<uint64_t> keys(1 << 16);
  for (auto& k : keys) k = (rng() % n) * 0x9e3779b9;
  size_t i = 0;
  uint64_t sum = 0;
  for (auto _ : state) sum += *m.Find(keys[i++ & 0xffff]);
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_FlatMapFind)->Arg(64)->Arg(1 << 20);

void BM_TimeSeriesAdd(benchmark::State& state) {
  TimeSeries s(4);
  s.SetStart(0);
  uint64_t ts = 0;
  for (auto _ : state) s.Add(0, ts += 3000, 1);
  benchmark::DoNotOptimize(s.used_buckets());
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_TimeSeriesAdd);

}  // namespace
}  // namespace iotwin::analysis
