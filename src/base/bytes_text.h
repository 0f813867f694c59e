// Names on Linux are bytes, not text: a file name, a comm or a command-line argument may hold any
// byte but NUL and need not be UTF-8. JSON (and the CSV/TSV readers people use) want valid UTF-8,
// and line-oriented text wants no control characters. This is the one place that turns such bytes
// into text, reversibly:
//   * valid UTF-8 sequences of printable characters are kept as they are;
//   * '\' becomes "\\" (so the escapes below cannot be confused with bytes of the name);
//   * every other byte (a byte that is not part of valid UTF-8, a C0 control such as '\n' or '\t',
//     DEL) becomes "\xNN", two lowercase hex digits.
// The result is valid UTF-8 without control characters; TextToBytes undoes it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace iotwin {

// `bytes` as escaped text (see above).
std::string BytesToText(std::string_view bytes);
void AppendBytesAsText(std::string* out, std::string_view bytes);

// The bytes BytesToText was given; nullopt when `text` holds a '\' that is not "\\" or "\xNN".
std::optional<std::string> TextToBytes(std::string_view text);

// A JSON string literal, quotes included, holding BytesToText(bytes): always valid JSON in UTF-8.
void AppendBytesAsJsonString(std::string* out, std::string_view bytes);

// An RFC 4180 CSV field holding BytesToText(bytes): quoted when it holds a comma or a quote
// (control characters, CR and LF included, are already escaped by BytesToText).
void AppendBytesAsCsvField(std::string* out, std::string_view bytes);

}  // namespace iotwin
