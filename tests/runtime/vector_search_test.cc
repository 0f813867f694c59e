// iotwin-workload vector-search recorded with the block layer, on an ext4 file system on a loop
// device: the search's node reads are in the trace as batches of 4 KiB O_DIRECT reads, one
// submitting syscall per hop inside that hop's markers, each hop issued only after the previous
// one completed, reaching the device byte for byte; and the generator's read log lists exactly
// the reads the trace holds.
#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "block_loop.h"
#include "record_check.h"

namespace iotwin::test {
namespace {

struct Hop {
  uint64_t query, hop;
  std::vector<size_t> reads;  // indices into the read log
};

// Reads of the log grouped by (query, hop) in log order; rerank rounds are hops too.
std::vector<Hop> HopsOf(const std::vector<nlohmann::json>& reads) {
  std::vector<Hop> hops;
  for (size_t i = 0; i < reads.size(); i++) {
    const uint64_t q = reads[i]["query"], h = reads[i]["hop"];
    if (hops.empty() || hops.back().query != q || hops.back().hop != h) hops.push_back({q, h, {}});
    hops.back().reads.push_back(i);
  }
  return hops;
}

// Timestamps of the marker `label` of one kind, in trace order.
std::vector<uint64_t> Markers(const LoadedTrace& t, const std::string& label, uint16_t kind) {
  std::vector<uint64_t> out;
  for (size_t i = 0; i < t.intents.size(); i++) {
    if (t.intent_labels[i] == label && t.intents[i].kind == kind) out.push_back(t.intents[i].ts);
  }
  return out;
}

class VectorSearchRecord : public ::testing::TestWithParam<const char*> {};

TEST_P(VectorSearchRecord, HopsAreBatchedDependentFourKiBReadsMatchingTheReadLog) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  const std::string engine = GetParam();
  LoopFs fs;
  ASSERT_TRUE(fs.ok()) << fs.error();
  TempDir dir;
  const std::string trace = dir / "t.iotwin", read_log = dir / "reads.jsonl",
                    op_log = dir / "ops.jsonl";
  const RunResult rec = test::Run(
      {IotwinBin(), "record", "-o", trace, "--no-status", "--", WorkloadBin(), "vector-search",
       "--small", "--dir", fs.path("w"), "--io", engine, "--read-log", read_log, "--log", op_log},
      180);
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  const LoadedTrace t = LoadTrace(trace);
  ASSERT_TRUE(t.error.empty()) << t.error;
  ASSERT_EQ(LostInSummary(t), 0u);
  const std::vector<nlohmann::json> reads = ReadLog(read_log);
  ASSERT_FALSE(reads.empty());
  const std::vector<Hop> hops = HopsOf(reads);

  // The trace's requests of the search, by user_data (1, 2, ... in the one searcher's order).
  const uint8_t eng = engine == "uring" ? IOT_AIO_ENGINE_URING : IOT_AIO_ENGINE_LIBAIO;
  std::map<uint64_t, iot_async_io> submits, completes;
  for (const auto& a : t.asyncs) {
    if (a.engine != eng) continue;
    (a.phase == IOT_AIO_SUBMIT ? submits : completes)[a.user_data] = a;
  }
  // The log's read count equals the trace's, and the op log's.
  ASSERT_EQ(submits.size(), reads.size());
  ASSERT_EQ(completes.size(), reads.size());
  const std::string op_name = engine == "uring" ? "uring_read" : "aio_pread";
  size_t logged = 0;
  for (const auto& e : ReadLog(op_log)) logged += e["op"] == op_name;
  EXPECT_EQ(logged, reads.size());
  for (size_t i = 0; i < reads.size(); i++) {
    const iot_async_io& s = submits.at(i + 1);
    EXPECT_EQ(s.offset, reads[i]["offset"].get<uint64_t>()) << i;
    EXPECT_EQ(s.length, 4096u) << i;
    EXPECT_EQ(s.offset % 4096, 0u) << i;
    EXPECT_EQ(completes.at(i + 1).res, 4096) << i;
    EXPECT_EQ(s.tid, reads[i]["tid"].get<uint32_t>()) << i;
  }

  // Each hop: one submitting syscall carries all its reads (it returns their count), between
  // the hop's begin and end markers; the next hop is submitted after all of them completed.
  const uint16_t submit_op = engine == "uring" ? IOT_OP_IO_URING_ENTER : IOT_OP_IO_SUBMIT;
  std::vector<const iot_syscall*> calls;
  for (const auto& s : t.syscalls) {
    if (s.sc.op == submit_op && s.sc.ret > 0) calls.push_back(&s.sc);
  }
  const auto hop_begin = Markers(t, "hop", IOT_INTENT_BEGIN);
  const auto hop_end = Markers(t, "hop", IOT_INTENT_END);
  const auto rerank_begin = Markers(t, "rerank", IOT_INTENT_BEGIN);
  ASSERT_EQ(hop_begin.size() + rerank_begin.size(), hops.size());
  ASSERT_EQ(hop_end.size(), hop_begin.size());
  ASSERT_EQ(calls.size(), hops.size()) << "one submitting call per hop";
  uint64_t previous_done = 0;
  for (size_t h = 0; h < hops.size(); h++) {
    const iot_syscall& call = *calls[h];
    EXPECT_EQ(static_cast<size_t>(call.ret), hops[h].reads.size()) << "hop " << h;
    EXPECT_LE(hops[h].reads.size(), 4u);  // --beam 4
    EXPECT_GT(call.ts, hop_begin[h]) << "hop " << h;
    uint64_t done = 0;
    for (size_t i : hops[h].reads) {
      const iot_async_io& s = submits.at(i + 1);
      EXPECT_GE(s.ts, call.ts) << "read " << i;
      EXPECT_LE(s.ts, call.ts + call.dur) << "read " << i;
      EXPECT_GT(s.ts, previous_done) << "read " << i << " issued before the previous hop ended";
      done = std::max(done, completes.at(i + 1).ts);
    }
    EXPECT_LT(done, hop_end[h]) << "hop " << h;
    previous_done = done;
  }

