#include "interop/text_util.h"

#include <fmt/format.h>

#include "base/bytes_text.h"

namespace iotwin::interop {

std::string_view TrimLeft(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
  return s.substr(i);
}

std::string_view TrimRight(std::string_view s) {
  size_t n = s.size();
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n')) {
    n--;
  }
  return s.substr(0, n);
}

std::string_view Trim(std::string_view s) { return TrimRight(TrimLeft(s)); }

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::vector<std::string_view> SplitWhitespace(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) i++;
    size_t start = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') i++;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::optional<uint64_t> ParseDec(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

std::optional<uint64_t> ParseCUnsigned(std::string_view s) {
  if (s.empty()) return std::nullopt;
  unsigned base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0') {
    base = 8;
    s.remove_prefix(1);
  }
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    unsigned d;
    if (c >= '0' && c <= '9') {
      d = static_cast<unsigned>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = static_cast<unsigned>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      d = static_cast<unsigned>(c - 'A' + 10);
    } else {
      return std::nullopt;
    }
    if (d >= base) return std::nullopt;
    if (v > (UINT64_MAX - d) / base) return std::nullopt;
    v = v * base + d;
  }
  return v;
}

std::optional<int64_t> ParseCInt(std::string_view s) {
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  auto u = ParseCUnsigned(s);
  if (!u) return std::nullopt;
  if (neg) {
    if (*u > uint64_t{1} << 63) return std::nullopt;
    return static_cast<int64_t>(0 - *u);
  }
  // Values above INT64_MAX (addresses, u64 offsets) keep their bit pattern.
  return static_cast<int64_t>(*u);
}

std::optional<uint64_t> ParseSecondsToNs(std::string_view s) {
  size_t dot = s.find('.');
  std::string_view whole = dot == std::string_view::npos ? s : s.substr(0, dot);
  auto secs = ParseDec(whole);
  if (!secs || *secs > UINT64_MAX / 1000000000ull - 1) return std::nullopt;
  uint64_t ns = *secs * 1000000000ull;
  if (dot != std::string_view::npos) {
    std::string_view frac = s.substr(dot + 1);
    if (frac.empty()) return std::nullopt;
    uint64_t scale = 100000000ull;
    for (char c : frac) {
      if (c < '0' || c > '9') return std::nullopt;
      ns += static_cast<uint64_t>(c - '0') * scale;
      scale /= 10;
    }
  }
  return ns;
}

void AppendMicros(std::string* out, uint64_t ns) {
  fmt::format_to(std::back_inserter(*out), "{}.{:03}", ns / 1000, ns % 1000);
}

void AppendMicros(std::string* out, int64_t ns) {
  if (ns < 0) {
    out->push_back('-');
    AppendMicros(out, static_cast<uint64_t>(0) - static_cast<uint64_t>(ns));
  } else {
    AppendMicros(out, static_cast<uint64_t>(ns));
  }
}

std::string Excerpt(std::string_view line, size_t max) {
  std::string out = BytesToText(line.substr(0, max));
  if (line.size() > max) out += "...";
  return out;
}

}  // namespace iotwin::interop
