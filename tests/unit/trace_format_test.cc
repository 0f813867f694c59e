// Trace format v1: round trips of every record type, truncation, corruption, salvage, seeking.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "format/layout.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "format/trace_writer.h"

namespace iotwin {
namespace {

class TraceFormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/iotwin-format-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/t.iotwin";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::vector<uint8_t> ReadFile(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  void WriteFile(const std::string& p, const std::vector<uint8_t>& data) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  }

  // Reads all records; returns the status of the first failure (ok at a clean or truncated end).
  Status ReadAll(const std::string& p, std::vector<std::vector<uint8_t>>* out,
                 TraceReaderOptions o = {}, TraceDamage* damage = nullptr) {
    auto r = TraceReader::Open(p, o);
    if (!r.ok()) return r.status();
    for (;;) {
      auto n = (*r)->Next();
      if (!n.ok()) return n.status();
      if (!*n) break;
      const uint8_t* b = reinterpret_cast<const uint8_t*>(*n);
      if (out) out->emplace_back(b, b + (*n)->size);
    }
    if (damage) *damage = (*r)->damage();
    return Status::Ok();
  }

  std::string dir_, path_;
};

nlohmann::json TestMeta() {
  return {{"tool", "iotwin-test"}, {"host", {{"kernel", "6.18"}, {"cpus", 2}}}};
}

iot_syscall MakeSyscall(uint64_t i) {
  iot_syscall s{};
  InitRecord(&s, IOT_REC_SYSCALL);
  s.op = IOT_OP_PREAD64;
  s.cpu = static_cast<uint16_t>(i % 2);
  s.ts = 1'000'000 + i * 2000;
  s.dur = 900 + i % 50;
  s.tgid = 100;
  s.tid = 100 + static_cast<uint32_t>(i % 3);
  s.ret = 4096;
  s.fd = 3;
  s.fd2 = -1;
  s.offset = i * 4096;
  s.length = 4096;
  s.ino = 42;
  s.dev = (8u << 20) | 1;
  return s;
}

// One record of every v1 type with distinctive field values.
std::vector<std::vector<uint8_t>> OneOfEach(TraceWriter* w) {
  std::vector<std::vector<uint8_t>> recs;
  auto add = [&](const auto& rec) {
    const uint8_t* b = reinterpret_cast<const uint8_t*>(&rec);
    recs.emplace_back(b, b + sizeof rec);
    EXPECT_TRUE(w->Append(rec).ok());
  };
  auto path = w->InternString("/data/model-00001-of-00002.safetensors");
  EXPECT_TRUE(path.ok());
  iot_syscall s = MakeSyscall(7);
  s.op = IOT_OP_OPENAT;
  s.path_id = *path;
  s.flags = 0x8000;
  s.mode = 0644;
  s.ret = 5;
  add(s);
  {
    struct {
      iot_iovec v;
      uint64_t lens[3];
    } v{};
    InitRecord(&v.v, IOT_REC_IOVEC);
    v.v.hdr.size = sizeof v;
    v.v.tid = 9;
    v.v.count = 3;
    v.v.captured = 3;
    v.v.ts = 55;
    v.lens[0] = 4096;
    v.lens[1] = 512;
    v.lens[2] = 8192;
    const uint8_t* vb = reinterpret_cast<const uint8_t*>(&v);
    recs.emplace_back(vb, vb + sizeof v);
    EXPECT_TRUE(w->Append(&v.v.hdr).ok());
  }
  {
    struct {
      iot_fdlist l;
      iot_fdlist_entry e[2];
    } l{};
    InitRecord(&l.l, IOT_REC_FDLIST);
    l.l.hdr.size = sizeof l;
    l.l.tid = 9;
    l.l.kind = IOT_FDL_URING_FILES;
    l.l.count = 3;
    l.l.captured = 2;
    l.l.ts = 56;
    l.l.first = 4;
    l.e[0] = {5, 0x800001, 77, 02, 8, IOT_FDLE_IDENT};
    l.e[1].fd = -1;
    const uint8_t* lb = reinterpret_cast<const uint8_t*>(&l);
    recs.emplace_back(lb, lb + sizeof l);
    EXPECT_TRUE(w->Append(&l.l.hdr).ok());
  }
  iot_proc p{};
  InitRecord(&p, IOT_REC_PROC);
  p.kind = IOT_PROC_EXEC;
  p.ts = 11;
  p.tgid = p.tid = 12;
  p.path_id = *path;
  std::memcpy(p.comm, "python3", 7);
  add(p);
  iot_fd_snapshot fs{};
  InitRecord(&fs, IOT_REC_FD_SNAPSHOT);
  fs.ts = 13;
  fs.fd = 4;
  fs.pos = 1 << 20;
  add(fs);
  iot_map_snapshot ms{};
  InitRecord(&ms, IOT_REC_MAP_SNAPSHOT);
  ms.ts = 14;
  ms.start = 0x7f0000000000;
  ms.end = 0x7f0000100000;
  add(ms);
  iot_page_fault pf{};
  InitRecord(&pf, IOT_REC_PAGE_FAULT);
  pf.ts = 15;
  pf.addr = 0x7f0000001000;
  pf.pgoff = 1;
  pf.flags = IOT_PFF_MAJOR;
  add(pf);
  iot_page_cache pc{};
  InitRecord(&pc, IOT_REC_PAGE_CACHE);
  pc.ts = 16;
  pc.kind = IOT_PC_ADD;
  pc.index = 33;
  pc.nr_pages = 4;
  add(pc);
  iot_writeback wb{};
  InitRecord(&wb, IOT_REC_WRITEBACK);
  wb.ts = 17;
  wb.kind = IOT_WB_INODE_DONE;
  wb.nr = 256;
  add(wb);
  iot_block b{};
  InitRecord(&b, IOT_REC_BLOCK);
  b.ts = 18;
  b.phase = IOT_BLK_ISSUE;
  b.sector = 123456;
  b.nr_sector = 256;
  b.bytes = 131072;
  b.flags = IOT_BLKF_READ | IOT_BLKF_READAHEAD;
  std::memcpy(b.comm, "kworker/u4:1", 12);
  add(b);
  iot_nvme n{};
  InitRecord(&n, IOT_REC_NVME);
  n.ts = 19;
  n.phase = IOT_NVME_SETUP;
  n.opcode = 2;
  n.slba = 999;
  n.nlb = 32;
  n.lba_size = 4096;
  add(n);
  iot_async_io a{};
  InitRecord(&a, IOT_REC_ASYNC_IO);
  a.ts = 20;
  a.engine = IOT_AIO_ENGINE_URING;
  a.phase = IOT_AIO_SUBMIT;
  a.user_data = 0xdeadbeef;
  a.length = 16 << 20;
  add(a);
  iot_intent in{};
  InitRecord(&in, IOT_REC_INTENT);
  in.ts = 21;
  in.kind = IOT_INTENT_BEGIN;
  in.label_id = *path;
  add(in);
  iot_lost l{};
  InitRecord(&l, IOT_REC_LOST);
  l.ts = 22;
  l.source = IOT_SRC_SYSCALL;
  l.count = 3;
  add(l);
  iot_clock c{};
  InitRecord(&c, IOT_REC_CLOCK);
  c.monotonic_ns = 23;
  c.realtime_ns = 1'700'000'000'000'000'000ull;
  add(c);
  iot_cache_state cs{};
  InitRecord(&cs, IOT_REC_CACHE_STATE);
  cs.ts = 24;
  cs.resident_pages = 10;
  cs.total_pages = 20;
  add(cs);
  iot_subpage sp{};
  InitRecord(&sp, IOT_REC_SUBPAGE);
  sp.ts = 25;
  sp.bitmap[0] = 0xff;
  sp.changed_words = 8;
  add(sp);
  iot_sched sc{};
  InitRecord(&sc, IOT_REC_SCHED);
  sc.ts = 26;
  sc.kind = IOT_SCHED_OFFCPU;
  sc.dur = 1000;
  add(sc);
  return recs;
}

TEST_F(TraceFormatTest, EveryRecordTypeRoundTrips) {
  std::vector<std::vector<uint8_t>> written;
  {
    auto w = TraceWriter::Create(path_, TestMeta());
    ASSERT_TRUE(w.ok()) << w.status().message();
    written = OneOfEach(w->get());
    ASSERT_TRUE((*w)->Finish({{"stop_reason", "exited"}, {"exit_status", 0}}).ok());
  }
  auto r = TraceReader::Open(path_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)->meta()["tool"], "iotwin-test");
  ASSERT_TRUE((*r)->summary().has_value());
  EXPECT_EQ((*(*r)->summary())["stop_reason"], "exited");
  std::set<uint16_t> types_seen;
  size_t i = 0;
  for (;;) {
    auto n = (*r)->Next();
    ASSERT_TRUE(n.ok()) << n.status().message();
    if (!*n) break;
    types_seen.insert((*n)->type);
    if ((*n)->type == IOT_REC_STRING) {
      EXPECT_EQ((*r)->String(As<iot_string>(*n).id), "/data/model-00001-of-00002.safetensors");
      continue;
    }
    ASSERT_LT(i, written.size());
    const auto& want = written[i++];
    // Written size may be padded to 8; compare the declared bytes, then the padding is zero.
    ASSERT_GE((*n)->size, want.size() - (want.size() % 8 ? want.size() % 8 : 0));
    iot_rec_hdr wh;
    std::memcpy(&wh, want.data(), sizeof wh);
    EXPECT_EQ((*n)->type, wh.type);
    EXPECT_EQ(0, std::memcmp(reinterpret_cast<const uint8_t*>(*n) + 4, want.data() + 4,
                             want.size() - 4))
        << RecordTypeName(wh.type);
  }
  EXPECT_EQ(i, written.size());
  for (uint16_t t = 1; t <= IOT_REC_MAX; t++) EXPECT_TRUE(types_seen.count(t)) << RecordTypeName(t);
  EXPECT_FALSE((*r)->damage().truncated);
  EXPECT_EQ((*r)->damage().unknown_records, 0u);
}

