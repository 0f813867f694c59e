// Small text helpers shared by the importers and exporters: number parsing that never throws,
// whitespace handling. Names (bytes) reach JSON, CSV and text through base/bytes_text.h.
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
// True for a non-empty run of ASCII digits.
bool AllDigits(std::string_view s);

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

// ns as microseconds with exactly three decimals ("12.345"), exact (integer arithmetic).
void AppendMicros(std::string* out, uint64_t ns);
void AppendMicros(std::string* out, int64_t ns);

// A bounded excerpt of a line for error messages, as text (base/bytes_text.h): valid UTF-8,
// no control characters.
std::string Excerpt(std::string_view line, size_t max = 120);

}  // namespace iotwin::interop
