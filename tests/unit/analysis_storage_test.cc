// What the report counts as the program's storage I/O: bytes read and written by calls and
// through file mappings, cache misses that major faults and the hit ratio share, and the
// pipes, sockets, devices and pseudo files it reports apart.
#include <fcntl.h>

#include <gtest/gtest.h>

#include "analysis/analyzer.h"
#include "trace_builder.h"

namespace iotwin::analysis {
namespace {

using nlohmann::json;
using test::FullCaptureMeta;
using test::TraceBuilder;

constexpr uint32_t kDev = (8u << 20) | 1;
constexpr uint64_t kStart = 1'000'000'000ULL;  // FullCaptureMeta's anchor
constexpr uint64_t kPage = 4096;

// A live capture's header: it records every file's type.
json CaptureMeta() {
  json meta = test::FullCaptureMeta();
  meta["capture"] = {{"mode", "command"}};
  return meta;
}

json Analyze(TraceBuilder& t) {
  Analyzer a;
  a.SetMeta(t.meta());
  t.ForEach([&](const iot_rec_hdr* r) { a.Consume(r); });
  return a.Model(std::nullopt);
}

void Call(TraceBuilder& t, uint16_t op, uint64_t ts, int fd, uint64_t ino, uint16_t ftype,
          int64_t ret, uint64_t offset = 0, std::string_view path = {}) {
  t.FileCall(op, ts, fd, kDev, ino, ftype, ret, offset, path);
}

void Fault(TraceBuilder& t, uint64_t ts, uint64_t ino, uint64_t pgoff, uint64_t around,
           uint32_t pages, uint16_t flags = 0) {
  iot_page_fault f{};
  InitRecord(&f, IOT_REC_PAGE_FAULT);
  f.ts = ts;
  f.tgid = f.tid = 1;
  f.dev = kDev;
  f.ino = ino;
  f.pgoff = pgoff;
  f.around_start = around;
  f.nr_pages = pages;
  f.flags = flags;
  t.Add(f);
}

const json* FileRow(const json& m, uint64_t ino) {
  for (const json& r : m["files"]["rows"])
    if (r["ino"] == ino) return &r;
  return nullptr;
}

// A cold mmap load as the capture writes it: the header's pread, the insertions of its
// readahead (written after the call's record), faults that map the readahead ahead of them and
// a fault that maps the same window again; and a cached library.
TraceBuilder ColdMappedLoad() {
  TraceBuilder t(CaptureMeta());
  uint64_t ts = kStart + 1000;
  Call(t, IOT_OP_OPENAT, ts, 3, 9, 8, 3, 0, "/m/shard");
  Call(t, IOT_OP_PREAD64, ts += 100, 3, 9, 8, 8, 0);
  t.PageCacheAt(IOT_PC_ADD, ts += 10, kDev, 9, 0, 4);   // page 0 for the pread, 1-3 ahead
  t.PageCacheAt(IOT_PC_ADD, ts += 10, kDev, 9, 4, 60);  // readahead
  Fault(t, ts += 100, 9, 1, 0, 16, IOT_PFF_MAJOR);     // maps 0-15: 15 missed; major
  Fault(t, ts += 100, 9, 4, 0, 16);                    // the same window again: nothing new
  Fault(t, ts += 100, 9, 16, 16, 16);                  // 16-31: missed
  Fault(t, ts += 100, 10, 0, 0, 4);                    // a cached library
  Fault(t, ts += 100, 10, 8, 8, 4, IOT_PFF_EXEC);      // its code: not data read
  return t;
}

TEST(Storage, FaultedBytesAreReadsOfTheirFile) {
  TraceBuilder t = ColdMappedLoad();
  const json m = Analyze(t);
  const json& read = m["totals"]["read"];
  EXPECT_EQ(read["syscall_bytes"], 8);
  EXPECT_EQ(read["mmap_ops"], 4);  // the instruction fetch is code, not a data read
  EXPECT_EQ(read["mmap_bytes"], (16 + 16 + 4) * kPage);
  EXPECT_EQ(read["ops"], 1 + 4);
  EXPECT_EQ(read["bytes"], 8 + (16 + 16 + 4) * kPage);
  const json* shard = FileRow(m, 9);
  ASSERT_NE(shard, nullptr) << m["files"].dump();
  EXPECT_EQ((*shard)["read"]["mmap_bytes"], 32 * kPage);
  EXPECT_EQ((*shard)["read"]["mmap_ops"], 3);
  // The shard's bytes rank it first.
  EXPECT_EQ(m["files"]["rows"][0]["ino"], 9);
}

TEST(Storage, MajorFaultsAndHitRatioShareOneDefinitionOfAMiss) {
  TraceBuilder t = ColdMappedLoad();
  const json m = Analyze(t);
  const json& mem = m["memory"];
  // Misses: page 0 by the pread (its insertion was written after it), 1-15 and 16-31 by faults.
  EXPECT_EQ(mem["misses"]["missed_call_pages"], 1);
  EXPECT_EQ(mem["misses"]["missed_fault_pages"], 31);
  // Major: the fault the capture flagged (the kernel's count). The fault on 16-31 mapped missed
  // pages of a readahead under way: minor, as the kernel counts it.
  EXPECT_EQ(mem["faults"]["major"], 1);
  EXPECT_EQ(mem["faults"]["minor"], 4);
  EXPECT_NEAR(mem["fault_hit_ratio"].get<double>(), 4.0 / 5, 1e-4);
  // Pages read: 1 by the call, 36 mapped, 4 of code; 32 of them missed.
  EXPECT_EQ(mem["misses"]["read_pages"], 1);
  EXPECT_EQ(mem["misses"]["mapped_pages"], 36);
  EXPECT_EQ(mem["misses"]["exec_pages"], 4);
  EXPECT_NEAR(mem["read_hit_ratio"].get<double>(), 1.0 - 32.0 / 41, 1e-4);
  const json* shard = FileRow(m, 9);
  ASSERT_NE(shard, nullptr);
  EXPECT_EQ((*shard)["faults"]["major"], 1);
  EXPECT_EQ((*shard)["missed_pages"], 32);
  EXPECT_NEAR((*shard)["hit_ratio"].get<double>(), 1.0 - 32.0 / 33, 1e-4);
}

// The capture writes a fault's record when the thread's next fault begins, its insertions may
// come after it: its pages missed. Whether it was major is the capture's flag alone.
TEST(Storage, InsertionRecordedAfterItsFaultMakesItsPagesMisses) {
  TraceBuilder t(CaptureMeta());
  uint64_t ts = kStart + 1000;
  Call(t, IOT_OP_OPENAT, ts, 3, 9, 8, 3, 0, "/m/shard");
  Fault(t, ts += 100, 9, 0, 0, 16);
  EXPECT_EQ(Analyze(t)["memory"]["faults"]["major"], 0);
  t.PageCacheAt(IOT_PC_ADD, ts += 10, kDev, 9, 0, 16);
  const json m = Analyze(t);
  EXPECT_EQ(m["memory"]["faults"]["major"], 0);
  EXPECT_EQ(m["memory"]["misses"]["missed_fault_pages"], 16);
  // A write's insertions are the program's own pages, not misses.
  TraceBuilder w(CaptureMeta());
  Call(w, IOT_OP_OPENAT, ts, 3, 9, 8, 3, 0, "/m/out");
  Call(w, IOT_OP_PWRITE64, ts += 100, 3, 9, 8, 8192, 0);
  w.PageCacheAt(IOT_PC_ADD, ts += 10, kDev, 9, 0, 2);
  Call(w, IOT_OP_PREAD64, ts += 100, 3, 9, 8, 8192, 0);
  const json mw = Analyze(w);
  EXPECT_EQ(mw["memory"]["misses"]["missed_call_pages"], 0);
  EXPECT_EQ(mw["memory"]["read_hit_ratio"], 1.0);
}

// Pages the capture inserted after a read count as that read's misses once: evicted and
// inserted again with no new access, they wait for the next access like any insertion.
TEST(Storage, ALateInsertionCountsForItsAccessOnce) {
  TraceBuilder t(CaptureMeta());
  uint64_t ts = kStart + 1000;
  Call(t, IOT_OP_OPENAT, ts, 3, 9, 8, 3, 0, "/m/shard");
  Call(t, IOT_OP_PREAD64, ts += 100, 3, 9, 8, 4 * kPage, 0);
  t.PageCacheAt(IOT_PC_ADD, ts += 10, kDev, 9, 0, 4);
  t.PageCacheAt(IOT_PC_DELETE, ts += 10, kDev, 9, 0, 4);
  t.PageCacheAt(IOT_PC_ADD, ts += 10, kDev, 9, 0, 4);
  const json m = Analyze(t);
  EXPECT_EQ(m["memory"]["misses"]["missed_call_pages"], 4) << m["memory"].dump();
}

TEST(Storage, PagesDirtiedThroughASharedMappingAreWrites) {
  TraceBuilder t(CaptureMeta());
  uint64_t ts = kStart + 1000;
  Call(t, IOT_OP_OPENAT, ts, 3, 9, 8, 3, 0, "/m/table");
  Fault(t, ts += 100, 9, 0, 0, 4, IOT_PFF_WRITE | IOT_PFF_SHARED);
  Fault(t, ts += 100, 9, 8, 8, 1, IOT_PFF_WRITE);  // private: a copy, not the file's
  const json m = Analyze(t);
  EXPECT_EQ(m["totals"]["write"]["mmap_ops"], 1);
  EXPECT_EQ(m["totals"]["write"]["mmap_bytes"], 4 * kPage);
  EXPECT_EQ(m["totals"]["read"]["mmap_bytes"], 0);
  const json* f = FileRow(m, 9);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ((*f)["write"]["mmap_bytes"], 4 * kPage);
}

TEST(Storage, PipesSocketsDevicesAndPseudoFilesAreReportedApart) {
  TraceBuilder t(CaptureMeta());
  uint64_t ts = kStart + 1000;
  Call(t, IOT_OP_WRITE, ts += 100, 1, 501, 1, 1000);   // a pipe
  Call(t, IOT_OP_READ, ts += 100, 4, 502, 12, 500);    // a socket
  Call(t, IOT_OP_READ, ts += 100, 7, 503, 0, 8);       // an eventfd: no type
  Call(t, IOT_OP_WRITE, ts += 100, 2, 504, 2, 10);     // a tty
  Call(t, IOT_OP_OPENAT, ts += 100, 5, 505, 8, 5, 0, "/proc/self/status");
  Call(t, IOT_OP_READ, ts += 100, 5, 505, 8, 300);
  Call(t, IOT_OP_OPENAT, ts += 100, 6, 506, 8, 6, 0, "/data/f");
  Call(t, IOT_OP_WRITE, ts += 100, 6, 506, 8, 100);
  const json m = Analyze(t);
  EXPECT_EQ(m["totals"]["write"]["bytes"], 100);
  EXPECT_EQ(m["totals"]["write"]["ops"], 1);
  EXPECT_EQ(m["totals"]["read"]["bytes"], 0);
  const json& other = m["non_storage"];
  EXPECT_EQ(other["pipe"]["write_bytes"], 1000);
  EXPECT_EQ(other["socket"]["read_bytes"], 500);
  EXPECT_EQ(other["anon_inode"]["read_bytes"], 8);
  EXPECT_EQ(other["char_device"]["write_bytes"], 10);
  EXPECT_EQ(other["pseudo_fs"]["read_bytes"], 300);
  ASSERT_EQ(m["files"]["rows"].size(), 1u) << m["files"].dump();
  EXPECT_EQ(m["files"]["rows"][0]["ino"], 506);
  EXPECT_EQ(m["threads"]["rows"][0]["write_bytes"], 100);
  EXPECT_EQ(m["threads"]["rows"][0]["read_bytes"], 0);
}

// An import leaves types it cannot see at 0: such a file is storage, not an anonymous inode.
TEST(Storage, UntypedFilesOfAnImportStayStorage) {
  TraceBuilder t(FullCaptureMeta());  // no "capture" in the header
  Call(t, IOT_OP_READ, kStart + 100, 7, 503, 0, 8);
  const json m = Analyze(t);
  EXPECT_EQ(m["totals"]["read"]["bytes"], 8);
  EXPECT_TRUE(m["non_storage"].empty()) << m["non_storage"].dump();
}

}  // namespace
}  // namespace iotwin::analysis
