// Device numbers as the trace records them: the kernel's internal dev_t (MKDEV), 12 bits of
// major above 20 bits of minor (include/linux/kdev_t.h), written "MAJOR:MINOR" in text.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace iotwin {

inline constexpr uint32_t kDevMaxMajor = (1u << 12) - 1;
inline constexpr uint32_t kDevMaxMinor = (1u << 20) - 1;

inline constexpr uint32_t DevMajor(uint32_t dev) { return dev >> 20; }
inline constexpr uint32_t DevMinor(uint32_t dev) { return dev & kDevMaxMinor; }

inline std::string FormatDev(uint32_t dev) {
  return fmt::format("{}:{}", DevMajor(dev), DevMinor(dev));
}

// MAJOR and MINOR in decimal digits only (no sign, space or trailing text), each in range;
// nullopt otherwise.
inline std::optional<uint32_t> ParseDevParts(std::string_view major, std::string_view minor) {
  auto part = [](std::string_view p, uint32_t max) -> std::optional<uint32_t> {
    uint32_t v = 0;
    if (p.empty() || p[0] < '0' || p[0] > '9') return std::nullopt;
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
    if (ec != std::errc() || end != p.data() + p.size() || v > max) return std::nullopt;
    return v;
  };
  auto ma = part(major, kDevMaxMajor);
  auto mi = part(minor, kDevMaxMinor);
  if (!ma || !mi) return std::nullopt;
  return (*ma << 20) | *mi;
}

// "MAJOR:MINOR", as ParseDevParts.
inline std::optional<uint32_t> ParseDev(std::string_view s) {
  const size_t colon = s.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  return ParseDevParts(s.substr(0, colon), s.substr(colon + 1));
}

}  // namespace iotwin
