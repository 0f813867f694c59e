#include "base/units.h"

#include <cctype>
#include <cmath>
#include <string>

#include "base/checked_math.h"

namespace iotwin::units {
namespace {

struct Number {
  uint64_t whole = 0;
  double fraction = 0;  // in [0, 1)
  std::string_view unit;
};

// The leading digits (and fraction) of `text`; the rest is the unit, spaces around it dropped.
Result<Number> SplitNumber(std::string_view text, std::string_view what) {
  std::string_view t = text;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  Number n;
  size_t i = 0;
  for (; i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])); ++i) {
    auto next = CheckedMul(n.whole, 10);
    if (next) next = CheckedAdd(*next, static_cast<uint64_t>(t[i] - '0'));
    if (!next) return Status::Invalid("'{}' is too large for a {}", text, what);
    n.whole = *next;
  }
  size_t digits = i;
  if (i < t.size() && t[i] == '.') {
    double scale = 0.1;
    for (++i; i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])); ++i, ++digits) {
      n.fraction += (t[i] - '0') * scale;
      scale /= 10;
    }
  }
  if (digits == 0) return Status::Invalid("'{}' is not a {}: no number", text, what);
  n.unit = t.substr(i);
  while (!n.unit.empty() && std::isspace(static_cast<unsigned char>(n.unit.front()))) {
    n.unit.remove_prefix(1);
  }
  return n;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Bytes per unit of a size suffix, 0 when it is not one.
uint64_t SizeMultiple(std::string_view unit) {
  std::string u = Lower(unit);
  if (u == "b") return 1;
  static constexpr std::string_view kPrefixes = "kmgtp";
  if (u.empty()) return 0;
  size_t power = kPrefixes.find(u[0]);
  std::string_view rest = std::string_view(u).substr(1);
  if (power == std::string_view::npos || !(rest.empty() || rest == "b" || rest == "ib")) return 0;
  return uint64_t{1} << (10 * (power + 1));
}

double DurationMultipleNs(std::string_view unit) {
  std::string u = Lower(unit);
  if (u == "ns") return 1;
  if (u == "us" || u == "\xc2\xb5s") return 1e3;
  if (u == "ms") return 1e6;
  if (u == "s") return 1e9;
  if (u == "m" || u == "min") return 60e9;
  if (u == "h") return 3600e9;
  return 0;
}

}  // namespace

Result<uint64_t> ParseSizeBytes(std::string_view text, uint64_t plain_unit) {
  IOTWIN_ASSIGN_OR_RETURN(Number n, SplitNumber(text, "size"));
  uint64_t multiple = n.unit.empty() ? plain_unit : SizeMultiple(n.unit);
  if (multiple == 0) {
    return Status::Invalid("'{}' is not a size: unknown unit '{}' (use k, M, G, T, P)",
                                   text, n.unit);
  }
  auto whole = CheckedMul(n.whole, multiple);
  double part = n.fraction * static_cast<double>(multiple);
  if (std::fabs(part - std::round(part)) > 1e-6) {
    return Status::Invalid("'{}' is not a whole number of bytes", text);
  }
  if (whole) whole = CheckedAdd(*whole, static_cast<uint64_t>(std::llround(part)));
  if (!whole) return Status::Invalid("'{}' is too large for a size", text);
  return *whole;
}

Result<double> ParseDurationNs(std::string_view text, double plain_unit_ns) {
  IOTWIN_ASSIGN_OR_RETURN(Number n, SplitNumber(text, "duration"));
  double multiple = n.unit.empty() ? plain_unit_ns : DurationMultipleNs(n.unit);
  if (multiple == 0) {
    return Status::Invalid(
        "'{}' is not a duration: unknown unit '{}' (use ns, us, ms, s, m, h)", text, n.unit);
  }
  double ns = (static_cast<double>(n.whole) + n.fraction) * multiple;
  if (!std::isfinite(ns) || ns > 1e19) {
    return Status::Invalid("'{}' is too long for a duration", text);
  }
  return ns;
}

}  // namespace iotwin::units
