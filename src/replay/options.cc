#include "replay/options.h"

#include <cstdlib>

#include "model/path.h"

namespace iotwin::replay {

std::string FillSpec::ToString() const {
  switch (kind) {
    case FillKind::kZero: return "zero";
    case FillKind::kRandom: return "random";
    case FillKind::kCompressible: return fmt::format("compressible:{}", ratio);
  }
  return "?";
}

Result<PaceMode> ParsePace(const std::string& s) {
  if (s == "original") return PaceMode::kOriginal;
  if (s == "gaps") return PaceMode::kGaps;
  if (s == "fast") return PaceMode::kFast;
  return Status::Invalid("--pace {}: expected original, gaps or fast", s);
}

Result<CacheMode> ParseCache(const std::string& s) {
  if (s == "as-captured") return CacheMode::kAsCaptured;
  if (s == "cold") return CacheMode::kCold;
  if (s == "warm") return CacheMode::kWarm;
  return Status::Invalid("--cache {}: expected as-captured, cold or warm", s);
}

Result<FillSpec> ParseFill(const std::string& s) {
  FillSpec f;
  if (s == "zero") {
    f.kind = FillKind::kZero;
  } else if (s == "random") {
    f.kind = FillKind::kRandom;
  } else if (s.rfind("compressible:", 0) == 0) {
    f.kind = FillKind::kCompressible;
    const char* num = s.c_str() + 13;
    char* end = nullptr;
    f.ratio = std::strtod(num, &end);
    if (end == num || *end != '\0' || !(f.ratio >= 1.0) || f.ratio > 4096) {
      return Status::Invalid("--fill {}: RATIO must be a number from 1 to 4096", s);
    }
  } else {
    return Status::Invalid("--fill {}: expected zero, random or compressible:RATIO", s);
  }
  return f;
}

Result<std::pair<std::string, std::string>> ParseMap(const std::string& s) {
  size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) {
    return Status::Invalid("--map {}: expected /recorded/prefix=/target/prefix", s);
  }
  std::string from = s.substr(0, eq), to = s.substr(eq + 1);
  if (from[0] != '/' || to[0] != '/') {
    return Status::Invalid("--map {}: both prefixes must be absolute", s);
  }
  return std::make_pair(model::NormalizePath(from), model::NormalizePath(to));
}

const char* PaceName(PaceMode m) {
  switch (m) {
    case PaceMode::kOriginal: return "original";
    case PaceMode::kGaps: return "gaps";
    case PaceMode::kFast: return "fast";
  }
  return "?";
}

const char* CacheName(CacheMode m) {
  switch (m) {
    case CacheMode::kAsCaptured: return "as-captured";
    case CacheMode::kCold: return "cold";
    case CacheMode::kWarm: return "warm";
  }
  return "?";
}

}  // namespace iotwin::replay
