// How many threads a replay may start. The replay runs one OS thread per traced thread (plus one
// bookkeeping thread per --amplify copy) and never serialises traced threads onto fewer workers,
// which would change the workload; a trace that needs more threads than the machine allows is
// refused before anything is written (docs/replay.md "Threads").
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "model/trace_model.h"

namespace iotwin::replay {

// The default ceiling without --max-threads.
inline constexpr uint64_t kDefaultMaxThreads = 4096;
// Memory a replay thread costs beyond the shared I/O buffers (kernel stack, the touched part of
// its stack, its statistics and tables), rounded up from measurements.
inline constexpr uint64_t kThreadMemoryBytes = uint64_t{512} << 10;

struct ThreadLimit {
  uint64_t limit = 0;
  std::string why;  // what sets it, e.g. "RLIMIT_NPROC of uid 65534 (300, 12 in use)"
};

// What the machine allows: min(asked (0: kDefaultMaxThreads), half of
// /proc/sys/kernel/threads-max, RLIMIT_NPROC less the threads the real uid already runs (where
// the kernel enforces it: not for root), MemAvailable / kThreadMemoryBytes).
ThreadLimit ReplayThreadLimit(uint64_t asked);

// Threads a syscall-level replay of `model` starts: a worker per traced thread and a
// bookkeeper, per copy.
uint64_t ReplayThreadsNeeded(const model::TraceModel& model, int amplify);

// An error naming the count and the limit when `needed` exceeds it.
Status CheckThreadLimit(uint64_t needed, const ThreadLimit& limit);

}  // namespace iotwin::replay
