// ModelOptions::host (model/trace_model.h): the model of one host of a merged trace, as
// `replay --mpi` builds it for each rank. Two hosts' traces with the same pid, merged: each
// host's model holds its own process and calls only, and keeps the job's time origin.
#include <gtest/gtest.h>

#include "format/hosts.h"
#include "format/merge.h"
#include "model/trace_model.h"
#include "temp_dir.h"
#include "trace_builder.h"

namespace iotwin {
namespace {

using test::TempDir;
using test::TraceBuilder;

constexpr uint64_t kRealtime = 1'000'000'000'000'000'000ULL;

nlohmann::json HostMeta(const std::string& name, uint64_t mono, uint64_t real) {
  nlohmann::json m = test::FullCaptureMeta();
  m["host"]["hostname"] = name;
  m["host"]["anchor"] = {{"monotonic_ns", mono}, {"realtime_ns", real}, {"boottime_ns", mono}};
  return m;
}

size_t Ops(const model::TraceModel& m) {
  size_t n = 0;
  for (const auto& th : m.threads()) n += th.ops.size();
  return n;
}

TEST(ModelHostFilter, EachHostsModelHoldsItsOwnCallsFromTheJobsStart) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  // alpha: pid 1234 reads from 1 s + 10 us; beta, its own pid 1234, writes 1 ms later.
  TraceBuilder alpha(HostMeta("alpha", 1'000'000'000, kRealtime));
  alpha.SetTime(1'000'010'000);
  alpha.Openat(1234, "/data/a", O_RDONLY, 3, 1 << 20);
  for (int i = 0; i < 4; i++) alpha.Pread(1234, 3, i * 4096, 4096, 4096, 1 << 20);
  TraceBuilder beta(HostMeta("beta", 5'000'000'000, kRealtime + 1'000'000));
  beta.SetTime(5'000'010'000);
  beta.Openat(1234, "/data/b", O_WRONLY | O_CREAT, 3);
  beta.Pwrite(1234, 3, 0, 8192, 8192);
  beta.Vectored(1234, IOT_OP_PWRITEV, 3, 8192, {4096, 4096}, 8192);
  ASSERT_TRUE(alpha.WriteFile(dir / "alpha.iotwin").ok());
  ASSERT_TRUE(beta.WriteFile(dir / "beta.iotwin").ok());
  MergeOptions mo;
  mo.inputs = {{dir / "alpha.iotwin", ""}, {dir / "beta.iotwin", ""}};
  mo.output = dir / "job.iotwin";
  auto merged = MergeTraces(mo);
  ASSERT_TRUE(merged.ok()) << merged.status().message();

  auto whole = model::LoadTraceModel(dir / "job.iotwin", {}, nullptr);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ((*whole)->processes().size(), 2u);
  EXPECT_EQ(Ops(**whole), 8u);
  const uint64_t job_start = (*whole)->start_ts();

  for (uint32_t host : {0u, 1u}) {
    model::ModelOptions options;
    options.host = host;
    auto m = model::LoadTraceModel(dir / "job.iotwin", options, nullptr);
    ASSERT_TRUE(m.ok()) << m.status().message();
    ASSERT_EQ((*m)->processes().size(), 1u) << "host " << host;
    EXPECT_EQ(HostOfPid((*m)->processes()[0].tgid), host);
    ASSERT_EQ((*m)->threads().size(), 1u);
    EXPECT_EQ(Ops(**m), host == 0 ? 5u : 3u);
    // beta's first call is 1 ms into the job: its model starts where the job does.
    EXPECT_EQ((*m)->start_ts(), job_start) << "host " << host;
  }
}

}  // namespace
}  // namespace iotwin
