// Numeric options that take units (sizes "4k", "1M"; durations "500ms", "2m"), for iotwin and
// iotwin-workload. The option keeps its C++ type: the transform rewrites the text to a plain
// number in the option's own unit before CLI11 converts it, so a plain number keeps its meaning.
#pragma once

#include <cmath>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "base/units.h"

namespace iotwin::cli {

// A size option counted in units of `unit_bytes` (1 for bytes, 1 << 20 for an option in MiB),
// named `unit_name` in messages; `whole`: the option holds an integer.
inline CLI::Validator SizeUnits(uint64_t unit_bytes = 1, std::string unit_name = "bytes",
                                bool whole = true) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        auto bytes = units::ParseSizeBytes(text, unit_bytes);
        if (!bytes.ok()) {
          return fmt::format("{}; examples: {}", bytes.status().message(), units::kSizeExamples);
        }
        if (whole && *bytes % unit_bytes != 0) {
          return fmt::format("'{}' is not a whole number of {}", text, unit_name);
        }
        text = whole ? fmt::format("{}", *bytes / unit_bytes)
                     : fmt::format("{}", static_cast<double>(*bytes) / unit_bytes);
        return std::string();
      },
      "SIZE");
}

// A duration option counted in units of `unit_ns` (1e9 for seconds, 1e3 for microseconds).
inline CLI::Validator DurationUnits(double unit_ns, std::string unit_name, bool whole = false) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        auto ns = units::ParseDurationNs(text, unit_ns);
        if (!ns.ok()) {
          return fmt::format("{}; examples: {}", ns.status().message(), units::kDurationExamples);
        }
        double value = *ns / unit_ns;
        if (whole && std::fabs(value - std::round(value)) > 1e-9) {
          return fmt::format("'{}' is not a whole number of {}", text, unit_name);
        }
        // ParseDurationNs refuses signs and caps at 1e19 ns, so the value fits a uint64_t (a
        // long long does not hold 1e19).
        text = whole ? fmt::format("{}", static_cast<uint64_t>(std::round(value)))
                     : fmt::format("{}", value);
        return std::string();
      },
      "DURATION");
}

// A count (rows, records): decimal digits only. CLI11 would wrap "-1" into a huge unsigned.
inline CLI::Validator Count() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        return digits ? std::string() : fmt::format("'{}' is not a count (0, 1, 2, ...)", text);
      },
      "COUNT");
}

}  // namespace iotwin::cli
