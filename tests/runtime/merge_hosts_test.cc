// `iotwin merge` on real recordings (docs/multi-host.md): two short runs of iotwin-workload,
// recorded one after the other on this machine as two "hosts", merged, and reported: each host's
// row of the merged report equals the report of its own trace, and --host keeps one host.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime_util.h"

namespace iotwin::test {
namespace {

using nlohmann::json;

json ReportJson(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {IotwinBin(), "report", "--json", "--no-progress"};
  argv.insert(argv.end(), args.begin(), args.end());
  RunResult r = test::Run(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out, nullptr, false);
}

TEST(MergeHosts, PerHostCallsOfTheMergedReportEqualEachHostsOwnReport) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string a = dir / "a.iotwin", b = dir / "b.iotwin", job = dir / "job.iotwin";
  RunResult ra = test::Run({IotwinBin(), "record", "-o", a, "--no-status", "--", WorkloadBin(), "micro",
                      "--dir", dir / "wa", "--op", "pread", "--ops", "300", "--quiet"});
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  RunResult rb = test::Run({IotwinBin(), "record", "-o", b, "--no-status", "--", WorkloadBin(), "micro",
                      "--dir", dir / "wb", "--op", "pwrite", "--ops", "200", "--threads", "2",
                      "--quiet"});
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  RunResult m = test::Run({IotwinBin(), "merge", a, b, "-o", job, "--name", "node-a", "--name", "node-b"});
  ASSERT_EQ(m.exit_code, 0) << m.err;

  const json own_a = ReportJson({a}), own_b = ReportJson({b}), merged = ReportJson({job});
  ASSERT_TRUE(merged.contains("hosts")) << merged.dump().substr(0, 400);
  const json& rows = merged["hosts"]["rows"];
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["name"], "node-a");
  EXPECT_EQ(rows[1]["name"], "node-b");
  for (const auto& [row, own] : {std::pair{&rows[0], &own_a}, std::pair{&rows[1], &own_b}}) {
    const json& t = (*own)["totals"];
    EXPECT_EQ((*row)["syscalls"], t["syscalls"]) << (*row)["name"];
    for (const char* d : {"read", "write"}) {
      EXPECT_EQ((*row)[d]["ops"], t[d]["ops"]) << (*row)["name"] << " " << d;
      EXPECT_EQ((*row)[d]["bytes"], t[d]["bytes"]) << (*row)["name"] << " " << d;
    }
  }
  EXPECT_GE(own_a["totals"]["read"]["ops"].get<uint64_t>(), 300u);
  EXPECT_GE(own_b["totals"]["write"]["ops"].get<uint64_t>(), 400u);
  EXPECT_EQ(merged["totals"]["syscalls"].get<uint64_t>(),
            own_a["totals"]["syscalls"].get<uint64_t>() + own_b["totals"]["syscalls"].get<uint64_t>());
  const json only_b = ReportJson({job, "--host", "node-b"});
  EXPECT_EQ(only_b["totals"]["syscalls"], own_b["totals"]["syscalls"]);
  EXPECT_EQ(only_b["totals"]["read"]["ops"], own_b["totals"]["read"]["ops"]);
  RunResult unknown = test::Run({IotwinBin(), "report", job, "--host", "node-c", "--no-progress"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("no such host in the trace (hosts: node-a, node-b)"),
            std::string::npos)
      << unknown.err;
  // Merged without names the two recordings of one machine share a host name: refused.
  RunResult same = test::Run({IotwinBin(), "merge", a, b, "-o", dir / "same.iotwin"});
  EXPECT_EQ(same.exit_code, 2);
  EXPECT_NE(same.err.find("--name"), std::string::npos) << same.err;
}

}  // namespace
}  // namespace iotwin::test

namespace iotwin::test {
namespace {

uint64_t LayersRequests(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {IotwinBin(), "layers", "--json"};
  argv.insert(argv.end(), args.begin(), args.end());
  RunResult r = test::Run(argv, 120);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out, nullptr, false);
  if (!j.is_object()) return 0;
  return j["coverage"]["requests"].get<uint64_t>();
}

// layers --host keeps the requests submitted on each host: two recordings of the checkpoint
// workload (shards written with fsync: requests submitted by the program itself) merged; each
// request is kept by exactly one host, and a host keeps no more than its own trace holds.
TEST(MergeHosts, LayersHostKeepsEachRequestOnTheHostThatSubmittedIt) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::vector<std::string> merge = {IotwinBin(), "merge", "-o", dir / "job.iotwin"};
  for (const char* n : {"a", "b"}) {
    const std::string trace = dir / (std::string(n) + ".iotwin");
    RunResult r = test::Run({IotwinBin(), "record", "-o", trace, "--no-status", "--",
                             WorkloadBin(), "checkpoint", "--dir", dir / n, "--shard-mb", "4",
                             "--job", n, "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    merge.push_back(trace);
  }
  merge.insert(merge.end(), {"--name", "node-a", "--name", "node-b"});
  RunResult m = test::Run(merge);
  ASSERT_EQ(m.exit_code, 0) << m.err;
  const uint64_t all = LayersRequests({dir / "job.iotwin"});
  const uint64_t on_a = LayersRequests({dir / "job.iotwin", "--host", "node-a"});
  const uint64_t on_b = LayersRequests({dir / "job.iotwin", "--host", "node-b"});
  std::printf("layers requests: job %lu, node-a %lu, node-b %lu\n", all, on_a, on_b);
  EXPECT_GT(on_b, 0u);
  EXPECT_EQ(on_a + on_b, all);
  EXPECT_LE(on_b, LayersRequests({dir / "b.iotwin"}));
  RunResult unknown = test::Run({IotwinBin(), "layers", dir / "job.iotwin", "--host", "node-c"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("node-c"), std::string::npos) << unknown.err;

  // compare --host judges one host of both traces: the job against itself on node-b judges the
  // calls b.iotwin judges against itself, and passes.
  auto judged = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {IotwinBin(), "compare", "--json"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunResult r = test::Run(argv, 120);
    EXPECT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 400);
    const json j = json::parse(r.out, nullptr, false);
    return j.is_object() ? j["scope"]["original"]["calls"].get<uint64_t>() : 0;
  };
  const uint64_t own_b = judged({dir / "b.iotwin", dir / "b.iotwin"});
  EXPECT_GT(own_b, 0u);
  EXPECT_EQ(judged({"--host", "node-b", dir / "job.iotwin", dir / "job.iotwin"}), own_b);
  EXPECT_GT(judged({dir / "job.iotwin", dir / "job.iotwin"}), own_b);
}

}  // namespace
}  // namespace iotwin::test
