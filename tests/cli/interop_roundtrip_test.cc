// Round trips through real tools: a trace exported for fio is replayed by fio and fio counts the
// same I/O; a program traced by strace and imported shows the calls the program logged; the
// imported trace exports to Chrome JSON that nests as Perfetto requires. No BPF needed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../unit/chrome_check.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "format/trace_writer.h"
#include "runtime_util.h"

namespace iotwin::test {
namespace {

constexpr uint64_t kMs = 1000000;

std::string Find(const char* tool) {
  for (const char* dir : {"/usr/bin/", "/usr/local/bin/", "/bin/"}) {
    std::string p = std::string(dir) + tool;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return {};
}

std::string Slurp(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return {};
  std::string s;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

iot_syscall Call(uint16_t op, uint64_t ts, uint32_t tid, int32_t fd, int64_t ret) {
  iot_syscall s{};
  InitRecord(&s, IOT_REC_SYSCALL);
  s.op = op;
  s.ts = ts;
  s.dur = 2000;
  s.tgid = 500;
  s.tid = tid;
  s.fd = fd;
  s.fd2 = -1;
  s.ret = ret;
  s.ftype = 8;
  return s;
}

struct FioTotals {
  uint64_t reads = 0, writes = 0, read_bytes = 0, write_bytes = 0, syncs = 0;
  int errors = 0;
};

FioTotals RunFio(const std::string& fio, const std::string& job, std::string* log) {
  RunResult r = iotwin::test::Run({fio, "--output-format=json", job}, 300);
  *log = r.out + r.err;
  FioTotals t;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  size_t brace = r.out.find('{');
  if (brace == std::string::npos) return t;
  auto doc = nlohmann::json::parse(r.out.substr(brace), nullptr, false);
  EXPECT_FALSE(doc.is_discarded()) << r.out;
  if (doc.is_discarded()) return t;
  for (const auto& j : doc["jobs"]) {
    t.reads += j["read"]["total_ios"].get<uint64_t>();
    t.writes += j["write"]["total_ios"].get<uint64_t>();
    t.read_bytes += j["read"]["io_bytes"].get<uint64_t>();
    t.write_bytes += j["write"]["io_bytes"].get<uint64_t>();
    if (j.contains("sync")) t.syncs += j["sync"]["total_ios"].get<uint64_t>();
    t.errors += j["error"].get<int>();
  }
  return t;
}

TEST(InteropRoundTrip, FioReplaysExportedThreads) {
  std::string fio = Find("fio");
  if (fio.empty()) GTEST_SKIP() << "fio not installed";
  TempDir tmp;
  std::string trace = tmp / "t.iotwin";
  uint64_t want_reads = 0, want_writes = 0, want_rbytes = 0, want_wbytes = 0;
  {
    auto w = TraceWriter::Create(trace, nlohmann::json{{"tool", "test"}});
    ASSERT_TRUE(w.ok());
    auto& tw = **w;
    uint32_t in = *tw.InternString("/models/weights.bin");
    uint32_t out = *tw.InternString("/scratch/kv.cache");
    auto open_in = Call(IOT_OP_OPENAT, 1 * kMs, 500, AT_FDCWD, 3);
    open_in.path_id = in;
    ASSERT_TRUE(tw.Append(open_in).ok());
    auto open_out = Call(IOT_OP_OPENAT, 1 * kMs, 501, AT_FDCWD, 4);
    open_out.path_id = out;
    open_out.flags = O_RDWR | O_CREAT;
    ASSERT_TRUE(tw.Append(open_out).ok());
    uint64_t ts = 2 * kMs;
    // Thread 500: sequential 128 KiB reads with read(), then a few positional 4 KiB reads.
    for (int i = 0; i < 16; i++) {
      auto r = Call(IOT_OP_READ, ts += 100000, 500, 3, 131072);
      r.length = 131072;
      ASSERT_TRUE(tw.Append(r).ok());
      want_reads++;
      want_rbytes += 131072;
    }
    for (int i = 0; i < 8; i++) {
      auto r = Call(IOT_OP_PREAD64, ts += 50000, 500, 3, 4096);
      r.offset = uint64_t(i) * 1048576;
      r.length = 4096;
      ASSERT_TRUE(tw.Append(r).ok());
      want_reads++;
      want_rbytes += 4096;
    }
    // Thread 501: KV-cache writes and reads back, a datasync.
    for (int i = 0; i < 10; i++) {
      auto wr = Call(IOT_OP_PWRITE64, ts += 30000, 501, 4, 65536);
      wr.offset = uint64_t(i) * 65536;
      wr.length = 65536;
      ASSERT_TRUE(tw.Append(wr).ok());
      want_writes++;
      want_wbytes += 65536;
    }
    ASSERT_TRUE(tw.Append(Call(IOT_OP_FDATASYNC, ts += 1000, 501, 4, 0)).ok());
    for (int i = 0; i < 5; i++) {
      auto r = Call(IOT_OP_PREAD64, ts += 20000, 501, 4, 65536);
      r.offset = uint64_t(i) * 65536;
      r.length = 65536;
      ASSERT_TRUE(tw.Append(r).ok());
      want_reads++;
      want_rbytes += 65536;
    }
    ASSERT_TRUE(tw.Append(Call(IOT_OP_CLOSE, ts += 1000, 501, 4, 0)).ok());
    ASSERT_TRUE(tw.Append(Call(IOT_OP_CLOSE, ts += 1000, 500, 3, 0)).ok());
    ASSERT_TRUE(tw.Finish(nlohmann::json::object()).ok());
  }
  RunResult ex = iotwin::test::Run({IotwinBin(), "export", trace, "--fio", tmp / "fio"});
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  auto info = nlohmann::json::parse(Slurp(tmp / "fio/export.json"));
  EXPECT_EQ(info["reads"], want_reads);
  EXPECT_EQ(info["writes"], want_writes);
  EXPECT_EQ(info["jobs"], 2);

  std::string log;
  FioTotals got = RunFio(fio, tmp / "fio/replay.fio", &log);
  EXPECT_EQ(got.errors, 0) << log;
  EXPECT_EQ(got.reads, want_reads) << log;
  EXPECT_EQ(got.writes, want_writes) << log;
  EXPECT_EQ(got.read_bytes, want_rbytes) << log;
  EXPECT_EQ(got.write_bytes, want_wbytes) << log;
  // The replayed files exist under the export's root, at least at their traced extent.
  struct stat st{};
  ASSERT_EQ(stat((tmp / "fio/files/f00000_models_weights.bin").c_str(), &st), 0);
  EXPECT_GE(st.st_size, 16 * 131072);
}

TEST(InteropRoundTrip, FioReplaysExportedBlockRequests) {
  std::string fio = Find("fio");
  if (fio.empty()) GTEST_SKIP() << "fio not installed";
  TempDir tmp;
  std::string trace = tmp / "b.iotwin";
  uint64_t want_reads = 0, want_writes = 0, want_rbytes = 0, want_wbytes = 0;
  {
    auto w = TraceWriter::Create(trace, nlohmann::json{{"tool", "test"}});
    ASSERT_TRUE(w.ok());
    auto& tw = **w;
    uint64_t ts = kMs;
    for (uint64_t i = 0; i < 40; i++) {
      iot_block b{};
      InitRecord(&b, IOT_REC_BLOCK);
      b.phase = IOT_BLK_ISSUE;
      b.ts = ts += 20000;
      b.dev = (259u << 20) | 0;
      b.sector = i * 256;
      b.bytes = 131072;
      b.nr_sector = 256;
      b.rq_id = i + 1;
      b.flags = (i % 4 == 3) ? IOT_BLKF_WRITE : IOT_BLKF_READ | IOT_BLKF_READAHEAD;
      ASSERT_TRUE(tw.Append(b).ok());
      if (b.flags & IOT_BLKF_WRITE) {
        want_writes++;
        want_wbytes += b.bytes;
      } else {
        want_reads++;
        want_rbytes += b.bytes;
      }
      b.phase = IOT_BLK_COMPLETE;
      b.ts += 50000;  // overlaps the next two issues: queue depth 3
      ASSERT_TRUE(tw.Append(b).ok());
    }
    ASSERT_TRUE(tw.Finish(nlohmann::json::object()).ok());
  }
  RunResult ex = iotwin::test::Run({IotwinBin(), "export", trace, "--fio", tmp / "fio", "--layer", "block",
                      "--fio-direct", "0"});
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  std::string job = Slurp(tmp / "fio/replay.fio");
  EXPECT_NE(job.find("ioengine=libaio\niodepth="), std::string::npos) << job;
  std::string log;
  FioTotals got = RunFio(fio, tmp / "fio/replay.fio", &log);
  EXPECT_EQ(got.errors, 0) << log;
  EXPECT_EQ(got.reads, want_reads) << log;
  EXPECT_EQ(got.writes, want_writes) << log;
  EXPECT_EQ(got.read_bytes, want_rbytes) << log;
  EXPECT_EQ(got.write_bytes, want_wbytes) << log;
}

// One logged call of tests/progs/interop_io.cc: op tid fd offset length ret path.
using CallKey = std::tuple<std::string, uint32_t, int32_t, uint64_t, uint64_t, int64_t, std::string>;

TEST(InteropRoundTrip, StraceOfARealProgramImportsWhatItDid) {
  std::string strace = Find("strace");
  if (strace.empty()) GTEST_SKIP() << "strace not installed";
  TempDir tmp;
  std::string dir = tmp / "work dir";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  std::string prog_log = tmp / "prog.log";
  std::string strace_log = tmp / "strace.log";
  RunResult st = iotwin::test::Run({strace, "-f", "-ttt", "-T", "-y", "-o", strace_log, TestProg("interop_io"),
                      dir, prog_log});
  ASSERT_EQ(st.exit_code, 0) << st.err;
  std::string trace = tmp / "s.iotwin";
  RunResult im = iotwin::test::Run({IotwinBin(), "import", "--format", "strace", strace_log, "-o", trace});
  ASSERT_EQ(im.exit_code, 0) << im.err;

  std::multiset<CallKey> logged;
  std::istringstream in(Slurp(prog_log));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string op, path;
    uint32_t tid;
    int32_t fd;
    uint64_t off, len;
    int64_t ret;
    ls >> op >> tid >> fd >> off >> len >> ret;
    std::getline(ls, path);
    path = path.empty() ? "-" : path.substr(1);
    logged.insert({op, tid, fd, off, len, ret, op == "openat" ? path : "-"});
  }
  ASSERT_EQ(logged.size(), 17u);

  auto reader = TraceReader::Open(trace);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::set<uint64_t> dir_files;  // identities of the files the program opened in `dir`
  std::multiset<CallKey> seen;
  for (;;) {
    auto next = (*reader)->Next();
    ASSERT_TRUE(next.ok());
    if (!*next) break;
    if ((*next)->type != IOT_REC_SYSCALL) continue;
    const auto& s = As<iot_syscall>(*next);
    std::string path(s.path_id ? (*reader)->String(s.path_id) : "");
    bool in_dir = path.rfind(dir + "/", 0) == 0;
    if (in_dir && s.ino) dir_files.insert(s.ino);
    if (!in_dir && !(s.ino && dir_files.count(s.ino))) continue;
    bool open = s.op == IOT_OP_OPENAT;
    seen.insert({std::string(OpName(s.op)), s.tid, s.fd, s.offset, s.length, s.ret,
                 open ? path : "-"});
  }
  // Every call the program made on its files, with the same arguments and results, and no other.
  EXPECT_EQ(seen, logged);
  if (seen != logged) {
    for (const auto& k : logged) {
      if (!seen.count(k)) ADD_FAILURE() << "missing: " << std::get<0>(k) << " fd " << std::get<2>(k)
                                        << " off " << std::get<3>(k) << " len " << std::get<4>(k)
                                        << " ret " << std::get<5>(k) << " " << std::get<6>(k);
    }
  }

  // The imported trace exports to Chrome JSON that nests as Perfetto requires.
  RunResult ch = iotwin::test::Run({IotwinBin(), "export", trace, "--chrome", tmp / "s.json"});
  ASSERT_EQ(ch.exit_code, 0) << ch.err;
  auto doc = nlohmann::json::parse(Slurp(tmp / "s.json"));
  auto problems = ChromeTraceProblems(doc);
  EXPECT_TRUE(problems.empty()) << problems.front();
  EXPECT_GT(doc["traceEvents"].size(), 17u);
}

}  // namespace
}  // namespace iotwin::test
