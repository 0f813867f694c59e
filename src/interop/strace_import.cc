// Importer for strace logs: `strace -f -ttt -T -y` and its variants (-yy, -s N, -tt, -t, -r, no
// timestamps, pid prefixes of -o files and of stderr, -ff files). See docs/interop.md.
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/file.h>
#include <xxhash.h>

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/checked_math.h"
#include "format/op_info.h"
#include "format/records.h"
#include "interop/importer.h"
#include "interop/strace_text.h"
#include "interop/symbols.h"
#include "interop/text_util.h"
#include "model/op_fields.h"
#include "model/trace_state.h"

namespace iotwin::interop {
namespace {

using strace::FdText;

constexpr uint64_t kNsPerDay = 86400ull * 1000000000ull;
// Records held back while the pid of unprefixed lines is unknown (see Placeholder below).
constexpr size_t kMaxHeldRecords = 1 << 16;
// The largest file position (loff_t).
constexpr uint64_t kMaxFilePosition = INT64_MAX;
// strace -r prints deltas; -ttt prints epoch seconds. Values below this are taken as deltas.
constexpr uint64_t kRelativeBelowNs = 100000000ull * 1000000000ull;  // 1e8 s (1973)

enum class TsKind { kNone, kEpoch, kRelative, kTimeOfDay };

// The file type and size strace printed in a stat structure ({st_mode=S_IFDIR|0755,
// st_size=4096, ...}, or stx_mode/stx_size for statx): a directory type is what tells a replay
// that "/" or a package directory is not a file. Type as DT_* (S_IF* >> 12), 0 when not shown.
void StatFields(std::string_view stat_text, iot_syscall* sc) {
  static constexpr std::pair<std::string_view, uint8_t> kTypes[] = {
      {"S_IFDIR", S_IFDIR >> 12}, {"S_IFREG", S_IFREG >> 12}, {"S_IFLNK", S_IFLNK >> 12},
      {"S_IFCHR", S_IFCHR >> 12}, {"S_IFBLK", S_IFBLK >> 12}, {"S_IFIFO", S_IFIFO >> 12},
      {"S_IFSOCK", S_IFSOCK >> 12}};
  std::string_view mode = strace::FieldValue(stat_text, "st_mode");
  if (mode.empty()) mode = strace::FieldValue(stat_text, "stx_mode");
  for (const auto& [name, type] : kTypes) {
    if (mode.substr(0, name.size()) == name &&
        (mode.size() == name.size() || mode[name.size()] == '|')) {
      sc->ftype = type;
    }
  }
  if (sc->ftype != (S_IFREG >> 12)) return;
  std::string_view size = strace::FieldValue(stat_text, "st_size");
  if (size.empty()) size = strace::FieldValue(stat_text, "stx_size");
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(size.data(), size.data() + size.size(), v);
  if (ec == std::errc() && end == size.data() + size.size() && !size.empty()) sc->fsize = v;
}

struct Head {
  bool has_pid = false;
  uint32_t pid = 0;
  bool has_ts = false;
  uint64_t ts = 0;  // ns: epoch, delta or time of day
  TsKind kind = TsKind::kNone;
  std::string_view body;
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

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

// "[pid  123] ", "123 " (-o with -f), then an optional timestamp.
std::optional<Head> ParseHead(std::string_view s) {
  Head h;
  size_t i = 0;
  if (StartsWith(s, "[pid")) {
    i = 4;
    while (i < s.size() && s[i] == ' ') i++;
    size_t d = i;
    while (i < s.size() && IsDigit(s[i])) i++;
    auto pid = ParseDec(s.substr(d, i - d));
    if (!pid || *pid > UINT32_MAX || i >= s.size() || s[i] != ']') return std::nullopt;
    i++;
    h.has_pid = true;
    h.pid = static_cast<uint32_t>(*pid);
  } else if (!s.empty() && IsDigit(s[0])) {
    size_t d = 0;
    while (d < s.size() && IsDigit(s[d])) d++;
    if (d < s.size() && s[d] == ' ') {
      auto pid = ParseDec(s.substr(0, d));
      if (!pid || *pid > UINT32_MAX) return std::nullopt;
      h.has_pid = true;
      h.pid = static_cast<uint32_t>(*pid);
      i = d;
    }
  }
  while (i < s.size() && s[i] == ' ') i++;
  if (i < s.size() && IsDigit(s[i])) {
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

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '?';
}

// The result part after "=": value, -y decoration, errno, -T duration.
struct RetInfo {
  bool known = false;  // "?" is unknown (exit_group, calls never returning)
  int64_t ret = 0;
  FdText fd;           // decoration of a returned descriptor
  std::optional<uint64_t> dur;
};

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
    size_t e = strace::FindDecorationEnd(r, lt);
    tok_end = e == std::string_view::npos ? r.size() : e;
  }
  if (tok_end == std::string_view::npos) tok_end = r.size();
  std::string_view tok = r.substr(0, tok_end);
  std::string_view rest = Trim(r.substr(tok_end));
  if (tok != "?") {
    info.fd = strace::ParseFd(tok);
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

// Maps strace's names (per-architecture spellings included) to iotwin op names.
std::string_view CanonicalName(std::string_view name) {
  static const std::unordered_map<std::string_view, std::string_view> kAliases = {
      {"_llseek", "lseek"},         {"llseek", "lseek"},         {"fadvise64_64", "fadvise64"},
      {"arm_fadvise64_64", "fadvise64"}, {"stat64", "stat"},     {"lstat64", "lstat"},
      {"fstat64", "fstat"},         {"fstatat64", "newfstatat"}, {"sendfile64", "sendfile"},
      {"mmap2", "mmap"},            {"old_mmap", "mmap"},        {"ftruncate64", "ftruncate"},
      {"truncate64", "truncate"},   {"pread", "pread64"},        {"pwrite", "pwrite64"},
      {"oldstat", "stat"},          {"oldlstat", "lstat"},       {"oldfstat", "fstat"},
      {"sync_file_range2", "sync_file_range"}, {"arm_sync_file_range", "sync_file_range"},
      {"fcntl64", "fcntl"},
  };
  auto it = kAliases.find(name);
  return it == kAliases.end() ? name : it->second;
}

uint64_t PathIdentity(std::string_view target) {
  uint64_t h = XXH3_64bits(target.data(), target.size());
  return h == 0 ? 1 : h;
}

std::string Basename(std::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

struct Pending {
  std::string name;
  std::string args;  // entry arguments printed before " <unfinished ...>"
  uint64_t ts = 0;
};

struct Task {
  uint32_t tgid = 0;
  bool alive = true;
  std::optional<Pending> pending;
  uint64_t created = 0;  // creation order
};

// One libaio request between io_submit and io_getevents.
struct AioRequest {
  uint8_t opcode = 0;
  int32_t fd = -1;
  uint64_t offset = 0, length = 0;
};

class StraceImporter : public Importer {
 public:
  using Importer::Importer;

  nlohmann::json Meta() const override {
    return {{"tool", "iotwin import (strace)"},
            {"layers",
             {{"syscall", {{"enabled", true}, {"reason", "imported from strace"}}},
              {"memory", {{"enabled", false}, {"reason", "strace sees no page faults"}}},
              {"block", {{"enabled", false}, {"reason", "strace sees no block requests"}}}}}};
  }

  Status BeginSource(uint32_t index, std::string_view name) override {
    // -ff writes FILE.<pid> per task, without pid prefixes.
    if (source_pid_.size() <= index) source_pid_.resize(index + 1, 0);
    size_t dot = name.rfind('.');
    if (dot != std::string_view::npos) {
      if (auto pid = ParseDec(name.substr(dot + 1)); pid && *pid > 0 && *pid <= UINT32_MAX) {
        source_pid_[index] = static_cast<uint32_t>(*pid);
      }
    }
    return Status::Ok();
  }

  std::optional<uint64_t> MergeKey(std::string_view text) const override {
    auto h = ParseHead(text);
    if (!h || !h->has_ts || h->kind == TsKind::kRelative) return std::nullopt;
    // <... resumed> lines carry the return time: merge them by it too (they follow their start).
    return h->ts;
  }

  Status Line(std::string_view text, const LinePos& pos) override {
    std::string joined;
    if (!carry_.empty()) {
      joined = carry_ + std::string(text);
      carry_.clear();
      text = joined;
    }
    // strace's own notices go to stderr; there they can land inside a line being printed:
    // "clone3({...}strace: Process 12 attached\n <unfinished ...>". The part before the notice
    // continues on the next line.
    size_t notice = text.find("strace: Process ");
    if (notice != std::string_view::npos) {
      HandleNotice(TrimRight(text.substr(notice)));
      if (Trim(text.substr(0, notice)).empty()) {
        stats_.comment_lines++;
      } else {
        carry_ = std::string(text.substr(0, notice));
      }
      return Status::Ok();
    }
    if (StartsWith(text, "strace: ")) {
      stats_.comment_lines++;
      return Status::Ok();
    }
    auto head = ParseHead(text);
    if (!head) return Unknown(pos, text, "bad pid prefix or timestamp");
    std::string_view body = TrimRight(head->body);
    if (body.empty()) return Unknown(pos, text, "no call after the prefix");

    uint64_t ts = TimeOf(*head);
    IOTWIN_ASSIGN_OR_RETURN(uint32_t pid, PidOf(*head, pos));

    if (StartsWith(body, "+++ ")) return ExitLine(pid, body, ts, pos, text);
    if (StartsWith(body, "--- ")) {
      stats_.counters["signals"]++;
      TaskFor(pid);
      return Status::Ok();
    }
    if (StartsWith(body, "<... ")) return ResumedLine(pid, body, ts, pos, text);
    return CallLine(pid, body, ts, pos, text);
  }

  Status Finish() override {
    for (auto& [pid, task] : tasks_) {
      if (task.pending) {
        stats_.counters["unfinished_at_end"]++;
        Pending p = std::move(*task.pending);
        task.pending.reset();
        LinePos none{"<end>", 0, 0, 0};
        IOTWIN_RETURN_IF_ERROR(Complete(pid, p.name, p.args, "", p.ts, p.ts, true, none));
      }
    }
    if (holding_) IOTWIN_RETURN_IF_ERROR(ResolvePlaceholder(options_.pid));
    if (!clock_set_) {
      sink_->SetClock({{"clock", "synthetic"}});
      clock_set_ = true;
    }
    return Status::Ok();
  }

 private:
  // ---- time ---------------------------------------------------------------------------------
  uint64_t TimeOf(const Head& h) {
    if (!h.has_ts) {
      // No timestamps: 1 µs per line keeps order and makes durations visible.
      if (!clock_set_) {
        sink_->SetClock({{"clock", "synthetic"}});
        clock_set_ = true;
      }
      last_ts_ = stats_.lines * 1000;
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
        sink_->SetClock({{"clock", "realtime"},
                         {"anchor", {{"monotonic_ns", ts}, {"realtime_ns", ts}, {"boottime_ns", 0}}}});
      } else if (h.kind == TsKind::kTimeOfDay) {
        sink_->SetClock({{"clock", "time_of_day"}});
      } else {
        sink_->SetClock({{"clock", "relative"}});
      }
    }
    last_ts_ = ts;
    return ts;
  }

  // ---- tasks ----------------------------------------------------------------------------------
  // Lines without a pid prefix belong to the only task alive. When strace writes to stderr, lines
  // printed while only the first task exists carry no prefix and nothing tells its pid; that task
  // is a placeholder (pid 0) until a later line identifies it (its first prefixed line, or
  // set_tid_address/gettid/getpid results), and records are held back (bounded) until then.
  Result<uint32_t> PidOf(const Head& h, const LinePos& pos) {
    if (h.has_pid) {
      if (holding_ && !tasks_.count(h.pid) && !announced_.count(h.pid)) {
        IOTWIN_RETURN_IF_ERROR(ResolvePlaceholder(h.pid));
      }
      return h.pid;
    }
    if (pos.source_index < source_pid_.size() && source_pid_[pos.source_index] != 0) {
      return source_pid_[pos.source_index];
    }
    // The only live task, or the oldest one when several are alive (counted: ambiguous).
    const std::pair<const uint32_t, Task>* best = nullptr;
    size_t alive = 0;
    for (const auto& kv : tasks_) {
      if (!kv.second.alive) continue;
      alive++;
      if (!best || kv.second.created < best->second.created) best = &kv;
    }
    if (alive > 1) stats_.counters["unprefixed_lines_with_several_tasks"]++;
    if (best) return best->first;
    if (options_.pid != 0) return options_.pid;
    if (!placeholder_used_) {
      placeholder_used_ = true;
      holding_ = true;
    }
    return uint32_t{0};
  }

  Task& TaskFor(uint32_t pid) {
    auto it = tasks_.find(pid);
    if (it != tasks_.end()) return it->second;
    Task t;
    t.created = next_created_++;
    auto c = child_tgid_.find(pid);
    if (c != child_tgid_.end()) {
      t.tgid = c->second;
    } else if (auto g = PendingThreadCloneTgid()) {
      // A new thread printed before its parent's clone() returned.
      t.tgid = *g;
    } else {
      t.tgid = pid;
    }
    return tasks_.emplace(pid, t).first->second;
  }

  std::optional<uint32_t> PendingThreadCloneTgid() const {
    for (const auto& [pid, t] : tasks_) {
      if (t.pending && (t.pending->name == "clone" || t.pending->name == "clone3") &&
          t.pending->args.find("CLONE_THREAD") != std::string::npos) {
        return t.tgid;
      }
    }
    return std::nullopt;
  }

  void HandleNotice(std::string_view notice) {
    // "strace: Process 123 attached" (also "... detached", "resumed").
    constexpr std::string_view kPrefix = "strace: Process ";
    if (notice.size() < kPrefix.size()) {  // "strace: ..." notices of other kinds are shorter
      stats_.counters["strace_notices"]++;
      return;
    }
    std::string_view rest = notice.substr(kPrefix.size());
    size_t sp = rest.find(' ');
    auto pid = ParseDec(rest.substr(0, sp));
    if (pid && *pid <= UINT32_MAX && sp != std::string_view::npos &&
        StartsWith(rest.substr(sp + 1), "attached")) {
      announced_.insert(static_cast<uint32_t>(*pid));
    }
    stats_.counters["strace_notices"]++;
  }

  // Callers must not hold a Task& across a call with pid != 0 (the placeholder entry moves). Emit
  // only ever resolves with options_.pid, which is 0 whenever a placeholder exists.
  Status ResolvePlaceholder(uint32_t pid) {
    holding_ = false;
    if (pid != 0) {
      auto it = tasks_.find(0);
      if (it != tasks_.end()) {
        Task t = it->second;
        tasks_.erase(it);
        if (t.tgid == 0) t.tgid = pid;
        tasks_.emplace(pid, t);
      }
      for (auto& [p, t] : tasks_) {
        if (t.tgid == 0) t.tgid = pid;
      }
      for (auto& [child, tgid] : child_tgid_) {
        if (tgid == 0) tgid = pid;
      }
      fds_.RenameProcess(0, pid);
      if (auto c = cwd_.find(0); c != cwd_.end()) {
        cwd_[pid] = c->second;
        cwd_.erase(0);
      }
      if (auto a = aio_.find(0); a != aio_.end()) {
        aio_[pid] = std::move(a->second);
        aio_.erase(0);
      }
      stats_.counters["placeholder_pid_resolved"]++;
    } else {
      stats_.counters["placeholder_pid_unknown"]++;
    }
    for (auto& bytes : held_) {
      if (pid != 0) Patch(bytes, pid);
      IOTWIN_RETURN_IF_ERROR(sink_->Append(reinterpret_cast<const iot_rec_hdr*>(bytes.data())));
    }
    held_.clear();
    held_.shrink_to_fit();
    return Status::Ok();
  }

  template <typename T>
  static void PatchField(std::vector<uint8_t>& bytes, size_t off, T value) {
    if (bytes.size() < off + sizeof(T)) return;
    T cur;
    std::memcpy(&cur, bytes.data() + off, sizeof cur);
    if (cur == 0) std::memcpy(bytes.data() + off, &value, sizeof value);
  }

  static void Patch(std::vector<uint8_t>& bytes, uint32_t pid) {
    const auto* h = reinterpret_cast<const iot_rec_hdr*>(bytes.data());
    switch (h->type) {
      case IOT_REC_SYSCALL:
        PatchField(bytes, offsetof(iot_syscall, tgid), pid);
        PatchField(bytes, offsetof(iot_syscall, tid), pid);
        break;
      case IOT_REC_PROC: {
        PatchField(bytes, offsetof(iot_proc, tgid), pid);
        PatchField(bytes, offsetof(iot_proc, tid), pid);
        // Only a new thread's child_tgid is its process; an exec or an exit has none.
        uint16_t kind = 0;
        if (bytes.size() >= offsetof(iot_proc, kind) + sizeof kind) {
          std::memcpy(&kind, bytes.data() + offsetof(iot_proc, kind), sizeof kind);
        }
        if (kind == IOT_PROC_THREAD) PatchField(bytes, offsetof(iot_proc, child_tgid), pid);
        break;
      }
      case IOT_REC_FD_SNAPSHOT:
        PatchField(bytes, offsetof(iot_fd_snapshot, tgid), pid);
        break;
      case IOT_REC_IOVEC:
        PatchField(bytes, offsetof(iot_iovec, tid), pid);
        break;
      case IOT_REC_ASYNC_IO:
        PatchField(bytes, offsetof(iot_async_io, tgid), pid);
        PatchField(bytes, offsetof(iot_async_io, tid), pid);
        break;
      default:
        break;
    }
  }

  Status Emit(const iot_rec_hdr* rec) {
    if (holding_) {
      const auto* p = reinterpret_cast<const uint8_t*>(rec);
      held_.emplace_back(p, p + rec->size);
      if (held_.size() >= kMaxHeldRecords) return ResolvePlaceholder(options_.pid);
      return Status::Ok();
    }
    return sink_->Append(rec);
  }
  template <typename T>
    requires(!std::is_pointer_v<T>)
  Status Emit(const T& rec) {
    return Emit(&rec.hdr);
  }

  // ---- line kinds ----------------------------------------------------------------------------
  Status ExitLine(uint32_t pid, std::string_view body, uint64_t ts, const LinePos& pos,
                  std::string_view text) {
    Task& task = TaskFor(pid);
    iot_proc p{};
    InitRecord(&p, IOT_REC_PROC);
    p.kind = IOT_PROC_EXIT;
    p.ts = ts;
    p.tgid = task.tgid;
    p.tid = pid;
    if (StartsWith(body, "+++ exited with ")) {
      std::string_view v = body.substr(16);
      size_t sp = v.find(' ');
      auto code = ParseDec(v.substr(0, sp));
      if (!code) return Unknown(pos, text, "bad exit status");
      p.exit_code = static_cast<int32_t>((*code & 0xff) << 8);
    } else if (StartsWith(body, "+++ killed by ")) {
      std::string_view v = body.substr(14);
      size_t sp = v.find(' ');
      auto sig = SignalValue(v.substr(0, sp));
      if (!sig) return Unknown(pos, text, "bad signal name");
      p.exit_code = *sig | (v.find("(core dumped)") != std::string_view::npos ? 0x80 : 0);
      p.flags |= IOT_PROCF_KILLED;
    } else if (StartsWith(body, "+++ superseded by execve")) {
      // This thread's pid lives on in the thread that called execve; no exit of its own.
      task.alive = false;
      stats_.counters["superseded_by_execve"]++;
      return Status::Ok();
    } else {
      return Unknown(pos, text, "unknown +++ line");
    }
    if (task.pending) {
      // The call never returned: the thread died inside it.
      Pending pend = std::move(*task.pending);
      task.pending.reset();
      stats_.counters["unfinished_at_exit"]++;
      IOTWIN_RETURN_IF_ERROR(Complete(pid, pend.name, pend.args, "", pend.ts, pend.ts, true, pos));
    }
    const uint32_t tgid = task.tgid;
    bool others = false;
    for (const auto& [q, t] : tasks_) {
      if (q != pid && t.alive && t.tgid == tgid) others = true;
    }
    // The task is gone: a later task with its number (a reused pid) starts alive and afresh, and
    // the walks over tasks cost what is alive, not every task the log ever had (fork storms).
    tasks_.erase(pid);
    if (!others) {
      p.flags |= IOT_PROCF_GROUP_DEAD;
      fds_.DropProcess(tgid);
      cwd_.erase(tgid);  // readers drop it too: a later process of this number records its own
      aio_.erase(tgid);
    }
    return Emit(p);
  }

  Status CallLine(uint32_t pid, std::string_view body, uint64_t ts, const LinePos& pos,
                  std::string_view text) {
    size_t paren = 0;
    while (paren < body.size() && IsNameChar(body[paren])) paren++;
    if (paren == 0 || paren >= body.size() || body[paren] != '(') {
      return Unknown(pos, text, "not a system call line");
    }
    std::string_view name = body.substr(0, paren);
    Task& task = TaskFor(pid);
    constexpr std::string_view kUnfinished = "<unfinished ...>";
    if (EndsWith(body, kUnfinished)) {
      std::string_view args = body.substr(paren + 1, body.size() - kUnfinished.size() - paren - 1);
      if (!args.empty() && args.back() == ' ') args.remove_suffix(1);
      if (task.pending) {
        // A task has at most one call in flight; the previous one never resumed.
        stats_.counters["unfinished_never_resumed"]++;
        Pending old = std::move(*task.pending);
        IOTWIN_RETURN_IF_ERROR(Complete(pid, old.name, old.args, "", old.ts, old.ts, true, pos));
      }
      task.pending = Pending{std::string(name), std::string(args), ts};
      return Status::Ok();
    }
    size_t close = strace::FindClose(body, paren);
    if (close == std::string_view::npos) return Unknown(pos, text, "unbalanced arguments");
    std::string_view after = TrimLeft(body.substr(close + 1));
    if (after.empty() || after[0] != '=') return Unknown(pos, text, "no '= result'");
    return Complete(pid, name, body.substr(paren + 1, close - paren - 1), after.substr(1), ts, ts,
                    false, pos);
  }

  Status ResumedLine(uint32_t pid, std::string_view body, uint64_t ts, const LinePos& pos,
                     std::string_view text) {
    std::string_view rest = body.substr(5);
    size_t sp = rest.find(' ');
    if (sp == std::string_view::npos || !StartsWith(rest.substr(sp), " resumed>")) {
      return Unknown(pos, text, "bad '<... resumed>' line");
    }
    std::string_view name = rest.substr(0, sp);
    std::string_view tail = rest.substr(sp + 9);  // after "resumed>"
    Task& task = TaskFor(pid);
    if (!task.pending || task.pending->name != name) {
      // Its start was not in the log (the log began mid-call, or the line was lost).
      stats_.counters["resumed_without_start"]++;
      return Status::Ok();
    }
    Pending p = std::move(*task.pending);
    task.pending.reset();
    // Older strace prints a space after "resumed>"; the unfinished part already ends with one.
    if (!tail.empty() && tail[0] == ' ' && !p.args.empty() && p.args.back() == ' ') {
      tail.remove_prefix(1);
    }
    std::string joined = p.name + "(" + p.args + std::string(tail);
    size_t close = strace::FindClose(joined, p.name.size());
    if (close == std::string::npos) return Unknown(pos, text, "unbalanced resumed arguments");
    std::string_view after = TrimLeft(std::string_view(joined).substr(close + 1));
    if (after.empty() || after[0] != '=') return Unknown(pos, text, "no '= result' after resumed");
    std::string args = joined.substr(p.name.size() + 1, close - p.name.size() - 1);
    return Complete(pid, p.name, args, after.substr(1), p.ts, ts, false, pos);
  }

  // ---- one finished call --------------------------------------------------------------------
  Status Complete(uint32_t pid, std::string_view raw_name, std::string_view args_text,
                  std::string_view result, uint64_t start_ts, uint64_t end_ts, bool interrupted,
                  const LinePos& pos) {
    RetInfo r = interrupted ? RetInfo{} : ParseResult(result);
    if (r.fd.nul_in_target) stats_.counters["names_with_nul"]++;
    uint64_t dur = r.dur ? *r.dur : (end_ts > start_ts ? end_ts - start_ts : 0);
    std::vector<std::string_view> a = strace::SplitTopLevel(args_text);
    std::string_view name = CanonicalName(raw_name);
    Task& task = TaskFor(pid);

    if (name == "clone" || name == "clone3" || name == "fork" || name == "vfork") {
      return Clone(pid, task, name, a, r, start_ts);
    }
    if (name == "execve" || name == "execveat") {
      if (r.known && r.ret == 0) return Exec(pid, task, name, a, start_ts);
      stats_.skipped[std::string(name) + " (failed)"]++;
      return Status::Ok();
    }
    if ((name == "set_tid_address" || name == "gettid" || name == "getpid") && pid == 0 &&
        holding_ && r.known && r.ret > 0 && r.ret <= INT32_MAX) {
      IOTWIN_RETURN_IF_ERROR(ResolvePlaceholder(static_cast<uint32_t>(r.ret)));
      stats_.skipped[std::string(name)]++;
      return Status::Ok();
    }
    auto op = OpFromName(name);
    if (!op) {
      stats_.skipped[std::string(name)]++;
      return Status::Ok();
    }
    return Syscall(pid, task, *op, raw_name, a, r, start_ts, dur, interrupted, pos);
  }

  Status Clone(uint32_t pid, Task& task, std::string_view name,
               const std::vector<std::string_view>& a, const RetInfo& r, uint64_t ts) {
    if (!r.known || r.ret <= 0 || r.ret > INT32_MAX) {
      stats_.skipped[std::string(name) + " (failed)"]++;
      return Status::Ok();
    }
    uint64_t flags = 0;
    if (name == "clone") {
      for (auto part : a) {
        if (StartsWith(part, "flags=")) flags = FlagsValue(part.substr(6)).value_or(0);
      }
    } else if (name == "clone3" && !a.empty()) {
      std::string_view group = strace::FirstBraceGroup(a[0]);
      flags = FlagsValue(strace::FieldValue(group, "flags")).value_or(0);
      if (auto sig = strace::FieldValue(group, "exit_signal"); !sig.empty()) {
        flags |= FlagsValue(sig).value_or(0);
      }
    } else if (name == "vfork") {
      flags = CLONE_VFORK | CLONE_VM;
    }
    auto child = static_cast<uint32_t>(r.ret);
    bool thread = (flags & CLONE_THREAD) != 0;
    uint32_t child_tgid = thread ? task.tgid : child;
    child_tgid_[child] = child_tgid;
    if (auto it = tasks_.find(child); it != tasks_.end()) it->second.tgid = child_tgid;
    if (!thread) InheritTables(task.tgid, child);
    iot_proc p{};
    InitRecord(&p, IOT_REC_PROC);
    p.kind = thread ? IOT_PROC_THREAD : IOT_PROC_FORK;
    p.ts = ts;
    p.clone_flags = flags;
    p.tgid = task.tgid;
    p.tid = pid;
    p.child_tgid = child_tgid;
    p.child_tid = child;
    return Emit(p);
  }

  // The child's descriptors and cwd at its parent's clone() result. strace -f often prints a
  // child's first calls before that result: what the child opened then stays, and it inherits
  // the parent's descriptors on the numbers it has not used (one it closed meanwhile comes back,
  // a lesser error than losing what it opened).
  void InheritTables(uint32_t parent_tgid, uint32_t child) {
    const auto t = tasks_.find(child);
    const bool seen = t != tasks_.end() && t->second.alive && fds_.HasProcess(child);
    if (!seen) fds_.Fork(parent_tgid, child);
    if (seen) {
      stats_.counters["child_seen_before_clone_result"]++;
      std::vector<std::pair<int32_t, model::Descriptor>> inherited;
      fds_.ForEachFd(parent_tgid, [&](int32_t fd, const model::Descriptor& d) {
        if (!fds_.Fd(child, fd)) inherited.emplace_back(fd, d);
      });
      for (const auto& [fd, d] : inherited) fds_.Bind(child, fd, d.desc, d.cloexec);
    }
    if (auto c = cwd_.find(parent_tgid); c != cwd_.end() && !(seen && cwd_.count(child))) {
      std::string cwd = c->second;
      cwd_[child] = cwd;
    }
  }

  Status Exec(uint32_t pid, Task& task, std::string_view name,
              const std::vector<std::string_view>& a, uint64_t ts) {
    size_t path_arg = name == "execveat" ? 1 : 0;
    std::optional<std::string> path;
    if (a.size() > path_arg) path = strace::Unquote(a[path_arg]);
    if (path && path->find('\0') != std::string::npos) {
      stats_.counters["names_with_nul"]++;
      path.reset();
    }
    iot_proc p{};
    InitRecord(&p, IOT_REC_PROC);
    p.kind = IOT_PROC_EXEC;
    p.ts = ts;
    p.tgid = task.tgid;
    p.tid = pid;
    if (path) {
      IOTWIN_ASSIGN_OR_RETURN(p.path_id, sink_->InternString(*path));
      std::string comm = Basename(*path).substr(0, sizeof p.comm - 1);
      std::memcpy(p.comm, comm.data(), comm.size());
    }
    fds_.Exec(task.tgid);
    return Emit(p);
  }

  // Descriptor argument: number plus -y decoration; a decorated descriptor this importer has not
  // seen opened is recorded once as an FD_SNAPSHOT (it was open before tracing started).
  Result<FdText> FdArg(uint32_t pid, Task& task, const std::vector<std::string_view>& a, size_t i,
                       uint64_t ts) {
    if (i >= a.size()) return FdText{};
    FdText fd = strace::ParseFd(a[i]);
    if (fd.nul_in_target) stats_.counters["names_with_nul"]++;
    if (!fd.number) return fd;
    if (*fd.number < INT32_MIN || *fd.number > INT32_MAX) {
      // strace prints descriptors as int: this names none, and is not cut onto one that may be
      // open.
      stats_.counters["descriptor_out_of_range"]++;
      fd.number = -1;
      return fd;
    }
    auto n = static_cast<int32_t>(*fd.number);
    if (n == AT_FDCWD) {
      if (fd.decorated) IOTWIN_RETURN_IF_ERROR(NoteCwd(pid, task, fd.target, ts));
      return fd;
    }
    if (fd.decorated && n >= 0 && !fds_.Fd(task.tgid, n)) {
      const model::DescriptionId id = fds_.NewDescription(0);
      if (model::OpenFileDescription* file = fds_.Description(id)) {
        file->ino = PathIdentity(fd.target);
        file->ftype = fd.ftype;
        fds_.Bind(task.tgid, n, id, false);
      }
      iot_fd_snapshot s{};
      InitRecord(&s, IOT_REC_FD_SNAPSHOT);
      s.tgid = task.tgid;
      s.ts = ts;
      s.ino = PathIdentity(fd.target);
      s.fd = n;
      s.ftype = fd.ftype;
      IOTWIN_ASSIGN_OR_RETURN(s.path_id, sink_->InternString(fd.target));
      IOTWIN_RETURN_IF_ERROR(Emit(s));
      stats_.counters["fds_open_before_trace"]++;
    }
    return fd;
  }

  Status NoteCwd(uint32_t pid, Task& task, const std::string& cwd, uint64_t ts) {
    auto& known = cwd_[task.tgid];
    if (known == cwd) return Status::Ok();
    known = cwd;
    iot_proc p{};
    InitRecord(&p, IOT_REC_PROC);
    p.kind = IOT_PROC_CWD;
    p.ts = ts;
    p.tgid = task.tgid;
    p.tid = pid;
    IOTWIN_ASSIGN_OR_RETURN(p.path_id, sink_->InternString(cwd));
    return Emit(p);
  }

  static std::optional<int64_t> IntArg(const std::vector<std::string_view>& a, size_t i) {
    if (i >= a.size()) return std::nullopt;
    std::string_view s = a[i];
    if (s == "NULL") return 0;
    // Pointers to offsets print as "[4096]" or "[0 => 4096]" (value at entry first).
    if (!s.empty() && s[0] == '[') {
      s.remove_prefix(1);
      size_t end = s.find_first_of(" ]");
      s = s.substr(0, end);
    }
    if (auto v = ParseCInt(s)) return v;
    if (auto f = FlagsValue(s)) return static_cast<int64_t>(*f);
    return std::nullopt;
  }
  // A close_range bound: strace prints it unsigned, or (older versions) as a descriptor, -y
  // decorated and the maximum as -1. nullopt when it is no 32-bit value.
  static std::optional<uint32_t> RangeBound(const std::vector<std::string_view>& a, size_t i) {
    if (i >= a.size()) return std::nullopt;
    const std::optional<int64_t> v = strace::ParseFd(a[i]).number;
    if (!v || *v < INT32_MIN || *v > int64_t{UINT32_MAX}) return std::nullopt;
    return static_cast<uint32_t>(*v);
  }
  static uint64_t UArg(const std::vector<std::string_view>& a, size_t i) {
    return static_cast<uint64_t>(IntArg(a, i).value_or(0));
  }
  static uint32_t FlagsArg(const std::vector<std::string_view>& a, size_t i) {
    if (i >= a.size()) return 0;
    return static_cast<uint32_t>(FlagsValue(a[i]).value_or(0));
  }

  // ---- locks ----
  // fcntl's command: the 32-bit ABI's *LK64 spellings are the same requests.
  static uint32_t FcntlCommand(std::string_view text) {
    text = Trim(text);
    if (text == "F_GETLK64") return F_GETLK;
    if (text == "F_SETLK64") return F_SETLK;
    if (text == "F_SETLKW64") return F_SETLKW;
    return static_cast<uint32_t>(FlagsValue(text).value_or(0));
  }
  static bool IsLockCommand(uint32_t cmd) {
    return cmd == F_GETLK || cmd == F_SETLK || cmd == F_SETLKW || cmd == F_OFD_GETLK ||
           cmd == F_OFD_SETLK || cmd == F_OFD_SETLKW;
  }
  // Lock types (F_RDLCK ...) and flock operations (LOCK_EX|LOCK_NB ...), or a number.
  static std::optional<uint64_t> LockSymbols(std::string_view expr) {
    static const std::unordered_map<std::string_view, uint64_t> kNames = {
        {"F_RDLCK", F_RDLCK}, {"F_WRLCK", F_WRLCK}, {"F_UNLCK", F_UNLCK}, {"LOCK_SH", LOCK_SH},
        {"LOCK_EX", LOCK_EX}, {"LOCK_NB", LOCK_NB}, {"LOCK_UN", LOCK_UN}};
    expr = Trim(expr);
    if (expr.empty()) return std::nullopt;
    uint64_t v = 0;
    for (size_t pos = 0; pos <= expr.size();) {
      size_t bar = expr.find('|', pos);
      std::string_view part = Trim(expr.substr(pos, bar == std::string_view::npos ? bar : bar - pos));
      if (auto it = kNames.find(part); it != kNames.end()) v |= it->second;
      else if (auto n = ParseCUnsigned(part)) v |= *n;
      else return std::nullopt;
      if (bar == std::string_view::npos) break;
      pos = bar + 1;
    }
    return v;
  }
  // "{l_type=F_WRLCK, l_whence=SEEK_SET, l_start=0, l_len=0}" into the record's lock fields
  // (op_fields.h: type in flags, whence in aux, start in offset, length in length). A struct
  // strace could not read (an address) leaves the type unknown (-1). For F_GETLK strace prints
  // the struct after the call: with no conflict its type is F_UNLCK, which no request can be, so
  // the request is taken as a write lock's.
  void LockRequest(std::string_view arg, iot_syscall* sc) {
    std::string_view group = strace::FirstBraceGroup(arg);
    auto type = LockSymbols(strace::FieldValue(group, "l_type"));
    if (group.empty() || !type) {
      sc->flags = static_cast<uint32_t>(-1);
      stats_.counters["lock_request_unknown"]++;
      return;
    }
    sc->flags = static_cast<uint32_t>(*type);
    if ((sc->mode == F_GETLK || sc->mode == F_OFD_GETLK) && *type == F_UNLCK) {
      sc->flags = F_WRLCK;
      stats_.counters["lock_query_type_assumed"]++;
    }
    sc->aux = FlagsValue(strace::FieldValue(group, "l_whence")).value_or(SEEK_SET);
    sc->offset = static_cast<uint64_t>(ParseCInt(strace::FieldValue(group, "l_start")).value_or(0));
    sc->length = static_cast<uint64_t>(ParseCInt(strace::FieldValue(group, "l_len")).value_or(0));
  }

  // Sum of iov_len in "[{iov_base=..., iov_len=4096}, ...]" (saturating); *lens gets each
  // length. *complete is false when strace left elements out: "[...]" (-s 0) or a trailing
  // "..." (more elements than -s allows).
  static uint64_t IovTotal(std::string_view iov, std::vector<uint64_t>* lens, bool* complete) {
    *complete = false;
    iov = Trim(iov);
    if (iov.size() < 2 || iov.front() != '[' || iov.back() != ']') return 0;
    iov = iov.substr(1, iov.size() - 2);
    *complete = true;
    uint64_t total = 0;
    for (auto part : strace::SplitTopLevel(iov)) {
      auto v = ParseCUnsigned(strace::FieldValue(part, "iov_len"));
      if (!v) {
        *complete = false;
        continue;
      }
      if (__builtin_add_overflow(total, *v, &total)) total = UINT64_MAX;
      lens->push_back(*v);
    }
    return total;
  }

  Status PathArg(const std::vector<std::string_view>& a, size_t i, uint32_t* id,
                 uint16_t* sflags, std::string* out = nullptr) {
    if (i >= a.size()) return Status::Ok();
    bool truncated = false;
    auto p = strace::Unquote(a[i], &truncated);
    if (!p) {
      *sflags |= IOT_SCF_PATH_FAULT;
      return Status::Ok();
    }
    if (p->find('\0') != std::string::npos) {
      // "\0" or "\x00" in the log: a name no system call can be given (the kernel reads a path
      // up to its first NUL). Left out, flagged unreadable, counted.
      *sflags |= IOT_SCF_PATH_FAULT;
      stats_.counters["names_with_nul"]++;
      return Status::Ok();
    }
    // Cut by -s, or longer than a trace string holds (the sink cuts it and counts it).
    if (truncated || p->size() > IOT_STRING_MAX) *sflags |= IOT_SCF_PATH_TRUNC;
    IOTWIN_ASSIGN_OR_RETURN(*id, sink_->InternString(*p));
    if (out) *out = std::move(*p);
    return Status::Ok();
  }

  static void SetIdentity(iot_syscall* sc, const FdText& fd) {
    if (fd.decorated && !fd.target.empty()) {
      sc->ino = PathIdentity(fd.target);
      sc->ftype = fd.ftype;
    } else {
      sc->sflags |= IOT_SCF_NO_FILE;
    }
  }

  // Position-dependent calls: the offset is the tracked file position where known.
  uint64_t PositionOf(uint32_t tgid, int32_t fd) {
    const model::OpenFileDescription* f = fds_.FdDescription(tgid, fd);
    if (f && f->pos_known) return f->pos;
    stats_.counters["io_at_unknown_position"]++;
    return 0;
  }
  void Advance(uint32_t tgid, int32_t fd, int64_t ret) {
    model::OpenFileDescription* f = fds_.FdDescription(tgid, fd);
    if (!f || !f->pos_known || ret <= 0) return;
    // Positions are loff_t: one carried past 2^63 - 1 is no position, the log is inconsistent.
    const auto n = static_cast<uint64_t>(ret);
    if (f->pos > kMaxFilePosition || n > kMaxFilePosition - f->pos) {
      f->pos_known = false;
      stats_.counters["position_past_largest_offset"]++;
      return;
    }
    f->pos += n;
  }

  // The descriptor a call returned; nullopt for a result past the descriptor range (a damaged
  // log), which must not be cut down onto a number that is open.
  std::optional<int32_t> NewFd(const RetInfo& r) {
    if (!r.known || r.ret < 0) return std::nullopt;
    if (r.ret > INT32_MAX) {
      stats_.counters["descriptor_result_out_of_range"]++;
      return std::nullopt;
    }
    return static_cast<int32_t>(r.ret);
  }

  // One call line being turned into a SYSCALL record.
  struct CallText {
    uint32_t pid;
    Task& task;
    uint16_t op;
    std::string_view raw_name;
    const std::vector<std::string_view>& a;
    const RetInfo& r;
    uint64_t ts;
    bool ok;
  };

  // The descriptor argument `i` of a call (FdArg with the call's process, task and time).
  Result<FdText> FdAt(const CallText& c, size_t i) { return FdArg(c.pid, c.task, c.a, i, c.ts); }

  Status Syscall(uint32_t pid, Task& task, uint16_t op, std::string_view raw_name,
                 const std::vector<std::string_view>& a, const RetInfo& r, uint64_t ts,
                 uint64_t dur, bool interrupted, const LinePos& pos) {
    (void)pos;
    fds_.NextRecord();
    iot_syscall sc{};
    InitRecord(&sc, IOT_REC_SYSCALL);
    sc.op = op;
    sc.ts = ts;
    sc.dur = dur;
    sc.tgid = task.tgid;
    sc.tid = pid;
    sc.ret = r.known ? r.ret : 0;
    sc.fd2 = -1;
    if (interrupted || !r.known) sc.sflags |= IOT_SCF_INTERRUPTED;
    const bool ok = r.known && r.ret >= 0;
    const CallText c{pid, task, op, raw_name, a, r, ts, ok};
    std::vector<uint64_t> iov_lens;
    IOTWIN_RETURN_IF_ERROR(FillCall(c, sc, &iov_lens));
    IOTWIN_RETURN_IF_ERROR(Emit(sc));
    if (!iov_lens.empty()) IOTWIN_RETURN_IF_ERROR(EmitIovec(pid, ts, sc.aux, iov_lens));
    if (op == IOT_OP_IO_SUBMIT && ok) IOTWIN_RETURN_IF_ERROR(AioSubmit(pid, task, a, r.ret, ts));
    if ((op == IOT_OP_IO_GETEVENTS || op == IOT_OP_IO_PGETEVENTS) && ok && r.ret > 0) {
      IOTWIN_RETURN_IF_ERROR(AioComplete(pid, task, a, SaturatingAdd(ts, dur)));
    }
    return Status::Ok();
  }

  // The record's fields from the call's arguments, by the family of the call (GetOpInfo); calls
  // of the other families name a path or a descriptor.
  Status FillCall(const CallText& c, iot_syscall& sc, std::vector<uint64_t>* iov_lens) {
    const OpInfo& info = GetOpInfo(c.op);
    switch (info.family) {
      case OpFamily::kUnknown:
        return Status::Ok();
      case OpFamily::kOpen:
        return OpenCall(c, sc);
      case OpFamily::kDescriptor:
        return DescriptorCall(c, sc);
      case OpFamily::kRead:
      case OpFamily::kWrite:
        return ReadWriteCall(c, info, sc, iov_lens);
      case OpFamily::kCopy:
        return CopyCall(c, sc);
      case OpFamily::kMemory:
        return MemoryCall(c, sc);
      case OpFamily::kAio:
      case OpFamily::kUring:
        return AsyncCall(c, sc);
      default:
        return info.path != PathRole::kNone ? PathCall(c, sc) : FdCall(c, sc);
    }
  }

  // Opens: the new descriptor's description (position, close-on-exec) is tracked.
  Status OpenCall(const CallText& c, iot_syscall& sc) {
    Task& task = c.task;
    const uint16_t op = c.op;
    const std::vector<std::string_view>& a = c.a;
    const RetInfo& r = c.r;
    const bool ok = c.ok;
    std::string path;
    switch (op) {
      case IOT_OP_OPEN:
      case IOT_OP_CREAT:
      case IOT_OP_OPENAT:
      case IOT_OP_OPENAT2: {
        size_t p = 0;
        if (op == IOT_OP_OPENAT || op == IOT_OP_OPENAT2) {
          IOTWIN_ASSIGN_OR_RETURN(FdText dir, FdAt(c, 0));
          sc.fd = static_cast<int32_t>(dir.number.value_or(AT_FDCWD));
          p = 1;
        } else {
          sc.fd = AT_FDCWD;
        }
        IOTWIN_RETURN_IF_ERROR(PathArg(a, p, &sc.path_id, &sc.sflags, &path));
        if (op == IOT_OP_CREAT) {
          sc.flags = O_CREAT | O_WRONLY | O_TRUNC;
          sc.mode = FlagsArg(a, 1);
        } else if (op == IOT_OP_OPENAT2) {
          std::string_view how = a.size() > 2 ? a[2] : std::string_view();
          sc.flags = static_cast<uint32_t>(FlagsValue(strace::FieldValue(how, "flags")).value_or(0));
          sc.mode = static_cast<uint32_t>(FlagsValue(strace::FieldValue(how, "mode")).value_or(0));
          sc.aux = FlagsValue(strace::FieldValue(how, "resolve")).value_or(0);
        } else {
          sc.flags = FlagsArg(a, p + 1);
          sc.mode = FlagsArg(a, p + 2);
        }
        SetIdentity(&sc, r.fd);
        if (sc.flags & O_DIRECTORY) sc.ftype = 4;
        if (const std::optional<int32_t> new_fd = ok ? NewFd(r) : std::nullopt) {
          // An O_APPEND descriptor writes at the end of a file whose size strace does not show.
          const model::DescriptionId id = fds_.NewDescription(sc.flags);
          if (model::OpenFileDescription* file = fds_.Description(id)) {
            file->pos_known = (sc.flags & O_APPEND) == 0;
            file->ino = sc.ino;
            file->ftype = sc.ftype;
            fds_.Bind(task.tgid, *new_fd, id, (sc.flags & O_CLOEXEC) != 0);
          }
        }
        break;
      }
      default:
        break;
    }
    return Status::Ok();
  }

  // close, close_range, dup*, fcntl, flock: the descriptor tables follow.
  Status DescriptorCall(const CallText& c, iot_syscall& sc) {
    Task& task = c.task;
    const uint16_t op = c.op;
    const std::vector<std::string_view>& a = c.a;
    const RetInfo& r = c.r;
    const bool ok = c.ok;
    std::string path;
    switch (op) {
      case IOT_OP_CLOSE: {
        IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
        sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
        SetIdentity(&sc, fd);
        // close releases the number even when it then fails (EINTR, EIO) or never returns;
        // EBADF: nothing was open. The rule of TraceState::OnSyscall.
        if (!(r.known && r.ret == -EBADF)) fds_.Close(task.tgid, sc.fd);
        break;
      }
      case IOT_OP_CLOSE_RANGE: {
        const std::optional<uint32_t> first = RangeBound(a, 0), last = RangeBound(a, 1);
        sc.fd = static_cast<int32_t>(first.value_or(0));
        sc.fd2 = static_cast<int32_t>(last.value_or(0));
        sc.flags = FlagsArg(a, 2);
        sc.sflags |= IOT_SCF_NO_FILE;
        if (!first || !last) {
          stats_.counters["close_range_bounds_unknown"]++;  // closes nothing rather than guess
        } else if (ok) {
          fds_.CloseRange(task.tgid, *first, *last, (sc.flags & CLOSE_RANGE_CLOEXEC) != 0);
        }
        break;
      }
      case IOT_OP_DUP:
      case IOT_OP_DUP2:
      case IOT_OP_DUP3: {
        IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
        sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
        if (op != IOT_OP_DUP) sc.fd2 = static_cast<int32_t>(strace::ParseFd(a.size() > 1 ? a[1] : "").number.value_or(-1));
        if (op == IOT_OP_DUP3) sc.flags = FlagsArg(a, 2);
        SetIdentity(&sc, fd.decorated ? fd : r.fd);
        if (const std::optional<int32_t> new_fd = ok ? NewFd(r) : std::nullopt) {
          fds_.Dup(task.tgid, sc.fd, *new_fd, model::OpResultCloexec(sc));
        }
        break;
      }
      case IOT_OP_FCNTL: {
        IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
        sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
        sc.mode = FcntlCommand(a.size() > 1 ? a[1] : std::string_view());
        if (IsLockCommand(sc.mode)) {
          LockRequest(a.size() > 2 ? a[2] : std::string_view(), &sc);
        } else {
          sc.aux = UArg(a, 2);
        }
        SetIdentity(&sc, fd);
        if (ok && (sc.mode == F_DUPFD || sc.mode == F_DUPFD_CLOEXEC)) {
          if (const std::optional<int32_t> new_fd = NewFd(r)) {
            fds_.Dup(task.tgid, sc.fd, *new_fd, sc.mode == F_DUPFD_CLOEXEC);
          }
        }
        if (ok && sc.mode == F_SETFD) fds_.SetCloexec(task.tgid, sc.fd, (sc.aux & FD_CLOEXEC) != 0);
        break;
      }
      case IOT_OP_FLOCK: {
        // flock(3</path>, LOCK_EX|LOCK_NB)
        IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
        sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
        sc.flags = static_cast<uint32_t>(LockSymbols(a.size() > 1 ? a[1] : std::string_view()).value_or(0));
        SetIdentity(&sc, fd);
        break;
      }
      default:
        break;
    }
    return Status::Ok();
  }

  // Reads and writes; vectored calls fill `iov_lens` (an IOVEC record follows).
  Status ReadWriteCall(const CallText& c, const OpInfo& info, iot_syscall& sc,
                       std::vector<uint64_t>* iov_lens) {
    Task& task = c.task;
    const uint16_t op = c.op;
    const std::vector<std::string_view>& a = c.a;
    const RetInfo& r = c.r;
    const bool ok = c.ok;
    switch (op) {
      case IOT_OP_READ:
      case IOT_OP_WRITE:
      case IOT_OP_READV:
      case IOT_OP_WRITEV:
      case IOT_OP_PREAD64:
      case IOT_OP_PWRITE64:
      case IOT_OP_PREADV:
      case IOT_OP_PWRITEV:
      case IOT_OP_PREADV2:
      case IOT_OP_PWRITEV2: {
        IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
        sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
        SetIdentity(&sc, fd);
        if (info.vectored) {
          bool complete = false;
          sc.length = IovTotal(a.size() > 1 ? a[1] : "", iov_lens, &complete);
          sc.aux = UArg(a, 2);
          if (!complete) {
            // strace -s 0 prints the array as "[...]": the request is not known. A successful
            // call moved at least its result; a failed one tells nothing.
            if (ok) {
              sc.length = std::max(sc.length, static_cast<uint64_t>(r.ret));
              stats_.counters["length_from_result"]++;
              sc.sflags |= IOT_SCF_APPROX_LENGTH;
            } else {
              stats_.counters["length_unknown"]++;
              sc.sflags |= IOT_SCF_APPROX_LENGTH;
            }
          }
        } else {
          sc.length = UArg(a, 2);
        }
        // pread64, pwrite64, preadv, pwritev: an offset argument; preadv2, pwritev2: an offset
        // or -1 for the current position, then flags.
        const bool or_current = info.offset == FieldUse::kOffsetOrCurrent;
        const bool positional = info.offset == FieldUse::kFileOffset || or_current;
        if (positional) sc.offset = UArg(a, 3);
        if (or_current) sc.flags = FlagsArg(a, 4);
        bool uses_position = !positional || (or_current &&
                                             static_cast<int64_t>(sc.offset) == -1);
        if (uses_position) {
          uint64_t at = PositionOf(task.tgid, sc.fd);
          if (!positional) sc.offset = at;
          if (ok) Advance(task.tgid, sc.fd, r.ret);
        }
        break;
      }
      default:
        break;
    }
    return Status::Ok();
  }

  // Calls on one descriptor: lseek, syncs, advice, space, fstat, getdents64.
  Status FdCall(const CallText& c, iot_syscall& sc) {
    Task& task = c.task;
    const uint16_t op = c.op;
    const std::string_view raw_name = c.raw_name;
    const std::vector<std::string_view>& a = c.a;
    const RetInfo& r = c.r;
    const bool ok = c.ok;
    switch (op) {
      case IOT_OP_LSEEK: {
        IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
        sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
        SetIdentity(&sc, fd);
        sc.offset = UArg(a, 1);
        sc.aux = UArg(a, 2);
        if (raw_name == "_llseek" || raw_name == "llseek") {
          // _llseek(fd, high, low, [result], whence)
          sc.offset = (UArg(a, 1) << 32) | (UArg(a, 2) & 0xffffffffu);
          sc.aux = UArg(a, 4);
        }
        if (ok) {
          if (model::OpenFileDescription* f = fds_.FdDescription(task.tgid, sc.fd)) {
            f->pos = static_cast<uint64_t>(r.ret);
            f->pos_known = true;
          }
        }
        break;
      }
      case IOT_OP_FSYNC:
      case IOT_OP_FDATASYNC:
      case IOT_OP_SYNCFS:
      case IOT_OP_FCHDIR:
      case IOT_OP_FSTAT:
      case IOT_OP_GETDENTS64: {
        IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
        sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
        SetIdentity(&sc, fd);
        if (op == IOT_OP_GETDENTS64) sc.length = UArg(a, 2);
        break;
      }
      case IOT_OP_SYNC_FILE_RANGE:
      case IOT_OP_FADVISE64:
      case IOT_OP_READAHEAD:
      case IOT_OP_FALLOCATE:
      case IOT_OP_FTRUNCATE: {
        IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
        sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
        SetIdentity(&sc, fd);
        if (op == IOT_OP_FALLOCATE) {
          sc.mode = FlagsArg(a, 1);
          sc.offset = UArg(a, 2);
          sc.length = UArg(a, 3);
        } else if (op == IOT_OP_FTRUNCATE) {
          sc.length = UArg(a, 1);
        } else {
          sc.offset = UArg(a, 1);
          sc.length = UArg(a, 2);
          if (op == IOT_OP_SYNC_FILE_RANGE) sc.flags = FlagsArg(a, 3);
          if (op == IOT_OP_FADVISE64) sc.aux = UArg(a, 3);
        }
        break;
      }
      default:
        break;
    }
    return Status::Ok();
  }

  // copy_file_range, splice, sendfile: the sides read or written at their position move.
  Status CopyCall(const CallText& c, iot_syscall& sc) {
    Task& task = c.task;
    const uint16_t op = c.op;
    const std::vector<std::string_view>& a = c.a;
    const RetInfo& r = c.r;
    const bool ok = c.ok;
    switch (op) {
      case IOT_OP_COPY_FILE_RANGE:
      case IOT_OP_SPLICE: {
        IOTWIN_ASSIGN_OR_RETURN(FdText in, FdAt(c, 0));
        IOTWIN_ASSIGN_OR_RETURN(FdText out, FdAt(c, 2));
        sc.fd = static_cast<int32_t>(in.number.value_or(-1));
        sc.fd2 = static_cast<int32_t>(out.number.value_or(-1));
        SetIdentity(&sc, in);
        sc.offset = UArg(a, 1);
        sc.aux = UArg(a, 3);
        sc.length = UArg(a, 4);
        sc.flags = FlagsArg(a, 5);
        if (ok) {
          if (a.size() > 1 && a[1] == "NULL") Advance(task.tgid, sc.fd, r.ret);
          if (a.size() > 3 && a[3] == "NULL") Advance(task.tgid, sc.fd2, r.ret);
        }
        break;
      }
      case IOT_OP_SENDFILE: {
        IOTWIN_ASSIGN_OR_RETURN(FdText out, FdAt(c, 0));
        IOTWIN_ASSIGN_OR_RETURN(FdText in, FdAt(c, 1));
        sc.fd = static_cast<int32_t>(out.number.value_or(-1));
        sc.fd2 = static_cast<int32_t>(in.number.value_or(-1));
        SetIdentity(&sc, out);
        sc.offset = UArg(a, 2);
        sc.length = UArg(a, 3);
        if (ok) {
          Advance(task.tgid, sc.fd, r.ret);
          if (a.size() > 2 && a[2] == "NULL") Advance(task.tgid, sc.fd2, r.ret);
        }
        break;
      }
      default:
        break;
    }
    return Status::Ok();
  }

  // Mappings.
  Status MemoryCall(const CallText& c, iot_syscall& sc) {
    const uint16_t op = c.op;
    const std::string_view raw_name = c.raw_name;
    const std::vector<std::string_view>& a = c.a;
    switch (op) {
      case IOT_OP_MMAP: {
        sc.aux = UArg(a, 0);
        sc.length = UArg(a, 1);
        sc.mode = FlagsArg(a, 2);
        sc.flags = FlagsArg(a, 3);
        IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 4));
        sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
        sc.offset = UArg(a, 5);
        // mmap2 counts in 4096-byte units; a count whose bytes pass 2^64 is no offset.
        if (raw_name == "mmap2" && __builtin_mul_overflow(sc.offset, uint64_t{4096}, &sc.offset)) {
          sc.offset = UINT64_MAX;
          stats_.counters["offset_out_of_range"]++;
        }
        SetIdentity(&sc, fd);
        break;
      }
      case IOT_OP_MUNMAP:
      case IOT_OP_MSYNC:
      case IOT_OP_MADVISE:
      case IOT_OP_MREMAP:
        sc.offset = UArg(a, 0);
        sc.length = UArg(a, 1);
        if (op == IOT_OP_MSYNC) sc.flags = FlagsArg(a, 2);
        if (op == IOT_OP_MADVISE) sc.aux = UArg(a, 2);
        if (op == IOT_OP_MREMAP) {
          sc.aux = UArg(a, 2);
          sc.flags = FlagsArg(a, 3);
        }
        sc.sflags |= IOT_SCF_NO_FILE;
        break;
      default:
        break;
    }
    return Status::Ok();
  }

