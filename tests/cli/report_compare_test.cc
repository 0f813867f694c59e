// `iotwin compare` end to end on synthetic traces: perfect fidelity with itself, differences
// found and exit 1, timing judged per pacing mode, corrupt input exit 2 (no BPF needed).
#include <fcntl.h>

#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../unit/trace_builder.h"
#include "runtime_util.h"

namespace iotwin::test {
namespace {

constexpr uint32_t kDev = (8u << 20) | 1;
constexpr uint64_t kT0 = 1'000'000'000ULL;

struct Shape {
  uint64_t read_size = 131072;
  uint64_t time_scale_pct = 100;  // 50: everything twice as fast
  bool swap_two = false;          // reorder two operations
  int extra_ops = 0;              // extra fsyncs at the end
  const char* pace = nullptr;     // replay header, if any
  uint32_t tid_base = 700;        // replays run under other ids
};

TraceBuilder Workload(const Shape& s) {
  TraceBuilder t(FullCaptureMeta());
  if (s.pace) t.meta()["replay"] = {{"source", "original.iotwin"}, {"pace", s.pace}};
  uint32_t main = s.tid_base, worker = s.tid_base + 1;
  auto at = [&](uint64_t rel) { return kT0 + rel * s.time_scale_pct / 100; };
  t.ProcAt(IOT_PROC_START, at(0), main, main, "train");
  t.Open(main, at(1000), "/data/train.bin", 3, kDev, 10);
  t.Open(worker, at(2000), "/ckpt/out.bin", 4, kDev, 11, O_WRONLY | O_CREAT, main);
  std::vector<std::pair<uint64_t, uint64_t>> reads;
  for (int i = 0; i < 400; i++) reads.push_back({uint64_t(i) * s.read_size, s.read_size});
  if (s.swap_two) std::swap(reads[100], reads[200]);
  uint64_t rel = 10'000;
  for (auto [off, len] : reads) {
    rel += 50'000;
    t.Io(IOT_OP_PREAD64, main, at(rel), 20'000, 3, kDev, 10, off, len, static_cast<int64_t>(len), main);
    if (rel % 1'000'000 == 0)
      t.Io(IOT_OP_PWRITE64, worker, at(rel + 10), 90'000, 4, kDev, 11, rel, 65536, 65536, main);
  }
  for (int i = 0; i < s.extra_ops; i++) {
    iot_syscall f = TraceBuilder::Sys(IOT_OP_FSYNC, worker, at(rel += 1000), main);
    f.fd = 4;
    f.dev = kDev;
    f.ino = 11;
    t.Add(f);
  }
  return t;
}

std::string WriteTrace(const TempDir& dir, const std::string& name, const TraceBuilder& t) {
  std::string p = dir / name;
  EXPECT_TRUE(t.WriteFile(p, {{"stop_reason", "exited"}, {"exit_status", 0}}).ok());
  return p;
}

nlohmann::json Measure(const nlohmann::json& r, const std::string& name) {
  for (const auto& m : r["measures"])
    if (m["name"] == name) return m;
  return nullptr;
}

TEST(CompareCli, TraceWithItselfIsPerfect) {
  TempDir dir;
  std::string a = WriteTrace(dir, "a.iotwin", Workload({}));
  RunResult r = test::Run({IotwinBin(), "compare", a, a, "--no-progress"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("VERDICT: PASS"), std::string::npos) << r.out;
  r = test::Run({IotwinBin(), "compare", a, a, "--json", "--no-progress"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "pass");
  EXPECT_DOUBLE_EQ(Measure(j, "seq-match")["value"].get<double>(), 1.0);
  for (const auto& m : j["measures"]) EXPECT_EQ(m["value"].get<double>(), 0.0 + (m["name"] == "seq-match")) << m;
  EXPECT_TRUE(j["timing_judged"].get<bool>());
}

TEST(CompareCli, ReplayUnderOtherIdsWithSameStructurePasses) {
  TempDir dir;
  std::string a = WriteTrace(dir, "a.iotwin", Workload({}));
  Shape s;
  s.tid_base = 4242;
  s.pace = "original";
  std::string b = WriteTrace(dir, "b.iotwin", Workload(s));
  RunResult r = test::Run({IotwinBin(), "compare", a, b, "--json", "--no-progress"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["pace"], "original");
  EXPECT_EQ(j["threads"]["matched_ops"], j["threads"]["compared_ops"]);
}

TEST(CompareCli, DifferentTracesFailWithTheDifferencesNamed) {
  TempDir dir;
  std::string a = WriteTrace(dir, "a.iotwin", Workload({}));
  Shape s;
  s.read_size = 65536;  // different request sizes
  s.swap_two = true;    // different order
  s.extra_ops = 3;      // extra operations
  std::string b = WriteTrace(dir, "b.iotwin", Workload(s));
  RunResult r = test::Run({IotwinBin(), "compare", a, b, "--json", "--no-progress"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "fail");
  std::set<std::string> failed;
  for (const auto& f : j["failed"]) failed.insert(f.get<std::string>());
  EXPECT_TRUE(failed.count("seq-match"));
  EXPECT_TRUE(failed.count("size-ks"));
  EXPECT_TRUE(failed.count("op-count-rel-err"));
  EXPECT_TRUE(failed.count("bytes-rel-err"));
  EXPECT_NEAR(Measure(j, "size-ks")["value"].get<double>(), 1.0, 1e-9);  // every read size differs
  bool fsync_diff = false;
  for (const auto& o : j["ops"])
    if (o["op"] == "fsync") fsync_diff = o["diff"] == 3;
  EXPECT_TRUE(fsync_diff) << j["ops"].dump();

  // Only the order differs: 2 of ~400 reads are out of place.
  Shape order;
  order.swap_two = true;
  std::string c = WriteTrace(dir, "c.iotwin", Workload(order));
  r = test::Run({IotwinBin(), "compare", a, c, "--json", "--no-progress"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  j = nlohmann::json::parse(r.out);
  double seq = Measure(j, "seq-match")["value"].get<double>();
  EXPECT_LT(seq, 1.0);
  EXPECT_GT(seq, 0.99);
  EXPECT_EQ(j["failed"], nlohmann::json::array({"seq-match"}));
  // The text output names the verdict and the thread whose order differs.
  r = test::Run({IotwinBin(), "compare", a, c, "--no-progress"});
  EXPECT_NE(r.out.find("VERDICT: FAIL (seq-match)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("op #"), std::string::npos) << r.out;
  // A looser threshold accepts it.
  r = test::Run({IotwinBin(), "compare", a, c, "--no-progress", "--threshold", "seq-match=0.99"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST(CompareCli, TimingJudgedOnlyWhereThePaceModePromisesIt) {
  TempDir dir;
  std::string a = WriteTrace(dir, "a.iotwin", Workload({}));
  Shape fast;
  fast.time_scale_pct = 50;  // twice the IOPS
  fast.pace = "fast";
  std::string b = WriteTrace(dir, "fast.iotwin", Workload(fast));
  RunResult r = test::Run({IotwinBin(), "compare", a, b, "--json", "--no-progress"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["timing_judged"].get<bool>());
  auto iops = Measure(j, "iops-rel-err");
  EXPECT_NEAR(iops["value"].get<double>(), 1.0, 0.02);  // reported: ~2x IOPS
  EXPECT_FALSE(iops["judged"].get<bool>());

  Shape paced = fast;
  paced.pace = "original";
  std::string c = WriteTrace(dir, "paced.iotwin", Workload(paced));
  // The reads are 50 us apart, 25 us in the paced trace: below the default iat resolution
  // (50 us) the inter-arrival times are one class, above a finer one they differ.
  r = test::Run({IotwinBin(), "compare", a, c, "--json", "--no-progress"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  j = nlohmann::json::parse(r.out);
  std::set<std::string> failed;
  for (const auto& f : j["failed"]) failed.insert(f.get<std::string>());
  EXPECT_TRUE(failed.count("iops-rel-err"));
  EXPECT_TRUE(failed.count("throughput-rel-err"));
  EXPECT_FALSE(failed.count("iat-ks")) << r.out;
  EXPECT_FALSE(failed.count("seq-match"));
  r = test::Run({IotwinBin(), "compare", a, c, "--json", "--no-progress", "--iat-resolution-us",
                 "10"});
  j = nlohmann::json::parse(r.out);
  failed.clear();
  for (const auto& f : j["failed"]) failed.insert(f.get<std::string>());
  EXPECT_TRUE(failed.count("iat-ks")) << r.out;
  // Timing can be switched off explicitly.
  r = test::Run({IotwinBin(), "compare", a, c, "--no-progress", "--threshold", "iops-rel-err=off",
                 "--threshold", "throughput-rel-err=off", "--threshold", "iat-ks=off",
                 "--threshold", "iops-series-err=off", "--threshold", "throughput-series-err=off"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST(CompareCli, BadInputExitsTwoNamingFileAndOffset) {
  TempDir dir;
  std::string a = WriteTrace(dir, "a.iotwin", Workload({}));
  std::ifstream in(a, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  // Damage the middle of the file (inside the first chunk's compressed payload).
  std::string bad = dir / "bad.iotwin";
  std::string damaged = bytes;
  for (size_t i = damaged.size() / 2; i < damaged.size() / 2 + 16; i++) damaged[i] ^= 0x5a;
  std::ofstream(bad, std::ios::binary) << damaged;
  RunResult r = test::Run({IotwinBin(), "compare", a, bad, "--no-progress"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("bad.iotwin: byte "), std::string::npos) << r.err;
  r = test::Run({IotwinBin(), "compare", dir / "nope.iotwin", a});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nope.iotwin"), std::string::npos) << r.err;
  r = test::Run({IotwinBin(), "compare", a, a, "--threshold", "no-such=1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown measure"), std::string::npos) << r.err;
  r = test::Run({IotwinBin(), "compare", a, a, "--threshold", "seq-match=abc"});
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace iotwin::test
