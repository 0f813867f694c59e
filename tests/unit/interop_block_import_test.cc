// Block-trace importers (ftrace text, blkparse, CHEOPS bpftrace CSV) and the fio iolog importer:
// golden tests on hand-checked inputs in tests/data/interop/.
#include <fcntl.h>
#include <linux/falloc.h>

#include <map>
#include <set>

#include <gtest/gtest.h>

#include "format/records.h"
#include "interop/block_text.h"
#include "interop/importer.h"
#include "interop/line_reader.h"
#include "interop_test_util.h"

namespace iotwin::interop {
namespace {

using testing::DataPath;
using testing::ImportOutcome;

constexpr uint32_t Dev(uint32_t maj, uint32_t min) { return (maj << 20) | min; }

// Request-size histogram of the issued (D) requests: bytes -> count.
std::map<uint64_t, int> IssueSizes(const std::vector<iot_block>& blocks) {
  std::map<uint64_t, int> h;
  for (const auto& b : blocks) {
    if (b.phase == IOT_BLK_ISSUE) h[b.bytes]++;
  }
  return h;
}

TEST(BlockText, Rwbs) {
  EXPECT_EQ(*ParseRwbs("R"), uint32_t{IOT_BLKF_READ});
  EXPECT_EQ(*ParseRwbs("RA"), uint32_t{IOT_BLKF_READ | IOT_BLKF_READAHEAD});
  EXPECT_EQ(*ParseRwbs("WS"), uint32_t{IOT_BLKF_WRITE | IOT_BLKF_SYNC});
  EXPECT_EQ(*ParseRwbs("FWS"), uint32_t{IOT_BLKF_PREFLUSH | IOT_BLKF_WRITE | IOT_BLKF_SYNC});
  EXPECT_EQ(*ParseRwbs("WFS"), uint32_t{IOT_BLKF_WRITE | IOT_BLKF_FUA | IOT_BLKF_SYNC});
  EXPECT_EQ(*ParseRwbs("F"), uint32_t{IOT_BLKF_FLUSH});
  EXPECT_EQ(*ParseRwbs("FF"), uint32_t{IOT_BLKF_PREFLUSH | IOT_BLKF_FLUSH});
  EXPECT_EQ(*ParseRwbs("DE"), uint32_t{IOT_BLKF_SECURE_ERASE});
  EXPECT_EQ(*ParseRwbs("D"), uint32_t{IOT_BLKF_DISCARD});
  EXPECT_EQ(*ParseRwbs("WZ"), uint32_t{IOT_BLKF_WRITE_ZEROES});
  EXPECT_EQ(*ParseRwbs("RM"), uint32_t{IOT_BLKF_READ | IOT_BLKF_META});
  EXPECT_EQ(*ParseRwbs("N"), uint32_t{IOT_BLKF_OTHER});
  EXPECT_FALSE(ParseRwbs("Q").has_value());
  EXPECT_FALSE(ParseRwbs("").has_value());
  for (const char* s : {"R", "RA", "WS", "FWS", "WFS", "F", "DE", "D", "WZ", "RM"}) {
    EXPECT_EQ(RwbsText(*ParseRwbs(s)), s);
  }
  EXPECT_EQ(*ParseDevT("259,4"), Dev(259, 4));
  EXPECT_EQ(*ParseDevT("8:0"), Dev(8, 0));
  EXPECT_FALSE(ParseDevT("8").has_value());
}

TEST(FtraceImport, OldAndNewFormatsLostEventsAndRequestIds) {
  ImportOutcome out;
  testing::ImportInto(&out, ImportFormat::kFtraceBlock, {DataPath("ftrace_block.txt")});
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  auto b = out.sink.Of<iot_block>(IOT_REC_BLOCK);
  ASSERT_EQ(b.size(), 10u);
  // insert + issue of one request share an id; its completion finds it by (dev, sector).
  EXPECT_EQ(b[0].phase, IOT_BLK_INSERT);
  EXPECT_EQ(b[1].phase, IOT_BLK_ISSUE);
  EXPECT_EQ(b[2].phase, IOT_BLK_COMPLETE);
  EXPECT_NE(b[0].rq_id, 0u);
  EXPECT_EQ(b[0].rq_id, b[1].rq_id);
  EXPECT_EQ(b[1].rq_id, b[2].rq_id);
  EXPECT_EQ(b[1].ts, 1000000200000ull);
  EXPECT_EQ(b[1].dev, Dev(254, 0));
  EXPECT_EQ(b[1].sector, 2048u);
  EXPECT_EQ(b[1].nr_sector, 256u);
  EXPECT_EQ(b[1].bytes, 131072u);
  EXPECT_EQ(b[1].flags, uint32_t{IOT_BLKF_READ | IOT_BLKF_READAHEAD});
  EXPECT_EQ(b[1].aux, (2u << 13) | 4u);  // ioprio be,0,4
  EXPECT_EQ(b[1].tid, 1234u);
  EXPECT_EQ(b[1].cpu, 1);
  EXPECT_STREQ(b[1].comm, "bash");
  EXPECT_EQ(b[2].tid, 0u);  // completion context is not the submitter
  EXPECT_EQ(b[2].bytes, 131072u);
  // Older kernels print no ioprio; task names may hold spaces.
  EXPECT_EQ(b[3].flags, uint32_t{IOT_BLKF_WRITE | IOT_BLKF_SYNC});
  EXPECT_EQ(b[3].tid, 77u);
  EXPECT_EQ(b[3].aux, 0u);
  // record-tgid column; a flush with preflush.
  EXPECT_EQ(b[4].dev, Dev(8, 0));
  EXPECT_EQ(b[4].tgid, 55u);
  EXPECT_EQ(b[4].flags, uint32_t{IOT_BLKF_PREFLUSH | IOT_BLKF_WRITE | IOT_BLKF_SYNC});
  EXPECT_EQ(b[5].rq_id, b[3].rq_id);
  EXPECT_EQ(b[6].rq_id, b[4].rq_id);
  EXPECT_EQ(b[6].error, -5);
  EXPECT_EQ(b[7].phase, IOT_BLK_QUEUE);
  EXPECT_EQ(b[7].bytes, 4096u);
  EXPECT_EQ(b[8].phase, IOT_BLK_SPLIT);
  EXPECT_EQ(b[8].aux, 4100u);
  EXPECT_EQ(b[9].flags, uint32_t{IOT_BLKF_DISCARD | IOT_BLKF_SYNC});
  EXPECT_EQ(IssueSizes(b), (std::map<uint64_t, int>{{0, 1}, {4096, 1}, {131072, 1}, {1048576, 1}}));

  auto lost = out.sink.Of<iot_lost>(IOT_REC_LOST);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].source, IOT_SRC_BLOCK);
  EXPECT_EQ(lost[0].cpu, 1);
  EXPECT_EQ(lost[0].count, 12u);
  EXPECT_EQ(out.sink.LostTotals().at("block"), 12u);

