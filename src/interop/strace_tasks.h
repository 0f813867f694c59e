// The tasks of a strace log: which pid a line belongs to (prefixes, -ff file names, the only
// live task, a placeholder), each task's process (tgid, from clone results) and its call in
// flight ("<unfinished ...>"), and the gate every record passes (held while the placeholder's pid
// is unknown).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "interop/importer.h"
#include "interop/record_sink.h"
#include "interop/strace_line.h"

namespace iotwin::interop::strace {

// A call printed "<unfinished ...>" whose "<... resumed>" line has not come yet.
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

// Lines without a pid prefix belong to the only task alive. When strace writes to stderr, lines
// printed while only the first task exists carry no prefix and nothing tells its pid; that task
// is a placeholder (pid 0) until a later line identifies it (its first prefixed line, or
// set_tid_address/gettid/getpid results), and records are held back (bounded) until then.
class StraceTasks {
 public:
  StraceTasks(RecordSink* sink, ImportStats* stats, uint32_t option_pid)
      : sink_(sink), stats_(stats), option_pid_(option_pid) {}

  // Called when the placeholder becomes `pid` (non-zero): state kept per process moves from 0.
  std::function<void(uint32_t pid)> on_placeholder_resolved;

  // -ff writes FILE.<pid> per task, without pid prefixes.
  void BeginSource(uint32_t index, std::string_view name);
  Result<uint32_t> PidOf(const Head& h, const LinePos& pos);
  // The task `pid`, made when new. Callers must not hold a Task& across a call that may resolve
  // the placeholder with a pid != 0 (its entry moves).
  Task& TaskFor(uint32_t pid);
  Task* Find(uint32_t pid);
  // "strace: Process 123 attached" (also "... detached", "resumed").
  void NoteNotice(std::string_view notice);
  // A clone() result: `child` belongs to `child_tgid`.
  void NoteClone(uint32_t child, uint32_t child_tgid);
  // Whether a task of `tgid` other than `pid` is alive.
  bool OthersAlive(uint32_t pid, uint32_t tgid) const;
  // The task is gone: a later task with its number (a reused pid) starts alive and afresh, and
  // the walks over tasks cost what is alive, not every task the log ever had (fork storms).
  void Remove(uint32_t pid) { tasks_.erase(pid); }
  std::unordered_map<uint32_t, Task>& all() { return tasks_; }

  bool holding() const { return holding_; }
  // The placeholder is `pid` (0: still unknown): held records go out, patched.
  Status ResolvePlaceholder(uint32_t pid);
  // At the end of the log: held records go out with the --pid option's pid (or 0).
  Status Finish();

  Status Emit(const iot_rec_hdr* rec);
  template <typename T>
  requires(!std::is_pointer_v<T>) Status Emit(const T& rec) { return Emit(&rec.hdr); }

 private:
  std::optional<uint32_t> PendingThreadCloneTgid() const;

  RecordSink* sink_;
  ImportStats* stats_;
  uint32_t option_pid_;
  std::unordered_map<uint32_t, Task> tasks_;
  uint64_t next_created_ = 0;
  std::unordered_map<uint32_t, uint32_t> child_tgid_;  // clone() results: child -> tgid
  std::unordered_set<uint32_t> announced_;             // "Process N attached" notices
  std::vector<uint32_t> source_pid_;
  bool placeholder_used_ = false;
  bool holding_ = false;
  std::vector<std::vector<uint8_t>> held_;
};

}  // namespace iotwin::interop::strace
