// Parsing JSON that comes from outside (a trace's header and footer, a sandbox manifest): the
// only way such text becomes a nlohmann::json. nlohmann's parser itself keeps its nesting on the
// heap, but copying, comparing, dumping and converting a value recurse once per level, so a few
// hundred thousand nested '[' (two bytes each) overflow the stack of whatever touches the value.
// Text nested deeper than kMaxJsonDepth is therefore refused before it is parsed; everything
// iotwin writes stays far below it (a trace header is about 6 levels deep).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/status.h"

namespace iotwin {

inline constexpr size_t kMaxJsonDepth = 128;

// The offset of the first '[' or '{' (outside strings) that opens level kMaxJsonDepth + 1, or
// npos when `text` nests no deeper than that. A scan of the bytes, not a parse: text that is not
// JSON is left for the parser to reject.
inline size_t JsonTooDeepAt(std::string_view text) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); i++) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        i++;  // the escaped character, a quote included
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      depth--;
    }
  }
  return std::string_view::npos;
}

// The value `text` holds. The error says what is wrong and at which byte, counting `text` as
// starting at byte `first_byte` of its file; the caller names the file. The parser's own message
// is not passed on: it quotes the input, which may hold any byte.
inline Result<nlohmann::json> ParseUntrustedJson(std::string_view text, uint64_t first_byte = 0) {
  if (const size_t at = JsonTooDeepAt(text); at != std::string_view::npos) {
    return Status::Corrupt("JSON nested deeper than {} levels at byte {}", kMaxJsonDepth,
                           first_byte + at);
  }
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte counts from 1 and points at the byte the parser stopped at.
    return Status::Corrupt("not JSON: syntax error at byte {}",
                           first_byte + (e.byte > 0 ? e.byte - 1 : 0));
  }
}

}  // namespace iotwin