  EXPECT_EQ(out.stats.comment_lines, 6u);
  EXPECT_EQ(out.stats.skipped.at("sched_switch"), 1u);
  EXPECT_EQ(out.stats.unknown_lines, 1u);
  EXPECT_EQ(out.stats.unknown_examples[0].line, 18u);
}

TEST(BlkparseImport, EventsSkipsSummaries) {
  ImportOutcome out;
  testing::ImportInto(&out, ImportFormat::kBlkparse, {DataPath("blkparse.txt")});
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  auto b = out.sink.Of<iot_block>(IOT_REC_BLOCK);
  ASSERT_EQ(b.size(), 13u);  // 15 events minus plug and unplug
  EXPECT_EQ(b[0].phase, IOT_BLK_QUEUE);
  EXPECT_EQ(b[0].sector, 223490u);
  EXPECT_EQ(b[0].bytes, 4096u);
  EXPECT_EQ(b[0].tid, 697u);
  EXPECT_STREQ(b[0].comm, "kjournald");
  EXPECT_EQ(b[3].phase, IOT_BLK_ISSUE);
  EXPECT_EQ(b[3].ts, 3000u);
  EXPECT_EQ(b[4].phase, IOT_BLK_COMPLETE);
  EXPECT_EQ(b[4].ts, 503000u);
  EXPECT_EQ(b[4].rq_id, b[3].rq_id);
  EXPECT_EQ(b[4].rq_id, b[2].rq_id);  // insert and issue share the request
  EXPECT_EQ(b[4].tid, 0u);
  EXPECT_EQ(b[6].phase, IOT_BLK_BACKMERGE);
  EXPECT_EQ(b[7].phase, IOT_BLK_ISSUE);
  EXPECT_EQ(b[7].bytes, 264u * 512);
  EXPECT_EQ(b[8].rq_id, b[7].rq_id);
  EXPECT_EQ(b[9].flags, uint32_t{IOT_BLKF_PREFLUSH | IOT_BLKF_WRITE | IOT_BLKF_SYNC});
  EXPECT_EQ(b[9].bytes, 0u);
  EXPECT_EQ(b[10].rq_id, b[9].rq_id);
  EXPECT_EQ(b[11].phase, IOT_BLK_SPLIT);
  EXPECT_EQ(b[11].aux, 5008u);
  EXPECT_EQ(b[12].phase, IOT_BLK_REMAP);
  EXPECT_EQ(b[12].aux, 4000u);
  EXPECT_EQ(IssueSizes(b), (std::map<uint64_t, int>{{0, 1}, {4096, 1}, {135168, 1}}));
  EXPECT_EQ(out.stats.unknown_lines, 0u);
  EXPECT_EQ(out.stats.skipped.at("action P"), 1u);
  EXPECT_EQ(out.stats.skipped.at("action U"), 1u);
  EXPECT_EQ(out.stats.comment_lines, 9u);  // summary lines (the blank one is counted as blank)
}

