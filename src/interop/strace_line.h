// The grammar of one strace output line: the pid prefix and timestamp ("[pid 12] ", "12 ",
// -t/-tt/-ttt/-r), a call's name, arguments and result ("= 3</f> <0.000012>", "= -1 ENOENT"),
// "<unfinished ...>" starts and "<... NAME resumed>" ends, and the clock the timestamps make.
// What the lines mean for tasks and records is the importer's (strace_import.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "interop/record_sink.h"
#include "interop/strace_text.h"

namespace iotwin::interop::strace {

enum class TsKind { kNone, kEpoch, kRelative, kTimeOfDay };

struct Head {
  bool has_pid = false;
  uint32_t pid = 0;
  bool has_ts = false;
  uint64_t ts = 0;  // ns: epoch, delta or time of day
  TsKind kind = TsKind::kNone;
  std::string_view body;
};

// "[pid  123] ", "123 " (-o with -f), then an optional timestamp; nullopt when malformed.
std::optional<Head> ParseHead(std::string_view s);

// The result part after "=": value, -y decoration, errno, -T duration.
struct RetInfo {
  bool known = false;  // "?" is unknown (exit_group, calls never returning)
  int64_t ret = 0;
  FdText fd;  // decoration of a returned descriptor
  std::optional<uint64_t> dur;
};
RetInfo ParseResult(std::string_view r);

// Maps strace's names (per-architecture spellings included) to iotwin op names.
std::string_view CanonicalName(std::string_view name);

// A line's parts, or the reason it is no such line (`error` non-empty).
struct CallParts {
  std::string_view name;
  std::string_view args;    // the text between the parentheses (before " <unfinished ...>")
  std::string_view result;  // after "=" (empty for an unfinished call)
  bool unfinished = false;
  std::string_view error;
};

// Length of the call name at the start of `body` when a '(' follows it; 0 when this is not a
// system call line.
size_t CallNameLength(std::string_view body);
// "name(args) = result" or "name(args <unfinished ...>", the name `name_length` long.
CallParts SplitCall(std::string_view body, size_t name_length);

// "<... NAME resumed>TAIL": NAME and TAIL; nullopt when the line is not of that form.
struct ResumedParts {
  std::string_view name, tail;
};
std::optional<ResumedParts> ParseResumed(std::string_view body);

// A resumed call made whole: `name(` + the arguments its start printed + the resumed tail.
struct JoinedCall {
  std::string text;  // holds what args and result view
  std::string args;
  std::string_view result;
  std::string_view error;
};
JoinedCall JoinResumed(std::string_view name, std::string_view start_args, std::string_view tail);

// The trace clock the line timestamps make: epoch seconds (CLOCK_REALTIME), time of day with
// midnight wraps, -r deltas summed, or 1 µs per line when the log has no timestamps. The first
// timestamp decides the header's clock.
class StraceClock {
 public:
  // The time of a line whose head is `h`; `lines` is the count of lines read so far.
  uint64_t TimeOf(const Head& h, uint64_t lines, RecordSink* sink);
  // At the end: a log without timestamps still gets a clock.
  void Finish(RecordSink* sink);

 private:
  bool clock_set_ = false;
  bool have_tod_ = false;
  uint64_t last_tod_ = 0, day_offset_ = 0, relative_sum_ = 0, last_ts_ = 0;
};

}  // namespace iotwin::interop::strace
