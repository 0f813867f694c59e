// iotwin-workload checkpoint: ranks of one job (here threads, each with its own run context, as
// mpirun's processes would be) save their shards, rank 0 commits the metadata after all of them,
// and each rank loads a reshard that straddles two shards, checked byte for byte.
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "checkpoint.h"
#include "temp_dir.h"

namespace iotwin::workload {
namespace {

struct RankRun {
  Result<ScenarioResult> result = Status::Internal("not run");
  IoCounters totals;
};

// Runs ranks `ranks_run` of a job of `ranks` ranks at once, each on its own thread.
std::vector<RankRun> RunJob(const std::string& dir, int ranks, std::vector<int> ranks_run,
                            double wait_s) {
  std::vector<RankRun> runs(ranks_run.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks_run.size(); i++) {
    threads.emplace_back([&, i] {
      CommonOptions common;
      common.dir = dir;
      RunContext ctx(common, 64);
      CheckpointOptions o;
      o.rank = ranks_run[i];
      o.ranks = ranks;
      o.job = "unit";
      o.shard_mb = 1;
      o.write_size = 256 * kKiB;
      o.read_size = 192 * kKiB;  // not a divisor of the shard: reads cross the shard boundary
      o.wait_s = wait_s;
      o.verify = true;
      runs[i].result = RunCheckpoint(o, ctx);
      runs[i].totals = ctx.Totals();
    });
  }
  for (auto& t : threads) t.join();
  return runs;
}

TEST(CheckpointWorkload, RanksSaveShardsRankZeroCommitsAndEachLoadsAReshard) {
  test::TempDir dir;
  const std::vector<RankRun> runs = RunJob(dir.path(), 3, {0, 1, 2}, 30);
  for (size_t r = 0; r < runs.size(); r++) {
    ASSERT_TRUE(runs[r].result.ok()) << "rank " << r << ": " << runs[r].result.status().ToString();
    EXPECT_EQ(runs[r].totals.read_bytes, 1 * kMiB) << "rank " << r;
    // The shard, and rank 0 also the metadata.
    EXPECT_EQ(runs[r].totals.write_bytes > 1 * kMiB, r == 0) << "rank " << r;
  }
  for (int r = 0; r < 3; r++) {
    struct stat st;
    const std::string shard = dir / ("checkpoint/shard-0000" + std::to_string(r) + "-of-00003.bin");
    ASSERT_EQ(stat(shard.c_str(), &st), 0) << shard;
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), 1 * kMiB);
  }
  std::ifstream in(dir / "checkpoint/metadata.json");
  const auto meta = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(meta.is_object());
  EXPECT_EQ(meta["ranks"], 3);
  EXPECT_EQ(meta["shards"].size(), 3u);
  EXPECT_EQ(meta["job"], "unit");
}

TEST(CheckpointWorkload, ARankThatNeverSavesFailsTheCommitNamingItsMarker) {
  test::TempDir dir;
  const std::vector<RankRun> runs = RunJob(dir.path(), 2, {0}, 0.2);
  ASSERT_FALSE(runs[0].result.ok());
  EXPECT_NE(runs[0].result.status().ToString().find(".saved-unit-1"), std::string::npos)
      << runs[0].result.status().ToString();
}

TEST(CheckpointWorkload, RankAndSizeComeFromMpirunsEnvironmentUnlessGiven) {
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  CheckpointOptions o;
  auto who = ResolveRank(o);
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(who->rank, 2);
  EXPECT_EQ(who->ranks, 4);
  o.rank = 5;  // given, and outside the job
  auto bad = ResolveRank(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kInvalidArgument);
  o.job = "a/b c";
  o.rank = 0;
  auto named = ResolveRank(o);
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->job, "a_b_c");  // a file-name component whatever the option says
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
}

}  // namespace
}  // namespace iotwin::workload