TEST(CheopsCsvImport, HistogramIsRequestSizes) {
  ImportOutcome out;
  ImportOptions o;
  o.dev = Dev(259, 4);
  testing::ImportInto(&out, ImportFormat::kBpftraceCsv, {DataPath("cheops.csv")}, o);
  ASSERT_TRUE(out.status.ok());
  auto b = out.sink.Of<iot_block>(IOT_REC_BLOCK);
  ASSERT_EQ(b.size(), 6u);
  EXPECT_EQ(b[0].ts, 81234567890123ull);  // ns kept, not rounded to seconds
  EXPECT_EQ(b[0].bytes, 131072u);         // bytes kept, not KiB
  EXPECT_EQ(b[0].sector, 5242880u);
  EXPECT_EQ(b[0].nr_sector, 256u);
  EXPECT_EQ(b[0].dev, Dev(259, 4));
  EXPECT_EQ(b[4].flags, uint32_t{IOT_BLKF_PREFLUSH | IOT_BLKF_WRITE | IOT_BLKF_SYNC});
  EXPECT_EQ(b[4].bytes, 0u);  // a flush is not a 0-byte write
  // The CHEOPS finding, from the histogram: 128 KiB dominates.
  auto h = IssueSizes(b);
  EXPECT_EQ(h, (std::map<uint64_t, int>{{0, 1}, {4096, 1}, {131072, 4}}));
  EXPECT_EQ(out.stats.comment_lines, 1u);
  EXPECT_EQ(out.stats.unknown_lines, 1u);
  EXPECT_EQ(out.sink.clock()["clock"], "monotonic");
}

