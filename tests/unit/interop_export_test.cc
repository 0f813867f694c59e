// Exporters: fio iologs against hand-checked golden files, Chrome JSON against Perfetto's nesting
// rules, CSV/JSONL tables.
#include <fcntl.h>
#include <linux/falloc.h>

#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "chrome_check.h"
#include "format/records.h"
#include "interop/exporters.h"
#include "interop_test_util.h"

namespace iotwin::interop {
namespace {

using testing::DataPath;
using testing::ReadFile;
using testing::ReplaceAll;
using testing::ScratchDir;
using ::iotwin::test::TraceBuilder;

constexpr uint64_t kMs = 1000000;
constexpr uint32_t Dev(uint32_t maj, uint32_t min) { return (maj << 20) | min; }

// Two threads of one process: reads at tracked positions, appends, a trim, a sync; plus calls fio
// cannot replay.
void WriteFileTrace(const std::string& path) {
  TraceBuilder b(nlohmann::json::object());
  b.Add(b.ProcRecord(IOT_PROC_CWD, 1, 10, 10, "", b.Str("/work")));
  {
    auto& s = b.Call(IOT_OP_OPENAT, 1 * kMs, 10, 10, AT_FDCWD, 3);
    s.path_id = b.Str("/data/in.bin");
    s.flags = O_RDONLY;
  }
  {
    auto& s = b.Call(IOT_OP_OPENAT, 1 * kMs + 500000, 10, 11, AT_FDCWD, 4);
    s.path_id = b.Str("out/log.txt");  // relative to the cwd
    s.flags = O_WRONLY | O_CREAT | O_APPEND;
  }
  b.Call(IOT_OP_READ, 2 * kMs, 10, 10, 3, 4096).length = 4096;
  {
    auto& s = b.Call(IOT_OP_WRITE, 2 * kMs + 500000, 10, 11, 4, 10);
    s.length = 10;
    s.fsize = 10;  // appends land at size - count
  }
  b.Call(IOT_OP_READ, 3 * kMs, 10, 10, 3, 4096).length = 4096;
  {
    auto& s = b.Call(IOT_OP_WRITE, 3 * kMs + 500000, 10, 11, 4, 20);
    s.length = 20;
    s.fsize = 30;
  }
  b.Call(IOT_OP_LSEEK, 4 * kMs, 10, 10, 3, 65536).offset = 65536;
  {
    auto& s = b.Call(IOT_OP_FALLOCATE, 4 * kMs, 10, 11, 4, 0);
    s.mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
    s.offset = 0;
    s.length = 4096;
  }
  b.Call(IOT_OP_FSYNC, 4 * kMs + 500000, 10, 11, 4, 0);
  b.Call(IOT_OP_READ, 5 * kMs, 10, 10, 3, 100).length = 4096;  // short read
  {
    auto& s = b.Call(IOT_OP_PREAD64, 6 * kMs, 10, 10, 3, 131072);
    s.offset = 1048576;
    s.length = 131072;
  }
  b.Call(IOT_OP_READ, 7 * kMs, 10, 10, 3, 0).length = 4096;  // EOF: nothing to replay
  b.Call(IOT_OP_WRITE, 7 * kMs, 10, 10, 1, 5).length = 5;    // fd 1: opened before the trace
  {
    auto& s = b.Call(IOT_OP_OPENAT, 7 * kMs, 10, 10, AT_FDCWD, 5);
    s.path_id = b.Str("/proc/self/status");
  }
  b.Call(IOT_OP_READ, 7 * kMs + 100, 10, 10, 5, 900).length = 4096;
  b.Call(IOT_OP_FSTAT, 8 * kMs, 10, 12, 3, 0);  // a thread without I/O: no job
  b.Call(IOT_OP_CLOSE, 9 * kMs, 10, 11, 4, 0);
  b.Call(IOT_OP_CLOSE, 10 * kMs, 10, 10, 3, 0);
  EXPECT_TRUE(b.WriteFile(path, nlohmann::json::object()).ok());
}

TEST(FioExport, ThreadsMatchGoldenIologs) {
  ScratchDir dir;
  WriteFileTrace(dir / "t.iotwin");
  FioExportOptions o;
  o.dir = dir / "fio";
  auto r = ExportFio(dir / "t.iotwin", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string root = dir / "fio/files";
  for (const char* job : {"p10-t10", "p10-t11"}) {
    std::string got = ReadFile(dir / (std::string("fio/") + job + ".iolog"));
    std::string want = ReplaceAll(ReadFile(DataPath(std::string("expected/fio_export_") + job + ".iolog")),
                                  "@ROOT@", root);
    EXPECT_EQ(got, want) << job;
  }
  EXPECT_EQ(access((dir / "fio/p10-t12.iolog").c_str(), F_OK), -1);
  EXPECT_EQ(r->jobs, 2u);
  EXPECT_EQ(r->reads, 4u);
  EXPECT_EQ(r->read_bytes, 4096u + 4096 + 100 + 131072);
  EXPECT_EQ(r->writes, 2u);
  EXPECT_EQ(r->write_bytes, 30u);
  EXPECT_EQ(r->trims, 1u);
  EXPECT_EQ(r->syncs, 1u);
  EXPECT_EQ(r->skipped.at("read: zero bytes transferred"), 1u);
  EXPECT_EQ(r->skipped.at("write: descriptor opened before the trace, not known"), 1u);
  EXPECT_EQ(r->skipped.at("read: pseudo-file (/proc, /sys, /dev)"), 1u);

  std::string job = ReadFile(dir / "fio/replay.fio");
  // Files prepared at their traced extent (rounded to 4 KiB) before the replay jobs start.
  EXPECT_NE(job.find("filename=" + root + "/f00000_data_in.bin\nsize=1179648\n"), std::string::npos) << job;
  EXPECT_NE(job.find("filename=" + root + "/f00001_work_out_log.txt\nsize=4096\n"), std::string::npos);
  EXPECT_NE(job.find("[p10-t10]\nstonewall\nread_iolog=" + (dir / "fio") + "/p10-t10.iolog\nioengine=psync\n"),
            std::string::npos) << job;
  EXPECT_NE(job.find("[p10-t11]\nread_iolog="), std::string::npos);
  EXPECT_EQ(job.find("replay_redirect"), std::string::npos);
  std::string tsv = ReadFile(dir / "fio/files.tsv");
  EXPECT_NE(tsv.find(root + "/f00001_work_out_log.txt\t/work/out/log.txt\t4096"), std::string::npos) << tsv;
  auto info = nlohmann::json::parse(ReadFile(dir / "fio/export.json"));
  EXPECT_EQ(info["reads"], 4);
}

TEST(FioExport, BlockLayerMatchesGoldenIolog) {
  ScratchDir dir;
  {
    TraceBuilder b(nlohmann::json::object());
    uint32_t sda = Dev(8, 0);
    b.Add(b.BlockRecord(IOT_BLK_QUEUE, 900000, sda, 0, 4096, IOT_BLKF_READ, 0, 5));
    b.Add(b.BlockRecord(IOT_BLK_ISSUE, 1000000, sda, 0, 4096, IOT_BLKF_READ, 1, 5));
    b.Add(b.BlockRecord(IOT_BLK_ISSUE, 1050000, Dev(259, 0), 100, 512, IOT_BLKF_READ, 9));
    b.Add(b.BlockRecord(IOT_BLK_ISSUE, 1100000, sda, 8, 8192, IOT_BLKF_WRITE, 2));
    b.Add(b.BlockRecord(IOT_BLK_COMPLETE, 1200000, sda, 0, 4096, IOT_BLKF_READ, 1));
    b.Add(b.BlockRecord(IOT_BLK_ISSUE, 1300000, sda, 16, 4096,
                  IOT_BLKF_PREFLUSH | IOT_BLKF_WRITE | IOT_BLKF_SYNC, 3));
    b.Add(b.BlockRecord(IOT_BLK_COMPLETE, 1400000, sda, 8, 8192, IOT_BLKF_WRITE, 2));
    b.Add(b.BlockRecord(IOT_BLK_COMPLETE, 1500000, sda, 16, 4096, IOT_BLKF_WRITE, 3));
    b.Add(b.BlockRecord(IOT_BLK_ISSUE, 2000000, sda, 1024, 1048576, IOT_BLKF_DISCARD, 4));
    b.Add(b.BlockRecord(IOT_BLK_COMPLETE, 2500000, sda, 1024, 1048576, IOT_BLKF_DISCARD, 4));
    EXPECT_TRUE(b.WriteFile(dir / "b.iotwin", nlohmann::json::object()).ok());
  }
  FioExportOptions o;
  o.dir = dir / "fio";
  o.block_layer = true;
  auto r = ExportFio(dir / "b.iotwin", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string root = dir / "fio/files";
  EXPECT_EQ(ReadFile(dir / "fio/dev-8-0.iolog"),
            ReplaceAll(ReadFile(DataPath("expected/fio_export_dev-8-0.iolog")), "@ROOT@", root));
  std::string job = ReadFile(dir / "fio/replay.fio");
  // Queue depth 2 was reached on 8:0 (requests 1 and 2, then 2 and 3 in flight).
  EXPECT_NE(job.find("[dev-8-0]\nstonewall\nread_iolog=" + (dir / "fio") +
                     "/dev-8-0.iolog\nioengine=libaio\niodepth=2\ndirect=1\n"),
            std::string::npos)
      << job;
  EXPECT_NE(job.find("[dev-259-0]\nread_iolog="), std::string::npos);
  EXPECT_EQ(r->jobs, 2u);
  EXPECT_EQ(r->trims, 1u);
  EXPECT_EQ(r->syncs, 1u);
  EXPECT_EQ(r->writes, 2u);
  EXPECT_EQ(r->reads, 2u);

  // A device named by the user is used as is and not prepared.
  o.dir = dir / "fio2";
  o.device_paths[Dev(8, 0)] = "/dev/iotwin-test-target";
  r = ExportFio(dir / "b.iotwin", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string log = ReadFile(dir / "fio2/dev-8-0.iolog");
  EXPECT_NE(log.find("0 /dev/iotwin-test-target read 0 4096\n"), std::string::npos) << log;
  EXPECT_EQ(ReadFile(dir / "fio2/replay.fio").find("filename=/dev/iotwin-test-target"), std::string::npos);
}

TEST(FioExport, RejectsUnusableRoot) {
  ScratchDir dir;
  WriteFileTrace(dir / "t.iotwin");
  FioExportOptions o;
  o.dir = dir / "fio";
  o.fio_root = dir / "has:colon";
  EXPECT_FALSE(ExportFio(dir / "t.iotwin", o).ok());
}

TEST(ChromeExport, NestsFlowsAndDeviceTracks) {
  ScratchDir dir;
  {
    TraceBuilder b(nlohmann::json{{"tool", "test"}});
    b.Add(b.ProcRecord(IOT_PROC_EXEC, 100, 10, 10, "trainer", b.Str("/usr/bin/trainer")));
    iot_intent in{};
    InitRecord(&in, IOT_REC_INTENT);
    in.kind = IOT_INTENT_BEGIN;
    in.ts = 500000;
    in.tgid = 10;
    in.tid = 10;
    in.label_id = b.Str("epoch 1");
    b.Add(in);
    // Block requests of the read are recorded before the read itself (recorded at exit).
    b.Add(b.BlockRecord(IOT_BLK_ISSUE, 1100000, Dev(8, 0), 0, 131072, IOT_BLKF_READ, 1, 10));
    b.Add(b.BlockRecord(IOT_BLK_ISSUE, 1200000, Dev(8, 0), 256, 131072, IOT_BLKF_READ, 2, 10));
    iot_nvme n{};
    InitRecord(&n, IOT_REC_NVME);
    n.phase = IOT_NVME_SETUP;
    n.ts = 1150000;
    n.dev = Dev(259, 0);
    n.qid = 1;
    n.cid = 7;
    n.opcode = 2;
    n.nlb = 32;
    n.lba_size = 4096;
    b.Add(n);
    n.phase = IOT_NVME_COMPLETE;
    n.ts = 1250000;
    b.Add(n);
    b.Add(b.BlockRecord(IOT_BLK_COMPLETE, 1300000, Dev(8, 0), 0, 131072, IOT_BLKF_READ, 1));
    b.Add(b.BlockRecord(IOT_BLK_COMPLETE, 1400000, Dev(8, 0), 256, 131072, IOT_BLKF_READ, 2));
    {
      auto& s = b.Call(IOT_OP_READ, 1000000, 10, 10, 3, 262144);
      s.dur = 500000;
      s.length = 262144;
    }
    {
      auto& s = b.Call(IOT_OP_PREAD64, 2000000, 10, 10, 3, 4096);
      s.dur = 100000;
    }
    // Overlaps its predecessor on the same thread (clock skew): must be clipped, not overlap.
    b.Call(IOT_OP_PREAD64, 2050000, 10, 10, 3, 4096).dur = 150000;
    iot_async_io a{};
    InitRecord(&a, IOT_REC_ASYNC_IO);
    a.engine = IOT_AIO_ENGINE_URING;
    a.phase = IOT_AIO_SUBMIT;
    a.opcode = 22;
    a.tgid = 10;
    a.tid = 11;
    a.ts = 2050000;
    a.req_id = 0xa;
    b.Add(a);
    a.ts = 2060000;
    a.req_id = 0xb;
    b.Add(a);
    a.phase = IOT_AIO_COMPLETE;
    a.ts = 2200000;
    b.Add(a);
    a.req_id = 0xa;
    a.ts = 2300000;
    b.Add(a);
    in.kind = IOT_INTENT_INSTANT;
    in.ts = 2500000;
    in.label_id = b.Str("checkpoint");
    b.Add(in);
    in.kind = IOT_INTENT_END;
    in.ts = 3000000;
    in.label_id = b.Str("epoch 1");
    b.Add(in);
    iot_lost l{};
    InitRecord(&l, IOT_REC_LOST);
    l.source = IOT_SRC_BLOCK;
    l.cpu = 0xffff;
    l.ts = 3000000;
    l.count = 5;
    b.Add(l);
    EXPECT_TRUE(b.WriteFile(dir / "c.iotwin", nlohmann::json::object()).ok());
  }
  auto r = ExportChrome(dir / "c.iotwin", dir / "c.json");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string text = ReadFile(dir / "c.json");
  auto doc = nlohmann::json::parse(text);
  auto problems = iotwin::test::ChromeTraceProblems(doc);
  EXPECT_TRUE(problems.empty()) << problems.front();
  EXPECT_EQ(doc["displayTimeUnit"], "ns");
  EXPECT_EQ(doc["metadata"]["t0_ns"], 100);
  EXPECT_EQ(r->clipped, 1u);
  EXPECT_EQ(r->slices, 3u);
  EXPECT_EQ(r->device_slices, 3u);  // two block requests, one NVMe command
  EXPECT_EQ(r->flows, 1u);
  // Timestamps: microseconds with three decimals, relative to t0.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex("\"name\":\"read\",\"cat\":\"syscall\",\"ph\":\"X\",\"ts\":([0-9.]+)")));
  EXPECT_EQ(m[1], "999.900");
  EXPECT_FALSE(std::regex_search(text, std::regex("\"ts\":[0-9]+\\.[0-9]{4}")));

  int block_with_flow = 0;
  std::set<int64_t> block_slots;
  uint64_t read_bind = 0;
  bool saw_process_name = false, saw_device_name = false, saw_async = false;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "read" && e.contains("bind_id")) read_bind = e["bind_id"];
    if (e["ph"] == "X" && e["cat"] == "block") {
      block_slots.insert(e["tid"].get<int64_t>());
      if (e.value("flow_in", false)) block_with_flow++;
    }
    if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "trainer") saw_process_name = true;
    if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "block 8:0") saw_device_name = true;
    if (e["ph"] == "b" && e["cat"] == "async_io") saw_async = true;
  }
  EXPECT_NE(read_bind, 0u);
  EXPECT_EQ(block_with_flow, 2);        // both requests link back to the read
  EXPECT_EQ(block_slots.size(), 2u);    // they overlapped: two slots
  EXPECT_TRUE(saw_process_name);
  EXPECT_TRUE(saw_device_name);
  EXPECT_TRUE(saw_async);
}

TEST(ChromeExport, ProblemsAreDetected) {
  // The checker itself must fail on broken input, or the test above proves nothing.
  auto doc = nlohmann::json::parse(R"({"traceEvents":[
    {"name":"a","ph":"X","ts":0,"dur":10,"pid":1,"tid":1},
    {"name":"b","ph":"X","ts":5,"dur":10,"pid":1,"tid":1},
    {"name":"c","cat":"x","ph":"b","ts":0,"pid":1,"id2":{"local":"0x1"}},
    {"name":"d","ph":"X","ts":0,"dur":1,"pid":1,"tid":2,"bind_id":7,"flow_in":true}]})");
  auto problems = iotwin::test::ChromeTraceProblems(doc);
  EXPECT_EQ(problems.size(), 3u);
}

