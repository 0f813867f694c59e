// Lexical helpers for strace output: bracket/quote-aware scanning, argument splitting, string
// unescaping and -y/-yy descriptor decorations. Kept apart from the importer so tests and the
// fuzz target can exercise them directly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace iotwin::interop::strace {

// Index of the ')' closing the '(' at `open`, skipping quoted strings and nested brackets;
// npos when the text ends first.
size_t FindClose(std::string_view s, size_t open);

// Index just past the '>' that closes the -y decoration opening at s[lt] == '<'; npos if none.
size_t FindDecorationEnd(std::string_view s, size_t lt);

// Content of the first "{...}" group of `s` (without the braces); empty when there is none.
std::string_view FirstBraceGroup(std::string_view s);

// Splits at commas outside quotes, brackets and -y decorations; each part trimmed.
std::vector<std::string_view> SplitTopLevel(std::string_view s);

// Value of `key=` inside a struct printed as "{a=1, key=VALUE, ...}" (or a bare "key=VALUE"
// argument list); empty when absent.
std::string_view FieldValue(std::string_view s, std::string_view key);

// Decodes a C-escaped quoted string ("..." with \n, \t, \", \\, \xHH, \NNN octal). Returns
// nullopt when `s` does not start with a quote; a trailing "..." (truncated by -s) is ignored
// and reported in *truncated.
std::optional<std::string> Unquote(std::string_view s, bool* truncated = nullptr);

// Decodes the octal escapes strace uses inside -y decorations (\74 for '<', ...).
std::string UnescapeDecoration(std::string_view s);

// A descriptor argument or return value: "3", "-100", "AT_FDCWD", with an optional -y
// decoration "3</path>" / "3<TCP:[...]>" / "3</dev/sda<block 8:0>>" / "AT_FDCWD</cwd>".
struct FdText {
  std::optional<int64_t> number;
  bool decorated = false;
  std::string target;  // decoded decoration (path, or "TCP:[...]", "pipe:[...]" ...)
  uint16_t ftype = 0;  // S_IFMT >> 12 when the decoration tells (socket, pipe, block, char)
  bool deleted = false;
  // The decoration decoded to a name holding a NUL byte, which no system call can be given: it
  // is dropped (decorated false, target empty) and the importer counts it.
  bool nul_in_target = false;
};
FdText ParseFd(std::string_view s);

}  // namespace iotwin::interop::strace
