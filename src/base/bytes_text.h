// Names on Linux are bytes, not text: a file name, a comm or a command-line argument may hold any
// byte but NUL and need not be UTF-8. JSON (and the CSV/TSV readers people use) want valid UTF-8,
// and line-oriented text wants no control characters. This is the one place that turns such bytes
// into text, reversibly:
//   * valid UTF-8 sequences of printable characters are kept as they are;
//   * '\' becomes "\\" (so the escapes below cannot be confused with bytes of the name);
//   * every other byte (a byte that is not part of valid UTF-8, a C0 control such as ESC, '\n' or
//     '\t', DEL, either byte of a C1 control U+0080..U+009F such as U+009B CSI) becomes "\xNN",
//     two lowercase hex digits.
// The result is valid UTF-8 without control characters, so no terminal escape sequence survives
// it; TextToBytes undoes it. Every text output (dump, report, layers, compare, replay's messages,
// CSV, JSON strings) writes names through it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace iotwin {

// `bytes` as escaped text (see above).
std::string BytesToText(std::string_view bytes);
void AppendBytesAsText(std::string* out, std::string_view bytes);

// Text of several lines (a report, a table) for a terminal or a text file: each line as
// BytesToText gives it, the '\n' that ends or separates lines kept. Whatever bytes from a trace the
// lines hold, no control character but '\n' is left (no escape sequence reaches a terminal).
std::string LinesToText(std::string_view lines);

// The bytes BytesToText was given; nullopt when `text` holds a '\' that is not "\\" or "\xNN".
std::optional<std::string> TextToBytes(std::string_view text);

// A JSON string literal, quotes included, holding BytesToText(bytes): always valid JSON in UTF-8.
void AppendBytesAsJsonString(std::string* out, std::string_view bytes);

// An RFC 4180 CSV field holding BytesToText(bytes): quoted when it holds a comma or a quote
// (control characters, CR and LF included, are already escaped by BytesToText). A spreadsheet
// takes a cell starting with '=', '+', '-' or '@' for a formula (OWASP "CSV injection"): such a
// text gets a single quote in front, and so does one starting with a quote, so that a reader
// drops one leading quote of a name cell and has the text back. Only for names, never numbers.
void AppendBytesAsCsvField(std::string* out, std::string_view bytes);

}  // namespace iotwin
