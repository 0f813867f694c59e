#include "model/scope.h"

#include <array>

#include <fmt/format.h>

namespace iotwin::model {
namespace {

constexpr size_t kNpos = std::string_view::npos;

// Whether byte `c` is in POSIX class `name` (ASCII); -1 for a class that does not exist.
int ClassMatch(std::string_view name, unsigned char c) {
  const bool upper = c >= 'A' && c <= 'Z', lower = c >= 'a' && c <= 'z';
  const bool digit = c >= '0' && c <= '9';
  const bool alpha = upper || lower;
  const bool graph = c > 0x20 && c < 0x7f;
  if (name == "alpha") return alpha;
  if (name == "digit") return digit;
  if (name == "alnum") return alpha || digit;
  if (name == "upper") return upper;
  if (name == "lower") return lower;
  if (name == "xdigit") return digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  if (name == "space") return c == ' ' || (c >= '\t' && c <= '\r');
  if (name == "blank") return c == ' ' || c == '\t';
  if (name == "punct") return graph && !alpha && !digit;
  if (name == "graph") return graph;
  if (name == "print") return graph || c == ' ';
  if (name == "cntrl") return c < 0x20 || c == 0x7f;
  return -1;
}

// The bracket expression at p[open] == '[': sets *matched for byte `c` and returns the index
// after its closing ']', or kNpos when it is unterminated or names an unknown class (the '['
// is then an ordinary byte, as fnmatch takes it).
size_t MatchBracket(std::string_view p, size_t open, unsigned char c, bool* matched) {
  size_t j = open + 1;
  bool negate = false;
  if (j < p.size() && (p[j] == '!' || p[j] == '^')) {
    negate = true;
    j++;
  }
  bool hit = false;
  bool first = true;  // a ']' right after '[' or '[!' is a member
  while (j < p.size()) {
    auto lo = static_cast<unsigned char>(p[j]);
    if (lo == ']' && !first) {
      *matched = hit != negate;
      return j + 1;
    }
    first = false;
    if (lo == '[' && j + 1 < p.size() && p[j + 1] == ':') {
      const size_t close = p.find(":]", j + 2);
      if (close == kNpos) return kNpos;
      const int in = ClassMatch(p.substr(j + 2, close - j - 2), c);
      if (in < 0) return kNpos;
      hit = hit || in == 1;
      j = close + 2;
      continue;
    }
    if (lo == '\\' && j + 1 < p.size()) lo = static_cast<unsigned char>(p[++j]);
    j++;
    if (j + 1 < p.size() && p[j] == '-' && p[j + 1] != ']') {
      auto hi = static_cast<unsigned char>(p[j + 1]);
      j += 2;
      if (hi == '\\' && j < p.size()) hi = static_cast<unsigned char>(p[j++]);
      hit = hit || (lo <= c && c <= hi);
    } else {
      hit = hit || c == lo;
    }
  }
  return kNpos;
}

// The `data` preset, by what each entry leaves out. Trees: a directory and everything below it;
// paths: globs on the whole path; names: globs on the last component.
struct PresetEntry {
  std::string_view glob;
  DataExclusion why;
};
constexpr std::array kPresetTrees = {
    PresetEntry{"/bin", DataExclusion::kProgram},
    PresetEntry{"/sbin", DataExclusion::kProgram},
    PresetEntry{"/usr/bin", DataExclusion::kProgram},
    PresetEntry{"/usr/sbin", DataExclusion::kProgram},
    PresetEntry{"/usr/local/bin", DataExclusion::kProgram},
    PresetEntry{"/usr/local/sbin", DataExclusion::kProgram},
    PresetEntry{"/usr/libexec", DataExclusion::kProgram},
    PresetEntry{"/etc/ld.so.conf.d", DataExclusion::kLoader},
    PresetEntry{"/var/cache/ldconfig", DataExclusion::kLoader},
    PresetEntry{"/usr/lib/locale", DataExclusion::kLocale},
    PresetEntry{"/usr/share/locale", DataExclusion::kLocale},
    PresetEntry{"/usr/share/locale-langpack", DataExclusion::kLocale},
    PresetEntry{"/usr/share/i18n", DataExclusion::kLocale},
    PresetEntry{"/usr/share/zoneinfo", DataExclusion::kLocale},
};
constexpr std::array kPresetPaths = {
    PresetEntry{"/etc/ld.so.*", DataExclusion::kLoader},
    // An installation's tree: /usr/lib/python3.11, a venv's, pyenv's or conda's lib/python3.x.
    PresetEntry{"*/lib/python[0-9]*", DataExclusion::kInterpreter},
    PresetEntry{"*/lib64/python[0-9]*", DataExclusion::kInterpreter},
    PresetEntry{"*/bin/python[0-9]*", DataExclusion::kInterpreter},
    PresetEntry{"*/.pyenv/*", DataExclusion::kInterpreter},
    PresetEntry{"*/site-packages/*.py", DataExclusion::kInterpreter},
    PresetEntry{"*/site-packages/*.pth", DataExclusion::kInterpreter},
    PresetEntry{"*/dist-packages/*.py", DataExclusion::kInterpreter},
    PresetEntry{"*/dist-packages/*.pth", DataExclusion::kInterpreter},
    PresetEntry{"*/__pycache__/*", DataExclusion::kInterpreter},
    PresetEntry{"/etc/localtime", DataExclusion::kLocale},
    PresetEntry{"*/gconv/gconv-modules*", DataExclusion::kLocale},
};
constexpr std::array kPresetNames = {
    PresetEntry{"*.so", DataExclusion::kLibrary},
    PresetEntry{"*.so.*", DataExclusion::kLibrary},
    PresetEntry{"*.pyc", DataExclusion::kInterpreter},
    PresetEntry{"__pycache__", DataExclusion::kInterpreter},
    PresetEntry{"pyvenv.cfg", DataExclusion::kInterpreter},
};

std::string JoinGlobs(const std::vector<std::string>& globs) {
  std::string out;
  for (const std::string& g : globs) {
    if (!out.empty()) out += ", ";
    out += g;
  }
  return out;
}

}  // namespace

bool GlobMatch(std::string_view p, std::string_view t) {
  size_t pi = 0, ti = 0;
  size_t star_p = kNpos, star_t = 0;  // where the last '*' resumes, and the text it took up to
  while (ti < t.size()) {
    if (pi < p.size()) {
      const char pc = p[pi];
      if (pc == '*') {
        star_p = ++pi;
        star_t = ti;
        continue;
      }
      if (pc == '?') {
        pi++;
        ti++;
        continue;
      }
      bool step = false;
      if (pc == '[') {
        bool in = false;
        const size_t end = MatchBracket(p, pi, static_cast<unsigned char>(t[ti]), &in);
        if (end != kNpos) {
          if (in) {
            pi = end;
            ti++;
            continue;
          }
          step = true;  // a bracket that does not match: backtrack
        }
      }
      if (!step) {
        const bool quoted = pc == '\\' && pi + 1 < p.size();
        if (p[quoted ? pi + 1 : pi] == t[ti]) {
          pi += quoted ? 2 : 1;
          ti++;
          continue;
        }
      }
    }
    // Mismatch: the last '*' takes one more byte, or there is none to take it.
    if (star_p == kNpos) return false;
    pi = star_p;
    ti = ++star_t;
  }
  while (pi < p.size() && p[pi] == '*') pi++;
  return pi == p.size();
}

Status CheckGlob(std::string_view option, std::string_view glob) {
  if (glob.empty()) return Status::Invalid("{}: empty pattern", option);
  const char c = glob[0];
  if (c != '/' && c != '*' && c != '?' && c != '[') {
    return Status::Invalid(
        "{} {}: patterns are matched on absolute paths; start it with / or * (e.g. '*/{}')",
        option, glob, glob);
  }
  for (size_t i = 0; i < glob.size(); i++) {
    if (glob[i] == '\\') {
      if (i + 1 == glob.size()) return Status::Invalid("{} {}: ends in a lone backslash", option, glob);
      i++;
    } else if (glob[i] == '[') {
      bool in = false;
      const size_t end = MatchBracket(glob, i, 0, &in);
      if (end == kNpos) {
        return Status::Invalid("{} {}: unterminated [...] or unknown [:class:] at byte {}",
                               option, glob, i);
      }
      i = end - 1;
    }
  }
  return Status::Ok();
}

std::string_view DataExclusionName(DataExclusion why) {
  switch (why) {
    case DataExclusion::kNone: return "";
    case DataExclusion::kProgram: return "program";
    case DataExclusion::kLoader: return "loader";
    case DataExclusion::kLibrary: return "library";
    case DataExclusion::kInterpreter: return "interpreter";
    case DataExclusion::kLocale: return "locale";
    case DataExclusion::kNotStorage: return "not storage";
  }
  return "";
}

DataExclusion DataPresetExcludes(std::string_view normalized, FileKind kind) {
  if (!IsStorage(kind)) return DataExclusion::kNotStorage;
  if (normalized.empty()) return DataExclusion::kNone;
  for (const PresetEntry& e : kPresetTrees)
    if (PathIsWithin(normalized, e.glob)) return e.why;
  for (const PresetEntry& e : kPresetPaths)
    if (GlobMatch(e.glob, normalized)) return e.why;
  const std::string_view name = BaseName(normalized);
  for (const PresetEntry& e : kPresetNames)
    if (GlobMatch(e.glob, name)) return e.why;
  return DataExclusion::kNone;
}

Result<ScopePreset> Scope::ParsePreset(std::string_view text) {
  if (text.empty() || text == "all") return ScopePreset::kAll;
  if (text == "data") return ScopePreset::kData;
  return Status::Invalid("--scope {}: expected data (leave out the loader, shared libraries, "
                         "interpreter files, locale data and pseudo files) or all",
                         text);
}

Result<Scope> Scope::Parse(std::string_view preset, const std::vector<std::string>& include,
                           const std::vector<std::string>& exclude) {
  Scope s;
  IOTWIN_ASSIGN_OR_RETURN(s.preset_, ParsePreset(preset));
  for (const std::string& g : include) IOTWIN_RETURN_IF_ERROR(CheckGlob("--include", g));
  for (const std::string& g : exclude) IOTWIN_RETURN_IF_ERROR(CheckGlob("--exclude", g));
  s.include_ = include;
  s.exclude_ = exclude;
  return s;
}

bool Scope::AdmitsPath(std::string_view normalized) const {
  if (!include_.empty()) {
    if (normalized.empty()) return false;
    bool any = false;
    for (const std::string& g : include_) {
      if (GlobMatch(g, normalized)) {
        any = true;
        break;
      }
    }
    if (!any) return false;
  }
  if (!normalized.empty()) {
    for (const std::string& g : exclude_)
      if (GlobMatch(g, normalized)) return false;
  }
  return preset_ != ScopePreset::kData ||
         DataPresetExcludes(normalized, FileKind::kStorage) == DataExclusion::kNone;
}

std::string Scope::Describe() const {
  if (IsAll()) return "all files";
  std::string out;
  if (preset_ == ScopePreset::kData) {
    out = "data: left out programs, the loader's cache, shared libraries, interpreter files, "
          "locale data and what is not storage (pseudo files, pipes, sockets, devices)";
  }
  if (!include_.empty()) {
    if (!out.empty()) out += "; ";
    out += "only paths matching " + JoinGlobs(include_);
  }
  if (!exclude_.empty()) {
    if (!out.empty()) out += "; ";
    out += "left out paths matching " + JoinGlobs(exclude_);
  }
  return out;
}

nlohmann::json Scope::ToJson() const {
  return nlohmann::json{{"preset", preset_ == ScopePreset::kData ? "data" : "all"},
                        {"include", include_},
                        {"exclude", exclude_},
                        {"description", Describe()}};
}

}  // namespace iotwin::model
