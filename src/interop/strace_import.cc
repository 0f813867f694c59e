// The strace importer's lines and finished calls; its other jobs are in the files
// strace_importer.h lists. See docs/interop.md.
#include <string>
#include <unordered_map>

#include "format/op_info.h"
#include "format/records.h"
#include "interop/importer.h"
#include "interop/strace_importer.h"
#include "interop/text_util.h"

namespace iotwin::interop {
namespace strace {

StraceImporter::StraceImporter(RecordSink* sink, const ImportOptions& options)
    : Importer(sink, options), tasks_(sink, &stats_, options.pid), aio_(&tasks_, &stats_) {
  tasks_.on_placeholder_resolved = [this](uint32_t pid) { OnPlaceholderResolved(pid); };
}

nlohmann::json StraceImporter::Meta() const {
  return {{"tool", "iotwin import (strace)"},
          {"layers",
           {{"syscall", {{"enabled", true}, {"reason", "imported from strace"}}},
            {"memory", {{"enabled", false}, {"reason", "strace sees no page faults"}}},
            {"block", {{"enabled", false}, {"reason", "strace sees no block requests"}}}}}};
}

Status StraceImporter::BeginSource(uint32_t index, std::string_view name) {
  tasks_.BeginSource(index, name);
  return Status::Ok();
}

std::optional<uint64_t> StraceImporter::MergeKey(std::string_view text) const {
  auto h = ParseHead(text);
  if (!h || !h->has_ts || h->kind == TsKind::kRelative) return std::nullopt;
  // <... resumed> lines carry the return time: merge them by it too (they follow their start).
  return h->ts;
}

Status StraceImporter::Line(std::string_view text, const LinePos& pos) {
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
    tasks_.NoteNotice(TrimRight(text.substr(notice)));
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

  uint64_t ts = clock_.TimeOf(*head, stats_.lines, sink_);
  IOTWIN_ASSIGN_OR_RETURN(uint32_t pid, tasks_.PidOf(*head, pos));

  if (StartsWith(body, "+++ ")) return ExitLine(pid, body, ts, pos, text);
  if (StartsWith(body, "--- ")) {
    stats_.counters["signals"]++;
    tasks_.TaskFor(pid);
    return Status::Ok();
  }
  if (StartsWith(body, "<... ")) return ResumedLine(pid, body, ts, pos, text);
  return CallLine(pid, body, ts, pos, text);
}

Status StraceImporter::Finish() {
  for (auto& [pid, task] : tasks_.all()) {
    if (task.pending) {
      stats_.counters["unfinished_at_end"]++;
      Pending p = std::move(*task.pending);
      task.pending.reset();
      IOTWIN_RETURN_IF_ERROR(Complete(pid, p.name, p.args, "", p.ts, p.ts, true));
    }
  }
  IOTWIN_RETURN_IF_ERROR(tasks_.Finish());
  clock_.Finish(sink_);
  return Status::Ok();
}

Status StraceImporter::CallLine(uint32_t pid, std::string_view body, uint64_t ts,
                                const LinePos& pos, std::string_view text) {
  const size_t name_length = CallNameLength(body);
  if (name_length == 0) return Unknown(pos, text, "not a system call line");
  Task& task = tasks_.TaskFor(pid);
  const CallParts call = SplitCall(body, name_length);
  if (call.unfinished) {
    if (task.pending) {
      // A task has at most one call in flight; the previous one never resumed.
      stats_.counters["unfinished_never_resumed"]++;
      Pending old = std::move(*task.pending);
      IOTWIN_RETURN_IF_ERROR(Complete(pid, old.name, old.args, "", old.ts, old.ts, true));
    }
    task.pending = Pending{std::string(call.name), std::string(call.args), ts};
    return Status::Ok();
  }
  if (!call.error.empty()) return Unknown(pos, text, call.error);
  return Complete(pid, call.name, call.args, call.result, ts, ts, false);
}

Status StraceImporter::ResumedLine(uint32_t pid, std::string_view body, uint64_t ts,
                                   const LinePos& pos, std::string_view text) {
  const std::optional<ResumedParts> resumed = ParseResumed(body);
  if (!resumed) return Unknown(pos, text, "bad '<... resumed>' line");
  Task& task = tasks_.TaskFor(pid);
  if (!task.pending || task.pending->name != resumed->name) {
    // Its start was not in the log (the log began mid-call, or the line was lost).
    stats_.counters["resumed_without_start"]++;
    return Status::Ok();
  }
  Pending p = std::move(*task.pending);
  task.pending.reset();
  const JoinedCall call = JoinResumed(p.name, p.args, resumed->tail);
  if (!call.error.empty()) return Unknown(pos, text, call.error);
  return Complete(pid, p.name, call.args, call.result, p.ts, ts, false);
}

Status StraceImporter::Complete(uint32_t pid, std::string_view raw_name, std::string_view args_text,
                                std::string_view result, uint64_t start_ts, uint64_t end_ts,
                                bool interrupted) {
  RetInfo r = interrupted ? RetInfo{} : ParseResult(result);
  if (r.fd.nul_in_target) stats_.counters["names_with_nul"]++;
  uint64_t dur = r.dur ? *r.dur : (end_ts > start_ts ? end_ts - start_ts : 0);
  Args a = SplitTopLevel(args_text);
  std::string_view name = CanonicalName(raw_name);
  Task& task = tasks_.TaskFor(pid);

  if (name == "clone" || name == "clone3" || name == "fork" || name == "vfork") {
    return Clone(pid, task, name, a, r, start_ts);
  }
  if (name == "execve" || name == "execveat") {
    if (r.known && r.ret == 0) return Exec(pid, task, name, a, start_ts);
    stats_.skipped[std::string(name) + " (failed)"]++;
    return Status::Ok();
  }
  if ((name == "set_tid_address" || name == "gettid" || name == "getpid") && pid == 0 &&
      tasks_.holding() && r.known && r.ret > 0 && r.ret <= INT32_MAX) {
    IOTWIN_RETURN_IF_ERROR(tasks_.ResolvePlaceholder(static_cast<uint32_t>(r.ret)));
    stats_.skipped[std::string(name)]++;
    return Status::Ok();
  }
  auto op = OpFromName(name);
  if (!op) {
    stats_.skipped[std::string(name)]++;
    return Status::Ok();
  }
  return Syscall(pid, task, *op, raw_name, a, r, start_ts, dur, interrupted);
}

}  // namespace strace

std::unique_ptr<Importer> MakeStraceImporter(RecordSink* sink, const ImportOptions& options) {
  return std::make_unique<strace::StraceImporter>(sink, options);
}

}  // namespace iotwin::interop