  // Calls naming paths: stat family, directories, renames, links, truncate, chdir.
  Status PathCall(const CallText& c, iot_syscall& sc) {
    const uint32_t pid = c.pid;
    Task& task = c.task;
    const uint16_t op = c.op;
    const std::vector<std::string_view>& a = c.a;
    const uint64_t ts = c.ts;
    const bool ok = c.ok;
    std::string path;
    switch (op) {
      case IOT_OP_TRUNCATE:
        sc.fd = AT_FDCWD;
        IOTWIN_RETURN_IF_ERROR(PathArg(a, 0, &sc.path_id, &sc.sflags));
        sc.length = UArg(a, 1);
        break;
      case IOT_OP_STAT:
      case IOT_OP_LSTAT:
      case IOT_OP_MKDIR:
      case IOT_OP_UNLINK:
      case IOT_OP_RMDIR:
      case IOT_OP_CHDIR:
        sc.fd = AT_FDCWD;
        IOTWIN_RETURN_IF_ERROR(PathArg(a, 0, &sc.path_id, &sc.sflags, &path));
        if (op == IOT_OP_MKDIR) sc.mode = FlagsArg(a, 1);
        if (op == IOT_OP_CHDIR && ok && !path.empty() && path[0] == '/') {
          IOTWIN_RETURN_IF_ERROR(NoteCwd(pid, task, path, ts));
        }
        if ((op == IOT_OP_STAT || op == IOT_OP_LSTAT) && ok && a.size() > 1) StatFields(a[1], &sc);
        break;
      case IOT_OP_NEWFSTATAT:
      case IOT_OP_STATX:
      case IOT_OP_MKDIRAT:
      case IOT_OP_UNLINKAT: {
        IOTWIN_ASSIGN_OR_RETURN(FdText dir, FdAt(c, 0));
        sc.fd = static_cast<int32_t>(dir.number.value_or(AT_FDCWD));
        IOTWIN_RETURN_IF_ERROR(PathArg(a, 1, &sc.path_id, &sc.sflags));
        if (op == IOT_OP_NEWFSTATAT) sc.flags = FlagsArg(a, 3);
        if (op == IOT_OP_STATX) {
          sc.flags = FlagsArg(a, 2);
          sc.aux = FlagsArg(a, 3);
        }
        if (op == IOT_OP_MKDIRAT) sc.mode = FlagsArg(a, 2);
        if (op == IOT_OP_UNLINKAT) sc.flags = FlagsArg(a, 2);
        // fstat via newfstatat(fd, "", ..., AT_EMPTY_PATH): the file behind the fd.
        if (dir.decorated && sc.fd != AT_FDCWD) SetIdentity(&sc, dir);
        if (op == IOT_OP_NEWFSTATAT && ok && a.size() > 2) StatFields(a[2], &sc);
        if (op == IOT_OP_STATX && ok && a.size() > 4) StatFields(a[4], &sc);
        break;
      }
      case IOT_OP_RENAME:
      case IOT_OP_LINK:
      case IOT_OP_SYMLINK:
        sc.fd = AT_FDCWD;
        sc.fd2 = AT_FDCWD;
        IOTWIN_RETURN_IF_ERROR(PathArg(a, 0, &sc.path_id, &sc.sflags));
        IOTWIN_RETURN_IF_ERROR(PathArg(a, 1, &sc.path2_id, &sc.sflags));
        break;
      case IOT_OP_RENAMEAT:
      case IOT_OP_RENAMEAT2:
      case IOT_OP_LINKAT: {
        IOTWIN_ASSIGN_OR_RETURN(FdText d1, FdAt(c, 0));
        IOTWIN_ASSIGN_OR_RETURN(FdText d2, FdAt(c, 2));
        sc.fd = static_cast<int32_t>(d1.number.value_or(AT_FDCWD));
        sc.fd2 = static_cast<int32_t>(d2.number.value_or(AT_FDCWD));
        IOTWIN_RETURN_IF_ERROR(PathArg(a, 1, &sc.path_id, &sc.sflags));
        IOTWIN_RETURN_IF_ERROR(PathArg(a, 3, &sc.path2_id, &sc.sflags));
        if (op != IOT_OP_RENAMEAT) sc.flags = FlagsArg(a, 4);
        break;
      }
      case IOT_OP_SYMLINKAT: {
        IOTWIN_ASSIGN_OR_RETURN(FdText d2, FdAt(c, 1));
        sc.fd = AT_FDCWD;
        sc.fd2 = static_cast<int32_t>(d2.number.value_or(AT_FDCWD));
        IOTWIN_RETURN_IF_ERROR(PathArg(a, 0, &sc.path_id, &sc.sflags));
        IOTWIN_RETURN_IF_ERROR(PathArg(a, 2, &sc.path2_id, &sc.sflags));
        break;
      }
      default:
        break;
    }
    return Status::Ok();
  }

