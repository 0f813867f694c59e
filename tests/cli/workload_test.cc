// Runtime tests of iotwin-workload: they run the built binary and check the files it leaves, its
// summary line and its op log (docs/workloads.md). No BPF needed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "runtime_util.h"

namespace iotwin::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * 1024;

// A temporary directory where O_DIRECT works: $TMPDIR//tmp if it does, else /var/tmp (tmpfs
// before Linux 6.6 refuses O_DIRECT).
class DirectDir {
 public:
  DirectDir() {
    if (!Supports(tmp_.path())) {
      char tmpl[] = "/var/tmp/iotwin-test-XXXXXX";
      const char* p = mkdtemp(tmpl);
      if (p != nullptr) own_ = p;
    }
  }
  ~DirectDir() {
    std::error_code ec;
    if (!own_.empty()) fs::remove_all(own_, ec);
  }
  std::string path() const { return own_.empty() ? tmp_.path() : own_; }

 private:
  static bool Supports(const std::string& dir) {
    const std::string probe = dir + "/.direct-probe";
    const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_DIRECT, 0600);
    if (fd >= 0) close(fd);
    unlink(probe.c_str());
    return fd >= 0;
  }
  TempDir tmp_;
  std::string own_;
};

RunResult Workload(std::vector<std::string> args, const std::vector<std::string>& env = {}) {
  args.insert(args.begin(), WorkloadBin());
  return Run(args, 120, env);
}

std::vector<json> ReadLog(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(json::parse(line));
  }
  return out;
}

json Summary(const RunResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line, last;
  while (std::getline(lines, line)) {
    if (!line.empty()) last = line;
  }
  return last.empty() ? json() : json::parse(last);
}

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// A data operation resolved to the file it touched (via the thread's openat fds).
struct DataOp {
  std::string op;
  std::string path;
  uint64_t offset;
  uint64_t len;
  int64_t ret;
  int thread;
};

// Follows openat/close per thread to name the file behind each data op.
std::vector<DataOp> ResolveDataOps(const std::vector<json>& log) {
  static const std::set<std::string> kData = {"pread64",   "pwrite64",   "read",
                                              "write",     "uring_read", "uring_write",
                                              "aio_pread", "aio_pwrite"};
  std::map<std::pair<int, int64_t>, std::string> open_files;  // (thread, fd) -> path
  std::vector<DataOp> ops;
  for (const auto& e : log) {
    const std::string op = e["op"];
    const int thread = e["thread"];
    if (op == "openat" && e["ret"].get<int64_t>() >= 0) {
      open_files[{thread, e["ret"].get<int64_t>()}] = e["path"];
    } else if (op == "close") {
      open_files.erase({thread, e["fd"].get<int64_t>()});
    } else if (kData.count(op)) {
      auto it = open_files.find({thread, e["fd"].get<int64_t>()});
      ops.push_back(
          {op, it == open_files.end() ? "?" : it->second, e["offset"], e["len"], e["ret"], thread});
    }
  }
  return ops;
}

// Checks that `ranges` (offset, len) tile [0, size) exactly, with no gap or overlap.
::testing::AssertionResult Tiles(std::vector<std::pair<uint64_t, uint64_t>> ranges, uint64_t size) {
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (const auto& [off, len] : ranges) {
    if (off != at)
      return ::testing::AssertionFailure() << "range at " << off << ", expected " << at;
    at += len;
  }
  if (at != size) return ::testing::AssertionFailure() << "ranges end at " << at << " of " << size;
  return ::testing::AssertionSuccess();
}

size_t CountOp(const std::vector<json>& log, const std::string& op) {
  return static_cast<size_t>(
      std::count_if(log.begin(), log.end(), [&](const json& e) { return e["op"] == op; }));
}

// ---------------------------------------------------------------------------------------------
// kv-offload

struct KvCase {
  const char* name;
  std::vector<std::string> args;
  const char* write_op;
  const char* read_op;
  bool direct;
};

class WorkloadKvTest : public ::testing::TestWithParam<KvCase> {};

