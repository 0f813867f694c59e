// Trace files written byte by byte, for header and footer JSON that TraceWriter would never
// write: the header with the given metadata text, no chunks, and optionally a trailer with no
// index entries and the given summary text, then the footer. Checksums are right, so the reader
// gets as far as parsing the JSON, whatever it holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include <xxhash.h>

#include "format/layout.h"

namespace iotwin::test {

inline std::string RawTraceBytes(std::string_view meta,
                                 std::optional<std::string_view> summary = std::nullopt) {
  layout::FileHeader h{};
  std::memcpy(h.magic, layout::kFileMagic, sizeof h.magic);
  h.major = layout::kMajor;
  h.minor = layout::kMinor;
  h.meta_len = static_cast<uint32_t>(meta.size());
  std::string hashed(reinterpret_cast<const char*>(&h), offsetof(layout::FileHeader, hash));
  hashed += meta;
  h.hash = XXH3_64bits(hashed.data(), hashed.size());
  std::string out(reinterpret_cast<const char*>(&h), sizeof h);
  out += meta;
  if (!summary) return out;
  layout::TrailerHeader th{};
  th.magic = layout::kTrailerMagic;
  th.summary_len = static_cast<uint32_t>(summary->size());
  std::string trailer(reinterpret_cast<const char*>(&th), sizeof th);
  trailer += *summary;
  layout::Footer f{};
  std::memcpy(f.magic, layout::kFooterMagic, sizeof f.magic);
  f.trailer_offset = out.size();
  f.trailer_len = trailer.size();
  hashed = trailer;
  hashed.append(reinterpret_cast<const char*>(&f), offsetof(layout::Footer, hash));
  f.hash = XXH3_64bits(hashed.data(), hashed.size());
  out += trailer;
  out.append(reinterpret_cast<const char*>(&f), sizeof f);
  return out;
}

// `{"nested": [[[...]]]}` with `depth` arrays: one level more than the arrays (the object).
inline std::string NestedJson(size_t depth) {
  return "{\"nested\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
}

}  // namespace iotwin::test
