// `iotwin replay --mpi` (docs/multi-host.md) on one machine as four: four runs of
// iotwin-workload recorded at once as four "nodes", merged into one job trace, replayed by
// `mpirun -np 4` (rank R replays host R) with --record, and the merged recording compared with
// the job: every rank replays its host's calls without a mismatch, the recording holds four
// hosts, each host's threads are paired with the same host's and match 100%, the whole job's
// IOPS is within 5% of the original's, and the start skew is reported. Skipped when iotwin was
// built without MPI or mpirun is missing (CI installs libopenmpi-dev and openmpi-bin from
// tools/debian-packages.txt).
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime_util.h"

namespace iotwin::test {
namespace {

using nlohmann::json;

constexpr int kRanks = 4;
constexpr uint32_t kHostPidBits = 22;  // format/hosts.h: pid' = host * 2^22 + pid

std::string Mpirun() {
  for (const char* p : {"/usr/bin/mpirun", "/usr/local/bin/mpirun"})
    if (access(p, X_OK) == 0) return p;
  return "";
}

std::vector<std::string> MpirunArgs(int ranks) {
  // Single-copy shared memory (CMA) needs ptrace rights a container may not grant.
  std::vector<std::string> args = {Mpirun(), "--allow-run-as-root", "--oversubscribe", "-np",
                                   std::to_string(ranks)};
  for (const char* mca : {"mpi_warn_on_fork=0", "btl_vader_single_copy_mechanism=none"}) {
    const std::string kv = mca;
    args.insert(args.end(), {"--mca", kv.substr(0, kv.find('=')), kv.substr(kv.find('=') + 1)});
  }
  return args;
}

TEST(ReplayMpi, FourRanksReplayTheirHostsOfAMergedJobAndTheRecordingComparesPerHost) {
  IOTWIN_REQUIRE_BPF_OR_SKIP();
  if (Mpirun().empty()) GTEST_SKIP() << "mpirun missing (openmpi-bin)";
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  // A rank that fails stops the job, naming itself; without MPI built in, --mpi says so.
  std::vector<std::string> probe = MpirunArgs(1);
  for (const std::string& a : {IotwinBin(), std::string("replay"), dir / "missing.iotwin",
                               std::string("--mpi"), std::string("--root"), dir / "r0"})
    probe.push_back(a);
  RunResult p = test::Run(probe, 60);
  if (p.err.find("built without MPI") != std::string::npos) {
    // CI installs libopenmpi-dev with openmpi-bin: there, a build that missed MPI is a failure.
    if (BpfRequired()) FAIL() << "mpirun is here but this iotwin was built without MPI";
    GTEST_SKIP() << "this iotwin was built without MPI";
  }
  ASSERT_NE(p.exit_code, 0);
  EXPECT_NE(p.err.find("rank 0 of 1"), std::string::npos) << p.err;

  // Four "nodes" at once, each its own trace and files.
  std::string script;
  std::vector<std::string> merge = {IotwinBin(), "merge", "-o", dir / "job.iotwin"};
  for (int n = 0; n < kRanks; n++) {
    const std::string trace = dir / ("node" + std::to_string(n) + ".iotwin");
    script += "'" + IotwinBin() + "' record -o '" + trace + "' --no-status -- '" + WorkloadBin() +
              "' micro --dir '" + (dir / ("w" + std::to_string(n))) +
              "' --op pwrite --ops 200 --rate 250 --file-mb 1 --quiet & ";
    merge.push_back(trace);
  }
  for (int n = 0; n < kRanks; n++)
    merge.insert(merge.end(), {"--name", "node" + std::to_string(n)});
  script += "wait";
  RunResult rec = test::Run({"/bin/sh", "-c", script}, 120);
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  RunResult m = test::Run(merge);
  ASSERT_EQ(m.exit_code, 0) << m.err;

  std::vector<std::string> replay = MpirunArgs(kRanks);
  for (const std::string& a :
       {IotwinBin(), std::string("replay"), dir / "job.iotwin", std::string("--mpi"),
        std::string("--root"), dir / "replay", std::string("--pace"), std::string("original"),
        std::string("--record"), dir / "out.iotwin", std::string("--json")})
    replay.push_back(a);
  RunResult r = test::Run(replay, 120);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const json s = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << r.out;
  EXPECT_EQ(s["schema"], "iotwin-replay-mpi/1");
  ASSERT_EQ(s["ranks"], kRanks);
  ASSERT_EQ(s["hosts"].size(), static_cast<size_t>(kRanks));
  for (int i = 0; i < kRanks; i++) {
    const json& h = s["hosts"][static_cast<size_t>(i)];
    EXPECT_EQ(h["host_name"], "node" + std::to_string(i));
    EXPECT_GE(h["ops"].get<uint64_t>(), 200u) << h.dump();
    EXPECT_EQ(h["mismatches"], 0) << h.dump();
  }
  ASSERT_TRUE(s["start"]["skew_ns"].is_number()) << s["start"].dump();
  const uint64_t skew = s["start"]["skew_ns"].get<uint64_t>();
  EXPECT_LT(skew, 100'000'000u) << "start skew " << skew << " ns";
  std::printf("start skew over %d ranks: %.1f us\n", kRanks, static_cast<double>(skew) / 1e3);
  // On one machine the clock offsets measured by ping-pong are within their errors of 0.
  ASSERT_TRUE(s["start"]["skew_on_rank0_clock_ns"].is_number()) << s["start"].dump();
  ASSERT_EQ(s["start"]["clock_offset_ns"].size(), static_cast<size_t>(kRanks));
  for (size_t i = 0; i < static_cast<size_t>(kRanks); i++) {
    const int64_t offset = s["start"]["clock_offset_ns"][i].get<int64_t>();
    EXPECT_LE(static_cast<uint64_t>(offset < 0 ? -offset : offset),
              s["start"]["clock_offset_error_ns"][i].get<uint64_t>() + 1000)
        << s["start"].dump();
  }
  ASSERT_TRUE(s["record"]["ok"].get<bool>()) << s["record"].dump();

  RunResult rep = test::Run({IotwinBin(), "report", "--json", "--no-progress", dir / "out.iotwin"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const json report = json::parse(rep.out, nullptr, false);
  ASSERT_EQ(report["hosts"]["rows"].size(), static_cast<size_t>(kRanks));

  RunResult c = test::Run(
      {IotwinBin(), "compare", "--json", "--top", "0", dir / "job.iotwin", dir / "out.iotwin"});
  ASSERT_NE(c.exit_code, 2) << c.err;
  const json cmp = json::parse(c.out, nullptr, false);
  ASSERT_TRUE(cmp.is_object()) << c.out.substr(0, 400);
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> per_host;  // matched, compared
  for (const json& row : cmp["threads"]["rows"]) {
    ASSERT_TRUE(row["original_tgid"].is_number() && row["replay_tgid"].is_number()) << row.dump();
    const uint32_t host = row["original_tgid"].get<uint32_t>() >> kHostPidBits;
    EXPECT_EQ(row["replay_tgid"].get<uint32_t>() >> kHostPidBits, host) << row.dump();
    per_host[host].first += row["matched"].get<uint64_t>();
    per_host[host].second +=
        std::max(row["original_ops"].get<uint64_t>(), row["replay_ops"].get<uint64_t>());
  }
  // The whole job's rate in original pacing (issue 39: within 5%).
  for (const json& measure : cmp["measures"]) {
    if (measure["name"] == "iops-rel-err") {
      EXPECT_LE(measure["value"].get<double>(), 0.05) << measure.dump();
      std::printf("whole-job iops-rel-err: %.4f\n", measure["value"].get<double>());
    }
  }
  ASSERT_EQ(per_host.size(), static_cast<size_t>(kRanks));
  ASSERT_EQ(cmp["threads"]["hosts"].size(), static_cast<size_t>(kRanks)) << cmp["threads"].dump();
  for (const json& h : cmp["threads"]["hosts"]) EXPECT_EQ(h["share"], 1.0) << h.dump();
  for (const auto& [host, n] : per_host) {
    EXPECT_GT(n.second, 0u);
    EXPECT_EQ(n.first, n.second) << "host " << host << ": seq-match below 100%";
  }
}

}  // namespace
}  // namespace iotwin::test
