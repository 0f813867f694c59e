#include "interop/strace_line.h"

#include <cctype>
#include <unordered_map>

#include "base/checked_math.h"
#include "interop/symbols.h"
#include "interop/text_util.h"

namespace iotwin::interop::strace {

namespace {

constexpr uint64_t kNsPerDay = 86400ull * 1000000000ull;
// strace -r prints deltas; -ttt prints epoch seconds. Values below this are taken as deltas.
constexpr uint64_t kRelativeBelowNs = 100000000ull * 1000000000ull;  // 1e8 s (1973)

bool IsDecimalDigit(char c) { return c >= '0' && c <= '9'; }

bool IsCallNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '?';
}

std::optional<uint64_t> ParseTimeOfDay(std::string_view tok) {
  size_t c1 = tok.find(':');
  if (c1 == std::string_view::npos) return std::nullopt;
  size_t c2 = tok.find(':', c1 + 1);
  if (c2 == std::string_view::npos) return std::nullopt;
  auto h = ParseDec(tok.substr(0, c1));
  auto m = ParseDec(tok.substr(c1 + 1, c2 - c1 - 1));
  auto s = ParseSecondsToNs(tok.substr(c2 + 1));
  if (!h || !m || !s || *h > 23 || *m > 59 || *s > 61ull * 1000000000ull) return std::nullopt;
  return (*h * 3600 + *m * 60) * 1000000000ull + *s;
}

// The pid prefix: "[pid  123]" or "123 " (-o with -f). Sets h->pid; returns the index after it,
// or nullopt when malformed.
std::optional<size_t> ParsePidPrefix(std::string_view s, Head* h) {
  size_t i = 0;
  if (StartsWith(s, "[pid")) {
    i = 4;
    while (i < s.size() && s[i] == ' ') i++;
    size_t d = i;
    while (i < s.size() && IsDecimalDigit(s[i])) i++;
    auto pid = ParseDec(s.substr(d, i - d));
    if (!pid || *pid > UINT32_MAX || i >= s.size() || s[i] != ']') return std::nullopt;
    i++;
    h->has_pid = true;
    h->pid = static_cast<uint32_t>(*pid);
  } else if (!s.empty() && IsDecimalDigit(s[0])) {
    size_t d = 0;
    while (d < s.size() && IsDecimalDigit(s[d])) d++;
    if (d < s.size() && s[d] == ' ') {
      auto pid = ParseDec(s.substr(0, d));
      if (!pid || *pid > UINT32_MAX) return std::nullopt;
      h->has_pid = true;
      h->pid = static_cast<uint32_t>(*pid);
      i = d;
    }
  }
  return i;
}

}  // namespace

std::optional<Head> ParseHead(std::string_view s) {
  Head h;
  std::optional<size_t> after_pid = ParsePidPrefix(s, &h);
  if (!after_pid) return std::nullopt;
  size_t i = *after_pid;
  while (i < s.size() && s[i] == ' ') i++;
  if (i < s.size() && IsDecimalDigit(s[i])) {
    size_t e = s.find(' ', i);
    if (e == std::string_view::npos) return std::nullopt;
    std::string_view tok = s.substr(i, e - i);
    if (tok.find(':') != std::string_view::npos) {
      auto t = ParseTimeOfDay(tok);
      if (!t) return std::nullopt;
      h.ts = *t;
      h.kind = TsKind::kTimeOfDay;
    } else {
      auto t = ParseSecondsToNs(tok);
      if (!t) return std::nullopt;
      h.ts = *t;
      h.kind = *t < kRelativeBelowNs ? TsKind::kRelative : TsKind::kEpoch;
    }
    h.has_ts = true;
    i = e;
    while (i < s.size() && s[i] == ' ') i++;
  }
  h.body = s.substr(i);
  return h;
}

RetInfo ParseResult(std::string_view r) {
  RetInfo info;
  r = Trim(r);
  if (!r.empty() && r.back() == '>') {
    size_t lt = r.rfind(" <");
    if (lt != std::string_view::npos) {
      std::string_view inner = r.substr(lt + 2, r.size() - lt - 3);
      if (auto d = ParseSecondsToNs(inner)) {
        info.dur = *d;
        r = TrimRight(r.substr(0, lt));
      } else if (inner == "unavailable") {
        r = TrimRight(r.substr(0, lt));
      }
    }
  }
  size_t tok_end = r.find(' ');
  size_t lt = r.find('<');
  if (lt != std::string_view::npos && (tok_end == std::string_view::npos || lt < tok_end)) {
    size_t e = FindDecorationEnd(r, lt);
    tok_end = e == std::string_view::npos ? r.size() : e;
  }
  if (tok_end == std::string_view::npos) tok_end = r.size();
  std::string_view tok = r.substr(0, tok_end);
  std::string_view rest = Trim(r.substr(tok_end));
  if (tok != "?") {
    info.fd = ParseFd(tok);
    if (info.fd.number) {
      info.known = true;
      info.ret = *info.fd.number;
    }
  }
  if (!rest.empty() && rest[0] == 'E') {
    size_t sp = rest.find(' ');
    if (auto e = ErrnoValue(rest.substr(0, sp))) {
      info.known = true;
      info.ret = -*e;
    }
  }
  return info;
}

