#include "replay/pacer.h"

#include <time.h>

#include <algorithm>
#include <cerrno>

#include "base/checked_math.h"

namespace iotwin::replay {

uint64_t ScaledDue(uint64_t base, uint64_t recorded_ns, double speed) {
  double scaled = static_cast<double>(recorded_ns) / speed;
  if (!(scaled < 18446744073709551616.0)) return UINT64_MAX;  // 2^64
  return SaturatingAdd(base, static_cast<uint64_t>(scaled));
}

Pacer::Pacer(PaceMode mode, double speed, uint64_t trace_start, uint64_t live_start,
             uint64_t gap_floor, uint64_t capture_cost)
    : mode_(mode), speed_(speed > 0 ? speed : 1.0), trace_start_(trace_start),
      live_start_(live_start), gap_floor_(gap_floor), capture_cost_(capture_cost) {}

uint64_t CaptureCostNs(const nlohmann::json& meta) {
  if (!meta.is_object() || !meta.contains("capture") || !meta["capture"].is_object()) return 0;
  const auto& cap = meta["capture"];
  if (!cap.contains("cost") || !cap["cost"].is_object()) return 0;
  const auto& cost = cap["cost"];
  if (!cost.contains("per_call_ns") || !cost["per_call_ns"].is_number_unsigned()) return 0;
  const uint64_t ns = cost["per_call_ns"].get<uint64_t>();
  return ns <= kMaxCaptureCostNs ? ns : 0;
}

uint64_t Pacer::Due(uint64_t ts, uint64_t prev_rec_end, uint64_t prev_live_done, uint64_t now) {
  switch (mode_) {
    case PaceMode::kFast:
      return now;
    case PaceMode::kOriginal: {
      uint64_t offset = ts > trace_start_ ? ts - trace_start_ : 0;
      if (capture_cost_ == 0) return ScaledDue(live_start_, offset, speed_);
      offset = CompensatedGap(offset, SaturatingMul(capture_cost_, calls_++));
      last_original_ = std::max(last_original_, offset);
      return ScaledDue(live_start_, last_original_, speed_);
    }
    case PaceMode::kGaps: {
      const uint64_t gap = CompensatedGap(ts > prev_rec_end ? ts - prev_rec_end : 0, capture_cost_);
      uint64_t scaled = ScaledDue(0, gap > gap_floor_ ? gap - gap_floor_ : 0, speed_);
      uint64_t absorbed = std::min(carry_, scaled);
      carry_ -= absorbed;
      return SaturatingAdd(prev_live_done, scaled - absorbed);
    }
  }
  return now;
}

void Pacer::Issued(uint64_t due, uint64_t issued) {
  if (mode_ == PaceMode::kGaps && issued > due) carry_ += issued - due;
}

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t WaitUntil(uint64_t deadline, uint64_t spin_ns) {
  uint64_t now = NowNs();
  if (now >= deadline) return now;
  if (deadline - now > spin_ns) {
    uint64_t wake = deadline - spin_ns;
    timespec ts{static_cast<time_t>(wake / 1'000'000'000ull),
                static_cast<long>(wake % 1'000'000'000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
  }
  while ((now = NowNs()) < deadline) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  return now;
}

}  // namespace iotwin::replay
