// `iotwin report` on recordings of real programs: what counts as the program's storage I/O.
// A cold mmap model load (safetensors-style) reads its shards through mappings; `tar czf`
// moves its data through a pipe to gzip.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime_util.h"

namespace iotwin::test {
namespace {

using nlohmann::json;

RunResult Record(const std::string& trace, const std::vector<std::string>& command) {
  std::vector<std::string> argv = {IotwinBin(), "record", "-o", trace, "--no-status", "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  return test::Run(argv, 300);
}

json Report(const std::string& trace) {
  RunResult r = test::Run({IotwinBin(), "report", trace, "--json", "--no-progress", "--top", "0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out, nullptr, false);
}

uint64_t SizeOf(const std::string& path) {
  struct stat st{};
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

uint64_t InoOf(const std::string& path) {
  struct stat st{};
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// The FILES row of the file with inode `ino`, and its rank; nullptr when absent.
const json* FileRow(const json& m, uint64_t ino, size_t* rank = nullptr) {
  const json& rows = m["files"]["rows"];
  for (size_t i = 0; i < rows.size(); i++) {
    if (rows[i]["ino"].get<uint64_t>() != ino) continue;
    if (rank) *rank = i;
    return &rows[i];
  }
  return nullptr;
}

uint64_t AllBytes(const json& dir) {
  return dir["bytes"].get<uint64_t>() + dir["async_bytes"].get<uint64_t>() +
         dir["mmap_bytes"].get<uint64_t>();
}

// Two 64 MiB safetensors shards under `model`, as model-load --prepare-only writes them.
void PrepareShards(const std::string& model, std::vector<std::string>* shards) {
  RunResult prep = test::Run({WorkloadBin(), "model-load", "--dir", model, "--prepare-only",
                              "--shards", "2", "--shard-mb", "64", "--quiet"});
  ASSERT_EQ(prep.exit_code, 0) << prep.err;
  for (int s = 1; s <= 2; s++) {
    shards->push_back(model + "/model/model-0000" + std::to_string(s) + "-of-00002.safetensors");
    ASSERT_GT(SizeOf(shards->back()), 60u << 20) << "shard missing: " << shards->back();
  }
}

// The case: `iotwin-workload model-load --mode mmap --drop-cache` read its shards
// through mappings. SUMMARY's reads are the shards' bytes (plus what the loader mapped of the
// program and its libraries: under 2 MiB, 1.5% of 128 MiB), and the major faults, the hit
// ratio and the block layer tell one story: nearly every page was read from the device.
TEST(ReportStorage, MmapModelLoadReadsAreTheShardBytes) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  if (access(WorkloadBin().c_str(), X_OK) != 0) GTEST_SKIP() << "no " << WorkloadBin();
  TempDir dir;
  const std::string model = dir / "model";
  std::vector<std::string> shards;
  ASSERT_NO_FATAL_FAILURE(PrepareShards(model, &shards));
  const std::string trace = dir / "load.iotwin";
  // Two loader threads, one shard each (MmapShardsOfOneThreadKeepTheirOwnInodes has one).
  RunResult r = Record(trace, {WorkloadBin(), "model-load", "--dir", model, "--mode", "mmap",
                               "--threads", "2", "--drop-cache", "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json m = Report(trace);
  ASSERT_TRUE(m.is_object());

  uint64_t shard_bytes = 0;
  for (const std::string& shard : shards) shard_bytes += SizeOf(shard);

  const json& read = m["totals"]["read"];
  const double reads = static_cast<double>(read["bytes"].get<uint64_t>());
  EXPECT_NEAR(reads / static_cast<double>(shard_bytes), 1.0, 0.05) << read.dump();
  EXPECT_GT(read["mmap_bytes"].get<uint64_t>(), shard_bytes * 9 / 10) << read.dump();
  for (const std::string& shard : shards) {
    const json* row = FileRow(m, InoOf(shard));
    ASSERT_NE(row, nullptr) << shard;
    // Each shard's own faults: the capture names the file of each fault (a fault given the
    // inode of the shard mapped before at the same address shows here).
    ASSERT_TRUE(row->contains("faults")) << shard << " has no faults: " << row->dump();
    const double mapped = static_cast<double>(AllBytes((*row)["read"]));
    EXPECT_NEAR(mapped / static_cast<double>(SizeOf(shard)), 1.0, 0.05) << row->dump();
  }

  // One story: the pages that missed the cache are the pages the device read, the hit ratio
  // says how few were cached, and the faults that mapped them are the major ones.
  ASSERT_TRUE(m["memory"].is_object());
  ASSERT_TRUE(m["block"].is_object()) << "no block layer";
  const json& mem = m["memory"];
  const json& misses = mem["misses"];
  const uint64_t page = mem["page_size"].get<uint64_t>();
  const uint64_t missed =
      misses["missed_call_pages"].get<uint64_t>() + misses["missed_fault_pages"].get<uint64_t>();
  const uint64_t pages_read =
      misses["read_pages"].get<uint64_t>() + misses["mapped_pages"].get<uint64_t>();
  const double block_read = static_cast<double>(m["block"]["read"]["bytes"].get<uint64_t>());
  EXPECT_NEAR(static_cast<double>(missed * page) / block_read, 1.0, 0.10) << mem.dump();
  const double hit = mem["read_hit_ratio"].get<double>();
  EXPECT_NEAR((1.0 - hit) * static_cast<double>(pages_read * page) / block_read, 1.0, 0.10)
      << "hit ratio " << hit << " against " << block_read << " block bytes";
  const uint64_t major = mem["faults"]["major"].get<uint64_t>();
  uint64_t shard_faults = 0, shard_major = 0;
  for (const std::string& shard : shards) {
    const json& f = (*FileRow(m, InoOf(shard)))["faults"];
    shard_faults += f["total"].get<uint64_t>();
    shard_major += f["major"].get<uint64_t>();
  }
  // Major faults are the kernel's (MemoryMajorFaults checks them against ru_majflt): a fault
  // that waits for a readahead under way maps missed pages yet is minor.
  EXPECT_LE(shard_major, shard_faults) << mem["faults"].dump();
  // A page of the program or its libraries that is not cached yet (a freshly built binary on a
  // fresh machine) is a major fault too: a few, not a share of the shards'.
  ASSERT_GE(major, shard_major) << mem["faults"].dump();
  EXPECT_LE(major - shard_major, std::max<uint64_t>(4, shard_major / 10))
      << "major faults outside the shards " << mem["faults"].dump();
  EXPECT_LT(hit, 0.05);
  EXPECT_NEAR(mem["fault_hit_ratio"].get<double>(),
              1.0 - static_cast<double>(major) / mem["faults"]["total"].get<double>(), 1e-3);
  // Amplification compares like with like: block bytes over what the program read.
  EXPECT_NEAR(m["amplification"]["read"].get<double>(), block_read / reads, 0.01);
  EXPECT_NEAR(m["amplification"]["read"].get<double>(), 1.0, 0.10);
}

// tar czf: tar reads the files and writes the archive through a pipe to gzip, which writes
// the archive. The pipe's bytes are on the non-storage line, not in the storage totals, and
// FILES puts the archive written above the C library read.
TEST(ReportStorage, TarPipeIsNotStorage) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  const bool gzip = access("/usr/bin/gzip", X_OK) == 0 || access("/bin/gzip", X_OK) == 0;
  if (access("/usr/bin/tar", X_OK) != 0 || !gzip) GTEST_SKIP() << "no tar or gzip";
  TempDir dir;
  const std::string src = dir / "src";
  ASSERT_EQ(mkdir(src.c_str(), 0755), 0);
  {
    // 2 MiB that gzip cannot compress and 2 MiB of text.
    std::ofstream random(src + "/random.bin", std::ios::binary);
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < (2 << 20) / 8; i++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      random.write(reinterpret_cast<const char*>(&x), sizeof x);
    }
    std::ofstream text(src + "/numbers.txt");
    for (int i = 0; text.tellp() < (2 << 20); i++) text << i << '\n';
  }
  const std::string archive = dir / "a.tgz", trace = dir / "tar.iotwin";
  RunResult r = Record(trace, {"/usr/bin/tar", "czf", archive, "-C", dir.path(), "src"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json m = Report(trace);
  ASSERT_TRUE(m.is_object());
  const uint64_t archive_bytes = SizeOf(archive);
  ASSERT_GT(archive_bytes, 2u << 20);

  const json& pipe = m["non_storage"]["pipe"];
  ASSERT_TRUE(pipe.is_object()) << m["non_storage"].dump();
  // tar wrote the uncompressed stream (over 4 MiB) into the pipe, gzip read it.
  EXPECT_GT(pipe["write_bytes"].get<uint64_t>(), 4u << 20) << pipe.dump();
  EXPECT_EQ(pipe["read_bytes"], pipe["write_bytes"]) << pipe.dump();
  // Storage writes are the archive's bytes only, not the pipe's.
  const json& totals = m["totals"];
  EXPECT_EQ(AllBytes(totals["write"]), archive_bytes) << totals["write"].dump();
  // Storage reads: the two files and what the programs mapped, never the pipe's stream.
  const uint64_t inputs = SizeOf(src + "/random.bin") + SizeOf(src + "/numbers.txt");
  EXPECT_GE(totals["read"]["syscall_bytes"].get<uint64_t>(), inputs);
  EXPECT_LT(totals["read"]["syscall_bytes"].get<uint64_t>(), inputs + (1u << 20))
      << totals["read"].dump();

  size_t archive_rank = 0, libc_rank = 0;
  const json* archive_row = FileRow(m, InoOf(archive), &archive_rank);
  ASSERT_NE(archive_row, nullptr) << m["files"].dump();
  const json* libc_row = nullptr;
  for (size_t i = 0; i < m["files"]["rows"].size() && !libc_row; i++) {
    for (const json& n : m["files"]["rows"][i]["names"]) {
      if (n.get<std::string>().find("libc.so") != std::string::npos) {
        libc_row = &m["files"]["rows"][i];
        libc_rank = i;
      }
    }
  }
  ASSERT_NE(libc_row, nullptr) << "libc not in FILES";
  EXPECT_LT(archive_rank, libc_rank);
  // No storage file in FILES carries the pipe's bytes.
  for (const json& row : m["files"]["rows"])
    EXPECT_LE(AllBytes(row["write"]), archive_bytes) << row.dump();
}

// One loader thread maps shard 1, unmaps it, then maps shard 2 of the same size, usually at the
// same address: the kernel can hand the freed VMA and struct file back for it. The capture's
// per-thread VMA cache must not take them for the old mapping: every shard has its own faults.
// (A cache that does not compare inodes gives shard 2's faults shard 1's inode in most runs of
// 64 MiB shards; four runs here.)
TEST(ReportStorage, MmapShardsOfOneThreadKeepTheirOwnInodes) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  if (access(WorkloadBin().c_str(), X_OK) != 0) GTEST_SKIP() << "no " << WorkloadBin();
  TempDir dir;
  const std::string model = dir / "model";
  std::vector<std::string> shards;
  ASSERT_NO_FATAL_FAILURE(PrepareShards(model, &shards));
  for (int run = 0; run < 4; run++) {
    const std::string trace = dir / ("load" + std::to_string(run) + ".iotwin");
    RunResult r = Record(trace, {WorkloadBin(), "model-load", "--dir", model, "--mode", "mmap",
                                 "--threads", "1", "--drop-cache", "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json m = Report(trace);
    ASSERT_TRUE(m.is_object());
    for (const std::string& shard : shards) {
      const json* row = FileRow(m, InoOf(shard));
      ASSERT_NE(row, nullptr) << "run " << run << ": " << shard;
      ASSERT_TRUE(row->contains("faults")) << "run " << run << ": " << shard
                                           << " has no faults: " << row->dump();
      const double mapped = static_cast<double>(AllBytes((*row)["read"]));
      EXPECT_NEAR(mapped / static_cast<double>(SizeOf(shard)), 1.0, 0.05)
          << "run " << run << ": " << row->dump();
    }
  }
}

}  // namespace
}  // namespace iotwin::test
