#include "interop/strace_text.h"

#include <cctype>

#include "interop/text_util.h"

namespace iotwin::interop::strace {

namespace {

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// One step of the shared scanner. `stack` holds the expected closers. Returns false when the
// character closes a level that is not open (ignored).
struct ScanState {
  std::string stack;
  bool in_quote = false;
  bool escape = false;
};

void Step(ScanState& st, std::string_view s, size_t i) {
  char c = s[i];
  if (st.in_quote) {
    if (st.escape) {
      st.escape = false;
    } else if (c == '\\') {
      st.escape = true;
    } else if (c == '"') {
      st.in_quote = false;
    }
    return;
  }
  char top = st.stack.empty() ? '\0' : st.stack.back();
  if (top == '>') {
    // Inside a -y decoration: only nested decorations and socket address brackets count; paths
    // are octal-escaped for '<' and '>', but may hold quotes and parentheses.
    if (c == '<' && i > 0 && IsAlnum(s[i - 1])) {
      st.stack.push_back('>');
    } else if (c == '[' && i > 0 && s[i - 1] == ':') {
      st.stack.push_back(']');
    } else if (c == '>') {
      st.stack.pop_back();
    }
    return;
  }
  if (top == ']' && !st.stack.empty() && st.stack.size() >= 2 &&
      st.stack[st.stack.size() - 2] == '>') {
    // Socket address inside a decoration ("TCP:[1.2.3.4:5->6.7.8.9:10]"): only ']' ends it.
    if (c == ']') st.stack.pop_back();
    return;
  }
  switch (c) {
    case '"':
      st.in_quote = true;
      break;
    case '(':
      st.stack.push_back(')');
      break;
    case '[':
      st.stack.push_back(']');
      break;
    case '{':
      st.stack.push_back('}');
      break;
    case ')':
    case ']':
    case '}':
      if (!st.stack.empty() && st.stack.back() == c) st.stack.pop_back();
      break;
    case '<':
      if (i > 0 && IsAlnum(s[i - 1])) st.stack.push_back('>');
      break;
    default:
      break;
  }
}

}  // namespace

size_t FindClose(std::string_view s, size_t open) {
  if (open >= s.size() || s[open] != '(') return std::string_view::npos;
  ScanState st;
  st.stack.push_back(')');
  for (size_t i = open + 1; i < s.size(); i++) {
    bool was_plain = !st.in_quote && st.stack.size() == 1;
    Step(st, s, i);
    if (was_plain && s[i] == ')' && st.stack.empty()) return i;
  }
  return std::string_view::npos;
}

size_t FindDecorationEnd(std::string_view s, size_t lt) {
  if (lt >= s.size() || s[lt] != '<') return std::string_view::npos;
  ScanState st;
  st.stack.push_back('>');
  for (size_t i = lt + 1; i < s.size(); i++) {
    Step(st, s, i);
    if (st.stack.empty()) return i + 1;
  }
  return std::string_view::npos;
}

std::string_view FirstBraceGroup(std::string_view s) {
  size_t open = s.find('{');
  if (open == std::string_view::npos) return {};
  ScanState st;
  st.stack.push_back('}');
  for (size_t i = open + 1; i < s.size(); i++) {
    Step(st, s, i);
    if (st.stack.empty()) return s.substr(open + 1, i - open - 1);
  }
  return {};
}

std::vector<std::string_view> SplitTopLevel(std::string_view s) {
  std::vector<std::string_view> out;
  ScanState st;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); i++) {
    if (!st.in_quote && st.stack.empty() && s[i] == ',') {
      out.push_back(Trim(s.substr(start, i - start)));
      start = i + 1;
      continue;
    }
    Step(st, s, i);
  }
  std::string_view last = Trim(s.substr(start));
  if (!last.empty() || !out.empty()) out.push_back(last);
  return out;
}