  // libaio and io_uring system calls (their requests are ASYNC_IO records).
  Status AsyncCall(const CallText& c, iot_syscall& sc) {
    const uint16_t op = c.op;
    const std::vector<std::string_view>& a = c.a;
    switch (op) {
      case IOT_OP_IO_SETUP:
      case IOT_OP_IO_URING_SETUP:
        sc.aux = UArg(a, 0);
        break;
      case IOT_OP_IO_SUBMIT:
        sc.aux = UArg(a, 1);
        break;
      case IOT_OP_IO_GETEVENTS:
      case IOT_OP_IO_PGETEVENTS:
        sc.aux = UArg(a, 1);
        break;
      case IOT_OP_IO_URING_ENTER:
      case IOT_OP_IO_URING_REGISTER: {
        IOTWIN_ASSIGN_OR_RETURN(FdText fd, FdAt(c, 0));
        sc.fd = static_cast<int32_t>(fd.number.value_or(-1));
        sc.aux = UArg(a, 1);
        if (op == IOT_OP_IO_URING_ENTER) {
          sc.mode = static_cast<uint32_t>(UArg(a, 2));
          sc.flags = FlagsArg(a, 3);
        }
        break;
      }
      default:
        break;
    }
    return Status::Ok();
  }

  Status EmitIovec(uint32_t tid, uint64_t ts, uint64_t count, const std::vector<uint64_t>& lens) {
    size_t n = std::min<size_t>(lens.size(), IOT_IOVEC_MAX);
    std::vector<uint8_t> buf(sizeof(iot_iovec) + n * 8, 0);
    auto* v = reinterpret_cast<iot_iovec*>(buf.data());
    InitRecord(v, IOT_REC_IOVEC);
    v->hdr.size = static_cast<uint16_t>(buf.size());
    v->tid = tid;
    v->count = static_cast<uint16_t>(std::min<uint64_t>(count ? count : lens.size(), UINT16_MAX));
    v->captured = static_cast<uint16_t>(n);
    v->ts = ts;
    std::memcpy(buf.data() + sizeof(iot_iovec), lens.data(), n * 8);
    return Emit(&v->hdr);
  }

