#include "base/units.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "base/checked_math.h"

namespace iotwin::units {
namespace {

std::string_view Trim(std::string_view t) {
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  return t;
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
  // "us", the micro sign U+00B5 and the Greek mu U+03BC.
  if (u == "us" || u == "\xc2\xb5s" || u == "\xce\xbcs") return 1e3;
  if (u == "ms") return 1e6;
  if (u == "s") return 1e9;
  if (u == "m" || u == "min") return 60e9;
  if (u == "h") return 3600e9;
  return 0;
}

using u128 = unsigned __int128;
constexpr u128 kU64Max = UINT64_MAX;

// A decimal number as digits / 10^scale, exactly; the rest of the text is its unit.
struct Decimal {
  u128 digits = 0;
  unsigned scale = 0;
  std::string_view unit;
};

Result<Decimal> ParseDecimal(std::string_view text, std::string_view t) {
  Decimal d;
  size_t i = 0, count = 0;
  bool point = false;
  for (; i < t.size(); ++i) {
    char c = t[i];
    if (c == '.' && !point) {
      point = true;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c))) break;
    if (++count > 30) return Status::Invalid("'{}' has too many digits for a size", text);
    d.digits = d.digits * 10 + static_cast<unsigned>(c - '0');
    d.scale += point ? 1 : 0;
  }
  if (count == 0) return Status::Invalid("'{}' is not a size: no number", text);
  d.unit = Trim(t.substr(i));
  return d;
}

}  // namespace

Result<uint64_t> ParseSizeBytes(std::string_view text, uint64_t plain_unit) {
  std::string_view t = Trim(text);
  // 0x... without a unit: a byte offset as C and fio write it.
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    std::string hex(t.substr(2));
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(hex.c_str(), &end, 16);
    if (*end != '\0' || hex.empty() || !std::isxdigit(static_cast<unsigned char>(hex[0]))) {
      return Status::Invalid("'{}' is not a hexadecimal size", text);
    }
    if (errno == ERANGE) return Status::Invalid("'{}' is too large for a size", text);
    auto bytes = CheckedMul(v, plain_unit);
    if (!bytes) return Status::Invalid("'{}' is too large for a size", text);
    return *bytes;
  }
  IOTWIN_ASSIGN_OR_RETURN(Decimal d, ParseDecimal(text, t));
  uint64_t multiple = d.unit.empty() ? plain_unit : SizeMultiple(d.unit);
  if (multiple == 0) {
    return Status::Invalid("'{}' is not a size: unknown unit '{}' (use k, M, G, T, P)", text,
                           d.unit);
  }
  // digits * multiple / 10^scale, in 128 bits: at most 30 digits (< 2^100) times 2^50 overflows,
  // so check before multiplying.
  u128 pow10 = 1;
  for (unsigned s = 0; s < d.scale; ++s) pow10 *= 10;
  if (d.digits > (~u128{0}) / multiple) return Status::Invalid("'{}' is too large for a size", text);
  u128 scaled = d.digits * multiple;
  if (scaled % pow10 != 0) return Status::Invalid("'{}' is not a whole number of bytes", text);
  u128 bytes = scaled / pow10;
  if (bytes > kU64Max) return Status::Invalid("'{}' is too large for a size", text);
  return static_cast<uint64_t>(bytes);
}

Result<double> ParseDurationNs(std::string_view text, double plain_unit_ns) {
  std::string t(Trim(text));
  // strtod reads what C reads (fractions, exponents); signs, hex, inf and nan are refused first.
  if (t.empty() || !(std::isdigit(static_cast<unsigned char>(t[0])) || t[0] == '.') ||
      (t.size() > 1 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X'))) {
    return Status::Invalid("'{}' is not a duration: no number", text);
  }
  char* end = nullptr;
  double value = std::strtod(t.c_str(), &end);
  if (end == t.c_str()) return Status::Invalid("'{}' is not a duration: no number", text);
  std::string_view unit = Trim(std::string_view(end));
  double multiple = unit.empty() ? plain_unit_ns : DurationMultipleNs(unit);
  if (multiple == 0) {
    return Status::Invalid("'{}' is not a duration: unknown unit '{}' (use ns, us, ms, s, m, h)",
                           text, unit);
  }
  double ns = value * multiple;
  if (!std::isfinite(ns) || ns > 1e19) {
    return Status::Invalid("'{}' is too long for a duration", text);
  }
  return ns;
}

std::string HumanBytes(uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.1f} GiB", b / double(1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", b / double(1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.1f} KiB", b / double(1ull << 10));
  return fmt::format("{} B", b);
}

}  // namespace iotwin::units
