// synth_trace: writes a large synthetic trace fast, for the analysis throughput benchmark
// (bench/run.sh, docs/benchmarks.md "Analysis"). Not a capture: the records are generated.
//
//   synth_trace OUT.iotwin EVENTS [--seed N] [--plain | --codec2]
//
// --plain writes format-1.0 chunks (zstd of the plain records, codec 1) and --codec2 format-1.1
// chunks (codec 2) instead of codec-3 ones, so they can be timed side by side.
//
// The mix is the training-like one of bench/analysis_bench.cc (MakeWorkload): 8 loader threads
// reading 64 shard files (mostly 128 KiB pread64, some read()), a checkpoint writer, lseeks,
// mapped-file page faults, page-cache insertions and block issue/complete pairs. Records are
// streamed into TraceWriter (zstd level 1, as `iotwin record` writes), never held in memory, so
// 50 million events take seconds and a few MiB of memory. Prints one JSON line: events written,
// bytes, seconds.
#include <fcntl.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/records.h"
#include "format/trace_writer.h"
#include "iotwin_abi.h"

namespace iotwin {
namespace {

constexpr uint32_t kDev = (8u << 20) | 1;
constexpr uint32_t kTgid = 100;

double NowSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

nlohmann::json Meta() {
  return {{"tool", "synth_trace"},
          {"host",
           {{"hostname", "synthetic"},
            {"kernel", "synthetic"},
            {"arch", "x86_64"},
            {"cpus", 2},
            {"page_size", 4096},
            {"clock", "monotonic"},
            {"anchor", {{"monotonic_ns", 1'000'000'000ULL}, {"realtime_ns", 0}, {"boottime_ns", 0}}}}},
          {"command", {"synth_trace"}},
          {"layers",
           {{"syscall", {{"enabled", true}, {"reason", ""}}},
            {"memory", {{"enabled", true}, {"reason", ""}}},
            {"block", {{"enabled", true}, {"reason", ""}}},
            {"nvme", {{"enabled", false}, {"reason", "synthetic"}}},
            {"sched", {{"enabled", false}, {"reason", "synthetic"}}}}}};
}

// Streams records into a TraceWriter and counts them; the first error is kept.
class Sink {
 public:
  explicit Sink(TraceWriter* w) : w_(w) {}

  template <typename T>
  void Add(const T& rec) {
    if (!status_.ok()) return;
    status_ = w_->Append(rec);
    events_++;
    by_type_[rec.hdr.type]++;
  }
  uint32_t String(const std::string& s) {
    auto id = w_->InternString(s);
    if (!id.ok()) {
      status_ = id.status();
      return 0;
    }
    return *id;
  }
  static iot_syscall Sys(uint16_t op, uint32_t tid, uint64_t ts) {
    iot_syscall s{};
    InitRecord(&s, IOT_REC_SYSCALL);
    s.op = op;
    s.tid = tid;
    s.tgid = kTgid;
    s.ts = ts;
    s.dur = 1000;
    s.fd = -1;
    s.fd2 = -1;
    return s;
  }
  const Status& status() const { return status_; }
  uint64_t events() const { return events_; }
  // Footer "events": {record type name: count}, as `iotwin record` writes it.
  nlohmann::json EventCounts() const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [type, n] : by_type_) j[std::string(RecordTypeName(type))] = n;
    return j;
  }

 private:
  TraceWriter* w_;
  Status status_;
  uint64_t events_ = 0;
  std::map<uint16_t, uint64_t> by_type_;
};

int Main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: synth_trace OUT.iotwin EVENTS [--seed N] [--plain]\n");
    return 2;
  }
  const std::string out = argv[1];
  const uint64_t target = std::strtoull(argv[2], nullptr, 10);
  uint64_t seed = 42;
  TraceWriterOptions options;
  options.zstd_level = 1;  // what `iotwin record` uses
  for (int i = 3; i < argc; i++) {
    if (std::strcmp(argv[i], "--seed") == 0) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "synth_trace: --seed needs a value\n");
        return 2;
      }
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--plain") == 0) {
      options.pack_records = false;  // format-1.0 chunks (codec 1), for side-by-side runs
    } else if (std::strcmp(argv[i], "--codec2") == 0) {
      options.packed_layout = PackedLayout::kPrevious;  // format-1.1 chunks
    } else {
      std::fprintf(stderr, "synth_trace: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  auto writer = TraceWriter::Create(out, Meta(), options);
  if (!writer.ok()) {
    std::fprintf(stderr, "synth_trace: %s\n", writer.status().ToString().c_str());
    return 1;
  }
  const double start = NowSeconds();
  Sink t(writer->get());
  std::mt19937_64 rng(seed);
  uint64_t ts = 1'000'000'000ULL;
  for (uint32_t tid = kTgid; tid < kTgid + 10; tid++) {
    iot_proc p{};
    InitRecord(&p, IOT_REC_PROC);
    p.kind = IOT_PROC_THREAD;
    p.ts = ts;
    p.tgid = kTgid;
    p.tid = kTgid;
    p.child_tgid = kTgid;
    p.child_tid = tid;
    std::strncpy(p.comm, "worker", sizeof p.comm - 1);
    t.Add(p);
  }
  auto open = [&](uint32_t tid, const std::string& path, int fd, uint64_t ino, uint32_t flags) {
    iot_syscall s = Sink::Sys(IOT_OP_OPENAT, tid, ts += 1000);
    s.fd = -100;
    s.ret = fd;
    s.flags = flags;
    s.dev = kDev;
    s.ino = ino;
    s.path_id = t.String(path);
    t.Add(s);
  };
  for (int f = 0; f < 64; f++) open(kTgid + f % 8, "/data/shard-" + std::to_string(f), 10 + f, 1000 + f, O_RDONLY);
  open(kTgid + 8, "/ckpt/model.pt", 200, 5000, O_WRONLY | O_CREAT);
  std::vector<uint64_t> pos(64, 0);
  auto io = [&](uint16_t op, uint32_t tid, uint64_t dur, int fd, uint64_t ino, uint64_t offset,
                uint64_t length) {
    iot_syscall s = Sink::Sys(op, tid, ts);
    s.dur = dur;
    s.fd = fd;
    s.dev = kDev;
    s.ino = ino;
    s.offset = offset;
    s.length = length;
    s.ret = static_cast<int64_t>(length);
    t.Add(s);
  };
  while (t.events() < target && t.status().ok()) {
    ts += 2000 + rng() % 2000;
    const uint32_t r = rng() % 100;
    const uint32_t tid = kTgid + rng() % 8;
    const int f = static_cast<int>(rng() % 64);
    if (r < 60) {
      const uint64_t len = rng() % 10 ? 131072 : 4096;
      io(IOT_OP_PREAD64, tid, 30'000, 10 + f, 1000 + f, pos[f], len);
      pos[f] += len;
    } else if (r < 72) {
      io(IOT_OP_READ, tid, 25'000, 10 + f, 1000 + f, 0, 65536);
    } else if (r < 78) {
      io(IOT_OP_WRITE, kTgid + 8, 90'000, 200, 5000, 0, 1 << 20);
    } else if (r < 80) {
      iot_syscall s = Sink::Sys(IOT_OP_LSEEK, tid, ts);
      s.fd = 10 + f;
      s.dev = kDev;
      s.ino = 1000 + f;
      s.offset = rng() % (1 << 30);
      s.aux = SEEK_SET;
      s.ret = static_cast<int64_t>(s.offset);
      t.Add(s);
    } else if (r < 88) {
      iot_page_fault pf{};
      InitRecord(&pf, IOT_REC_PAGE_FAULT);
      pf.ts = ts;
      pf.tgid = kTgid;
      pf.tid = tid;
      pf.dev = kDev;
      pf.ino = 1000 + f;
      pf.pgoff = rng() % 100000;
      pf.flags = rng() % 4 == 0 ? IOT_PFF_MAJOR : 0;
      pf.nr_pages = 1;
      t.Add(pf);
    } else if (r < 92) {
      iot_page_cache c{};
      InitRecord(&c, IOT_REC_PAGE_CACHE);
      c.kind = IOT_PC_ADD;
      c.ts = ts;
      c.dev = kDev;
      c.ino = 1000 + f;
      c.index = rng() % 100000;
      c.nr_pages = 32;
      t.Add(c);
    } else {
      iot_block b{};
      InitRecord(&b, IOT_REC_BLOCK);
      b.phase = IOT_BLK_ISSUE;
      b.ts = ts;
      b.dev = 253u << 20;
      b.sector = rng() % (1ull << 30);
      b.bytes = 131072;
      b.nr_sector = b.bytes / 512;
      b.flags = IOT_BLKF_READ;
      b.rq_id = 0xffff888000000000ULL + (rng() % 256) * 512;
      t.Add(b);
      b.phase = IOT_BLK_COMPLETE;
      b.ts = ts + 80'000;
      t.Add(b);
    }
  }
  if (t.status().ok()) {
    nlohmann::json summary = {{"stop_reason", "synthetic"},
                              {"exit_status", 0},
                              {"events", t.EventCounts()},
                              {"lost", nlohmann::json::object()},
                              {"duration_ns", ts - 1'000'000'000ULL}};
    Status st = (*writer)->Finish(summary);
    if (!st.ok()) {
      std::fprintf(stderr, "synth_trace: %s\n", st.ToString().c_str());
      return 1;
    }
  } else {
    std::fprintf(stderr, "synth_trace: %s\n", t.status().ToString().c_str());
    return 1;
  }
  nlohmann::json line = {{"events", t.events()},
                         {"bytes", (*writer)->bytes_written()},
                         {"seconds", NowSeconds() - start}};
  std::printf("%s\n", line.dump().c_str());
  return 0;
}

}  // namespace
}  // namespace iotwin

int main(int argc, char** argv) { return iotwin::Main(argc, argv); }
