// Pacing: when a replay worker issues its next operation.
//
//   original  the recorded schedule, absolute: op i is due at live_start + (ts_i - trace_start)
//             / speed. Lateness needs no carrying: a late op is issued at once and the next one is
//             still due at its own absolute time, so delays never accumulate.
//   gaps      think time: op i is due when the previous op of the same thread completed plus the
//             recorded idle gap between them (ts_i - end_{i-1}) / speed, less the thread's gap
//             floor. Overshoot (waking late, or waiting on another thread) is carried forward and
//             taken out of later gaps, never making an op due before its predecessor completed.
//             A thread's first op counts its gap from the thread's creation point (recorded: its
//             THREAD/FORK record; live: when its creator's op was done in the replay), taken
//             before the op waits for other threads: that wait is part of the gap, absorbed by
//             it, never slept on top of it (a late thread would otherwise sleep its gap twice).
//             The gap floor: a recorded gap holds the original program's own cost of leaving one
//             call and entering the next (the kernel's return and entry paths, with a tracer's
//             probes), which the replay pays again around its own calls; the floor is that cost
//             as the trace shows it, the thread's smallest gaps (GapFloor), so it is counted
//             once. Without it a thread of back-to-back calls runs longer by that cost per call.
//   fast      due at once.
//
// Capture cost: every recorded call carries what the capture added to it (measured at record
// time, the trace header's capture.cost.per_call_ns; CaptureCostNs). Unless the replay keeps the
// raw gaps (--raw-gaps), `gaps` takes it out of each recorded gap before the floor (the floor is
// then computed over the gaps so reduced), and `original` takes it out once per earlier call of
// the thread from the op's recorded offset (the traced run's timeline, shrunk back to the
// untraced program's), never making an op due before the thread's previous one. Neither goes
// below zero.
//
// Pacer is per thread and pure arithmetic (no clock); WaitUntil() does the waiting: a coarse
// sleep to `spin_ns` before the deadline, then a spin on the clock, so wake-up latency of the
// sleep never makes an op late and an op is never issued early.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/gap_floor.h"
#include "replay/options.h"

namespace iotwin::replay {

class Pacer {
 public:
  // `trace_start`: recorded time origin; `live_start`: the live instant it maps to;
  // `gap_floor`: recorded ns taken out of every gap (gaps mode; GapFloor).
  // `capture_cost`: recorded ns the capture added per call, taken out (gaps, original).
  Pacer(PaceMode mode, double speed, uint64_t trace_start, uint64_t live_start,
        uint64_t gap_floor = 0, uint64_t capture_cost = 0);

  // Live time at which the op recorded at `ts` is due. `prev_rec_end`: recorded completion of
  // the thread's previous replayed op (or the thread's recorded start); `prev_live_done`: live
  // completion of that op (or the thread's live creation point, not the end of its first op's
  // dependency waits); `now` for fast mode.
  uint64_t Due(uint64_t ts, uint64_t prev_rec_end, uint64_t prev_live_done, uint64_t now);
  // Reports when the op due at `due` was actually issued; lateness is carried (gaps mode).
  void Issued(uint64_t due, uint64_t issued);

  uint64_t carried() const { return carry_; }
  PaceMode mode() const { return mode_; }

 private:
  PaceMode mode_;
  double speed_;
  uint64_t trace_start_, live_start_;
  uint64_t gap_floor_;
  uint64_t capture_cost_;
  uint64_t carry_ = 0;
  uint64_t calls_ = 0;          // ops made due so far (original: the capture cost taken out)
  uint64_t last_original_ = 0;  // the previous op's recorded offset, compensated (original)
};

// At most this per call: the capture's programs cost microseconds per call; a larger figure in a
// trace's header is not a measurement (traces are untrusted) and is ignored.
inline constexpr uint64_t kMaxCaptureCostNs = 100'000;

// The capture's cost per call from a trace header (capture.cost.per_call_ns), 0 when absent or
// out of bounds.
uint64_t CaptureCostNs(const nlohmann::json& meta);

// A recorded gap less the capture's cost, at least 0.
inline uint64_t CompensatedGap(uint64_t gap, uint64_t capture_cost) {
  return gap > capture_cost ? gap - capture_cost : 0;
}

// GapFloor, kMaxGapFloorNs: base/gap_floor.h.
using iotwin::GapFloor;
using iotwin::kMaxGapFloorNs;

// CLOCK_MONOTONIC now, ns.
// base + recorded_ns / speed, saturating: recorded times come from an untrusted trace, and a
// double at or above 2^64 does not convert to an integer (undefined behaviour).
uint64_t ScaledDue(uint64_t base, uint64_t recorded_ns, double speed);

uint64_t NowNs();
// Waits until CLOCK_MONOTONIC >= deadline: sleeps until deadline - spin_ns, then spins. Returns
// the clock as last read (>= deadline), so that a caller needs no read of its own.
uint64_t WaitUntil(uint64_t deadline, uint64_t spin_ns);

}  // namespace iotwin::replay