TEST_P(WorkloadKvTest, WritesTheDocumentedChunkFilesAndGetsReadWhatPutWrote) {
  const KvCase& c = GetParam();
  DirectDir dir;
  const std::string log = dir.path() + "/ops.jsonl";
  std::vector<std::string> args = {"kv-offload", "--dir", dir.path(), "--log", log, "--verify"};
  args.insert(args.end(), c.args.begin(), c.args.end());
  const RunResult r = Workload(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json s = Summary(r);

  // Defaults: 4 layers x 2 KV heads x 64 dims x 2 bytes x 2 (K,V) = 2 KiB/token; 256 tokens.
  const uint64_t chunk = 512 * kKiB;
  EXPECT_EQ(s["bytes_per_token"], 2048);
  EXPECT_EQ(s["chunk_bytes"], chunk);
  std::set<std::string> on_disk;
  for (const auto& f : fs::directory_iterator(dir.path() + "/kv")) {
    const std::string name = f.path().filename();
    EXPECT_EQ(name.size(), 16 + std::string(".kvchunk").size()) << name;
    EXPECT_TRUE(name.ends_with(".kvchunk")) << name;
    EXPECT_EQ(FileSize(f.path()), chunk) << name;
    on_disk.insert(f.path());
  }
  EXPECT_EQ(on_disk.size(), 16u);
  EXPECT_EQ(s["files"], 16);
  EXPECT_EQ(s["write_bytes"], 16 * chunk);
  EXPECT_EQ(s["read_bytes"], 32 * chunk);

  const std::vector<json> entries = ReadLog(log);
  ASSERT_FALSE(entries.empty());
  std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> written;
  std::map<std::string, uint64_t> read_bytes;
  uint64_t reads = 0;
  for (const DataOp& op : ResolveDataOps(entries)) {
    EXPECT_EQ(op.ret, static_cast<int64_t>(op.len)) << op.op << " " << op.path << " @" << op.offset;
    EXPECT_EQ(op.len, 128 * kKiB);  // --io-size default: each chunk moves in 4 requests
    if (op.op == c.write_op) {
      written[op.path].emplace_back(op.offset, op.len);
    } else {
      EXPECT_EQ(op.op, c.read_op);
      read_bytes[op.path] += op.len;
      reads++;
    }
  }
  EXPECT_EQ(written.size(), 16u);
  for (const auto& [path, ranges] : written) {
    EXPECT_TRUE(on_disk.count(path)) << path;
    EXPECT_TRUE(Tiles(ranges, chunk)) << path;
  }
  EXPECT_EQ(reads, 32u * 4u);
  for (const auto& [path, bytes] : read_bytes) {
    EXPECT_TRUE(written.count(path)) << "read a chunk that was never put: " << path;
    EXPECT_EQ(bytes % chunk, 0u) << "gets read whole chunks: " << path;
  }
  // Zipf reuse: 32 gets over 16 chunks hit some chunks more than once.
  EXPECT_LT(read_bytes.size(), 32u);
  EXPECT_EQ(s["distinct_gets"], read_bytes.size());

  for (const auto& e : entries) {
    if (e["op"] != "openat" || e["path"].get<std::string>().find("/kv/") == std::string::npos)
      continue;
    EXPECT_EQ((e["flags"].get<int>() & O_DIRECT) != 0, c.direct) << e.dump();
    EXPECT_GE(e["ret"].get<int>(), 0) << e.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(
    WorkloadIo, WorkloadKvTest,
    ::testing::Values(
        KvCase{"buffered", {}, "pwrite64", "pread64", false},
        KvCase{"direct", {"--io", "direct"}, "pwrite64", "pread64", true},
        KvCase{"uring", {"--io", "uring", "--qd", "3"}, "uring_write", "uring_read", false},
        KvCase{"uring_direct", {"--io", "uring", "--direct"}, "uring_write", "uring_read", true},
        KvCase{"threads", {"--threads", "3", "--fsync"}, "pwrite64", "pread64", false}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(WorkloadKv, UringBatchesRequestsByQueueDepth) {
  TempDir dir;
  const std::string log = dir / "ops.jsonl";
  // 512 KiB chunks in 64 KiB requests = 8 per chunk; qd 3 => batches of 3, 3, 2.
  const RunResult r =
      Workload({"kv-offload", "--dir", dir.path(), "--io", "uring", "--qd", "3", "--io-size",
                "65536", "--chunks", "2", "--gets", "1", "--log", log});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto entries = ReadLog(log);
  std::vector<uint64_t> batch;
  for (const auto& e : entries) {
    if (e["op"] == "io_uring_enter") {
      EXPECT_EQ(e["to_submit"], e["min_complete"]);
      EXPECT_EQ(e["ret"], e["to_submit"]);
      batch.push_back(e["to_submit"]);
    }
  }
  EXPECT_EQ(batch, (std::vector<uint64_t>{3, 3, 2, 3, 3, 2, 3, 3, 2}));
  EXPECT_EQ(CountOp(entries, "io_uring_setup"), 2u);  // one ring per worker, put and get phases
}

TEST(WorkloadKv, ModelShapeSetsTheChunkSize) {
  TempDir dir;
  // 2 (K,V) x 2 layers x 1 head x 128 dims x 2 bytes = 1 KiB/token, 16 tokens => 16 KiB chunks.
  const RunResult r = Workload({"kv-offload", "--dir", dir.path(), "--layers", "2", "--kv-heads",
                                "1", "--head-dim", "128", "--chunk-tokens", "16", "--chunks", "5",
                                "--phase", "put", "--io-size", "4096"});
  const json s = Summary(r);
  EXPECT_EQ(s["chunk_bytes"], 16 * kKiB);
  EXPECT_EQ(s["ops"], 5 * 4);
  size_t n = 0;
  for (const auto& f : fs::directory_iterator(dir / "kv")) {
    EXPECT_EQ(FileSize(f.path()), 16 * kKiB);
    n++;
  }
  EXPECT_EQ(n, 5u);
}

TEST(WorkloadKv, GetPhaseAloneReadsWhatAnEarlierPutWrote) {
  TempDir dir;
  ASSERT_EQ(Workload({"kv-offload", "--dir", dir.path(), "--phase", "put", "--quiet"}).exit_code,
            0);
  const json s =
      Summary(Workload({"kv-offload", "--dir", dir.path(), "--phase", "get", "--verify"}));
  EXPECT_EQ(s["write_bytes"], 0);
  EXPECT_EQ(s["read_bytes"], 32 * 512 * kKiB);

  // Another seed names other chunks: they are not there, so the get refuses to start.
  const RunResult other =
      Workload({"kv-offload", "--dir", dir.path(), "--phase", "get", "--seed", "2"});
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("missing"), std::string::npos) << other.err;
}

// ---------------------------------------------------------------------------------------------
// model-load

struct Shard {
  uint64_t header_len;
  json header;
  uint64_t size;
};

Shard ReadShard(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint8_t prefix[8] = {};
  in.read(reinterpret_cast<char*>(prefix), 8);
  Shard s;
  s.header_len = 0;
  for (int i = 0; i < 8; i++) s.header_len |= static_cast<uint64_t>(prefix[i]) << (8 * i);
  std::string text(s.header_len, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  s.header = json::parse(text);
  s.size = FileSize(path);
  return s;
}

std::string ShardPath(const std::string& dir, int i, int n) {
  char name[64];
  snprintf(name, sizeof name, "/model/model-%05d-of-%05d.safetensors", i, n);
  return dir + name;
}

TEST(WorkloadModel, PrepareWritesValidSafetensorsShards) {
  TempDir dir;
  const json s = Summary(Workload(
      {"model-load", "--dir", dir.path(), "--prepare-only", "--shards", "3", "--shard-mb", "4"}));
  EXPECT_EQ(s["files"], 3);
  EXPECT_EQ(s["read_bytes"], 0);  // prepare only: no load
  uint64_t total = 0;
  std::set<std::string> names;
  for (int i = 1; i <= 3; i++) {
    const std::string path = ShardPath(dir.path(), i, 3);
    ASSERT_TRUE(fs::exists(path)) << path;
    const Shard sh = ReadShard(path);
    EXPECT_EQ(sh.header_len % 8, 0u);
    EXPECT_EQ(sh.header["__metadata__"]["format"], "pt");
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (const auto& [name, t] : sh.header.items()) {
      if (name == "__metadata__") continue;
      names.insert(name);
      EXPECT_EQ(t["dtype"], "BF16");
      uint64_t elems = 1;
      for (const auto& d : t["shape"]) elems *= d.get<uint64_t>();
      const uint64_t b = t["data_offsets"][0], e = t["data_offsets"][1];
      EXPECT_EQ(e - b, 2 * elems) << name;
      ranges.emplace_back(b, e - b);
    }
    EXPECT_TRUE(Tiles(ranges, sh.size - 8 - sh.header_len)) << path;
    total += sh.size;
  }
  EXPECT_TRUE(names.count("model.embed_tokens.weight"));
  EXPECT_TRUE(names.count("lm_head.weight"));
  EXPECT_TRUE(names.count("model.layers.0.self_attn.q_proj.weight"));
  // About --shards x --shard-mb in all.
  EXPECT_GT(total, 10 * kMiB);
  EXPECT_LT(total, 14 * kMiB);
}

class WorkloadModelLoadTest : public ::testing::TestWithParam<const char*> {};

TEST_P(WorkloadModelLoadTest, ReadsEveryByteOrPageExactlyOnce) {
  const std::string mode = GetParam();
  DirectDir dir;
  ASSERT_EQ(Workload({"model-load", "--dir", dir.path(), "--prepare-only", "--quiet"}).exit_code,
            0);
  const std::string log = dir.path() + "/ops.jsonl";
  const json s = Summary(Workload({"model-load", "--dir", dir.path(), "--mode", mode, "--verify",
                                   "--drop-cache", "--log", log}));
  const auto entries = ReadLog(log);
  std::map<std::string, Shard> shards;
  for (int i = 1; i <= 2; i++)
    shards[ShardPath(dir.path(), i, 2)] = ReadShard(ShardPath(dir.path(), i, 2));

  // --drop-cache: one fadvise64(DONTNEED) per shard, right after its open.
  EXPECT_EQ(CountOp(entries, "fadvise64"), 2u);
  for (size_t i = 0; i < entries.size(); i++) {
    if (entries[i]["op"] != "fadvise64") continue;
    EXPECT_EQ(entries[i]["advice"], POSIX_FADV_DONTNEED);
    ASSERT_GT(i, 0u);
    EXPECT_EQ(entries[i - 1]["op"], "openat");
    EXPECT_EQ(entries[i - 1]["ret"], entries[i]["fd"]);
  }

  if (mode == "mmap") {
    std::map<std::string, std::vector<uint64_t>> pages;
    for (const auto& e : entries) {
      if (e["op"] == "touch") {
        EXPECT_EQ(e["write"], false);
        EXPECT_EQ(e["pgoff"].get<uint64_t>(), e["offset"].get<uint64_t>() / 4096);
        pages[e["file"]].push_back(e["pgoff"]);
      }
    }
    uint64_t total = 0;
    for (const auto& [path, sh] : shards) {
      const uint64_t first = (8 + sh.header_len) / 4096, last = (sh.size - 1) / 4096;
      std::vector<uint64_t> expect;
      for (uint64_t p = first; p <= last; p++) expect.push_back(p);
      EXPECT_EQ(pages[path], expect) << path << ": every data page once, in order";
      total += expect.size();
    }
    EXPECT_EQ(s["pages_touched"], total);
    EXPECT_EQ(CountOp(entries, "mmap"), 2u);
    EXPECT_EQ(CountOp(entries, "munmap"), 2u);
    std::multiset<uint64_t> mapped, sizes;
    for (const auto& e : entries) {
      if (e["op"] == "mmap") mapped.insert(e["len"].get<uint64_t>());
    }
    for (const auto& [path, sh] : shards) sizes.insert(sh.size);
    EXPECT_EQ(mapped, sizes) << "each shard mapped whole";
  } else {
    std::map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> ranges;
    const std::string op = mode == "pread" ? "pread64" : "aio_pread";
    for (const DataOp& d : ResolveDataOps(entries)) {
      EXPECT_EQ(d.op, op);
      ASSERT_GE(d.ret, 0);
      EXPECT_LE(static_cast<uint64_t>(d.ret), d.len);
      ranges[d.path].emplace_back(d.offset, static_cast<uint64_t>(d.ret));
      if (mode == "pread") {
        EXPECT_LE(d.len, 128 * kKiB);
        EXPECT_EQ(static_cast<uint64_t>(d.ret), d.len);
      } else {
        EXPECT_EQ(d.offset % (16 * kMiB), 0u);
        EXPECT_EQ(d.len % 4096, 0u);
      }
    }
    ASSERT_EQ(ranges.size(), 2u);
    for (const auto& [path, sh] : shards) EXPECT_TRUE(Tiles(ranges[path], sh.size)) << path;
    if (mode == "direct-async") {
      EXPECT_EQ(CountOp(entries, "io_setup"), 1u);
      EXPECT_EQ(CountOp(entries, "io_submit"), 2u);
      EXPECT_EQ(CountOp(entries, "io_getevents"), 2u);
      for (const auto& e : entries) {
        if (e["op"] == "openat") {
          EXPECT_NE(e["flags"].get<int>() & O_DIRECT, 0);
        }
      }
    }
  }
  EXPECT_EQ(s["shard_bytes"], shards.begin()->second.size + std::next(shards.begin())->second.size);
}

INSTANTIATE_TEST_SUITE_P(WorkloadModes, WorkloadModelLoadTest,
                         ::testing::Values("mmap", "pread", "direct-async"), [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(WorkloadModel, DirectAsyncKeepsQueueDepthAndBlockSize) {
  DirectDir dir;
  const std::string log = dir.path() + "/ops.jsonl";
  // One 9 MiB-ish shard in 1 MiB blocks at qd 4: batches of 4, 4, then the rest.
  const json s = Summary(
      Workload({"model-load", "--dir", dir.path(), "--prepare", "--shards", "1", "--shard-mb", "9",
                "--mode", "direct-async", "--block-mb", "1", "--qd", "4", "--log", log}));
  const auto entries = ReadLog(log);
  const uint64_t size = s["shard_bytes"];
  const uint64_t blocks = (size + kMiB - 1) / kMiB;
  std::vector<uint64_t> submits;
  for (const auto& e : entries) {
    if (e["op"] == "io_submit") submits.push_back(e["nr"]);
  }
  std::vector<uint64_t> expect;
  for (uint64_t left = blocks; left > 0; left -= std::min<uint64_t>(4, left)) {
    expect.push_back(std::min<uint64_t>(4, left));
  }
  EXPECT_EQ(submits, expect);
}

TEST(WorkloadModel, LoadRefusesToRunWithoutShards) {
  TempDir dir;
  const RunResult r = Workload({"model-load", "--dir", dir.path(), "--mode", "pread"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("missing"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--prepare"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "model"));
}

// ---------------------------------------------------------------------------------------------
// micro

struct MicroCase {
  const char* name;
  std::vector<std::string> args;
  const char* syscall;
  uint64_t size;
  uint64_t ops_per_thread;
  int threads;
};

class WorkloadMicroTest : public ::testing::TestWithParam<MicroCase> {};

TEST_P(WorkloadMicroTest, LogsTheRequestedOpsWithSizesAndPattern) {
  const MicroCase& c = GetParam();
  DirectDir dir;
  const std::string log = dir.path() + "/ops.jsonl";
  std::vector<std::string> args = {"micro", "--dir", dir.path(), "--file-mb", "1", "--log", log};
  args.insert(args.end(), c.args.begin(), c.args.end());
  const json s = Summary(Workload(args));
  const uint64_t blocks = kMiB / c.size;
  const auto entries = ReadLog(log);

  // Per thread: the ops the run issued (after the prepare phase, which is main-thread work).
  std::map<int, std::vector<uint64_t>> offsets;
  for (const DataOp& d : ResolveDataOps(entries)) {
    if (d.thread == 0) continue;
    EXPECT_EQ(d.op, c.syscall);
    EXPECT_EQ(d.len, c.size);
    EXPECT_EQ(d.ret, static_cast<int64_t>(c.size));
    EXPECT_EQ(d.offset % c.size, 0u);
    EXPECT_LT(d.offset, kMiB);
    offsets[d.thread].push_back(d.offset / c.size);
  }
  ASSERT_EQ(offsets.size(), static_cast<size_t>(c.threads));
  EXPECT_EQ(s["ops_per_thread"].size(), static_cast<size_t>(c.threads));
  for (const auto& [thread, blk] : offsets) {
    ASSERT_EQ(blk.size(), c.ops_per_thread) << "thread " << thread;
    const std::string pattern = s["pattern"];
    if (pattern == "seq") {
      for (size_t i = 0; i < blk.size(); i++) EXPECT_EQ(blk[i], i % blocks) << i;
    } else if (pattern.starts_with("stride:")) {
      const uint64_t n = std::stoull(pattern.substr(7));
      // Pass k visits k, k+n, k+2n, ... below the block count.
      std::vector<uint64_t> expect;
      for (uint64_t pass = 0; expect.size() < blk.size(); pass = (pass + 1) % std::min(n, blocks)) {
        for (uint64_t b = pass; b < blocks && expect.size() < blk.size(); b += n)
          expect.push_back(b);
      }
      EXPECT_EQ(blk, expect);
    } else {
      std::set<uint64_t> distinct(blk.begin(), blk.end());
      EXPECT_GT(distinct.size(), blk.size() / 2) << "random offsets should mostly differ";
      EXPECT_FALSE(std::is_sorted(blk.begin(), blk.end()));
    }
  }
  // read/write move through the file position: an lseek precedes every non-sequential access.
  if (std::string(c.syscall) == "read" || std::string(c.syscall) == "write") {
    for (size_t i = 0; i + 1 < entries.size(); i++) {
      if (entries[i]["op"] == "lseek" && entries[i + 1]["thread"] == entries[i]["thread"]) {
        EXPECT_EQ(entries[i + 1]["offset"], entries[i]["offset"]);
      }
    }
  }
  EXPECT_EQ(s["files"], c.threads > 1 && std::find(c.args.begin(), c.args.end(),
                                                   "--per-thread-files") != c.args.end()
                            ? c.threads
                            : 1);
}

INSTANTIATE_TEST_SUITE_P(
    WorkloadOps, WorkloadMicroTest,
    ::testing::Values(
        MicroCase{"pread_seq", {"--op", "pread", "--ops", "300"}, "pread64", 4096, 300, 1},
        MicroCase{"randread",
                  {"--op", "randread", "--ops", "100", "--size", "8192"},
                  "pread64",
                  8192,
                  100,
                  1},
        MicroCase{"read_stride",
                  {"--op", "read", "--ops", "70", "--pattern", "stride:5"},
                  "read",
                  4096,
                  70,
                  1},
        MicroCase{"write_rand",
                  {"--op", "write", "--ops", "40", "--pattern", "rand"},
                  "write",
                  4096,
                  40,
                  1},
        MicroCase{
            "pwrite_direct_threads",
            {"--op", "pwrite", "--ops", "50", "--direct", "--threads", "3", "--per-thread-files"},
            "pwrite64",
            4096,
            50,
            3},
        MicroCase{"randwrite_shared",
                  {"--op", "randwrite", "--ops", "25", "--threads", "2"},
                  "pwrite64",
                  4096,
                  25,
                  2}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(WorkloadMicro, RatePacesOperations) {
  TempDir dir;
  const std::string log = dir / "ops.jsonl";
  const std::string markers = dir / "markers";
  { std::ofstream(markers).flush(); }
  // 20 ops at 200/s: op i is due 5 ms x i after the run starts, about 95 ms from first to last.
  const json s = Summary(Workload({"micro", "--dir", dir.path(), "--file-mb", "1", "--ops", "20",
                                   "--rate", "200", "--log", log},
                                  {"IOTWIN_MARKER=" + markers}));
  std::vector<uint64_t> ts;
  uint64_t run_marker_ns = 0;  // written right after the schedule's start was taken
  for (const auto& e : ReadLog(log)) {
    if (e["op"] == "pread64" && e["thread"] != 0) ts.push_back(e["ts_ns"]);
    if (e["op"] == "marker" && e["text"] == "B micro.run") run_marker_ns = e["ts_ns"];
  }
  ASSERT_EQ(ts.size(), 20u);
  ASSERT_NE(run_marker_ns, 0u);
  // The schedule is absolute, so an op is never early (a late one may be followed by a quick
  // catch-up: sleep wake-ups on a busy VM are late by milliseconds).
  for (size_t i = 0; i < ts.size(); i++) {
    EXPECT_GE(ts[i] + 1'000'000u, run_marker_ns + i * 5'000'000u) << "op " << i << " early";
  }
  EXPECT_LT(ts.back() - ts.front(), 400'000'000u);
  EXPECT_GE(s["seconds"].get<double>(), 0.095);
}

TEST(WorkloadMicro, SecondsBoundsTheRun) {
  TempDir dir;
  const json s = Summary(Workload(
      {"micro", "--dir", dir.path(), "--file-mb", "1", "--seconds", "0.2", "--rate", "500"}));
  EXPECT_GE(s["seconds"].get<double>(), 0.19);
  EXPECT_LT(s["seconds"].get<double>(), 1.0);
  // Paced at 500/s for 0.2 s: about 100 ops (allow scheduling slack).
  EXPECT_GE(s["ops_per_thread"][0].get<uint64_t>(), 80u);
  EXPECT_LE(s["ops_per_thread"][0].get<uint64_t>(), 101u);
}

// ---------------------------------------------------------------------------------------------
// Determinism: same seed and options => the same operations.

// The parts of a log entry that must repeat: everything but times, thread ids, addresses and fds.
std::vector<std::string> Normalize(const std::vector<json>& log, const std::string& dir) {
  std::vector<std::string> out;
  for (json e : log) {
    for (const char* k : {"ts_ns", "dur_ns", "tid", "addr", "ctx", "fd"}) e.erase(k);
    const std::string op = e["op"];
    if (op == "openat" || op == "io_uring_setup") e.erase("ret");  // fd numbers
    for (const char* k : {"path", "file"}) {
      if (e.contains(k)) {
        std::string p = e[k];
        if (p.starts_with(dir)) p = "DIR" + p.substr(dir.size());
        e[k] = p;
      }
    }
    out.push_back(e.dump());
  }
  std::sort(out.begin(), out.end());  // thread + seq make every entry unique; order-free compare
  return out;
}

class WorkloadDeterminismTest : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(WorkloadDeterminismTest, SameSeedSameOperations) {
  auto run = [&](const std::string& seed, std::string* dir_out) {
    auto dir = std::make_unique<DirectDir>();
    const std::string log = dir->path() + "/ops.jsonl";
    std::vector<std::string> args = GetParam();
    args.insert(args.end(), {"--dir", dir->path(), "--seed", seed, "--log", log, "--quiet"});
    const RunResult r = Workload(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    *dir_out = dir->path();
    auto n = Normalize(ReadLog(log), dir->path());
    return n;
  };
  std::string d1, d2, d3;
  const auto a = run("7", &d1);
  const auto b = run("7", &d2);
  const auto c = run("8", &d3);
  ASSERT_GT(a.size(), 10u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c) << "a different seed should change the operations";
}

INSTANTIATE_TEST_SUITE_P(
    WorkloadScenarios, WorkloadDeterminismTest,
    ::testing::Values(std::vector<std::string>{"kv-offload", "--threads", "2", "--io", "uring"},
                      std::vector<std::string>{"kv-offload", "--dist", "uniform", "--gets", "50"},
                      std::vector<std::string>{"micro", "--op", "randread", "--ops", "200",
                                               "--file-mb", "2", "--threads", "2"}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

TEST(WorkloadDeterminism, ModelFilesAreByteIdenticalForTheSameSeed) {
  TempDir a, b;
  ASSERT_EQ(Workload({"model-load", "--dir", a.path(), "--prepare-only", "--seed", "3", "--quiet"})
                .exit_code,
            0);
  ASSERT_EQ(Workload({"model-load", "--dir", b.path(), "--prepare-only", "--seed", "3", "--quiet"})
                .exit_code,
            0);
  for (int i = 1; i <= 2; i++) {
    std::ifstream fa(ShardPath(a.path(), i, 2), std::ios::binary),
        fb(ShardPath(b.path(), i, 2), std::ios::binary);
    const std::string ca((std::istreambuf_iterator<char>(fa)), {}),
        cb((std::istreambuf_iterator<char>(fb)), {});
    EXPECT_GT(ca.size(), kMiB);
    EXPECT_TRUE(ca == cb) << "shard " << i << " differs";
  }
}

// ---------------------------------------------------------------------------------------------
// Intent markers and the log's final marker.

TEST(WorkloadMarkers, PhasesAreBracketedOnTheMarkerChannel) {
  TempDir dir;
  const std::string markers = dir / "markers";
  { std::ofstream(markers).flush(); }
  const std::string log = dir / "ops.jsonl";
  const RunResult r = Workload({"kv-offload", "--dir", dir.path(), "--log", log, "--quiet"},
                               {"IOTWIN_MARKER=" + markers});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(markers);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  EXPECT_EQ(lines, (std::vector<std::string>{"B workload.kv-offload", "B kv.put", "E kv.put",
                                             "B kv.get", "E kv.get", "E workload.kv-offload"}));
  const auto entries = ReadLog(log);
  ASSERT_FALSE(entries.empty());
  EXPECT_EQ(entries.front()["op"], "marker_open");
  EXPECT_EQ(entries.front()["path"], markers);
  std::vector<std::string> logged;
  for (const auto& e : entries) {
    if (e["op"] == "marker") {
      logged.push_back(e["text"]);
      EXPECT_EQ(e["ret"].get<size_t>(), e["text"].get<std::string>().size() + 1);  // + '\n'
      EXPECT_EQ(e["fd"], entries.front()["ret"]);
    }
  }
  EXPECT_EQ(logged, lines);
  // The final marker is the last logged op: the log itself is written after it.
  EXPECT_EQ(entries.back()["op"], "marker");
  EXPECT_EQ(entries.back()["text"], "E workload.kv-offload");
}

TEST(WorkloadMarkers, ShardMarkersComeFromTheLoadingThreads) {
  TempDir dir;
  const std::string markers = dir / "markers";
  { std::ofstream(markers).flush(); }
  const std::string log = dir / "ops.jsonl";
  ASSERT_EQ(Workload({"model-load", "--dir", dir.path(), "--prepare", "--threads", "2", "--log",
                      log, "--quiet"},
                     {"IOTWIN_MARKER=" + markers})
                .exit_code,
            0);
  std::set<int> shard_threads;
  for (const auto& e : ReadLog(log)) {
    if (e["op"] == "marker" && e["text"] == "B model.shard")
      shard_threads.insert(e["thread"].get<int>());
  }
  EXPECT_EQ(shard_threads.size(), 2u);
  EXPECT_FALSE(shard_threads.count(0));
}

TEST(WorkloadMarkers, NoChannelNoMarkers) {
  TempDir dir;
  const std::string log = dir / "ops.jsonl";
  ASSERT_EQ(
      Workload({"micro", "--dir", dir.path(), "--ops", "5", "--log", log, "--quiet"}).exit_code, 0);
  const auto entries = ReadLog(log);
  EXPECT_EQ(CountOp(entries, "marker"), 0u);
  EXPECT_EQ(CountOp(entries, "marker_open"), 0u);
}

TEST(WorkloadMarkers, UnopenableChannelIsAnError) {
  TempDir dir;
  const RunResult r =
      Workload({"micro", "--dir", dir.path(), "--ops", "5"}, {"IOTWIN_MARKER=" + (dir / "absent")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("IOTWIN_MARKER"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "absent")) << "the channel is never created by the workload";
}

// ---------------------------------------------------------------------------------------------
// The log against an independent observer: strace -f sees exactly the logged syscalls.

struct SyscallSeen {
  std::string name;
  std::string args;
};

// Per thread id, the syscalls strace saw that the log covers (allocator and liburing ring
// mappings excluded, as docs/workloads.md says).
std::map<int64_t, std::vector<SyscallSeen>> ReadStrace(const std::string& path) {
  static const std::set<std::string> kCovered = {
      "openat",    "close",        "read",       "write",          "pread64",
      "pwrite64",  "lseek",        "fsync",      "fadvise64",      "ftruncate",
      "mkdirat",   "newfstatat",   "mmap",       "munmap",         "io_setup",
      "io_submit", "io_getevents", "io_destroy", "io_uring_setup", "io_uring_enter"};
  std::map<int64_t, std::vector<SyscallSeen>> out;
  std::map<int64_t, size_t> unfinished;  // tid -> index of its call waiting for "resumed"
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    // "<tid> <name>(<args>) = <ret>", or split under -f: "<tid> <name>(<args> <unfinished ...>"
    // then later "<tid> <... <name> resumed><rest>".
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) continue;
    const int64_t tid = std::stoll(line.substr(0, sp));
    const size_t name_start = line.find_first_not_of(' ', sp);
    if (line.compare(name_start, 5, "<... ") == 0) {
      const size_t resumed = line.find("resumed>");
      auto it = unfinished.find(tid);
      if (resumed != std::string::npos && it != unfinished.end()) {
        std::string& args = out[tid][it->second].args;
        args = args.substr(0, args.find(" <unfinished")) + line.substr(resumed + 8);
        unfinished.erase(it);
      }
      continue;
    }
    const size_t paren = line.find('(', name_start);
    if (paren == std::string::npos) continue;
    const std::string name = line.substr(name_start, paren - name_start);
    if (!kCovered.count(name)) continue;
    const std::string args = line.substr(paren + 1);
    if (name == "mmap" && (args.find("MAP_ANONYMOUS") != std::string::npos ||
                           args.find("MAP_POPULATE") != std::string::npos)) {
      continue;
    }
    out[tid].push_back({name, args});
    if (args.find("<unfinished ...>") != std::string::npos) unfinished[tid] = out[tid].size() - 1;
  }
  return out;
}

// Checks a pread64/pwrite64 strace line ("fd, "data"..., len, offset)   = ret") against the log.
::testing::AssertionResult SameTransfer(const std::string& args, const json& e) {
  const std::string range = ", " + std::to_string(e["len"].get<uint64_t>()) + ", " +
                            std::to_string(e["offset"].get<uint64_t>()) + ")";
  const size_t at = args.rfind(range);
  if (at != std::string::npos) {
    const size_t eq = args.find("= ", at + range.size());
    if (eq != std::string::npos && args.substr(eq + 2) == std::to_string(e["ret"].get<int64_t>())) {
      return ::testing::AssertionSuccess();
    }
  }
  return ::testing::AssertionFailure() << "strace: " << args << "\nlog: " << e.dump();
}

class WorkloadStraceTest : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(WorkloadStraceTest, LoggedSyscallsAreExactlyWhatTheKernelSaw) {
  const std::string strace = "/usr/bin/strace";
  if (access(strace.c_str(), X_OK) != 0) GTEST_SKIP() << "strace not installed";
  DirectDir dir;
  const std::string log = dir.path() + "/ops.jsonl";
  const std::string trace = dir.path() + "/strace.txt";
  const std::string markers = dir.path() + "/markers";
  { std::ofstream(markers).flush(); }
  std::vector<std::string> argv = {strace, "-f", "-qq", "-o", trace, WorkloadBin()};
  argv.insert(argv.end(), GetParam().begin(), GetParam().end());
  argv.insert(argv.end(), {"--dir", dir.path() + "/w", "--log", log, "--quiet"});
  const RunResult r = ::iotwin::test::Run(argv, 120, {"IOTWIN_MARKER=" + markers});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  std::map<int64_t, std::vector<json>> logged;
  for (const auto& e : ReadLog(log)) {
    std::string op = e["op"];
    if (op == "marker") op = "write";
    if (op == "marker_open") op = "openat";
    static const std::set<std::string> kPseudo = {"touch",     "uring_read", "uring_write",
                                                  "aio_pread", "aio_pwrite", "uring_exit"};
    if (kPseudo.count(op)) continue;
    json c = e;
    c["op"] = op;
    logged[e["tid"].get<int64_t>()].push_back(c);
  }
  const auto seen = ReadStrace(trace);
  ASSERT_FALSE(logged.empty());
  for (const auto& [tid, ops] : logged) {
    ASSERT_TRUE(seen.count(tid)) << "strace saw nothing from thread " << tid;
    const auto& calls = seen.at(tid);
    // The logged ops must be a contiguous run of what strace saw: nothing missing, nothing extra
    // in between (before: loader and thread start-up; after: the log file and the summary).
    auto matches_at = [&](size_t start) {
      if (start + ops.size() > calls.size()) return false;
      for (size_t i = 0; i < ops.size(); i++) {
        if (calls[start + i].name != ops[i]["op"]) return false;
      }
      return true;
    };
    size_t start = 0;
    while (start < calls.size() && !matches_at(start)) start++;
    ASSERT_LT(start, calls.size()) << "thread " << tid << ": the " << ops.size()
                                   << " logged syscalls are not a contiguous run of strace's";
    for (size_t i = 0; i < ops.size(); i++) {
      const SyscallSeen& sc = calls[start + i];
      const json& e = ops[i];
      if (sc.name == "pread64" || sc.name == "pwrite64") {
        EXPECT_TRUE(SameTransfer(sc.args, e));
      }
      if (sc.name == "openat") {
        EXPECT_NE(sc.args.find("\"" + e["path"].get<std::string>() + "\""), std::string::npos)
            << sc.args;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    WorkloadScenarios, WorkloadStraceTest,
    ::testing::Values(
        std::vector<std::string>{"kv-offload", "--io", "uring", "--threads", "2", "--fsync"},
        std::vector<std::string>{"kv-offload", "--io", "direct", "--chunks", "4", "--gets", "4"},
        std::vector<std::string>{"model-load", "--prepare", "--mode", "mmap", "--drop-cache"},
        std::vector<std::string>{"model-load", "--prepare", "--mode", "direct-async", "--threads",
                                 "2"},
        std::vector<std::string>{"micro", "--op", "write", "--pattern", "stride:3", "--ops", "50"},
        std::vector<std::string>{"mixed", "--gets", "8", "--writes", "8"}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

// ---------------------------------------------------------------------------------------------
// mixed, defaults, bad options

TEST(WorkloadMixed, ThreeRolesRunConcurrently) {
  TempDir dir;
  const std::string log = dir / "ops.jsonl";
  const json s = Summary(Workload({"mixed", "--dir", dir.path(), "--log", log}));
  std::map<int, std::set<std::string>> ops_by_thread;
  for (const DataOp& d : ResolveDataOps(ReadLog(log))) {
    const std::string kind = d.path.find("/kv/") != std::string::npos      ? "kv"
                             : d.path.find("/model/") != std::string::npos ? "model"
                                                                           : "journal";
    ops_by_thread[d.thread].insert(d.op + ":" + kind);
  }
  // Thread 1 is setup (puts + prepare); 2, 3, 4 are the roles.
  EXPECT_EQ(ops_by_thread[2], (std::set<std::string>{"pread64:kv"}));
  EXPECT_EQ(ops_by_thread[3], (std::set<std::string>{"pread64:model"}));
  EXPECT_EQ(ops_by_thread[4], (std::set<std::string>{"pwrite64:journal"}));
  EXPECT_EQ(s["threads"], 3);
}

TEST(WorkloadDefaults, EachDefaultRunIsSmallAndFast) {
  TempDir dir;
  const std::vector<std::vector<std::string>> runs = {
      {"kv-offload"}, {"model-load", "--prepare"}, {"micro"}, {"mixed"}};
  for (auto args : runs) {
    args.insert(args.end(), {"--dir", dir.path()});
    const json s = Summary(Workload(args));
    ASSERT_TRUE(s.is_object()) << args[0];
    EXPECT_GT(s["ops"].get<uint64_t>(), 0u) << args[0];
    EXPECT_LT(s["bytes"].get<uint64_t>(), 100 * kMiB) << args[0];
    // Well under a second on an idle machine; the bound leaves room for a loaded CI host.
    EXPECT_LT(s["seconds"].get<double>(), 2.0) << args[0];
  }
}

TEST(WorkloadCli, BadOptionsExitWithStatus2AndSayWhy) {
  TempDir dir;
  const std::string d = dir.path();
  const std::vector<std::vector<std::string>> bad = {
      {},
      {"no-such-scenario", "--dir", d},
      {"kv-offload"},  // --dir missing
      {"kv-offload", "--dir", d, "--io", "mmap"},
      {"kv-offload", "--dir", d, "--threads", "0"},
      {"kv-offload", "--dir", d, "--chunks", "0"},
      {"kv-offload", "--dir", d, "--io", "direct", "--io-size", "1000"},
      {"kv-offload", "--dir", d, "--direct"},  // O_DIRECT without a direct engine
      {"kv-offload", "--dir", d, "--qd", "0", "--io", "uring"},
      {"kv-offload", "--dir", d, "--layers", "x"},
      {"model-load", "--dir", d, "--prepare", "--prepare-only"},
      {"model-load", "--dir", d, "--mode", "stream"},
      {"model-load", "--dir", d, "--prepare", "--shards", "8", "--shard-mb", "1", "--hidden",
       "1024"},
      {"micro", "--dir", d, "--pattern", "stride:0"},
      {"micro", "--dir", d, "--op", "randread", "--pattern", "seq"},
      {"micro", "--dir", d, "--size", "4097", "--direct"},
      {"micro", "--dir", d, "--size", "4096", "--file-mb", "0"},
      {"mixed", "--dir", d, "--threads", "2"},
  };
  for (const auto& args : bad) {
    const RunResult r = Workload(args);
    std::string cmd;
    for (const auto& a : args) cmd += a + " ";
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.err;
    EXPECT_NE(r.err.find("error"), std::string::npos) << cmd << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << cmd << ": no summary on failure";
  }
  // Nothing was created by the refused runs except what validation needs (no data files).
  EXPECT_FALSE(fs::exists(dir / "kv"));
  EXPECT_FALSE(fs::exists(dir / "model"));
}

}  // namespace
}  // namespace iotwin::test
