// mixed: three concurrent roles (KV-cache gets, model shard preads, a journal writer) over data
// the scenario prepares first, for checking that capture and replay keep threads apart.
#pragma once

#include <cstdint>

#include "common.h"
#include "kv_offload.h"
#include "model_load.h"

namespace iotwin::workload {

struct MixedOptions {
  KvOptions kv;        // chunks, gets, shape (buffered I/O)
  ModelOptions model;  // shards, shard size (pread mode)
  uint64_t writes = 64;
  uint64_t write_size = 128 * kKiB;
  uint64_t fsync_every = 16;  // 0 = never
};

Result<ScenarioResult> RunMixed(const MixedOptions& o, RunContext& ctx);

}  // namespace iotwin::workload