  // One query marker pair per query; each read depends on a read of an earlier hop of its query.
  EXPECT_EQ(Markers(t, "query", IOT_INTENT_BEGIN).size(), 16u);
  EXPECT_EQ(Markers(t, "query", IOT_INTENT_END).size(), 16u);
  EXPECT_EQ(Markers(t, "vector.search", IOT_INTENT_BEGIN).size(), 1u);
  for (size_t i = 0; i < reads.size(); i++) {
    const auto& dep = reads[i]["depends_on"];
    if (reads[i]["hop"] == 0) {
      EXPECT_TRUE(dep.empty()) << i;
      continue;
    }
    ASSERT_EQ(dep.size(), 1u) << i;
    const size_t from = dep[0].get<size_t>();
    ASSERT_LT(from, i);
    EXPECT_EQ(reads[from]["query"], reads[i]["query"]);
    EXPECT_LT(reads[from]["hop"].get<uint64_t>(), reads[i]["hop"].get<uint64_t>());
  }

  // The block layer saw every node read reach the device: 4 KiB each (adjacent nodes of one
  // batch may merge into one request).
  const RunResult layers =
      test::Run({IotwinBin(), "layers", "--json", "--all-requests", trace}, 180);
  ASSERT_EQ(layers.exit_code, 0) << layers.err;
  const auto report = nlohmann::json::parse(layers.out);
  ASSERT_EQ(report["layers"]["block"]["enabled"], true);
  uint64_t bytes = 0;
  for (const auto& q : report["requests"]) {
    if (q["cause"] != "async" || q["op"] != "read") continue;
    EXPECT_EQ(q["bytes"].get<uint64_t>() % 4096, 0u) << q.dump();
    EXPECT_EQ(q["dev"].get<std::string>().rfind("7:", 0), 0u) << "not the loop device";
    bytes += q["bytes"].get<uint64_t>();
  }
  EXPECT_EQ(bytes, 4096 * reads.size());
  std::cout << "[ vector-search ] " << engine << ": " << reads.size() << " reads in " << hops.size()
            << " hops of 16 queries\n";
}

// Without BPF: the same seed gives the same index file byte for byte, and the same reads for any
// number of searcher threads.
std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The read log without what may vary between runs (thread, tid, timestamps).
std::vector<nlohmann::json> StableReads(const std::string& path) {
  std::vector<nlohmann::json> out = ReadLog(path);
  for (auto& r : out) {
    for (const char* k : {"thread", "tid", "ts_ns", "done_ns"}) r.erase(k);
  }
  return out;
}

TEST(VectorSearchDeterminism, SameIndexBytesAndSameReadsForAnyThreadCount) {
  TempDir dir;
  auto run = [&](const std::string& sub, const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {WorkloadBin(), "vector-search", "--small",
                                     "--buffered",  "--quiet",       "--dir",
                                     dir / sub,     "--read-log",    dir / (sub + ".reads")};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return test::Run(argv, 120);
  };
  RunResult a = run("a", {});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  RunResult b = run("b", {"--threads", "3", "--io", "uring"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  RunResult c = run("c", {"--seed", "2"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const std::string ia = FileBytes(dir / "a/vector/disk.index");
  EXPECT_EQ(ia.size(), 2001u * 4096);
  EXPECT_TRUE(ia == FileBytes(dir / "b/vector/disk.index")) << "same seed, different index";
  EXPECT_FALSE(ia == FileBytes(dir / "c/vector/disk.index")) << "another seed, same index";
  const auto ra = StableReads(dir / "a.reads");
  ASSERT_FALSE(ra.empty());
  EXPECT_EQ(ra, StableReads(dir / "b.reads"));
  EXPECT_NE(ra, StableReads(dir / "c.reads"));
  // Three searchers: query q ran in searcher q mod 3 (op-log threads 1, 2, 3).
  for (const auto& r : ReadLog(dir / "b.reads")) {
    EXPECT_EQ(r["thread"].get<uint64_t>(), 1 + r["query"].get<uint64_t>() % 3) << r.dump();
  }
  // A search-only run reads the index the build left, and reads the same nodes.
  RunResult s = run("a", {"--phase", "search"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(ra, StableReads(dir / "a.reads"));
  // ... and refuses an index built for another data set.
  RunResult other = run("a", {"--phase", "search", "--vectors", "3000"});
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("built for 2000 vectors"), std::string::npos) << other.err;
}

INSTANTIATE_TEST_SUITE_P(Engines, VectorSearchRecord, ::testing::Values("uring", "libaio"));

}  // namespace
}  // namespace iotwin::test
