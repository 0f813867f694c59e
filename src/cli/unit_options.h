// Numeric options that take units (sizes "4k", "1M"; durations "500ms", "2m"), for iotwin and
// iotwin-workload. The option keeps its C++ type: the transform rewrites the text to a plain
// number in the option's own unit before CLI11 converts it, so a plain number keeps its meaning.
#pragma once

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/units.h"

namespace iotwin::cli {

// Examples of sizes that are whole numbers of `unit_bytes` (KiB, MiB or GiB; bytes otherwise).
inline std::string WholeSizeExamples(uint64_t unit_bytes) {
  if (unit_bytes == uint64_t{1} << 10) return "256k, 4M";
  if (unit_bytes == uint64_t{1} << 20) return "64M, 1G";
  if (unit_bytes == uint64_t{1} << 30) return "2G, 1T";
  return std::string(units::kSizeExamples);
}

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
          return fmt::format("'{}' is not a whole number of {}; examples: {}", text, unit_name,
                             WholeSizeExamples(unit_bytes));
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
          return fmt::format("'{}' is not a whole number of {}; examples: 10{}, 250{}", text,
                             unit_name, unit_name, unit_name);
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
        return digits ? std::string()
                      : fmt::format("'{}' is not a count (0, 1, 2, ...); examples: 0, 20", text);
      },
      "COUNT");
}

// A plain number (`whole`: an integer, `sign`: may be negative), checked before CLI11 converts
// it, whose message would be "Could not convert: --amplify = x". `examples` are shown on error.
// No description: the help keeps CLI11's INT or FLOAT.
inline CLI::Validator Number(bool whole, std::string examples, bool sign = false) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const char* start = text.c_str();
        if (!sign && *start == '-') start = "";  // refused below, like any other non-number
        char* end = nullptr;
        errno = 0;
        bool finite = true;
        if (whole) {
          (void)std::strtoll(start, &end, 10);
        } else {
          finite = std::isfinite(std::strtod(start, &end));
        }
        const bool ok = finite && *start != '\0' &&
                        !std::isspace(static_cast<unsigned char>(*start)) && end != start &&
                        *end == '\0' && errno == 0;
        return ok ? std::string()
                  : fmt::format("'{}' is not {}; examples: {}", text,
                                whole ? (sign ? "a whole number" : "a whole number >= 0")
                                      : (sign ? "a number" : "a number >= 0"),
                                examples);
      },
      "");
}

// One of a fixed set of words. Named "{a,b,c}" as CLI::IsMember is, so that --help, the man
// pages and the shell completion (cli_docs.cc) list the words.
inline CLI::Validator OneOf(std::vector<std::string> words) {
  std::string name = fmt::format("{{{}}}", fmt::join(words, ","));
  return CLI::Validator(
      [words](std::string& text) -> std::string {
        for (const std::string& w : words) {
          if (w == text) return std::string();
        }
        return fmt::format("'{}' is not one of: {}", text, fmt::join(words, ", "));
      },
      name);
}

}  // namespace iotwin::cli
