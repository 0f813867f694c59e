// checkpoint: a distributed checkpoint as data-parallel training writes one (PyTorch's
// torch.distributed.checkpoint, DeepSpeed): every rank saves its shard with large sequential
// writes and an fsync, rank 0 then writes the metadata, and every rank loads a reshard (a range
// that straddles two ranks' shards, as a restart on another layout reads). Runs alone (one rank)
// or as one rank of a job under mpirun, which names the rank and the job's size in the
// environment; the ranks meet through marker files in the shared directory, not through MPI.
#pragma once

#include <cstdint>
#include <string>

#include "common.h"

namespace iotwin::workload {

struct CheckpointOptions {
  int rank = -1;               // -1: from the environment (OMPI_COMM_WORLD_RANK, PMI_RANK), else 0
  int ranks = 0;               // 0: from the environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE), else 1
  std::string job;             // marker names; "": from the environment (PMIX_NAMESPACE, ...)
  uint64_t shard_mb = 64;      // each rank's shard
  uint64_t write_size = 4 * kMiB;
  uint64_t read_size = 4 * kMiB;
  double wait_s = 120;         // how long a rank waits for the others before failing
  bool verify = false;         // check the content of every byte loaded
};

// The rank, the job's size and the job's name, from the options or else the environment.
struct RankInfo {
  int rank = 0, ranks = 1;
  std::string job;
};
Result<RankInfo> ResolveRank(const CheckpointOptions& o);

Result<ScenarioResult> RunCheckpoint(const CheckpointOptions& o, RunContext& ctx);

}  // namespace iotwin::workload