std::string_view FieldValue(std::string_view s, std::string_view key) {
  s = Trim(s);
  if (!s.empty() && s.front() == '{') {
    s.remove_prefix(1);
    if (!s.empty() && s.back() == '}') s.remove_suffix(1);
  }
  for (std::string_view part : SplitTopLevel(s)) {
    if (part.size() > key.size() && StartsWith(part, key) && part[key.size()] == '=') {
      return Trim(part.substr(key.size() + 1));
    }
  }
  return {};
}

namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes escapes in s[from, to).
std::string Unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); i++) {
    char c = s[i];
    if (c != '\\' || i + 1 >= s.size()) {
      out.push_back(c);
      continue;
    }
    char n = s[++i];
    switch (n) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'x': {
        int v = 0, digits = 0;
        while (digits < 2 && i + 1 < s.size() && HexDigit(s[i + 1]) >= 0) {
          v = v * 16 + HexDigit(s[++i]);
          digits++;
        }
        if (digits == 0) {
          out.push_back('x');
        } else {
          out.push_back(static_cast<char>(v));
        }
        break;
      }
      default:
        if (n >= '0' && n <= '7') {
          int v = n - '0', digits = 1;
          while (digits < 3 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7') {
            v = v * 8 + (s[++i] - '0');
            digits++;
          }
          out.push_back(static_cast<char>(v & 0xff));
        } else {
          out.push_back(n);  // \" \\ and anything else: the character itself
        }
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> Unquote(std::string_view s, bool* truncated) {
  s = Trim(s);
  if (truncated) *truncated = false;
  if (s.empty() || s[0] != '"') return std::nullopt;
  size_t end = std::string_view::npos;
  bool esc = false;
  for (size_t i = 1; i < s.size(); i++) {
    if (esc) {
      esc = false;
    } else if (s[i] == '\\') {
      esc = true;
    } else if (s[i] == '"') {
      end = i;
      break;
    }
  }
  if (end == std::string_view::npos) return std::nullopt;
  if (truncated && s.substr(end + 1) == "...") *truncated = true;
  return Unescape(s.substr(1, end - 1));
}

std::string UnescapeDecoration(std::string_view s) { return Unescape(s); }

FdText ParseFd(std::string_view s) {
  FdText out;
  s = Trim(s);
  size_t lt = s.find('<');
  std::string_view num = lt == std::string_view::npos ? s : s.substr(0, lt);
  if (num == "AT_FDCWD") {
    out.number = -100;
  } else if (auto v = ParseCInt(num)) {
    out.number = *v;
  }
  if (lt == std::string_view::npos || s.back() != '>') return out;
  std::string_view deco = s.substr(lt + 1, s.size() - lt - 2);
  out.decorated = true;
  // -yy device nodes: "/dev/sda<block 8:0>" and "/dev/null<char 1:3>".
  if (!deco.empty() && deco.back() == '>') {
    size_t inner = deco.rfind('<');
    if (inner != std::string_view::npos) {
      std::string_view kind = deco.substr(inner + 1);
      if (StartsWith(kind, "block ")) out.ftype = 6;
      if (StartsWith(kind, "char ")) out.ftype = 2;
      deco = deco.substr(0, inner);
    }
  }
  if (EndsWith(deco, " (deleted)")) {
    out.deleted = true;
    deco.remove_suffix(10);
  }
  if (!deco.empty() && deco[0] != '/') {
    // Non-file objects: "socket:[123]", "TCP:[...]", "UNIX:[...]", "pipe:[123]", "anon_inode:...".
    if (StartsWith(deco, "pipe:")) {
      out.ftype = 1;
    } else if (StartsWith(deco, "socket:") || StartsWith(deco, "TCP") ||
               StartsWith(deco, "UDP") || StartsWith(deco, "UNIX") ||
               StartsWith(deco, "NETLINK") || StartsWith(deco, "RAW")) {
      out.ftype = 12;
    }
  }
  out.target = Unescape(deco);
  if (out.target.find('\0') != std::string::npos) {
    out.nul_in_target = true;
    out.decorated = false;
    out.deleted = false;
    out.target.clear();
  }
  return out;
}

}  // namespace iotwin::interop::strace