TEST(FioIologImport, Version2) {
  ImportOutcome out;
  testing::ImportInto(&out, ImportFormat::kFioIolog, {DataPath("fio_v2.iolog")});
  ASSERT_TRUE(out.status.ok());
  auto c = out.sink.Of<iot_syscall>(IOT_REC_SYSCALL);
  ASSERT_EQ(c.size(), 6u);
  EXPECT_EQ(c[0].op, IOT_OP_OPENAT);
  EXPECT_EQ(out.sink.String(c[0].path_id), "/data/file1");
  int32_t fd = static_cast<int32_t>(c[0].ret);
  EXPECT_EQ(c[1].op, IOT_OP_PWRITE64);
  EXPECT_EQ(c[1].fd, fd);
  EXPECT_EQ(c[1].length, 4096u);
  EXPECT_EQ(c[2].op, IOT_OP_PREAD64);
  EXPECT_EQ(c[3].op, IOT_OP_FSYNC);
  // The wait (1000 µs) moved the synthetic clock.
  EXPECT_GE(c[3].ts - c[2].ts, 1000000u);
  EXPECT_EQ(c[4].op, IOT_OP_FALLOCATE);
  EXPECT_EQ(c[4].mode, uint32_t{FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE});
  EXPECT_EQ(c[4].offset, 8192u);
  EXPECT_EQ(c[4].length, 4096u);
  EXPECT_EQ(c[5].op, IOT_OP_CLOSE);
  EXPECT_EQ(c[5].fd, fd);
  EXPECT_EQ(out.stats.counters.at("waits"), 1u);
  EXPECT_EQ(out.stats.unknown_lines, 0u);
}

TEST(FioIologImport, Version3ImplicitOpenAndUnknownAction) {
  ImportOutcome out;
  testing::ImportInto(&out, ImportFormat::kFioIolog, {DataPath("fio_v3.iolog")});
  ASSERT_TRUE(out.status.ok());
  auto c = out.sink.Of<iot_syscall>(IOT_REC_SYSCALL);
  ASSERT_EQ(c.size(), 6u);
  EXPECT_EQ(c[0].op, IOT_OP_OPENAT);
  EXPECT_EQ(c[0].ts, 10000u);  // µs -> ns
  EXPECT_EQ(c[1].op, IOT_OP_PREAD64);
  EXPECT_EQ(c[1].ts, 20000u);
  EXPECT_EQ(c[1].length, 65536u);
  EXPECT_EQ(c[2].op, IOT_OP_OPENAT);  // /data/b used without open: fio opens it, so do we
  EXPECT_EQ(out.sink.String(c[2].path_id), "/data/b");
  EXPECT_EQ(c[3].op, IOT_OP_PWRITE64);
  EXPECT_EQ(c[3].offset, 4096u);
  EXPECT_EQ(c[4].op, IOT_OP_FDATASYNC);
  EXPECT_EQ(c[5].op, IOT_OP_CLOSE);
  EXPECT_EQ(out.stats.counters.at("implicit_opens"), 1u);
  EXPECT_EQ(out.stats.unknown_lines, 1u);
  EXPECT_EQ(out.stats.unknown_examples[0].line, 8u);
}

TEST(FioIologImport, SeveralLogsAreThreads) {
  ImportOutcome out;
  testing::ImportInto(&out, ImportFormat::kFioIolog,
                      {DataPath("fio_v3.iolog"), DataPath("fio_v3.iolog")});
  ASSERT_TRUE(out.status.ok());
  std::set<uint32_t> tids;
  for (const auto& c : out.sink.Of<iot_syscall>(IOT_REC_SYSCALL)) tids.insert(c.tid);
  EXPECT_EQ(tids.size(), 2u);
}

TEST(LineReader, LongLinesCrLfAndMissingNewline) {
  std::string big(LineReader::kMaxLine + 100, 'x');
  std::string text = "a\r\n" + big + "\nlast";
  auto r = LineReader::FromMemory(text);
  std::string_view line;
  ASSERT_TRUE(*r.Next(&line));
  EXPECT_EQ(line, "a");
  EXPECT_EQ(r.line_offset(), 0u);
  ASSERT_TRUE(*r.Next(&line));
  EXPECT_EQ(line.size(), LineReader::kMaxLine);
  EXPECT_TRUE(r.line_cut());
  EXPECT_EQ(r.line_number(), 2u);
  ASSERT_TRUE(*r.Next(&line));
  EXPECT_EQ(line, "last");
  EXPECT_EQ(r.line_offset(), 3u + big.size() + 1);
  EXPECT_FALSE(*r.Next(&line));
}

}  // namespace
}  // namespace iotwin::interop