  // An iocb's opcode as strace prints it: IOCB_CMD_<name> by the op table's libaio names, or a
  // number; 255 (no opcode) for anything else.
  static uint8_t LibaioOpcode(std::string_view text) {
    constexpr std::string_view kPrefix = "IOCB_CMD_";
    if (StartsWith(text, kPrefix) && text.size() > kPrefix.size()) {
      const std::string_view name = text.substr(kPrefix.size());
      for (unsigned op = 0; op < 255; op++) {
        if (AsyncOp(IOT_AIO_ENGINE_LIBAIO, static_cast<uint8_t>(op)).name == name) {
          return static_cast<uint8_t>(op);
        }
      }
    }
    return static_cast<uint8_t>(ParseCUnsigned(text).value_or(255));
  }

  // io_submit(ctx, nr, [{aio_data=.., aio_lio_opcode=IOCB_CMD_PREAD, aio_fildes=3, ...}, ...])
  Status AioSubmit(uint32_t pid, Task& task, const std::vector<std::string_view>& a, int64_t submitted,
                   uint64_t ts) {
    if (a.size() < 3) return Status::Ok();
    std::string_view list = Trim(a[2]);
    if (list.size() < 2 || list.front() != '[') return Status::Ok();
    uint64_t ctx = UArg(a, 0);
    int64_t n = 0;
    for (auto iocb : strace::SplitTopLevel(list.substr(1, list.size() - 2))) {
      if (n++ >= submitted) break;
      if (iocb == "...") {
        // strace -s N printed fewer iocbs than were submitted: their requests are not known.
        stats_.counters["iocbs_not_shown"] += static_cast<uint64_t>(submitted - (n - 1));
        break;
      }
      iot_async_io io{};
      InitRecord(&io, IOT_REC_ASYNC_IO);
      io.engine = IOT_AIO_ENGINE_LIBAIO;
      io.phase = IOT_AIO_SUBMIT;
      io.opcode = LibaioOpcode(strace::FieldValue(iocb, "aio_lio_opcode"));
      io.ts = ts;
      io.ctx = ctx;
      io.user_data = ParseCUnsigned(strace::FieldValue(iocb, "aio_data")).value_or(0);
      FdText fd = strace::ParseFd(strace::FieldValue(iocb, "aio_fildes"));
      io.fd = static_cast<int32_t>(fd.number.value_or(-1));
      io.offset = static_cast<uint64_t>(ParseCInt(strace::FieldValue(iocb, "aio_offset")).value_or(0));
      std::string_view nbytes = strace::FieldValue(iocb, "aio_nbytes");
      io.aflags = IOT_AIOF_BYTES;
      if (!nbytes.empty()) {
        io.length = ParseCUnsigned(nbytes).value_or(0);
      } else {
        std::vector<uint64_t> lens;
        bool complete = false;
        io.length = IovTotal(strace::FieldValue(iocb, "aio_buf"), &lens, &complete);
        io.iov_count = static_cast<uint16_t>(std::min<size_t>(lens.size(), UINT16_MAX));
        if (!complete) {
          stats_.counters["aio_length_unknown"]++;
          io.length = 0;
          io.aflags = IOT_AIOF_IOV_FAULT;  // readers take the completion's result
        }
      }
      io.rw_flags = static_cast<uint32_t>(FlagsValue(strace::FieldValue(iocb, "aio_rw_flags")).value_or(0));
      io.tgid = task.tgid;
      io.tid = pid;
      aio_[task.tgid][{ctx, io.user_data}] = AioRequest{io.opcode, io.fd, io.offset, io.length};
      IOTWIN_RETURN_IF_ERROR(Emit(io));
    }
    return Status::Ok();
  }

