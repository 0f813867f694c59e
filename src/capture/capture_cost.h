// What the capture adds to each traced system call, measured on the running kernel at the start
// of a recording (with the programs of the enabled layers attached): a child process reads one
// cached page of a memfd in a loop, in turns untraced and traced, and the difference of the
// fastest turns per call is the cost. The trace's header keeps it (capture.cost, docs/trace-format.md)
// and replays take it out of the recorded think time (replay/pacer.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace iotwin::capture {

struct CaptureCost {
  uint64_t per_call_ns = 0;        // traced - untraced, per call (0 when tracing looked free)
  uint64_t untraced_call_ns = 0;   // the fastest untraced turn, per call
  uint64_t traced_call_ns = 0;     // the fastest traced turn, per call
  uint64_t calls = 0;              // calls per turn
  uint64_t turns = 0;              // turns of each kind
  nlohmann::json ToJson() const;
};

// The calibration in two halves: Untraced() before the capture's programs are attached (the
// program as it runs without iotwin), Traced() after, with the process in the traced set.
// `trace` adds a process to the traced set; `ring_fd` is the capture's ring buffer, whose
// records of the calibration are consumed and dropped (call Traced() before anything else is
// traced and before the trace's consumer exists).
class CaptureCostProbe {
 public:
  CaptureCostProbe();
  ~CaptureCostProbe();
  CaptureCostProbe(const CaptureCostProbe&) = delete;
  CaptureCostProbe& operator=(const CaptureCostProbe&) = delete;

  Status Untraced();
  Result<CaptureCost> Traced(const std::function<Status(pid_t)>& trace, int ring_fd);

 private:
  // The fastest of the child's turns, ns per call; `trace` (may be empty) runs on its pid first.
  Result<uint64_t> FastestTurn(const std::function<Status(pid_t)>& trace);
  int memfd_ = -1;
  uint64_t untraced_ns_ = 0;
};

}  // namespace iotwin::capture
