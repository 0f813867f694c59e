// The streaming Analyzer on synthetic traces: sizes, offsets tracked through descriptors,
// access patterns, filters, block/memory/async/intent layers.
#include <fcntl.h>

#include <random>
#include <unordered_map>

#include <gtest/gtest.h>

#include "analysis/analyzer.h"
#include "analysis/flat_map.h"
#include "trace_builder.h"

namespace iotwin::analysis {
namespace {

using nlohmann::json;
using test::FullCaptureMeta;
using test::TraceBuilder;

constexpr uint32_t kDev = (8u << 20) | 1;
constexpr uint64_t kStart = 1'000'000'000ULL;  // FullCaptureMeta's anchor

json Analyze(const TraceBuilder& t, AnalyzerOptions o = {}) {
  Analyzer a(std::move(o));
  a.SetMeta(t.records().empty() ? json::object() : test::FullCaptureMeta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  return a.Model(std::nullopt);
}

const json* FindRow(const json& rows, const char* key, const json& value) {
  for (const auto& r : rows)
    if (r.contains(key) && r[key] == value) return &r;
  return nullptr;
}

TEST(FlatMap, MatchesUnorderedMapUnderRandomInsertErase) {
  FlatMap<uint64_t> m;
  std::unordered_map<uint64_t, uint64_t> ref;
  std::mt19937_64 rng(1);
  for (int i = 0; i < 200000; i++) {
    uint64_t k = rng() % 5000;
    if (rng() % 3 == 0) {
      EXPECT_EQ(m.Erase(k), ref.erase(k) == 1);
    } else {
      m.FindOrInsert(k) = i;
      ref[k] = static_cast<uint64_t>(i);
    }
  }
  EXPECT_EQ(m.size(), ref.size());
  for (const auto& [k, v] : ref) {
    const uint64_t* got = m.Find(k);
    ASSERT_NE(got, nullptr) << k;
    EXPECT_EQ(*got, v);
  }
  size_t visited = 0;
  m.ForEach([&](uint64_t k, uint64_t) {
    ++visited;
    EXPECT_TRUE(ref.count(k));
  });
  EXPECT_EQ(visited, ref.size());
}

TEST(Analyzer, DominantRequestSizeAndShares) {
  TraceBuilder t(FullCaptureMeta());
  t.Open(100, kStart + 1000, "/data/model.bin", 3, kDev, 42);
  uint64_t ts = kStart + 10'000;
  for (int i = 0; i < 94; i++, ts += 10'000)
    t.Io(IOT_OP_PREAD64, 100, ts, 5000, 3, kDev, 42, uint64_t(i) * 131072, 131072, 131072);
  const uint64_t probes[] = {50'000'000, 70'000'000, 55'000'000, 90'000'000, 60'000'000, 99'000'000};
  for (uint64_t off : probes) t.Io(IOT_OP_PREAD64, 100, ts += 10'000, 2000, 3, kDev, 42, off, 4096, 4096);
  json m = Analyze(t);

  const json* sz = FindRow(m["sizes"], "op", "pread64");
  ASSERT_NE(sz, nullptr) << m["sizes"].dump();
  EXPECT_EQ((*sz)["ops"], 100);
  EXPECT_EQ((*sz)["dominant"]["size"], 131072);
  EXPECT_EQ((*sz)["dominant"]["count"], 94);
  EXPECT_DOUBLE_EQ((*sz)["dominant"]["ops_share"].get<double>(), 0.94);
  double bytes_share = 94.0 * 131072 / (94.0 * 131072 + 6.0 * 4096);
  EXPECT_NEAR((*sz)["dominant"]["bytes_share"].get<double>(), bytes_share, 1e-4);
  EXPECT_TRUE((*sz)["exact"].get<bool>());
  EXPECT_EQ(m["totals"]["read"]["ops"], 100);
  EXPECT_EQ(m["totals"]["read"]["bytes"], 94u * 131072 + 6u * 4096);
  EXPECT_EQ(m["totals"]["mix"]["read_ops_share"], 1.0);

  // Access pattern: the 128 KiB run is sequential, the 4 KiB probes jump around.
  const json& p = m["pattern"]["read"];
  EXPECT_EQ(p["first"], 1);
  EXPECT_EQ(p["sequential"], 93);
  EXPECT_EQ(p["random"], 6);
  EXPECT_EQ(p["strided"], 0);
  // The file is named by the path it was opened with.
  ASSERT_EQ(m["files"]["rows"].size(), 1u);
  EXPECT_EQ(m["files"]["rows"][0]["names"][0], "/data/model.bin");
  EXPECT_EQ(m["files"]["rows"][0]["read"]["ops"], 100);
  EXPECT_EQ(m["files"]["rows"][0]["opens"], 1);
  // Latency of the op.
  const json* op = FindRow(m["ops"], "op", "pread64");
  ASSERT_NE(op, nullptr);
  EXPECT_EQ((*op)["latency_ns"]["max"], 5000);
  EXPECT_EQ((*op)["latency_ns"]["min"], 2000);
}

TEST(Analyzer, TracksFilePositionsThroughReadLseekDupAndAppend) {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = kStart + 1000;
  t.Open(7, ts, "/tmp/f", 3, kDev, 5);
  // Three reads without an offset field: the analyzer must place them at 0, 4096, 8192.
  for (int i = 0; i < 3; i++) t.Io(IOT_OP_READ, 7, ts += 1000, 100, 3, kDev, 5, 0, 4096, 4096);
  t.LseekAt(7, ts += 1000, 3, kDev, 5, 100000);
  t.Io(IOT_OP_READ, 7, ts += 1000, 100, 3, kDev, 5, 0, 4096, 4096);  // at 100000: a jump
  iot_syscall dup = TraceBuilder::Sys(IOT_OP_DUP, 7, ts += 1000);
  dup.fd = 3;
  dup.ret = 9;
  t.Add(dup);
  t.Io(IOT_OP_READ, 7, ts += 1000, 100, 9, kDev, 5, 0, 4096, 4096);  // shared position: 104096
  // A short read advances by what was read, not by what was asked.
  t.Io(IOT_OP_READ, 7, ts += 1000, 100, 3, kDev, 5, 0, 4096, 10);   // at 108192, 10 bytes
  t.Io(IOT_OP_READ, 7, ts += 1000, 100, 3, kDev, 5, 0, 4096, 0);    // at 108202 (EOF)
  // O_APPEND writes land at the end of the file (size after the write - bytes written).
  t.Open(7, ts += 1000, "/tmp/log", 4, kDev, 6, O_WRONLY | O_APPEND);
  iot_syscall w = TraceBuilder::Sys(IOT_OP_WRITE, 7, ts += 1000);
  w.fd = 4;
  w.dev = kDev;
  w.ino = 6;
  w.length = 100;
  w.ret = 100;
  w.fsize = 1100;
  t.Add(w);

  AnalyzerOptions opts;
  opts.collect_distributions = true;
  Analyzer a(opts);
  a.SetMeta(test::FullCaptureMeta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  json m = a.Model(std::nullopt);
  EXPECT_EQ(m["offsets"]["tracked"], 8);
  EXPECT_EQ(m["offsets"]["recorded"], 0);
  EXPECT_EQ(m["offsets"]["tracked_vs_recorded_mismatch"], 0);
  const json& p = m["pattern"]["read"];
  EXPECT_EQ(p["first"], 1);
  EXPECT_EQ(p["sequential"], 5);  // reads 2, 3, the dup'ed read, and both after the short read
  EXPECT_EQ(p["random"], 1);      // after the lseek
  EXPECT_EQ(a.offsets(0).max(), 108202u);
  EXPECT_EQ(a.offsets(1).max(), 1000u);
  EXPECT_EQ(a.offsets(1).min(), 1000u);
  // The seek distance of the jump: 100000 - 12288 lies in [2^16, 2^17).
  bool found = false;
  for (const auto& row : p["seek_histogram"])
    if (row["from"] == 65536) found = row["count"] == 1;
  EXPECT_TRUE(found) << p["seek_histogram"].dump();
}

// One description read by two threads in turn: each thread's stream is its own, and a
// process's row sums its threads.
TEST(Analyzer, ThreadsSharingADescriptionKeepTheirOwnStreams) {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = kStart + 1000;
  constexpr uint32_t kTgid = 50;
  t.Open(kTgid, ts, "/data/shard", 3, kDev, 9, O_RDONLY, kTgid);
  t.Open(kTgid, ts += 1000, "/data/other", 4, kDev, 10, O_RDONLY, kTgid);
  // Thread 51 reads [0, 1 MiB) and thread 52 reads [8 MiB, 9 MiB), 64 KiB at a time,
  // alternating; each also writes to the other file every fourth request.
  for (uint64_t i = 0; i < 16; i++) {
    t.Io(IOT_OP_PREAD64, 51, ts += 1000, 100, 3, kDev, 9, i * 65536, 65536, 65536, kTgid);
    t.Io(IOT_OP_PREAD64, 52, ts += 1000, 100, 3, kDev, 9, (128 + i) * 65536, 65536, 65536,
         kTgid);
    if (i % 4 == 0)
      t.Io(IOT_OP_PWRITE64, 51, ts += 1000, 100, 4, kDev, 10, i * 4096, 4096, 4096, kTgid);
  }
  json m = Analyze(t);
  const json& read = m["pattern"]["read"];
  EXPECT_EQ(read["first"], 2);
  EXPECT_EQ(read["sequential"], 30);
  EXPECT_EQ(read["random"], 0);
  EXPECT_EQ(read["strided"], 0);
  const json& write = m["pattern"]["write"];
  EXPECT_EQ(write["first"], 1);
  EXPECT_EQ(write["strided"], 2);  // a 12 KiB gap twice: random once, then strided
  EXPECT_EQ(write["random"], 1);

  const json* proc = FindRow(m["processes"]["rows"], "tgid", kTgid);
  ASSERT_NE(proc, nullptr) << m["processes"].dump();
  uint64_t ops = 0, read_bytes = 0, write_ops = 0;
  for (const auto& row : m["threads"]["rows"]) {
    if (row["tgid"] != kTgid) continue;
    ops += row["ops"].get<uint64_t>();
    read_bytes += row["read_bytes"].get<uint64_t>();
    write_ops += row["write_ops"].get<uint64_t>();
  }
  EXPECT_EQ((*proc)["ops"], ops);
  EXPECT_EQ((*proc)["ops"], 2 + 32 + 4);
  EXPECT_EQ((*proc)["read_bytes"], read_bytes);
  EXPECT_EQ((*proc)["read_bytes"], 32 * 65536);
  EXPECT_EQ((*proc)["write_ops"], write_ops);
  EXPECT_EQ(m["totals"]["read"]["syscall_ops"], 32);
  EXPECT_EQ(m["totals"]["write"]["syscall_bytes"], 4 * 4096);
}

// Streams are found by direct index for low thread and file indices (in the order the trace
// first names them) and through a hash map from file index 1024 or thread index 256 on: each
// (thread, file) pair keeps its own stream on both paths, and a thread's asynchronous
// submissions keep theirs apart from its system calls on both.
TEST(Analyzer, StreamsStayApartOnEveryLookupPath) {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = kStart + 1000;
  // Thread `tid`, alone in its process: a read, an asynchronous read 1 MiB further, then the
  // read following the first (sequential only if the asynchronous one has a stream apart).
  auto read_around_async = [&](uint32_t tid, uint64_t ino) {
    t.Open(tid, ts += 10, "/swap/tensor" + std::to_string(tid), 3, kDev, ino);
    t.Io(IOT_OP_PREAD64, tid, ts += 10, 100, 3, kDev, ino, 0, 4096, 4096);
    t.AsyncAt(IOT_AIO_ENGINE_URING, IOT_AIO_SUBMIT, 22 /* IORING_OP_READ */, ts += 10, tid, 3, 7,
            1 << 20, 4096, 0);
    t.Io(IOT_OP_PREAD64, tid, ts += 10, 100, 3, kDev, ino, 4096, 4096, 4096);
  };
  read_around_async(1, 5000);  // thread index 0, file index 0: direct
  constexpr uint32_t kTgid = 50;
  constexpr int kFiles = 1100, kThreads = 300;
  for (int i = 0; i < kFiles; i++)  // file indices 1 to 1100
    t.Open(kTgid, ts += 10, "/data/f" + std::to_string(i), 3 + i, kDev, 100 + i, O_RDONLY,
           kTgid);
  // Thread k (index k + 2: the opener is index 1) reads a file of its own (7k mod 1100) and one
  // of 76 it shares with 2 or 3 other threads (1024 + k mod 76), at k MiB, then 4 KiB further on
  // in each: one first and one sequential request per (thread, file), whatever the interleaving.
  for (int round = 0; round < 2; round++) {
    for (int k = 0; k < kThreads; k++) {
      const uint32_t tid = kTgid + 1 + static_cast<uint32_t>(k);
      const uint64_t offset = (uint64_t(k) << 20) + uint64_t(round) * 4096;
      for (int file : {(7 * k) % kFiles, 1024 + k % 76})
        t.Io(IOT_OP_PREAD64, tid, ts += 10, 100, 3 + file, kDev, 100 + static_cast<uint64_t>(file),
             offset, 4096, 4096, kTgid);
    }
  }
  read_around_async(2, 5001);  // thread index 302, file index 1101: hashed
  json m = Analyze(t);
  const json& read = m["pattern"]["read"];
  EXPECT_EQ(read["first"], 2 * kThreads + 4);
  EXPECT_EQ(read["sequential"], 2 * kThreads + 2);
  EXPECT_EQ(read["random"], 0);
  EXPECT_EQ(read["strided"], 0);
  EXPECT_EQ(m["pattern"]["streams_dropped"], 0);
}

TEST(Analyzer, PositionsSurviveForkAndMismatchesAreCounted) {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = kStart + 1000;
  t.Open(10, ts, "/tmp/shared", 3, kDev, 8);
  t.Io(IOT_OP_READ, 10, ts += 1000, 100, 3, kDev, 8, 0, 512, 512);
  t.ProcAt(IOT_PROC_FORK, ts += 1000, 10, 10, "parent", 11, 11);
  // The child's read continues the shared position; the capture recorded 999 (disagreeing).
  t.Io(IOT_OP_READ, 11, ts += 1000, 100, 3, kDev, 8, 999, 512, 512);
  json m = Analyze(t);
  EXPECT_EQ(m["offsets"]["tracked"], 2);
  EXPECT_EQ(m["offsets"]["tracked_vs_recorded_mismatch"], 1);
  // Different threads: each stream starts with a "first" access.
  EXPECT_EQ(m["pattern"]["read"]["first"], 2);
}

TEST(Analyzer, UnknownDescriptorsUseTheRecordedOffset) {
  TraceBuilder t(FullCaptureMeta());
  // fd 5 was opened before the capture: no open, no snapshot.
  t.Io(IOT_OP_READ, 3, kStart + 1000, 100, 5, kDev, 9, 8192, 4096, 4096);
  t.Io(IOT_OP_READ, 3, kStart + 2000, 100, 5, kDev, 9, 0, 4096, 4096);  // capture left it 0
  AnalyzerOptions opts;
  opts.collect_distributions = true;
  Analyzer a(opts);
  a.SetMeta(test::FullCaptureMeta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  json m = a.Model(std::nullopt);
  EXPECT_EQ(m["offsets"]["recorded"], 1);
  EXPECT_EQ(m["offsets"]["tracked"], 1);
  EXPECT_EQ(a.offsets(0).max(), 12288u);
  EXPECT_EQ(m["pattern"]["read"]["sequential"], 1);
}

TEST(Analyzer, CloseAndCloseRangeForgetPositions) {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = kStart + 1000;
  t.Open(3, ts, "/a", 3, kDev, 20);
  t.Open(3, ts += 10, "/b", 4, kDev, 21);
  t.Open(3, ts += 10, "/c", 9, kDev, 22);
  t.Io(IOT_OP_READ, 3, ts += 10, 10, 3, kDev, 20, 0, 100, 100);
  iot_syscall cr = TraceBuilder::Sys(IOT_OP_CLOSE_RANGE, 3, ts += 10);
  cr.fd = 3;
  cr.fd2 = 5;
  t.Add(cr);
  // fd 3 and 4 are gone: their next reads (say, after a reopen the capture missed) take the
  // recorded offset; fd 9 was outside the range and keeps its tracked position.
  t.Io(IOT_OP_READ, 3, ts += 10, 10, 3, kDev, 20, 5000, 100, 100);
  t.Io(IOT_OP_READ, 3, ts += 10, 10, 9, kDev, 22, 0, 100, 100);
  json m = Analyze(t);
  EXPECT_EQ(m["offsets"]["tracked"], 2);
  EXPECT_EQ(m["offsets"]["recorded"], 1);
}

// A descriptor number handed over between threads: the capture writes records at exit, stamped
// with their start, so the close that freed a number (or an old-file call before it) can arrive
// after the open, in another thread, that reused it. Calls of other threads that began before
// that open returned used the previous file: its close must not drop the new description, nor
// its reads and lseeks move the new file's position.
enum class Handover { kClose, kCloseRange, kCloseBeganFirst, kLseekThenClose };

TraceBuilder HandoverTrace(Handover kind) {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = kStart + 1000;
  // Process 60: thread 60 opens /x as fd 3 and reads 4 KiB; thread 61 opens /y in [T, T + 1 µs)
  // and gets fd 3; then thread 60's old-file calls arrive, stamped inside that span (or, for
  // kCloseBeganFirst, the close stamped before it); then thread 61 reads /y twice and thread 62,
  // handed the number later, reads on.
  constexpr uint32_t a = 60;
  t.Open(a, ts += 1000, "/x", 3, kDev, 30, O_RDONLY, a);
  t.Io(IOT_OP_READ, a, ts += 1000, 100, 3, kDev, 30, 0, 4096, 4096, a);
  const uint64_t open_at = ts += 10'000;
  t.Open(a + 1, open_at, "/y", 3, kDev, 31, O_RDONLY, a);
  switch (kind) {
    case Handover::kClose:
      t.Io(IOT_OP_READ, a, open_at + 200, 100, 3, kDev, 30, 4096, 4096, 4096, a);
      t.CloseAt(a, open_at + 500, 3, kDev, 30, a);
      break;
    case Handover::kCloseRange: {
      t.Io(IOT_OP_READ, a, open_at + 200, 100, 3, kDev, 30, 4096, 4096, 4096, a);
      iot_syscall cr = TraceBuilder::Sys(IOT_OP_CLOSE_RANGE, a, open_at + 500, a);
      cr.fd = 3;
      cr.fd2 = 3;
      t.Add(cr);
      break;
    }
    case Handover::kCloseBeganFirst:  // a slow close: it began first and ended after the open
      t.Io(IOT_OP_READ, a, open_at - 3000, 100, 3, kDev, 30, 4096, 4096, 4096, a);
      t.CloseAt(a, open_at - 500, 3, kDev, 30, a);
      break;
    case Handover::kLseekThenClose:
      t.LseekAt(a, open_at + 200, 3, kDev, 30, 8192, SEEK_SET, a);
      t.CloseAt(a, open_at + 500, 3, kDev, 30, a);
      break;
  }
  t.Io(IOT_OP_READ, a + 1, ts += 5000, 100, 3, kDev, 31, 0, 4096, 4096, a);
  t.Io(IOT_OP_READ, a + 1, ts += 1000, 100, 3, kDev, 31, 4096, 4096, 4096, a);
  t.Io(IOT_OP_READ, a + 2, ts += 1000, 100, 3, kDev, 31, 8192, 4096, 4096, a);
  return t;
}

TEST(Analyzer, AHandedOverNumberKeepsTheNewFilesPosition) {
  for (Handover kind : {Handover::kClose, Handover::kCloseRange, Handover::kCloseBeganFirst,
                        Handover::kLseekThenClose}) {
    SCOPED_TRACE(static_cast<int>(kind));
    const bool lseek = kind == Handover::kLseekThenClose;
    json m = Analyze(HandoverTrace(kind));
    EXPECT_EQ(m["offsets"]["tracked_vs_recorded_mismatch"], 0);
    // /x's first read and /y's three (thread 62's included: it came after the open).
    EXPECT_EQ(m["offsets"]["tracked"], 4);
    // /x's read of the previous instance takes its recorded offset (no such read with lseek).
    EXPECT_EQ(m["offsets"]["recorded"], lseek ? 0 : 1);
    EXPECT_EQ(m["offsets"]["previous_instance"], 2);  // that read or lseek, and the close
    const json& read = m["pattern"]["read"];
    // Streams: (60, /x), (61, /y), (62, /y).
    EXPECT_EQ(read["first"], 3);
    EXPECT_EQ(read["sequential"], lseek ? 1 : 2);
    EXPECT_EQ(read["random"], 0);
  }
}

// On clocks too coarse to order a call against an open (strace -t's whole seconds, imports
// without timestamps), the rule stays off: every call is taken as it comes.
TEST(Analyzer, TheHandoverRuleNeedsAFineClock) {
  TraceBuilder t = HandoverTrace(Handover::kClose);
  json meta = test::FullCaptureMeta();
  meta["host"]["clock"] = "synthetic";
  Analyzer a;
  a.SetMeta(meta);
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  json m = a.Model(std::nullopt);
  EXPECT_EQ(m["offsets"]["previous_instance"], 0);
  EXPECT_EQ(m["offsets"]["tracked_vs_recorded_mismatch"], 1);  // /x's read moved /y's position
}

TraceBuilder TwoThreads() {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = kStart;
  t.ProcAt(IOT_PROC_START, ts, 100, 100, "trainer");
  t.Open(100, ts += 1000, "/data/a.bin", 3, kDev, 1);
  t.Open(200, ts += 1000, "/ckpt/b.pt", 4, kDev, 2, O_WRONLY | O_CREAT, 100);
  for (int i = 0; i < 10; i++) {
    ts += 100'000'000;  // 0.1 s apart
    t.Io(IOT_OP_PREAD64, 100, ts, 1000, 3, kDev, 1, uint64_t(i) * 65536, 65536, 65536);
    t.Io(IOT_OP_WRITE, 200, ts + 500, 3000, 4, kDev, 2, 0, 1 << 20, 1 << 20, 100);
  }
  return t;
}

TEST(Analyzer, FiltersByThreadFileOpAndTime) {
  TraceBuilder t = TwoThreads();
  json all = Analyze(t);
  EXPECT_EQ(all["totals"]["read"]["ops"], 10);
  EXPECT_EQ(all["totals"]["write"]["ops"], 10);
  EXPECT_EQ(all["threads"]["total"], 2);
  EXPECT_EQ(all["processes"]["total"], 1);
  EXPECT_EQ(all["processes"]["rows"][0]["comm"], "trainer");

  AnalyzerOptions by_tid;
  by_tid.filter.tids = {200};
  json m = Analyze(t, by_tid);
  EXPECT_EQ(m["totals"]["read"]["ops"], 0);
  EXPECT_EQ(m["totals"]["write"]["ops"], 10);
  EXPECT_EQ(m["totals"]["write"]["bytes"], 10u << 20);

  AnalyzerOptions by_file;
  by_file.filter.file_globs = {"/data/*"};
  m = Analyze(t, by_file);
  EXPECT_EQ(m["totals"]["read"]["ops"], 10);
  EXPECT_EQ(m["totals"]["write"]["ops"], 0);
  ASSERT_EQ(m["files"]["rows"].size(), 1u);
  EXPECT_EQ(m["files"]["rows"][0]["names"][0], "/data/a.bin");

  AnalyzerOptions by_op;
  by_op.filter.ops = {IOT_OP_WRITE};
  m = Analyze(t, by_op);
  EXPECT_EQ(m["totals"]["read"]["ops"], 0);
  EXPECT_EQ(m["totals"]["write"]["ops"], 10);
  EXPECT_EQ(m["ops"].size(), 1u);

  // Requests i = 0..9 happen at 0.1*(i+1) s + 2 µs; [0.35 s, 0.75 s] holds i = 3..6.
  AnalyzerOptions by_time;
  by_time.filter.from_s = 0.35;
  by_time.filter.to_s = 0.75;
  m = Analyze(t, by_time);
  EXPECT_EQ(m["totals"]["read"]["ops"], 4);
  EXPECT_EQ(m["totals"]["write"]["ops"], 4);
  EXPECT_EQ(m["filter"]["from_s"], 0.35);
  // Rates are over the window: from --from, not from the trace's start.
  const uint64_t from = m["totals"]["start_ns"].get<uint64_t>() + 350'000'000;
  const uint64_t span = m["totals"]["last_ts_ns"].get<uint64_t>() - from;
  EXPECT_EQ(m["totals"]["span_ns"].get<uint64_t>(), span);
  EXPECT_NEAR(m["totals"]["read"]["iops"].get<double>(), 4 / (static_cast<double>(span) / 1e9),
              1e-3);
}

TEST(Analyzer, TimeSeriesCountsOpsAndBytesPerBucket) {
  TraceBuilder t = TwoThreads();
  AnalyzerOptions opts;
  opts.collect_distributions = true;
  Analyzer a(opts);
  a.SetMeta(test::FullCaptureMeta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  const TimeSeries& s = a.series();
  uint64_t ops = 0, bytes = 0;
  for (uint64_t v : s.Series(Analyzer::kAppReadOps)) ops += v;
  for (uint64_t v : s.Series(Analyzer::kAppWriteBytes)) bytes += v;
  EXPECT_EQ(ops, 10u);
  EXPECT_EQ(bytes, 10u << 20);
  // 1 s of activity in at most 1024 buckets: the width grew from 1 ms to 1.024 ms... 2 ms.
  EXPECT_GE(s.width_ns(), 1'000'000u);
  EXPECT_LE(s.used_buckets(), TimeSeries::kMaxBuckets);
  json m = a.Model(std::nullopt);
  EXPECT_EQ(m["timeseries"]["bucket_ns"], s.width_ns());
  EXPECT_FALSE(m["timeseries"].contains("block_read_ops"));
}

TEST(Analyzer, BlockLayerLatenciesSizesAndAmplification) {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = kStart + 1000;
  t.Open(1, ts, "/f", 3, kDev, 3);
  // The application reads 8 KiB; the device reads 2 x 64 KiB (readahead).
  t.Io(IOT_OP_PREAD64, 1, ts += 1000, 100, 3, kDev, 3, 0, 8192, 8192);
  const uint32_t disk = (253u << 20) | 0;
  for (int i = 0; i < 2; i++) {
    uint64_t sector = uint64_t(i) * 128;
    t.BlockAt(IOT_BLK_QUEUE, ts += 10, disk, sector, 65536, IOT_BLKF_READ, 0);
    t.BlockAt(IOT_BLK_ISSUE, ts += 20, disk, sector, 65536, IOT_BLKF_READ, 0xffff0000 + i);
    t.BlockAt(IOT_BLK_COMPLETE, ts += 40, disk, sector, 65536, IOT_BLKF_READ, 0xffff0000 + i);
  }
  t.BlockAt(IOT_BLK_ISSUE, ts += 10, disk, 4096, 4096, IOT_BLKF_WRITE | IOT_BLKF_SYNC, 0xfff1);
  t.BlockAt(IOT_BLK_COMPLETE, ts += 30, disk, 4096, 4096, IOT_BLKF_WRITE, 0xfff1);
  json m = Analyze(t);
  ASSERT_TRUE(m["block"].is_object());
  const json& b = m["block"];
  EXPECT_EQ(b["requests"], 3);
  EXPECT_EQ(b["read"]["ops"], 2);
  EXPECT_EQ(b["read"]["bytes"], 131072);
  EXPECT_EQ(b["read"]["dominant"]["size"], 65536);
  EXPECT_EQ(b["write"]["ops"], 1);
  EXPECT_EQ(b["read"]["pattern"]["sequential"], 1);
  // Values below 64 ns are exact in the histograms.
  EXPECT_EQ(b["latency_ns"]["D2C"]["count"], 3);
  EXPECT_EQ(b["latency_ns"]["D2C"]["max"], 40);
  EXPECT_EQ(b["latency_ns"]["D2C"]["min"], 30);
  EXPECT_EQ(b["latency_ns"]["Q2C"]["count"], 2);
  EXPECT_EQ(b["latency_ns"]["Q2C"]["p50"], 60);
  EXPECT_EQ(b["latency_ns"]["Q2D"]["p50"], 20);
  EXPECT_EQ(b["devices"][0]["name"], "253:0");
  EXPECT_EQ(b["devices"][0]["sync"], 1);
  ASSERT_TRUE(m["amplification"].is_object());
  EXPECT_DOUBLE_EQ(m["amplification"]["read"].get<double>(), 16.0);
  EXPECT_FALSE(m["amplification"].contains("read_incl_faults"));

  // Mapped reads count with the application's reads; write faults and anonymous faults do not.
  t.FaultAt(ts += 10, 1, kDev, 3, 100, true, 8);   // 32 KiB read through a mapping
  iot_page_fault w{};
  InitRecord(&w, IOT_REC_PAGE_FAULT);
  w.ts = ts += 10;
  w.tgid = w.tid = 1;
  w.dev = kDev;
  w.ino = 3;
  w.pgoff = 200;
  w.flags = IOT_PFF_WRITE;
  w.nr_pages = 16;
  t.Add(w);
  t.FaultAt(ts += 10, 1, 0, 0, 300, false, 4);  // anonymous memory
  m = Analyze(t);
  const json& a = m["amplification"];
  EXPECT_EQ(a["fault_read_bytes"], 32768);
  // Like with like: block reads per byte the program read, by calls and through mappings.
  EXPECT_DOUBLE_EQ(a["read"].get<double>(), 131072.0 / (8192 + 32768));
}

TEST(Analyzer, FaultsPageCacheAndHitRatio) {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = kStart + 1000;
  t.Open(1, ts, "/weights.npy", 3, kDev, 77);
  // 10 pages read by syscalls, 4 pages had to be brought into the cache.
  t.Io(IOT_OP_PREAD64, 1, ts += 1000, 100, 3, kDev, 77, 0, 40960, 40960);
  t.PageCacheAt(IOT_PC_ADD, ts += 10, kDev, 77, 0, 4);
  t.PageCacheAt(IOT_PC_READAHEAD, ts += 10, kDev, 77, 4, 32);
  // 3 mapped faults, one major.
  t.FaultAt(ts += 100, 1, kDev, 77, 100, true);
  t.FaultAt(ts += 100, 1, kDev, 77, 101, false);
  t.FaultAt(ts += 100, 1, kDev, 77, 102, false);
  json m = Analyze(t);
  ASSERT_TRUE(m["memory"].is_object());
  EXPECT_EQ(m["memory"]["faults"]["total"], 3);
  EXPECT_EQ(m["memory"]["faults"]["major"], 1);
  EXPECT_NEAR(m["memory"]["fault_hit_ratio"].get<double>(), 2.0 / 3, 1e-4);
  EXPECT_EQ(m["memory"]["page_cache"]["readahead_pages"], 32);
  // Pages accessed: 10 (read) + 3 (faults); added: 4 -> hit ratio 9/13.
  EXPECT_NEAR(m["memory"]["read_hit_ratio"].get<double>(), 9.0 / 13, 1e-4);
  const json& f = m["files"]["rows"][0];
  EXPECT_EQ(f["faults"]["major"], 1);
  EXPECT_NEAR(f["hit_ratio"].get<double>(), 9.0 / 13, 1e-4);
}

TEST(Analyzer, AsyncRequestsArePairedAndSized) {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = kStart + 1000;
  t.Open(1, ts, "/swap/tensor0", 3, kDev, 55, O_RDWR | O_DIRECT);
  for (int i = 0; i < 4; i++)
    t.AsyncAt(IOT_AIO_ENGINE_LIBAIO, IOT_AIO_SUBMIT, 0, ts += 100, 1, 3, 1000 + i,
            uint64_t(i) << 24, 16 << 20, 0);
  for (int i = 0; i < 4; i++)
    t.AsyncAt(IOT_AIO_ENGINE_LIBAIO, IOT_AIO_COMPLETE, 0, ts += 50, 1, 3, 1000 + i, 0, 0, 16 << 20);
  // A completion whose submission the capture missed.
  t.AsyncAt(IOT_AIO_ENGINE_LIBAIO, IOT_AIO_COMPLETE, 1, ts += 50, 1, 3, 5000, 0, 4096, 4096);
  json m = Analyze(t);
  ASSERT_TRUE(m["async"].is_object());
  EXPECT_EQ(m["async"]["requests"], 5);
  EXPECT_EQ(m["async"]["unpaired_completions"], 1);
  const json* pread = FindRow(m["async"]["rows"], "name", "PREAD");
  ASSERT_NE(pread, nullptr);
  EXPECT_EQ((*pread)["count"], 4);
  EXPECT_EQ((*pread)["dominant"]["size"], 16 << 20);
  // Latencies: submit i at 1100+100i... complete at 1400+50(i+1)+... : 350, 300, 250, 200 ns.
  EXPECT_EQ((*pread)["latency_ns"]["count"], 4);
  EXPECT_NEAR((*pread)["latency_ns"]["max"].get<double>(), 350, 0);
  EXPECT_EQ(m["totals"]["read"]["async_ops"], 4);
  EXPECT_EQ(m["totals"]["read"]["async_bytes"], 4u << 24);
  EXPECT_EQ(m["files"]["rows"][0]["read"]["async_ops"], 4);
  EXPECT_EQ(m["files"]["rows"][0]["read"]["pattern"]["sequential"], 3);
}

TEST(Analyzer, IntentLabelsTimeAndAttributedIo) {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = kStart + 1000;
  t.Open(1, ts, "/f", 3, kDev, 3);
  for (int epoch = 0; epoch < 2; epoch++) {
    t.Intent(IOT_INTENT_BEGIN, ts += 1000, 1, "epoch");
    t.Io(IOT_OP_PREAD64, 1, ts += 100, 100, 3, kDev, 3, 0, 4096, 4096);
    t.Intent(IOT_INTENT_END, ts += 900, 1, "epoch");
  }
  t.Intent(IOT_INTENT_INSTANT, ts += 10, 1, "checkpoint");
  t.Intent(IOT_INTENT_END, ts += 10, 1, "never-begun");
  json m = Analyze(t);
  ASSERT_TRUE(m["intents"].is_object());
  const json* e = FindRow(m["intents"]["rows"], "label", "epoch");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ((*e)["intervals"], 2);
  EXPECT_EQ((*e)["total_ns"], 2000);
  EXPECT_EQ((*e)["max_ns"], 1000);
  EXPECT_EQ((*e)["ops"], 2);
  EXPECT_EQ((*e)["bytes"], 8192);
  const json* c = FindRow(m["intents"]["rows"], "label", "checkpoint");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["instants"], 1);
  EXPECT_EQ(m["intents"]["unmatched_ends"], 1);
}

TEST(Analyzer, LossesAndFooterFacts) {
  TraceBuilder t(FullCaptureMeta());
  t.LostAt(IOT_SRC_SYSCALL, 0, kStart + 10, 5);
  t.LostAt(IOT_SRC_SYSCALL, 0, kStart + 20, 12);  // cumulative: 12 on CPU 0
  t.LostAt(IOT_SRC_SYSCALL, 1, kStart + 20, 3);
  t.LostAt(IOT_SRC_BLOCK, 0, kStart + 20, 1);
  AnalyzerOptions opts;
  opts.collect_distributions = true;
  Analyzer a(opts);
  a.SetMeta(test::FullCaptureMeta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  json m = a.Model(std::nullopt);
  EXPECT_EQ(m["capture"]["lost"]["syscall"], 15);
  EXPECT_EQ(m["capture"]["lost"]["block"], 1);
  EXPECT_EQ(m["capture"]["host"]["hostname"], "testhost");
  EXPECT_FALSE(m["capture"]["complete"].get<bool>());
  // A footer's totals take precedence.
  json summary = {{"lost", {{"syscall", 20}}}, {"duration_ns", 5'000'000'000ULL},
                  {"stop_reason", "exited"}, {"exit_status", 0}};
  json m2 = a.Model(summary);
  EXPECT_EQ(m2["capture"]["lost"]["syscall"], 20);
  EXPECT_EQ(m2["capture"]["duration_ns"], 5'000'000'000ULL);
  EXPECT_TRUE(m2["capture"]["complete"].get<bool>());
}

TEST(Analyzer, SequencesInOrderOfFirstAppearance) {
  TraceBuilder t(FullCaptureMeta());
  uint64_t ts = kStart;
  // Process 20 appears first (thread 21 before 20), then process 10.
  t.Io(IOT_OP_PREAD64, 21, ts += 10, 1, 3, kDev, 1, 0, 10, 10, 20);
  t.Io(IOT_OP_PREAD64, 20, ts += 10, 1, 3, kDev, 1, 10, 10, 10, 20);
  t.Io(IOT_OP_PREAD64, 10, ts += 10, 1, 3, kDev, 1, 0, 10, 10, 10);
  t.Io(IOT_OP_PREAD64, 21, ts += 10, 1, 3, kDev, 1, 20, 10, 10, 20);
  AnalyzerOptions o;
  o.collect_sequences = true;
  Analyzer a(o);
  a.SetMeta(test::FullCaptureMeta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  auto seqs = a.Sequences();
  ASSERT_EQ(seqs.size(), 3u);
  EXPECT_EQ(seqs[0].tid, 21u);
  EXPECT_EQ(seqs[0].process_rank, 0u);
  EXPECT_EQ(seqs[0].thread_rank, 0u);
  EXPECT_EQ(seqs[0].ops->size(), 2u);
  EXPECT_EQ(seqs[1].tid, 20u);
  EXPECT_EQ(seqs[1].thread_rank, 1u);
  EXPECT_EQ(seqs[2].tid, 10u);
  EXPECT_EQ(seqs[2].process_rank, 1u);
  // Same arguments give the same fingerprint whatever the descriptor or time.
  EXPECT_EQ((*seqs[2].ops)[0], OpFingerprint(IOT_OP_PREAD64, 0, 10, 0, 0));
  EXPECT_NE((*seqs[2].ops)[0], OpFingerprint(IOT_OP_PREAD64, 0, 11, 0, 0));
  EXPECT_NE((*seqs[2].ops)[0], OpFingerprint(IOT_OP_PWRITE64, 0, 10, 0, 0));
}

}  // namespace
}  // namespace iotwin::analysis