std::string_view CanonicalName(std::string_view name) {
  static const std::unordered_map<std::string_view, std::string_view> kAliases = {
      {"_llseek", "lseek"},
      {"llseek", "lseek"},
      {"fadvise64_64", "fadvise64"},
      {"arm_fadvise64_64", "fadvise64"},
      {"stat64", "stat"},
      {"lstat64", "lstat"},
      {"fstat64", "fstat"},
      {"fstatat64", "newfstatat"},
      {"sendfile64", "sendfile"},
      {"mmap2", "mmap"},
      {"old_mmap", "mmap"},
      {"ftruncate64", "ftruncate"},
      {"truncate64", "truncate"},
      {"pread", "pread64"},
      {"pwrite", "pwrite64"},
      {"oldstat", "stat"},
      {"oldlstat", "lstat"},
      {"oldfstat", "fstat"},
      {"sync_file_range2", "sync_file_range"},
      {"arm_sync_file_range", "sync_file_range"},
      {"fcntl64", "fcntl"},
  };
  auto it = kAliases.find(name);
  return it == kAliases.end() ? name : it->second;
}

size_t CallNameLength(std::string_view body) {
  size_t paren = 0;
  while (paren < body.size() && IsCallNameChar(body[paren])) paren++;
  if (paren == 0 || paren >= body.size() || body[paren] != '(') return 0;
  return paren;
}

CallParts SplitCall(std::string_view body, size_t paren) {
  CallParts c;
  c.name = body.substr(0, paren);
  constexpr std::string_view kUnfinished = "<unfinished ...>";
  if (EndsWith(body, kUnfinished)) {
    std::string_view args = body.substr(paren + 1, body.size() - kUnfinished.size() - paren - 1);
    if (!args.empty() && args.back() == ' ') args.remove_suffix(1);
    c.args = args;
    c.unfinished = true;
    return c;
  }
  size_t close = FindClose(body, paren);
  if (close == std::string_view::npos) {
    c.error = "unbalanced arguments";
    return c;
  }
  std::string_view after = TrimLeft(body.substr(close + 1));
  if (after.empty() || after[0] != '=') {
    c.error = "no '= result'";
    return c;
  }
  c.args = body.substr(paren + 1, close - paren - 1);
  c.result = after.substr(1);
  return c;
}

std::optional<ResumedParts> ParseResumed(std::string_view body) {
  std::string_view rest = body.substr(5);  // after "<... "
  size_t sp = rest.find(' ');
  if (sp == std::string_view::npos || !StartsWith(rest.substr(sp), " resumed>")) {
    return std::nullopt;
  }
  return ResumedParts{rest.substr(0, sp), rest.substr(sp + 9)};
}

JoinedCall JoinResumed(std::string_view name, std::string_view start_args, std::string_view tail) {
  JoinedCall j;
  // Older strace prints a space after "resumed>"; the unfinished part already ends with one.
  if (!tail.empty() && tail[0] == ' ' && !start_args.empty() && start_args.back() == ' ') {
    tail.remove_prefix(1);
  }
  j.text = std::string(name) + "(" + std::string(start_args) + std::string(tail);
  size_t close = FindClose(j.text, name.size());
  if (close == std::string::npos) {
    j.error = "unbalanced resumed arguments";
    return j;
  }
  std::string_view after = TrimLeft(std::string_view(j.text).substr(close + 1));
  if (after.empty() || after[0] != '=') {
    j.error = "no '= result' after resumed";
    return j;
  }
  j.args = j.text.substr(name.size() + 1, close - name.size() - 1);
  j.result = after.substr(1);
  return j;
}

uint64_t StraceClock::TimeOf(const Head& h, uint64_t lines, RecordSink* sink) {
  if (!h.has_ts) {
    // No timestamps: 1 µs per line keeps order and makes durations visible.
    if (!clock_set_) {
      sink->SetClock({{"clock", "synthetic"}});
      clock_set_ = true;
    }
    last_ts_ = lines * 1000;
    return last_ts_;
  }
  uint64_t ts = h.ts;
  if (h.kind == TsKind::kTimeOfDay) {
    // Midnight wraps: a step back of more than 12 h starts the next day.
    if (have_tod_ && ts + kNsPerDay / 2 < last_tod_) day_offset_ += kNsPerDay;
    have_tod_ = true;
    last_tod_ = ts;
    ts += day_offset_;
  } else if (h.kind == TsKind::kRelative) {
    relative_sum_ = SaturatingAdd(relative_sum_, ts);
    ts = relative_sum_;
  }
  if (!clock_set_) {
    clock_set_ = true;
    if (h.kind == TsKind::kEpoch) {
      // Timestamps stay CLOCK_REALTIME ns; the anchor maps them onto themselves so tools that
      // convert "monotonic" to wall time get the right answer.
      sink->SetClock({{"clock", "realtime"},
                      {"anchor", {{"monotonic_ns", ts}, {"realtime_ns", ts}, {"boottime_ns", 0}}}});
    } else if (h.kind == TsKind::kTimeOfDay) {
      sink->SetClock({{"clock", "time_of_day"}});
    } else {
      sink->SetClock({{"clock", "relative"}});
    }
  }
  last_ts_ = ts;
  return ts;
}

void StraceClock::Finish(RecordSink* sink) {
  if (clock_set_) return;
  sink->SetClock({{"clock", "synthetic"}});
  clock_set_ = true;
}

}  // namespace iotwin::interop::strace
