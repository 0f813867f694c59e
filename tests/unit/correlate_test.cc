// Cross-layer correlation (src/correlate) over synthetic records: linking calls, bios, requests
// and NVMe commands; per-layer latency; attribution of write-back, flushes and journal I/O;
// explicit unattribution; the report's sections.
#include "correlate/correlate.h"

#include <gtest/gtest.h>

#include <cstring>

#include "correlate/layers_report.h"
#include "format/records.h"

namespace iotwin::correlate {
namespace {

constexpr uint32_t kPid = 100;
constexpr uint32_t kLoop = (7u << 20) | 0;
constexpr uint32_t kFsDev = kLoop;

// Builds records and feeds them to a Correlator.
class Trace {
 public:
  Trace() {
    iot_proc p{};
    InitRecord(&p, IOT_REC_PROC);
    p.kind = IOT_PROC_START;
    p.tgid = p.tid = kPid;
    Add(p);
  }
  template <typename T>
  void Add(const T& r) {
    c_.Add(&r.hdr);
  }
  void String(uint32_t id, const std::string& s) {
    std::vector<uint8_t> buf(sizeof(iot_string) + s.size() + 8, 0);
    auto* h = reinterpret_cast<iot_string*>(buf.data());
    h->hdr.type = IOT_REC_STRING;
    h->hdr.size = static_cast<uint16_t>((sizeof(iot_string) + s.size() + 7) & ~7u);
    h->id = id;
    h->len = static_cast<uint16_t>(s.size());
    memcpy(buf.data() + sizeof(iot_string), s.data(), s.size());
    c_.Add(&h->hdr);
  }
  iot_syscall& Call(uint16_t op, uint64_t ts, uint64_t dur, uint32_t tid = kPid) {
    calls_.emplace_back();
    iot_syscall& s = calls_.back();
    memset(&s, 0, sizeof s);
    InitRecord(&s, IOT_REC_SYSCALL);
    s.op = op;
    s.ts = ts;
    s.dur = dur;
    s.tgid = kPid;
    s.tid = tid;
    s.fd = 3;
    s.fd2 = -1;
    s.dev = kFsDev;
    s.ino = 12;
    s.ftype = 8;
    return s;
  }
  void Block(uint16_t phase, uint64_t ts, uint64_t rq, uint64_t bio, uint64_t sector, uint32_t bytes,
             uint32_t flags, uint32_t tid = 0, uint64_t aux = 0, uint64_t parent = 0,
             uint64_t ino = 0, uint64_t pgoff = 0) {
    iot_block b{};
    InitRecord(&b, IOT_REC_BLOCK);
    b.phase = phase;
    b.ts = ts;
    b.rq_id = rq;
    b.bio_id = bio;
    b.sector = sector;
    b.bytes = bytes;
    b.nr_sector = bytes / 512;
    b.flags = flags;
    b.dev = kLoop;
    b.tid = tid;
    b.tgid = tid ? (tid == 999 ? 999 : kPid) : 0;
    b.aux = aux;
    b.parent_id = parent;
    b.ino = ino;
    b.ino_dev = ino ? kFsDev : 0;
    b.pgoff = pgoff;
    if (tid == 999) memcpy(b.comm, "kworker/u4:1", 12);
    Add(b);
  }
  void Nvme(uint16_t phase, uint64_t ts, uint64_t rq, uint8_t opcode, uint64_t slba, uint32_t nlb,
            uint16_t cid) {
    iot_nvme n{};
    InitRecord(&n, IOT_REC_NVME);
    n.phase = phase;
    n.ts = ts;
    n.rq_id = rq;
    n.opcode = opcode;
    n.slba = slba;
    n.nlb = nlb;
    n.qid = 1;
    n.cid = cid;
    n.lba_size = 4096;
    n.cdw10 = static_cast<uint32_t>(slba);
    n.cdw12 = nlb - 1;
    Add(n);
  }
  void Sched(uint16_t kind, uint64_t ts, uint64_t dur, uint32_t vec, uint32_t tid = kPid) {
    iot_sched s{};
    InitRecord(&s, IOT_REC_SCHED);
    s.kind = kind;
    s.ts = ts;
    s.dur = dur;
    s.tgid = kPid;
    s.tid = tid;
    s.vec = vec;
    Add(s);
  }
  Correlation Finish() {
    for (const auto& s : calls_) Add(s);
    return c_.Finish();
  }