  // io_getevents(ctx, min, nr, [{data=.., obj=.., res=4096, res2=0}, ...], timeout)
  Status AioComplete(uint32_t pid, Task& task, const std::vector<std::string_view>& a,
                     uint64_t ts) {
    if (a.size() < 4) return Status::Ok();
    std::string_view list = Trim(a[3]);
    if (list.size() < 2 || list.front() != '[') return Status::Ok();
    uint64_t ctx = UArg(a, 0);
    for (auto ev : strace::SplitTopLevel(list.substr(1, list.size() - 2))) {
      iot_async_io io{};
      InitRecord(&io, IOT_REC_ASYNC_IO);
      io.engine = IOT_AIO_ENGINE_LIBAIO;
      io.phase = IOT_AIO_COMPLETE;
      io.ts = ts;
      io.ctx = ctx;
      io.user_data = ParseCUnsigned(strace::FieldValue(ev, "data")).value_or(0);
      io.res = ParseCInt(strace::FieldValue(ev, "res")).value_or(0);
      io.tgid = task.tgid;
      io.tid = pid;
      io.fd = -1;
      auto& inflight = aio_[task.tgid];
      if (auto it = inflight.find({ctx, io.user_data}); it != inflight.end()) {
        io.opcode = it->second.opcode;
        io.fd = it->second.fd;
        io.offset = it->second.offset;
        io.length = it->second.length;
        inflight.erase(it);
      }
      IOTWIN_RETURN_IF_ERROR(Emit(io));
    }
    return Status::Ok();
  }