TEST_F(TraceFormatTest, ManyChunksStreamInOrderWithIndex) {
  const uint64_t kCount = 200'000;  // ~22 MB raw: many 1 MiB chunks
  {
    auto w = TraceWriter::Create(path_, TestMeta());
    ASSERT_TRUE(w.ok());
    for (uint64_t i = 0; i < kCount; i++) ASSERT_TRUE((*w)->Append(MakeSyscall(i)).ok());
    ASSERT_TRUE((*w)->Finish({}).ok());
  }
  auto r = TraceReader::Open(path_);
  ASSERT_TRUE(r.ok());
  EXPECT_GT((*r)->index().size(), 10u);
  uint64_t i = 0;
  for (;;) {
    auto n = (*r)->Next();
    ASSERT_TRUE(n.ok()) << n.status().message();
    if (!*n) break;
    ASSERT_EQ(As<iot_syscall>(*n).offset, i * 4096);
    i++;
  }
  EXPECT_EQ(i, kCount);
  // Compressed size per record: repetitive pread records compress well below their 112 bytes.
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_LT(static_cast<double>(st.st_size) / kCount, 16.0);
}

TEST_F(TraceFormatTest, NamesBeyondTheStringBudgetFailWithTheirOffset) {
  // 2,000 distinct 4 KiB names compress to a few KiB, yet take 8 MiB once read.
  {
    auto w = TraceWriter::Create(path_, TestMeta());
    ASSERT_TRUE(w.ok());
    for (int i = 0; i < 2000; i++) {
      std::string name = "/" + std::to_string(i) + std::string(4000, 'x');
      ASSERT_TRUE((*w)->InternString(name).ok());
    }
    ASSERT_TRUE((*w)->Finish({}).ok());
  }
  EXPECT_LT(std::filesystem::file_size(path_), 1u << 20);
  TraceReaderOptions small;
  small.max_string_bytes = 1 << 20;
  Status st = ReadAll(path_, nullptr, small);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("more than 1 MiB"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("at byte"), std::string::npos) << st.ToString();
  // The same names within the default budget read in full.
  EXPECT_TRUE(ReadAll(path_, nullptr).ok());
}

