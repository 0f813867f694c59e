#include "base/bytes_text.h"

#include <cstdint>

namespace iotwin {

namespace {

constexpr char kHex[] = "0123456789abcdef";

// Length of the valid UTF-8 sequence of two to four bytes at s[i], or 0 when there is none
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
size_t MultiByteLen(std::string_view s, size_t i) {
  auto b = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t cp;
  if ((b & 0xE0) == 0xC0) {
    n = 2;
    cp = b & 0x1F;
  } else if ((b & 0xF0) == 0xE0) {
    n = 3;
    cp = b & 0x0F;
  } else if ((b & 0xF8) == 0xF0) {
    n = 4;
    cp = b & 0x07;
  } else {
    return 0;
  }
  if (n > s.size() - i) return 0;
  for (size_t k = 1; k < n; k++) {
    auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (c & 0x3F);
  }
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
      cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  // C1 controls (U+0080..U+009F) are as unwelcome in text as C0 ones.
  if (cp < 0xA0) return 0;
  return n;
}

void AppendEscapedByte(std::string* out, unsigned char c) {
  out->append("\\x");
  out->push_back(kHex[c >> 4]);
  out->push_back(kHex[c & 15]);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

void AppendBytesAsText(std::string* out, std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x80) {
      size_t n = MultiByteLen(bytes, i);
      if (n == 0) {
        AppendEscapedByte(out, c);
        i++;
      } else {
        out->append(bytes.substr(i, n));
        i += n;
      }
      continue;
    }
    if (c == '\\') {
      out->append("\\\\");
    } else if (c < 0x20 || c == 0x7f) {
      AppendEscapedByte(out, c);
    } else {
      out->push_back(static_cast<char>(c));
    }
    i++;
  }
}

std::string BytesToText(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  AppendBytesAsText(&out, bytes);
  return out;
}

std::string LinesToText(std::string_view lines) {
  std::string out;
  out.reserve(lines.size());
  for (size_t start = 0; start < lines.size();) {
    const size_t end = lines.find('\n', start);
    if (end == std::string_view::npos) {
      AppendBytesAsText(&out, lines.substr(start));
      break;
    }
    AppendBytesAsText(&out, lines.substr(start, end - start));
    out.push_back('\n');
    start = end + 1;
  }
  return out;
}

std::optional<std::string> TextToBytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); i++) {
    if (text[i] != '\\') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '\\') {
      out.push_back('\\');
      i++;
      continue;
    }
    if (i + 3 < text.size() && text[i + 1] == 'x' && HexValue(text[i + 2]) >= 0 &&
        HexValue(text[i + 3]) >= 0) {
      out.push_back(static_cast<char>(HexValue(text[i + 2]) * 16 + HexValue(text[i + 3])));
      i += 3;
      continue;
    }
    return std::nullopt;
  }
  return out;
}

void AppendBytesAsJsonString(std::string* out, std::string_view bytes) {
  // After BytesToText only '"' and '\' need JSON escapes: no control characters are left.
  std::string text = BytesToText(bytes);
  out->push_back('"');
  for (char c : text) {
    if (c == '"' || c == '\\') out->push_back('\\');
    out->push_back(c);
  }
  out->push_back('"');
}

void AppendBytesAsCsvField(std::string* out, std::string_view bytes) {
  std::string text = BytesToText(bytes);
  // Tab and CR, which OWASP lists too, are escaped by BytesToText already.
  if (!text.empty() && std::string_view("=+-@'").find(text[0]) != std::string_view::npos) {
    text.insert(text.begin(), '\'');
  }
  if (text.find_first_of(",\"") == std::string::npos) {
    out->append(text);
    return;
  }
  out->push_back('"');
  for (char c : text) {
    if (c == '"') out->push_back('"');
    out->push_back(c);
  }
  out->push_back('"');
}

}  // namespace iotwin