  struct PairHash {
    size_t operator()(const std::pair<uint64_t, uint64_t>& p) const {
      return std::hash<uint64_t>()(p.first * 0x9e3779b97f4a7c15ull ^ p.second);
    }
  };

  std::unordered_map<uint32_t, Task> tasks_;
  uint64_t next_created_ = 0;
  std::unordered_map<uint32_t, uint32_t> child_tgid_;  // clone() results: child -> tgid
  std::unordered_set<uint32_t> announced_;            // "Process N attached" notices
  std::vector<uint32_t> source_pid_;
  bool placeholder_used_ = false;
  bool holding_ = false;
  std::vector<std::vector<uint8_t>> held_;
  // Descriptor tables of the traced processes (positions: PositionOf, Advance).
  model::TraceState fds_{model::TraceStateOptions{.keep_paths = false}};
  std::unordered_map<uint32_t, std::string> cwd_;
  std::unordered_map<uint32_t,
                     std::unordered_map<std::pair<uint64_t, uint64_t>, AioRequest, PairHash>>
      aio_;
  std::string carry_;
  bool clock_set_ = false;
  bool have_tod_ = false;
  uint64_t last_tod_ = 0, day_offset_ = 0, relative_sum_ = 0, last_ts_ = 0;
};

}  // namespace

std::unique_ptr<Importer> MakeStraceImporter(RecordSink* sink, const ImportOptions& options) {
  return std::make_unique<StraceImporter>(sink, options);
}

}  // namespace iotwin::interop
