// Sizes and durations as people type them on the command line of fio, dd or perf: "4k", "1M",
// "2G", "4KiB", "500ms", "10s", "2m", "100us". A number without a unit keeps the option's own unit.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace iotwin::units {

// Digits with an optional fraction, then an optional binary multiple, case-insensitive: k, m, g,
// t, p, each optionally followed by "b" or "ib" (all powers of 1024, as fio counts by default),
// or "b" alone for bytes. Without a unit the number counts in `plain_unit` bytes. Fails on
// anything else, on a result that is not a whole number of bytes and on overflow.
Result<uint64_t> ParseSizeBytes(std::string_view text, uint64_t plain_unit);

// Digits with an optional fraction, then an optional unit: ns, us (or µs), ms, s, m or min, h.
// Without a unit the number counts in `plain_unit_ns` nanoseconds. Returns nanoseconds.
Result<double> ParseDurationNs(std::string_view text, double plain_unit_ns);

// A byte count for people, one decimal in the largest binary unit it reaches: "512 B",
// "10.3 KiB", "1.5 GiB".
std::string HumanBytes(uint64_t bytes);

// Examples for error messages.
inline constexpr std::string_view kSizeExamples = "4096, 4k, 1M, 2G, 4KiB";
inline constexpr std::string_view kDurationExamples = "500ms, 10s, 2m, 100us";

}  // namespace iotwin::units
