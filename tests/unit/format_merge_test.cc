// iotwin merge (format/merge.h, docs/multi-host.md): two hosts' traces with colliding pids and
// different clock anchors become one trace whose records name their host, in aligned time
// order, and whose per-host figures are each host's own.
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "analysis/trace_analysis.h"
#include "format/hosts.h"
#include "format/layout.h"
#include "format/merge.h"
#include "format/trace_reader.h"
#include "temp_dir.h"
#include "trace_builder.h"

namespace iotwin {
namespace {

using test::TempDir;
using test::TraceBuilder;

constexpr uint64_t kRealtime = 1'000'000'000'000'000'000ULL;  // 2001, in ns

// A capture header of host `name` whose monotonic clock reads `mono` when realtime reads `real`.
nlohmann::json HostMeta(const std::string& name, uint64_t mono, uint64_t real) {
  nlohmann::json m = test::FullCaptureMeta();
  m["host"]["hostname"] = name;
  m["host"]["anchor"] = {{"monotonic_ns", mono}, {"realtime_ns", real}, {"boottime_ns", mono}};
  return m;
}

// Host alpha: pid 1234 reads /data/a from monotonic 1 s + 10 us, every 10 us.
TraceBuilder Alpha() {
  TraceBuilder b(HostMeta("alpha", 1'000'000'000, kRealtime));
  b.SetTime(1'000'010'000);
  b.Openat(1234, "/data/a", O_RDONLY, 3, 1 << 20);
  for (int i = 0; i < 4; i++) b.Pread(1234, 3, i * 4096, 4096, 4096, 1 << 20);
  b.Lost(IOT_SRC_SYSCALL, 5);
  return b;
}

// Host beta: its own pid 1234 writes /data/b from its monotonic 5 s + 10 us; its clocks put
// that at alpha's 1 s + 25 us, between alpha's calls.
TraceBuilder Beta(const std::string& name = "beta") {
  TraceBuilder b(HostMeta(name, 5'000'000'000, kRealtime + 15'000));
  b.SetTime(5'000'010'000);
  b.Openat(1234, "/data/b", O_WRONLY | O_CREAT, 3);
  b.Pwrite(1234, 3, 0, 8192, 8192);
  b.Vectored(1234, IOT_OP_PWRITEV, 3, 8192, {4096, 4096}, 8192);
  b.Lost(IOT_SRC_SYSCALL, 7);
  return b;
}

struct Rec {
  uint16_t type;
  uint64_t ts;
  uint32_t tgid;
  std::string path;
  uint64_t count;  // LOST
};

std::vector<Rec> ReadAll(const std::string& path) {
  std::vector<Rec> out;
  auto reader = TraceReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().message();
  if (!reader.ok()) return out;
  for (;;) {
    auto next = (*reader)->Next();
    EXPECT_TRUE(next.ok()) << next.status().message();
    if (!next.ok() || !*next) break;
    const iot_rec_hdr* h = *next;
    if (h->type == IOT_REC_STRING) continue;
    Rec r{h->type, RecordTimestamp(h), 0, "", 0};
    if (h->type == IOT_REC_SYSCALL) {
      r.tgid = As<iot_syscall>(h).tgid;
      r.path = std::string((*reader)->String(As<iot_syscall>(h).path_id));
    }
    if (h->type == IOT_REC_LOST) r.count = As<iot_lost>(h).count;
    out.push_back(r);
  }
  return out;
}

Result<MergeResult> Merge(const std::vector<std::string>& paths, const std::string& out,
                          std::vector<std::string> names = {},
                          std::vector<MergeOffset> offsets = {}) {
  MergeOptions o;
  for (size_t i = 0; i < paths.size(); i++)
    o.inputs.push_back({paths[i], i < names.size() ? names[i] : ""});
  o.offsets = std::move(offsets);
  o.output = out;
  return MergeTraces(o);
}

nlohmann::json Totals(const std::string& path, std::vector<std::string> hosts = {}) {
  analysis::TraceAnalysisOptions o;
  o.analyzer.filter.host_names = std::move(hosts);
  auto a = analysis::AnalyzeTraceFile(path, o);
  EXPECT_TRUE(a.ok()) << a.status().message();
  return a.ok() ? a->model["totals"] : nlohmann::json();
}

class MergeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    ASSERT_TRUE(Alpha().WriteFile(a_).ok());
    ASSERT_TRUE(Beta().WriteFile(b_).ok());
  }
  TempDir dir_;
  std::string a_ = dir_ / "a.iotwin", b_ = dir_ / "b.iotwin", job_ = dir_ / "job.iotwin";
};

TEST_F(MergeTest, InterleavesByAlignedTimeAndKeepsHostsApart) {
  auto merged = Merge({a_, b_}, job_);
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  EXPECT_EQ(merged->records_per_host, (std::vector<uint64_t>{6, 5}));
  const std::vector<Rec> recs = ReadAll(job_);
  // alpha's calls at 1 s + 10, 20, 30, 40, 50 us; beta's at 1 s + 25, 35, 45 us (+ its IOVEC).
  std::vector<std::pair<uint64_t, uint32_t>> calls;
  for (size_t i = 0; i < recs.size(); i++) {
    if (recs[i].type == IOT_REC_SYSCALL) calls.emplace_back(recs[i].ts, recs[i].tgid);
    if (recs[i].type == IOT_REC_IOVEC) {
      ASSERT_GT(i, 0u);
      EXPECT_EQ(recs[i - 1].type, IOT_REC_SYSCALL);  // right after its call
      EXPECT_EQ(recs[i - 1].ts, recs[i].ts);
    }
  }
  const uint32_t beta_pid = 1234 + (1u << 22);
  const std::vector<std::pair<uint64_t, uint32_t>> want = {
      {1'000'010'000, 1234},     {1'000'020'000, 1234},     {1'000'025'000, beta_pid},
      {1'000'030'000, 1234},     {1'000'035'000, beta_pid}, {1'000'040'000, 1234},
      {1'000'045'000, beta_pid}, {1'000'050'000, 1234}};
  EXPECT_EQ(calls, want);
  EXPECT_EQ(recs[0].path, "/data/a");
  EXPECT_EQ(recs[2].path, "/data/b");  // beta's string id, re-interned
  EXPECT_EQ(HostOfPid(beta_pid), 1u);
  // LOST counts are cumulative per (source, cpu): the merged one is the sum of the hosts'.
  EXPECT_EQ(recs.back().type, IOT_REC_LOST);
  EXPECT_EQ(recs.back().count, 12u);

  const nlohmann::json& meta = merged->meta;
  EXPECT_EQ(HostNames(meta), (std::vector<std::string>{"alpha", "beta"}));
  EXPECT_EQ(meta["hosts"][1]["clock_shift_ns"].get<int64_t>(), -3'999'985'000);
  EXPECT_EQ(meta["hosts"][1]["pid_base"].get<uint64_t>(), 1u << 22);
  EXPECT_TRUE(meta["merge"]["uncertainty_ns"].is_null());  // realtime clocks, not measured
  EXPECT_EQ(meta["host"]["anchor"]["monotonic_ns"].get<uint64_t>(), 1'000'000'000u);
}

TEST_F(MergeTest, PerHostFiguresEqualEachHostsOwn) {
  ASSERT_TRUE(Merge({a_, b_}, job_).ok());
  const nlohmann::json job = Totals(job_);
  const nlohmann::json own_a = Totals(a_), own_b = Totals(b_);
  const nlohmann::json host_a = Totals(job_, {"alpha"}), host_b = Totals(job_, {"beta"});
  for (const char* key : {"syscalls", "errors"}) {
    EXPECT_EQ(host_a[key], own_a[key]) << key;
    EXPECT_EQ(host_b[key], own_b[key]) << key;
    EXPECT_EQ(job[key].get<uint64_t>(), own_a[key].get<uint64_t>() + own_b[key].get<uint64_t>());
  }
  for (const char* dir : {"read", "write"}) {
    for (const char* key : {"ops", "bytes"}) {
      EXPECT_EQ(host_a[dir][key], own_a[dir][key]) << dir << " " << key;
      EXPECT_EQ(host_b[dir][key], own_b[dir][key]) << dir << " " << key;
    }
  }
  EXPECT_EQ(own_a["read"]["ops"], 4);
  EXPECT_EQ(own_b["write"]["ops"], 2);
  EXPECT_EQ(job["processes"], 2);  // two pid 1234s, two processes
  EXPECT_EQ(Totals(job_, {"gamma"})["syscalls"], 0);
  auto unknown = ResolveHostNames(TraceReader::Open(job_).value()->meta(), {"gamma"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "--host gamma: no such host in the trace (hosts: alpha, beta)");
}

TEST_F(MergeTest, MeasuredOffsetMovesTheHostAndStatesItsError) {
  auto merged = Merge({a_, b_}, job_, {}, {{"beta", 15'000, 40}});
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  EXPECT_EQ(merged->meta["merge"]["uncertainty_ns"], 40);
  std::vector<uint64_t> beta_ts;
  for (const Rec& r : ReadAll(job_))
    if (r.type == IOT_REC_SYSCALL && HostOfPid(r.tgid) == 1) beta_ts.push_back(r.ts);
  EXPECT_EQ(beta_ts, (std::vector<uint64_t>{1'000'010'000, 1'000'020'000, 1'000'030'000}));
}

void ExpectRefused(const Result<MergeResult>& r, const std::vector<std::string>& words) {
  ASSERT_FALSE(r.ok());
  for (const std::string& w : words)
    EXPECT_NE(r.status().message().find(w), std::string::npos) << r.status().message();
}

TEST_F(MergeTest, Refusals) {
  // Two hosts of one name, and --name telling them apart.
  const std::string b2 = dir_ / "b2.iotwin";
  ASSERT_TRUE(Beta("alpha").WriteFile(b2).ok());
  ExpectRefused(Merge({a_, b2}, job_), {a_, b2, "both are host 'alpha'", "--name"});
  EXPECT_TRUE(Merge({a_, b2}, job_, {"alpha", "beta"}).ok());
  // A merged trace merged again.
  ExpectRefused(Merge({job_, b_}, dir_ / "again.iotwin"), {job_, "already a merged trace"});
  // The same recording twice.
  ExpectRefused(Merge({a_, a_}, job_, {"x", "y"}), {"the same recording"});
  // No clock anchor (an imported trace, the builder's bare header).
  const std::string bare = dir_ / "bare.iotwin";
  TraceBuilder plain;
  plain.Pread(10, 3, 0, 4096, 4096);
  ASSERT_TRUE(plain.WriteFile(bare).ok());
  ExpectRefused(Merge({a_, bare}, job_), {bare, "no clock anchor"});
  // A pid no Linux kernel makes, named with the file and the chunk's byte offset.
  const std::string forged = dir_ / "forged.iotwin";
  TraceBuilder big(HostMeta("big", 1'000'000'000, kRealtime + 1));
  big.SetTime(1'000'010'000);
  big.Pread(5'000'000, 3, 0, 4096, 4096);
  ASSERT_TRUE(big.WriteFile(forged).ok());
  ExpectRefused(Merge({a_, forged}, job_),
                {forged, "record 1", "byte offset", "tgid 5000000 is not below 4194304"});
  // --offset for a host that is not there.
  ExpectRefused(Merge({a_, b_}, job_, {}, {{"gamma", 1, std::nullopt}}),
                {"--offset gamma", "hosts: alpha, beta"});
  EXPECT_FALSE(ParseMergeOffset("beta=12x").ok());
  EXPECT_EQ(ParseMergeOffset("beta=-12:3")->offset_ns, -12);
}

TEST_F(MergeTest, RefusesDifferentFormatVersions) {
  // b.iotwin rewritten as format 1.2 (its header's minor and hash).
  std::ifstream in(b_, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  layout::FileHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  h.minor = static_cast<uint16_t>(layout::kMinor - 1);
  std::string hashed(reinterpret_cast<const char*>(&h), offsetof(layout::FileHeader, hash));
  hashed += bytes.substr(sizeof h, h.meta_len);
  h.hash = XXH3_64bits(hashed.data(), hashed.size());
  std::memcpy(bytes.data(), &h, sizeof h);
  const std::string older = dir_ / "older.iotwin";
  std::ofstream(older, std::ios::binary) << bytes;
  ExpectRefused(Merge({a_, older}, job_),
                {older, fmt::format("trace format 1.{}", layout::kMinor - 1), a_,
                 "one iotwin version"});
}

}  // namespace
}  // namespace iotwin
