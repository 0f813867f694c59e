// vector-search: a DiskANN-style on-disk graph index, built from a seeded data set and searched
// with batched, dependent 4 KiB node reads (one batch of W reads per hop). docs/workloads.md
// "vector-search".
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common.h"
#include "vector_index.h"

namespace iotwin::workload {

struct VectorOptions {
  uint64_t vectors = 100000;  // N
  uint32_t dim = 128;         // D
  uint32_t clusters = 64;
  uint32_t degree = 32;      // R
  uint32_t build_list = 64;  // L during construction
  float alpha = 1.2f;
  uint32_t pq_bytes = 32;     // bytes per in-memory PQ code
  uint64_t queries = 1000;    // Q
  uint32_t search_list = 64;  // L
  uint32_t beam = 4;          // W
  uint32_t rerank = 0;
  uint64_t recall_sample = 100;
  std::string io = "libaio";   // uring | libaio | pread
  bool buffered = false;       // page cache instead of O_DIRECT
  std::string phase = "both";  // build | search | both
  std::string read_log;        // --read-log FILE
  bool small = false;

  bool direct() const { return !buffered; }
};

// --small: a data set and query count that run in about a second (for tests). Options the user
// gave explicitly (`given(name)` true, name without dashes) keep their values.
void ApplyVectorSmallPreset(VectorOptions& o, const std::function<bool(std::string_view)>& given);

Status ValidateVector(const VectorOptions& o);

// Every node read of the search, for `--read-log`: which read's neighbour list each one came from.
class VectorReadLog {
 public:
  struct Query {
    int thread = 0;  // op-log thread number of the searcher
    int64_t tid = 0;
    SearchResult result;
    std::vector<std::pair<uint64_t, uint64_t>> batch_ns;  // per read: its batch's issue, done
  };
  std::vector<Query>& queries() { return queries_; }
  // JSON Lines, one per read, queries in order; read ids count from 0 over the whole run.
  Status Write(const std::string& path) const;
  uint64_t reads() const;

 private:
  std::vector<Query> queries_;
};

// Runs the scenario; the search's reads go into `reads` (written by the caller after the run,
// so that writing them is not part of the traced workload).
Result<ScenarioResult> RunVectorSearch(const VectorOptions& o, RunContext& ctx,
                                       VectorReadLog& reads);

}  // namespace iotwin::workload
