// micro: simple read/write loops for tests and benchmarks.
#pragma once

#include <cstdint>
#include <string>

#include "common.h"

namespace iotwin::workload {

struct MicroOptions {
  std::string op = "pread";  // read | write | pread | pwrite | randread | randwrite
  uint64_t size = 4096;
  uint64_t file_mb = 8;
  uint64_t ops = 0;    // per thread; 0 = 1024 unless --seconds is given
  double seconds = 0;  // stop after this long (with --ops: whichever comes first)
  bool per_thread_files = false;
  double rate = 0;  // total ops/s over all threads, 0 = unpaced
  bool direct = false;
  std::string pattern;  // seq | rand | stride:N; empty = the op's default
};

// How offsets advance: blocks are `size`-byte slots of the file.
struct AccessPattern {
  enum class Kind { kSeq, kRand, kStride } kind = Kind::kSeq;
  uint64_t stride = 1;  // blocks between accesses for kStride
};

Result<AccessPattern> ParsePattern(const std::string& text);

Result<ScenarioResult> RunMicro(const MicroOptions& o, RunContext& ctx);

}  // namespace iotwin::workload