TEST(TableExport, CsvAndJsonlColumnsQuotingCounts) {
  ScratchDir dir;
  {
    TraceBuilder b(nlohmann::json::object());
    auto& s = b.Call(IOT_OP_OPENAT, 1000, 1, 1, AT_FDCWD, 3);
    s.path_id = b.Str("/data/a,\"b\".bin");
    b.Call(IOT_OP_PREAD64, 2000, 1, 1, 3, 4096).offset = 8192;
    b.Add(b.BlockRecord(IOT_BLK_ISSUE, 3000, Dev(8, 0), 16, 4096, IOT_BLKF_READ | IOT_BLKF_READAHEAD, 1));
    b.Add(b.ProcRecord(IOT_PROC_EXEC, 500, 1, 1, "cat"));
    EXPECT_TRUE(b.WriteFile(dir / "t.iotwin", nlohmann::json::object()).ok());
  }
  auto r = ExportTables(dir / "t.iotwin", dir / "csv", TableFormat::kCsv);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rows.at("syscalls"), 2u);
  EXPECT_EQ(r->rows.at("block"), 1u);
  EXPECT_EQ(r->rows.at("proc"), 1u);
  std::string csv = ReadFile(dir / "csv/syscalls.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "ts_ns,dur_ns,tgid,tid,cpu,op,ret,fd,fd2,offset,length,aux,aux_names,flags,flags_names,"
            "mode,mode_names,ino,fsize,dev,file_id,path,file2_id,path2,ftype,sflags");
  EXPECT_NE(csv.find(",openat,3,-100,-1,"), std::string::npos);
  EXPECT_NE(csv.find("\"/data/a,\"\"b\"\".bin\""), std::string::npos) << csv;  // RFC 4180
  EXPECT_NE(csv.find("2000,1000,1,1,0,pread64,4096,3,-1,8192,"), std::string::npos) << csv;
  std::string blk = ReadFile(dir / "csv/block.csv");
  EXPECT_NE(blk.find("3000,D,8388608,16,8,4096,RA,"), std::string::npos) << blk;

  auto j = ExportTables(dir / "t.iotwin", dir / "jsonl", TableFormat::kJsonl);
  ASSERT_TRUE(j.ok());
  std::string jl = ReadFile(dir / "jsonl/syscalls.jsonl");
  size_t lines = 0;
  size_t pos = 0;
  while (pos < jl.size()) {
    size_t nl = jl.find('\n', pos);
    auto row = nlohmann::json::parse(jl.substr(pos, nl - pos));
    EXPECT_TRUE(row.contains("ts_ns"));
    if (row["op"] == "openat") {
      EXPECT_EQ(row["path"], "/data/a,\"b\".bin");
    }
    lines++;
    pos = nl + 1;
  }
  EXPECT_EQ(lines, 2u);
  auto info = nlohmann::json::parse(ReadFile(dir / "jsonl/trace_info.json"));
  EXPECT_EQ(info["tables"]["syscalls"], 2);
}

}  // namespace
}  // namespace iotwin::interop
