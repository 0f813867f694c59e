// Small text helpers shared by the importers and exporters: number parsing that never throws,
// whitespace handling, JSON and CSV escaping.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace iotwin::interop {

std::string_view Trim(std::string_view s);
std::string_view TrimLeft(std::string_view s);
std::string_view TrimRight(std::string_view s);
bool StartsWith(std::string_view s, std::string_view prefix);
bool EndsWith(std::string_view s, std::string_view suffix);

// Splits on runs of spaces/tabs; no empty tokens.
std::vector<std::string_view> SplitWhitespace(std::string_view s);

// Whole-token unsigned decimal.
std::optional<uint64_t> ParseDec(std::string_view s);
// Whole-token integer as C writes it: optional sign, then 0x hex, 0 octal or decimal.
std::optional<int64_t> ParseCInt(std::string_view s);
// Whole-token unsigned in C notation (0x.., 0.., decimal); rejects a sign.
std::optional<uint64_t> ParseCUnsigned(std::string_view s);
// "SECS.FRACTION" (any number of fraction digits, truncated to ns) -> ns. Also accepts "SECS".
std::optional<uint64_t> ParseSecondsToNs(std::string_view s);

// The string as valid UTF-8: invalid bytes become U+FFFD (nlohmann::json refuses invalid UTF-8).
std::string SanitizeUtf8(std::string_view s);
// Appends `s` as a JSON string literal (quotes included); invalid UTF-8 bytes become U+FFFD.
void AppendJsonString(std::string* out, std::string_view s);
// Appends `s` as a CSV field (RFC 4180: quoted when it holds a comma, quote, CR or LF).
void AppendCsvField(std::string* out, std::string_view s);
// ns as microseconds with exactly three decimals ("12.345"), exact (integer arithmetic).
void AppendMicros(std::string* out, uint64_t ns);
void AppendMicros(std::string* out, int64_t ns);

// A printable, bounded excerpt of a line for error messages.
std::string Excerpt(std::string_view line, size_t max = 120);

}  // namespace iotwin::interop