TEST_F(TraceFormatTest, SeekTimeUsesIndexAndKeepsStrings) {
  const uint64_t kCount = 100'000;
  uint32_t sid = 0;
  {
    auto w = TraceWriter::Create(path_, TestMeta());
    ASSERT_TRUE(w.ok());
    sid = *(*w)->InternString("/early/path");
    for (uint64_t i = 0; i < kCount; i++) ASSERT_TRUE((*w)->Append(MakeSyscall(i)).ok());
    ASSERT_TRUE((*w)->Finish({}).ok());
  }
  auto r = TraceReader::Open(path_);
  ASSERT_TRUE(r.ok());
  uint64_t target = MakeSyscall(70'000).ts;
  ASSERT_TRUE((*r)->SeekTime(target).ok());
  auto n = (*r)->Next();
  ASSERT_TRUE(n.ok() && *n);
  uint64_t first_ts = RecordTimestamp(*n);
  EXPECT_LE(first_ts, target);
  EXPECT_GT(first_ts, MakeSyscall(50'000).ts);  // it skipped most of the file
  EXPECT_EQ((*r)->String(sid), "/early/path");
  // The record at `target` is reachable from there.
  bool found = false;
  for (; *n; n = (*r)->Next()) {
    ASSERT_TRUE(n.ok());
    if (RecordTimestamp(*n) == target) {
      found = true;
      break;
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(TraceFormatTest, EveryTruncationReadsCompleteChunksThenReportsIt) {
  TraceWriterOptions o;
  o.chunk_bytes = 4096;  // many small chunks
  {
    auto w = TraceWriter::Create(path_, TestMeta(), o);
    ASSERT_TRUE(w.ok());
    for (uint64_t i = 0; i < 300; i++) ASSERT_TRUE((*w)->Append(MakeSyscall(i)).ok());
    ASSERT_TRUE((*w)->Finish({}).ok());
  }
  std::vector<uint8_t> full = ReadFile(path_);
  auto r0 = TraceReader::Open(path_);
  ASSERT_TRUE(r0.ok());
  std::vector<ChunkIndexEntry> index = (*r0)->index();
  ASSERT_GT(index.size(), 5u);
  uint64_t header_end = index[0].offset;
  std::string cut = dir_ + "/cut.iotwin";
  for (size_t len = 0; len < full.size(); len += (len < header_end + 64 ? 1 : 7)) {
    WriteFile(cut, std::vector<uint8_t>(full.begin(), full.begin() + static_cast<ptrdiff_t>(len)));
    std::vector<std::vector<uint8_t>> recs;
    TraceDamage damage;
    Status st = ReadAll(cut, &recs, {}, &damage);
    if (len < header_end) {
      // The header itself is cut: a clear error naming the file and a byte offset.
      ASSERT_FALSE(st.ok()) << len;
      EXPECT_NE(st.message().find(cut), std::string::npos) << st.message();
      EXPECT_NE(st.message().find("byte"), std::string::npos) << st.message();
      continue;
    }
    ASSERT_TRUE(st.ok()) << "len " << len << ": " << st.message();
    ASSERT_TRUE(damage.truncated) << len;
    EXPECT_NE(damage.truncated_detail.find("byte"), std::string::npos);
    // Exactly the chunks that lie wholly inside the cut are read.
    uint64_t expect = 0;
    for (size_t c = 0; c < index.size(); c++) {
      uint64_t end = c + 1 < index.size() ? index[c + 1].offset : (*r0)->index().back().offset;
      if (c + 1 == index.size()) break;  // last chunk's end is the trailer start: handled below
      if (end <= len) expect += index[c].records;
    }
    EXPECT_GE(recs.size(), expect) << len;
    EXPECT_LE(recs.size(), 300u);
    for (size_t k = 0; k < recs.size(); k++) {
      iot_syscall s;
      std::memcpy(&s, recs[k].data(), sizeof s);
      ASSERT_EQ(s.offset, k * 4096);
    }
  }
}

TEST_F(TraceFormatTest, BitFlipsAreDetectedWithOffsetOrSalvaged) {
  TraceWriterOptions o;
  o.chunk_bytes = 8192;
  {
    auto w = TraceWriter::Create(path_, TestMeta(), o);
    ASSERT_TRUE(w.ok());
    for (uint64_t i = 0; i < 2000; i++) ASSERT_TRUE((*w)->Append(MakeSyscall(i)).ok());
    ASSERT_TRUE((*w)->Finish({{"stop_reason", "exited"}}).ok());
  }
  std::vector<uint8_t> full = ReadFile(path_);
  std::mt19937_64 rng(1);
  std::string bad = dir_ + "/bad.iotwin";
  int detected = 0;
  for (int trial = 0; trial < 300; trial++) {
    std::vector<uint8_t> copy = full;
    size_t byte = rng() % copy.size();
    copy[byte] ^= static_cast<uint8_t>(1u << (rng() % 8));
    WriteFile(bad, copy);
    std::vector<std::vector<uint8_t>> recs;
    Status st = ReadAll(bad, &recs);
    // Every flipped bit lands in a checksummed region, so strict reading must fail...
    ASSERT_FALSE(st.ok()) << "flip at byte " << byte << " went unnoticed";
    detected++;
    EXPECT_NE(st.message().find("byte"), std::string::npos) << st.message();
    // ...and salvage reading must not crash, and must keep every intact record in order.
    TraceReaderOptions so;
    so.salvage = true;
    std::vector<std::vector<uint8_t>> salvaged;
    TraceDamage damage;
    Status ss = ReadAll(bad, &salvaged, so, &damage);
    if (ss.ok()) {
      EXPECT_LE(salvaged.size(), 2000u);
      uint64_t prev = 0;
      for (size_t k = 0; k < salvaged.size(); k++) {
        iot_syscall s;
        std::memcpy(&s, salvaged[k].data(), sizeof s);
        if (k) {
          ASSERT_GT(s.offset, prev);
        }
        prev = s.offset;
      }
      if (salvaged.size() < 2000u) {
        EXPECT_FALSE(damage.skipped_chunks.empty());
      }
    }
  }
  EXPECT_EQ(detected, 300);
}

TEST_F(TraceFormatTest, UnknownTypesAreSkippedAndShortRecordsZeroExtended) {
  {
    auto w = TraceWriter::Create(path_, TestMeta());
    ASSERT_TRUE(w.ok());
    struct {
      iot_rec_hdr h;
      uint32_t payload[3];
    } future{{999, 16}, {1, 2, 3}};
    ASSERT_TRUE((*w)->Append(&future.h).ok());
    // A syscall record from a hypothetical writer that knew only the first 40 bytes.
    iot_syscall s = MakeSyscall(3);
    s.hdr.size = 40;
    ASSERT_TRUE((*w)->Append(&s.hdr).ok());
    ASSERT_TRUE((*w)->Finish({}).ok());
  }
  auto r = TraceReader::Open(path_);
  ASSERT_TRUE(r.ok());
  auto n = (*r)->Next();
  ASSERT_TRUE(n.ok() && *n);
  ASSERT_EQ((*n)->type, IOT_REC_SYSCALL);
  const auto& s = As<iot_syscall>(*n);
  EXPECT_EQ(s.tgid, 100u);  // within the 40 bytes
  EXPECT_EQ(s.offset, 0u);  // beyond: zero-filled, not garbage
  EXPECT_EQ(s.ino, 0u);
  n = (*r)->Next();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, nullptr);
  EXPECT_EQ((*r)->damage().unknown_records, 1u);
}

// Records longer than this build's fixed size (a newer writer's extra fields) come back in
// place, whole, between full-size and short records of other types (TraceReader's fast path
// for full-size records and its slow path for short ones, interleaved).
TEST_F(TraceFormatTest, LongerRecordsComeBackWholeBetweenFullAndShortOnes) {
  {
    auto w = TraceWriter::Create(path_, TestMeta());
    ASSERT_TRUE(w.ok());
    struct {
      iot_syscall s;
      uint64_t extra;
    } longer{MakeSyscall(1), 0x1122334455667788ULL};
    longer.s.hdr.size = sizeof longer;
    ASSERT_TRUE((*w)->Append(&longer.s.hdr).ok());
    iot_syscall full = MakeSyscall(2);
    ASSERT_TRUE((*w)->Append(full).ok());
    iot_syscall shorter = MakeSyscall(3);
    shorter.hdr.size = 40;
    ASSERT_TRUE((*w)->Append(&shorter.hdr).ok());
    ASSERT_TRUE((*w)->Append(MakeSyscall(4)).ok());
    ASSERT_TRUE((*w)->Finish({}).ok());
  }
  auto r = TraceReader::Open(path_);
  ASSERT_TRUE(r.ok());
  std::vector<uint16_t> sizes;
  std::vector<uint64_t> offsets;
  uint64_t extra = 0;
  for (;;) {
    auto n = (*r)->Next();
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    if (!*n) break;
    ASSERT_EQ((*n)->type, IOT_REC_SYSCALL);
    sizes.push_back((*n)->size);
    offsets.push_back(As<iot_syscall>(*n).offset);
    if ((*n)->size > sizeof(iot_syscall)) {
      std::memcpy(&extra, reinterpret_cast<const uint8_t*>(*n) + sizeof(iot_syscall), sizeof extra);
    }
  }
  EXPECT_EQ(sizes, (std::vector<uint16_t>{sizeof(iot_syscall) + 8, sizeof(iot_syscall), 40,
                                           sizeof(iot_syscall)}));
  // The short record's offset lies beyond its 40 bytes: zero, not the neighbour's bytes.
  EXPECT_EQ(offsets, (std::vector<uint64_t>{MakeSyscall(1).offset, MakeSyscall(2).offset, 0,
                                             MakeSyscall(4).offset}));
  EXPECT_EQ(extra, 0x1122334455667788ULL);
}

TEST_F(TraceFormatTest, NotATraceAndWrongVersionGiveClearErrors) {
  WriteFile(path_, {'h', 'e', 'l', 'l', 'o'});
  auto r = TraceReader::Open(path_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(path_ + ": byte 0"), std::string::npos)
      << r.status().message();

  std::vector<uint8_t> junk(100, 'x');
  WriteFile(path_, junk);
  r = TraceReader::Open(path_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not an iotwin trace"), std::string::npos);

  {
    auto w = TraceWriter::Create(path_, TestMeta());
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Finish({}).ok());
  }
  auto data = ReadFile(path_);
  data[8] = 2;  // major version 2
  WriteFile(path_, data);
  r = TraceReader::Open(path_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kUnsupported);
  EXPECT_NE(r.status().message().find("version 2"), std::string::npos) << r.status().message();
}

TEST_F(TraceFormatTest, HostileLengthsDoNotAllocate) {
  {
    auto w = TraceWriter::Create(path_, TestMeta());
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append(MakeSyscall(1)).ok());
    ASSERT_TRUE((*w)->FlushChunk().ok());
  }  // no Finish: no footer
  auto data = ReadFile(path_);
  auto r0 = TraceReader::Open(path_);
  ASSERT_TRUE(r0.ok());
  size_t chunk_at = 32 + data[16] + (data[17] << 8);
  layout::ChunkHeader h;
  std::memcpy(&h, data.data() + chunk_at, sizeof h);
  h.raw_len = 0xffffffff;
  h.header_hash = layout::HashChunkHeader(h);  // a consistent but hostile header
  std::memcpy(data.data() + chunk_at, &h, sizeof h);
  WriteFile(path_, data);
  Status st = ReadAll(path_, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("exceed the limit"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("byte " + std::to_string(chunk_at)), std::string::npos)
      << st.message();
}

TEST_F(TraceFormatTest, InternStringIsStableAndTruncatesOverlongStrings) {
  std::string longname(IOT_STRING_MAX + 100, 'a');
  uint32_t a, b, c;
  {
    auto w = TraceWriter::Create(path_, TestMeta());
    ASSERT_TRUE(w.ok());
    a = *(*w)->InternString("x");
    b = *(*w)->InternString("x");
    c = *(*w)->InternString(longname);
    ASSERT_TRUE((*w)->Finish({}).ok());
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  auto r = TraceReader::Open(path_);
  ASSERT_TRUE(r.ok());
  bool saw_trunc = false;
  for (auto n = (*r)->Next(); n.ok() && *n; n = (*r)->Next()) {
    if ((*n)->type == IOT_REC_STRING && As<iot_string>(*n).id == c) {
      saw_trunc = As<iot_string>(*n).flags & IOT_STRF_TRUNCATED;
    }
  }
  EXPECT_TRUE(saw_trunc);
  EXPECT_EQ((*r)->String(c).size(), size_t{IOT_STRING_MAX});
}

TEST(RecordsTest, OpNamesRoundTrip) {
  for (uint16_t op = 1; op <= IOT_OP_MAX; op++) {
    auto back = OpFromName(OpName(op));
    ASSERT_TRUE(back.has_value()) << op;
    EXPECT_EQ(*back, op);
  }
  EXPECT_TRUE(OpIsRead(IOT_OP_PREADV2));
  EXPECT_TRUE(OpIsWrite(IOT_OP_PWRITE64));
  EXPECT_FALSE(OpIsRead(IOT_OP_WRITE));
  EXPECT_EQ(OpName(9999), "unknown");
}

}  // namespace
}  // namespace iotwin