 private:
  Correlator c_;
  std::vector<iot_syscall> calls_;
};

constexpr uint32_t kRead = IOT_BLKF_READ | IOT_BLKF_SYNC;
constexpr uint32_t kWrite = IOT_BLKF_WRITE;

const Request* FindRequest(const Correlation& c, uint64_t id) {
  for (const Request& q : c.requests) {
    if (q.id == id) return &q;
  }
  return nullptr;
}

// A 1 MiB O_DIRECT read: the file system builds one bio, the block layer splits a 512 KiB piece
// off it; two requests, both of the call.
Trace SplitRead() {
  Trace t;
  t.Call(IOT_OP_PREAD64, 1000, 9000).length = 1 << 20;
  t.Block(IOT_BLK_QUEUE, 1200, 0, 1, 2048, 1 << 20, kRead, kPid);
  t.Block(IOT_BLK_SPLIT, 1300, 0, 2, 2048, 512 << 10, kRead, kPid, 3072, /*parent=*/1);
  t.Block(IOT_BLK_GETRQ, 1400, 0, 2, 2048, 512 << 10, kRead, kPid);
  t.Block(IOT_BLK_ISSUE, 1500, 10, 2, 2048, 512 << 10, kRead, kPid);
  t.Block(IOT_BLK_GETRQ, 1600, 0, 1, 3072, 512 << 10, kRead, kPid);
  t.Block(IOT_BLK_ISSUE, 1700, 11, 1, 3072, 512 << 10, kRead, kPid);
  t.Block(IOT_BLK_COMPLETE, 6000, 10, 2, 2048, 512 << 10, kRead, 0, 512 << 10);
  t.Block(IOT_BLK_COMPLETE, 8000, 11, 1, 3072, 512 << 10, kRead, 0, 512 << 10);
  return t;
}

TEST(Correlate, DirectReadSplitIntoTwoRequestsIsLinkedToItsCall) {
  Correlation c = SplitRead().Finish();
  ASSERT_EQ(c.requests.size(), 2u);
  ASSERT_EQ(c.bios.size(), 2u);
  const Request* a = FindRequest(c, 10);
  const Request* b = FindRequest(c, 11);
  ASSERT_TRUE(a && b);
  for (const Request* q : {a, b}) {
    EXPECT_EQ(q->cause, Cause::kSyscall);
    ASSERT_NE(q->syscall, kNone);
    EXPECT_EQ(c.syscalls[q->syscall].op, IOT_OP_PREAD64);
    EXPECT_EQ(q->tid, kPid);
    EXPECT_EQ(q->q_ts, 1200u) << "a split piece takes the Q time of the bio it came from";
    EXPECT_TRUE(q->completed);
  }
  EXPECT_EQ(c.syscalls[a->syscall].requests.size(), 2u);
  // per layer: 200 before Q, then Q2D, D2C, and the rest back to the application = 9000
  EXPECT_TRUE(a->layers.has_app);
  EXPECT_EQ(a->layers.app_to_q, 200);
  EXPECT_EQ(a->layers.q2d, 300);
  EXPECT_EQ(a->layers.d2c, 4500);
  EXPECT_EQ(a->layers.c_to_app, 4000);
  EXPECT_EQ(a->layers.q2g, 200);
  EXPECT_EQ(a->layers.total, 9000);
  EXPECT_EQ(a->layers.deviation, 0);
  EXPECT_EQ(b->layers.app_to_q + b->layers.q2d + b->layers.d2c + b->layers.c_to_app, 9000);
}

TEST(Correlate, ReportCountsSplitsAndPartsSumWithinTolerance) {
  Correlation c = SplitRead().Finish();
  nlohmann::json r = LayersReport(c);
  EXPECT_EQ(r["coverage"]["requests"], 2);
  EXPECT_EQ(r["coverage"]["linked"], 2);
  EXPECT_EQ(r["coverage"]["unattributed"], 0);
  EXPECT_EQ(r["latency"]["requests"], 2);
  EXPECT_EQ(r["latency"]["within_tolerance"], 2);
  EXPECT_EQ(r["splits"]["kernel_split_pieces"], 1);
  ASSERT_EQ(r["splits"]["calls"].size(), 1u);
  EXPECT_EQ(r["splits"]["calls"][0]["requests"], 2);
  EXPECT_EQ(r["splits"]["calls"][0]["bios_built_by_fs"], 1);
  EXPECT_EQ(r["amplification"]["read"]["device_requests"], 1 << 20);
  // device time is the union of both requests' D->C: [1500, 8000) of a 9000 ns call
  EXPECT_NEAR(r["software_share"]["mean_pct"].get<double>(), 100.0 * (9000 - 6500) / 9000, 0.01);
  std::string text = RenderLayersText(r);
  EXPECT_NE(text.find("Per-request latency by layer"), std::string::npos);
  EXPECT_NE(text.find("pread64"), std::string::npos);
}

TEST(Correlate, OutOfOrderCompletionShowsAsDeviation) {
  Trace t;
  t.Call(IOT_OP_PREAD64, 1000, 1000);
  t.Block(IOT_BLK_QUEUE, 1100, 0, 1, 0, 4096, kRead, kPid);
  t.Block(IOT_BLK_ISSUE, 1200, 5, 1, 0, 4096, kRead, kPid);
  t.Block(IOT_BLK_COMPLETE, 2500, 5, 1, 0, 4096, kRead, 0, 4096);  // after the call returned
  Correlation c = t.Finish();
  ASSERT_EQ(c.requests.size(), 1u);
  EXPECT_EQ(c.requests[0].layers.c_to_app, -500);
  EXPECT_EQ(c.requests[0].layers.deviation, 500);
  nlohmann::json r = LayersReport(c);
  EXPECT_EQ(r["latency"]["within_tolerance"], 1) << "500 ns is within the 2 us floor";
  LayersOptions strict;
  strict.tolerance_ns = 100;
  strict.tolerance_fraction = 0;
  EXPECT_EQ(LayersReport(c, strict)["latency"]["within_tolerance"], 0);
}

TEST(Correlate, MergedBioJoinsTheRequestThatContainsIt) {
  Trace t;
  t.Call(IOT_OP_WRITEV, 1000, 5000);
  t.Block(IOT_BLK_QUEUE, 1100, 0, 1, 100, 4096, kWrite, kPid);
  t.Block(IOT_BLK_GETRQ, 1150, 0, 1, 100, 4096, kWrite, kPid);
  t.Block(IOT_BLK_QUEUE, 1200, 0, 2, 108, 4096, kWrite, kPid);
  t.Block(IOT_BLK_BACKMERGE, 1250, 0, 2, 108, 4096, kWrite, kPid);
  t.Block(IOT_BLK_ISSUE, 1300, 7, 1, 100, 8192, kWrite, kPid);
  t.Block(IOT_BLK_COMPLETE, 3000, 7, 1, 100, 8192, kWrite, 0, 8192);
  Correlation c = t.Finish();
  ASSERT_EQ(c.requests.size(), 1u);
  EXPECT_EQ(c.requests[0].bios.size(), 2u);
  EXPECT_EQ(c.requests[0].cause, Cause::kSyscall);
  nlohmann::json r = LayersReport(c);
  EXPECT_EQ(r["splits"]["merges"]["bios_merged"], 1);
  EXPECT_EQ(r["splits"]["merges"]["requests_with_several_bios"], 1);
  bool q2m = false;
  for (const auto& b : r["btt"]) q2m |= b["metric"] == "Q2M" && b["mean_ns"] == 50;
  EXPECT_TRUE(q2m) << r["btt"].dump();
}

TEST(Correlate, FlusherWriteBackIsAttributedToTheFileAndItsDirtyingCalls) {
  Trace t;
  t.String(1, "/data/model.bin");
  iot_syscall& open = t.Call(IOT_OP_OPENAT, 100, 10);
  open.ret = 3;
  open.path_id = 1;
  for (int i = 0; i < 4; i++) {
    iot_syscall& w = t.Call(IOT_OP_PWRITE64, 1000 + i * 100, 50);
    w.offset = i * 8192;
    w.length = 8192;
    w.ret = 8192;
  }
  iot_syscall& other = t.Call(IOT_OP_PWRITE64, 1500, 50);  // a page outside the request
  other.offset = 1 << 20;
  other.ret = 4096;
  // the flusher (tgid 999, not traced) writes the first 16 KiB back
  t.Block(IOT_BLK_QUEUE, 50000, 0, 1, 800, 16384, kWrite, 999, 0, 0, /*ino=*/12, /*pgoff=*/0);
  t.Block(IOT_BLK_ISSUE, 50100, 3, 1, 800, 16384, kWrite);
  t.Block(IOT_BLK_COMPLETE, 51000, 3, 1, 800, 16384, kWrite, 0, 16384);
  Correlation c = t.Finish();
  ASSERT_EQ(c.requests.size(), 1u);
  const Request& q = c.requests[0];
  EXPECT_EQ(q.cause, Cause::kWriteback);
  EXPECT_EQ(q.ino, 12u);
  EXPECT_EQ(c.FileName(q.ino_dev, q.ino), "/data/model.bin");
  EXPECT_EQ(q.dirtied_by_calls.size(), 2u) << "the two writes of pages 0-3";
  EXPECT_FALSE(q.layers.has_app);
  nlohmann::json r = LayersReport(c);
  ASSERT_EQ(r["writeback"].size(), 1u);
  EXPECT_EQ(r["writeback"][0]["file"], "/data/model.bin");
  EXPECT_EQ(r["writeback"][0]["dirtying_calls"], 2);
}

TEST(Correlate, JournalAndFlushDuringFsyncAreInducedByIt) {
  Trace t;
  t.Call(IOT_OP_FSYNC, 1000, 100000);
  // data write-back in the caller
  t.Block(IOT_BLK_QUEUE, 2000, 0, 1, 64, 4096, kWrite, kPid, 0, 0, 12, 0);
  t.Block(IOT_BLK_ISSUE, 2100, 1, 1, 64, 4096, kWrite, kPid);
  t.Block(IOT_BLK_COMPLETE, 3000, 1, 1, 64, 4096, kWrite, 0, 4096);
  // the journal thread's commit block, then the cache flush (no bio)
  t.Block(IOT_BLK_QUEUE, 4000, 0, 2, 900, 4096, kWrite | IOT_BLKF_META | IOT_BLKF_PREFLUSH, 999);
  t.Block(IOT_BLK_ISSUE, 4100, 2, 0, 0, 0, IOT_BLKF_FLUSH | IOT_BLKF_PREFLUSH);
  t.Block(IOT_BLK_COMPLETE, 60000, 2, 0, 0, 0, IOT_BLKF_FLUSH | IOT_BLKF_PREFLUSH);
  t.Block(IOT_BLK_ISSUE, 60100, 3, 2, 900, 4096, kWrite | IOT_BLKF_META);
  t.Block(IOT_BLK_COMPLETE, 61000, 3, 2, 900, 4096, kWrite | IOT_BLKF_META, 0, 4096);
  // a flush of nobody, later
  t.Block(IOT_BLK_ISSUE, 500000, 4, 0, 0, 0, IOT_BLKF_FLUSH);
  t.Block(IOT_BLK_COMPLETE, 500100, 4, 0, 0, 0, IOT_BLKF_FLUSH);
  Correlation c = t.Finish();
  ASSERT_EQ(c.requests.size(), 4u);
  EXPECT_EQ(FindRequest(c, 1)->cause, Cause::kSyscall);
  EXPECT_EQ(FindRequest(c, 2)->cause, Cause::kSyncInduced);
  EXPECT_EQ(FindRequest(c, 3)->cause, Cause::kSyncInduced);
  EXPECT_EQ(FindRequest(c, 4)->cause, Cause::kUnattributed);
  EXPECT_NE(FindRequest(c, 4)->why.find("flush"), std::string::npos);
  nlohmann::json r = LayersReport(c);
  EXPECT_EQ(r["coverage"]["linked"], 3);
  EXPECT_EQ(r["coverage"]["unattributed"], 1);
  EXPECT_EQ(r["coverage"]["by_cause"]["sync_induced"], 2);
}

TEST(Correlate, TracedThreadOutsideAnyCallIsUnattributedWithAReason) {
  Trace t;
  t.Block(IOT_BLK_QUEUE, 1000, 0, 1, 8, 4096, kRead | IOT_BLKF_READAHEAD, kPid, 0, 0, 40, 3);
  t.Block(IOT_BLK_ISSUE, 1100, 1, 1, 8, 4096, kRead);
  t.Block(IOT_BLK_COMPLETE, 2000, 1, 1, 8, 4096, kRead, 0, 4096);
  Correlation c = t.Finish();
  ASSERT_EQ(c.requests.size(), 1u);
  EXPECT_EQ(c.requests[0].cause, Cause::kUnattributed);
  EXPECT_NE(c.requests[0].why.find("outside any recorded system call"), std::string::npos);
  EXPECT_NE(c.requests[0].why.find("memory layer"), std::string::npos);
}

TEST(Correlate, PageFaultBeforeTheBioIsItsCause) {
  Trace t;
  iot_page_fault f{};
  InitRecord(&f, IOT_REC_PAGE_FAULT);
  f.ts = 900;
  f.tgid = f.tid = kPid;
  f.ino = 40;
  f.dev = kFsDev;
  f.pgoff = 3;
  f.flags = IOT_PFF_MAJOR;
  t.Add(f);
  t.Block(IOT_BLK_QUEUE, 1000, 0, 1, 8, 4096, kRead, kPid, 0, 0, 40, 3);
  t.Block(IOT_BLK_ISSUE, 1100, 1, 1, 8, 4096, kRead);
  t.Block(IOT_BLK_COMPLETE, 2000, 1, 1, 8, 4096, kRead, 0, 4096);
  Correlation c = t.Finish();
  ASSERT_EQ(c.requests.size(), 1u);
  EXPECT_EQ(c.requests[0].cause, Cause::kPageFault);
  EXPECT_EQ(c.faults[c.requests[0].fault].pgoff, 3u);
}

TEST(Correlate, AsyncRequestsInsideOneSubmitCallAreMatchedInOrder) {
  Trace t;
  t.Call(IOT_OP_IO_URING_ENTER, 1000, 2000);
  for (int i = 0; i < 2; i++) {
    iot_async_io a{};
    InitRecord(&a, IOT_REC_ASYNC_IO);
    a.engine = IOT_AIO_ENGINE_URING;
    a.phase = IOT_AIO_SUBMIT;
    a.ts = 1100 + i * 300;
    a.tgid = a.tid = kPid;
    a.req_id = 70 + i;
    a.user_data = 500 + i;
    a.length = 8192;
    a.opcode = 22;
    t.Add(a);
    a.phase = IOT_AIO_COMPLETE;
    a.ts = 9000 + i;
    a.res = 8192;
    t.Add(a);
  }
  t.Block(IOT_BLK_QUEUE, 1200, 0, 1, 0, 8192, kRead, kPid);
  t.Block(IOT_BLK_ISSUE, 1250, 1, 1, 0, 8192, kRead);
  t.Block(IOT_BLK_QUEUE, 1500, 0, 2, 64, 8192, kRead, kPid);
  t.Block(IOT_BLK_ISSUE, 1550, 2, 2, 64, 8192, kRead);
  t.Block(IOT_BLK_COMPLETE, 8000, 1, 1, 0, 8192, kRead, 0, 8192);
  t.Block(IOT_BLK_COMPLETE, 8500, 2, 2, 64, 8192, kRead, 0, 8192);
  Correlation c = t.Finish();
  ASSERT_EQ(c.requests.size(), 2u);
  for (const Request& q : c.requests) {
    EXPECT_EQ(q.cause, Cause::kAsync);
    ASSERT_NE(q.async, kNone);
  }
  EXPECT_EQ(c.asyncs[FindRequest(c, 1)->async].user_data, 500u);
  EXPECT_EQ(c.asyncs[FindRequest(c, 2)->async].user_data, 501u);
  // submit -> Q -> D -> C -> completion seen by the application
  const RequestLayers& l = FindRequest(c, 2)->layers;
  EXPECT_TRUE(l.has_app);
  EXPECT_EQ(l.total, 9001 - 1400);
  EXPECT_EQ(l.deviation, 0);
}

TEST(Correlate, NvmeCommandsJoinTheirRequest) {
  Trace t;
  t.Call(IOT_OP_PREAD64, 1000, 9000);
  t.Block(IOT_BLK_QUEUE, 1100, 0, 1, 0, 8192, kRead, kPid);
  t.Nvme(IOT_NVME_SETUP, 1200, 1, 0x02, 0, 2, 33);
  t.Block(IOT_BLK_ISSUE, 1250, 1, 1, 0, 8192, kRead, kPid);
  t.Nvme(IOT_NVME_COMPLETE, 7000, 1, 0x02, 0, 2, 33);
  t.Block(IOT_BLK_COMPLETE, 7100, 1, 1, 0, 8192, kRead, 0, 8192);
  t.Nvme(IOT_NVME_SETUP, 8000, 77, 0x02, 0, 1, 34);  // names no request
  Correlation c = t.Finish();
  ASSERT_EQ(c.requests.size(), 1u);
  ASSERT_EQ(c.requests[0].nvme.size(), 1u);
  EXPECT_EQ(c.requests[0].nvme[0].complete_ts, 7000u);
  EXPECT_EQ(c.requests[0].layers.nvme, 5800);
  EXPECT_EQ(c.nvme_unjoined, 1u);
  nlohmann::json r = LayersReport(c);
  const auto& cmd = r["requests"][0]["nvme"][0];
  EXPECT_EQ(cmd["op"], "read");
  EXPECT_EQ(cmd["nlb"], 2);
  EXPECT_EQ(cmd["bytes"], 8192);
  // with NVMe, the device share is the command's time: 5800 of 9000
  EXPECT_NEAR(r["software_share"]["mean_pct"].get<double>(), 100.0 * 3200 / 9000, 0.01);
}

TEST(Correlate, InterferenceIsClippedToTheRequest) {
  Trace t;
  t.Call(IOT_OP_PREAD64, 1000, 9000);
  t.Block(IOT_BLK_QUEUE, 1100, 0, 1, 0, 4096, kRead, kPid);
  t.Block(IOT_BLK_ISSUE, 1200, 1, 1, 0, 4096, kRead, kPid);
  t.Block(IOT_BLK_COMPLETE, 5100, 1, 1, 0, 4096, kRead, 0, 4096);
  t.Sched(IOT_SCHED_OFFCPU, 1300, 3000, 2);      // waiting: 3000 inside
  t.Sched(IOT_SCHED_OFFCPU, 4500, 2000, 0);      // preempted: 600 inside [1100, 5100)
  t.Sched(IOT_SCHED_HARDIRQ, 1150, 20, 33);
  t.Sched(IOT_SCHED_SOFTIRQ, 9000, 50, 4);       // after completion: not counted
  t.Sched(IOT_SCHED_HARDIRQ, 1150, 20, 33, 555);  // another thread
  Correlation c = t.Finish();
  const Interference& in = c.requests[0].interference;
  EXPECT_EQ(in.offcpu_blocked_ns, 3000u);
  EXPECT_EQ(in.offcpu_preempted_ns, 600u);
  EXPECT_EQ(in.hardirq_ns, 20u);
  EXPECT_EQ(in.softirq_ns, 0u);
  EXPECT_EQ(in.intervals, 3u);
}

TEST(Correlate, DependentReadChainsAndAppPresplitAreFound) {
  Trace t;
  uint64_t ts = 1000;
  for (int i = 0; i < 5; i++) {
    iot_syscall& s = t.Call(IOT_OP_PREAD64, ts, 10000);
    s.offset = 4096 * i;
    s.length = 4096;
    s.ret = 4096;
    t.Block(IOT_BLK_QUEUE, ts + 1000, 0, 100 + i, 8 * i, 4096, kRead, kPid);
    t.Block(IOT_BLK_ISSUE, ts + 2000, 200 + i, 100 + i, 8 * i, 4096, kRead, kPid);
    t.Block(IOT_BLK_COMPLETE, ts + 8000, 200 + i, 100 + i, 8 * i, 4096, kRead, 0, 4096);
    ts += 10000 + 5000;  // 5 us of user code between reads
  }
  Correlation c = t.Finish();
  nlohmann::json r = LayersReport(c);
  const auto& dc = r["dependent_chains"];
  EXPECT_EQ(dc["chains"], 1);
  EXPECT_EQ(dc["reads_in_chains"], 5);
  // span 5 * 10000 + 4 * 5000; with resubmission: first read + 4 device times of 6000
  EXPECT_EQ(dc["span_ns"], 70000);
  EXPECT_EQ(dc["estimated_with_driver_resubmission_ns"], 10000 + 4 * 6000);
  // five sequential 4 KiB reads of one file by one thread: a pre-split
  EXPECT_EQ(r["splits"]["app_presplit_runs"], 1);
  EXPECT_EQ(r["splits"]["app_presplit"][0]["calls"], 5);
  EXPECT_EQ(r["splits"]["app_presplit"][0]["bytes"], 5 * 4096);
  LayersOptions tight;
  tight.dependent_gap_ns = 1000;
  EXPECT_EQ(LayersReport(c, tight)["dependent_chains"]["chains"], 0);
}


// Durations are checked before arithmetic: two requests whose device times together pass
// INT64_MAX (a forged trace) give a saturated sum and a mean between their min and max.
TEST(Correlate, LatencySumsOfForgedDurationsSaturate) {
  constexpr uint64_t kHuge = 6'000'000'000'000'000'000ull;  // two of them pass INT64_MAX
  Trace t;
  t.Call(IOT_OP_PREAD64, 1000, 2 * kHuge).length = 1 << 20;
  t.Block(IOT_BLK_QUEUE, 1100, 0, 1, 2048, 1 << 20, kRead, kPid);
  t.Block(IOT_BLK_SPLIT, 1200, 0, 2, 2048, 512 << 10, kRead, kPid, 3072, /*parent=*/1);
  t.Block(IOT_BLK_ISSUE, 1300, 10, 2, 2048, 512 << 10, kRead, kPid);
  t.Block(IOT_BLK_ISSUE, 1400, 11, 1, 3072, 512 << 10, kRead, kPid);
  t.Block(IOT_BLK_COMPLETE, 1300 + kHuge, 10, 2, 2048, 512 << 10, kRead, 0, 512 << 10);
  t.Block(IOT_BLK_COMPLETE, 1400 + kHuge, 11, 1, 3072, 512 << 10, kRead, 0, 512 << 10);
  Correlation c = t.Finish();
  nlohmann::json layers = LayersReport(c)["latency"]["layers"];
  const nlohmann::json* device = nullptr;
  for (const nlohmann::json& l : layers) {
    if (l["layer"] == "driver_device") device = &l;
  }
  ASSERT_NE(device, nullptr) << layers.dump();
  EXPECT_EQ((*device)["n"], 2);
  EXPECT_EQ((*device)["sum_ns"].get<int64_t>(), INT64_MAX);
  EXPECT_GE((*device)["mean_ns"].get<int64_t>(), (*device)["min_ns"].get<int64_t>());
  EXPECT_LE((*device)["mean_ns"].get<int64_t>(), (*device)["max_ns"].get<int64_t>());
}

}  // namespace
}  // namespace iotwin::correlate
