// What a replay measured: per op kind counts, bytes, latency; schedule error; skipped ops by
// reason; result mismatches with a few examples. Each worker fills its own ReplayStats (no
// sharing on the hot path); they are merged at the end.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "replay/histogram.h"

namespace iotwin::replay {

// Why a recorded op was not issued, beyond the model's reasons (model::Skip).
enum class LiveSkip : uint8_t {
  kLiveFdMissing = 0,  // the op that created the descriptor failed in the replay
  kMappingMissing,     // the mmap it refers to failed or is gone
  kAsyncEngine,        // no async engine (setup failed)
  kCount,
};

enum class Mismatch : uint8_t {
  kShort = 0,      // fewer bytes than recorded (short read/write, different position)
  kLong,           // more bytes than recorded
  kErrorVsSuccess, // failed in replay, succeeded in the trace
  kSuccessVsError, // succeeded in replay, failed in the trace
  kErrno,          // failed in both, different error
  kFault,          // a page touch hit SIGBUS/SIGSEGV
  kWaitTimedOut,   // a waiting call gave up on requests that were never submitted (watchdog)
  kCount,
};
const char* MismatchName(Mismatch m);

struct MismatchExample {
  std::string op;
  uint32_t tid = 0;
  uint32_t index = 0;
  std::string path;
  int64_t recorded = 0;
  int64_t live = 0;
};

struct OpStats {
  uint64_t count = 0;
  uint64_t errors = 0;  // negative results in the replay
  uint64_t bytes = 0;   // bytes moved (successful reads/writes)
  Histogram latency;
};

class ReplayStats {
 public:
  // Op name -> stats ("pread64", "page_fault", "uring:read", ...).
  OpStats& Op(const std::string& name);
  void AddSchedule(uint64_t lateness_ns) { schedule_.Add(lateness_ns); }
  // An empty `op` only creates the reason's entry (pre-allocation); it is not counted.
  void AddSkip(const std::string& reason, const std::string& op) {
    auto& m = skipped_[reason];
    if (!op.empty()) m[op]++;
  }
  void AddMismatch(Mismatch kind, const std::string& op, MismatchExample example, int max_examples);
  void Merge(const ReplayStats& o, int max_examples);

  uint64_t ops() const;
  uint64_t bytes() const;
  uint64_t mismatches() const;
  uint64_t skipped() const;
  const Histogram& schedule() const { return schedule_; }
  const std::map<std::string, OpStats>& by_op() const { return ops_; }
  const std::map<std::string, std::map<std::string, uint64_t>>& skipped_by_reason() const {
    return skipped_;
  }
  // mismatch kind -> op -> count
  const std::map<std::string, std::map<std::string, uint64_t>>& mismatch_counts() const {
    return mismatch_counts_;
  }
  const std::vector<MismatchExample>& examples(const std::string& kind) const;
  const std::map<std::string, std::vector<MismatchExample>>& all_examples() const {
    return examples_;
  }

 private:
  std::map<std::string, OpStats> ops_;
  Histogram schedule_;
  std::map<std::string, std::map<std::string, uint64_t>> skipped_;
  std::map<std::string, std::map<std::string, uint64_t>> mismatch_counts_;
  std::map<std::string, std::vector<MismatchExample>> examples_;
};

// Seconds from `start_ns` to `end_ns` (CLOCK_MONOTONIC); 0 when the end is not after the start,
// never the wrapped difference of an end that came first.
double ElapsedSeconds(uint64_t start_ns, uint64_t end_ns);
// `count` per second over `secs`; 0 when there is no measurable time.
double PerSecond(uint64_t count, double secs);

// Classifies a live result against the recorded one; false when they agree. `count_result`:
// compare successful values exactly (reads, writes, lseek), else success vs success agrees.
bool CompareResult(int64_t recorded, int64_t live, bool count_result, Mismatch* kind);

}  // namespace iotwin::replay
