#include "interop/strace_tasks.h"

#include <sched.h>

#include <cstddef>
#include <cstring>

#include "format/records.h"
#include "interop/strace_importer.h"
#include "interop/symbols.h"
#include "interop/text_util.h"

namespace iotwin::interop::strace {

// Records held back while the pid of unprefixed lines is unknown.
constexpr size_t kMaxHeldRecords = 1 << 16;

void StraceTasks::BeginSource(uint32_t index, std::string_view name) {
  if (source_pid_.size() <= index) source_pid_.resize(index + 1, 0);
  size_t dot = name.rfind('.');
  if (dot != std::string_view::npos) {
    if (auto pid = ParseDec(name.substr(dot + 1)); pid && *pid > 0 && *pid <= UINT32_MAX) {
      source_pid_[index] = static_cast<uint32_t>(*pid);
    }
  }
}

Result<uint32_t> StraceTasks::PidOf(const Head& h, const LinePos& pos) {
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
  if (alive > 1) stats_->counters["unprefixed_lines_with_several_tasks"]++;
  if (best) return best->first;
  if (option_pid_ != 0) return option_pid_;
  if (!placeholder_used_) {
    placeholder_used_ = true;
    holding_ = true;
  }
  return uint32_t{0};
}

Task& StraceTasks::TaskFor(uint32_t pid) {
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

Task* StraceTasks::Find(uint32_t pid) {
  auto it = tasks_.find(pid);
  return it == tasks_.end() ? nullptr : &it->second;
}

std::optional<uint32_t> StraceTasks::PendingThreadCloneTgid() const {
  for (const auto& [pid, t] : tasks_) {
    if (t.pending && (t.pending->name == "clone" || t.pending->name == "clone3") &&
        t.pending->args.find("CLONE_THREAD") != std::string::npos) {
      return t.tgid;
    }
  }
  return std::nullopt;
}

void StraceTasks::NoteNotice(std::string_view notice) {
  constexpr std::string_view kPrefix = "strace: Process ";
  if (notice.size() < kPrefix.size()) {  // "strace: ..." notices of other kinds are shorter
    stats_->counters["strace_notices"]++;
    return;
  }
  std::string_view rest = notice.substr(kPrefix.size());
  size_t sp = rest.find(' ');
  auto pid = ParseDec(rest.substr(0, sp));
  if (pid && *pid <= UINT32_MAX && sp != std::string_view::npos &&
      StartsWith(rest.substr(sp + 1), "attached")) {
    announced_.insert(static_cast<uint32_t>(*pid));
  }
  stats_->counters["strace_notices"]++;
}

void StraceTasks::NoteClone(uint32_t child, uint32_t child_tgid) {
  child_tgid_[child] = child_tgid;
  if (auto it = tasks_.find(child); it != tasks_.end()) it->second.tgid = child_tgid;
}

bool StraceTasks::OthersAlive(uint32_t pid, uint32_t tgid) const {
  for (const auto& [q, t] : tasks_) {
    if (q != pid && t.alive && t.tgid == tgid) return true;
  }
  return false;
}

namespace {

template <typename T>
void PatchZeroField(std::vector<uint8_t>& bytes, size_t off, T value) {
  if (bytes.size() < off + sizeof(T)) return;
  T cur;
  std::memcpy(&cur, bytes.data() + off, sizeof cur);
  if (cur == 0) std::memcpy(bytes.data() + off, &value, sizeof value);
}

// A held record's zero pids (the placeholder's) become `pid`.
void PatchPlaceholderPid(std::vector<uint8_t>& bytes, uint32_t pid) {
  const auto* h = reinterpret_cast<const iot_rec_hdr*>(bytes.data());
  switch (h->type) {
    case IOT_REC_SYSCALL:
      PatchZeroField(bytes, offsetof(iot_syscall, tgid), pid);
      PatchZeroField(bytes, offsetof(iot_syscall, tid), pid);
      break;
    case IOT_REC_PROC: {
      PatchZeroField(bytes, offsetof(iot_proc, tgid), pid);
      PatchZeroField(bytes, offsetof(iot_proc, tid), pid);
      // Only a new thread's child_tgid is its process; an exec or an exit has none.
      uint16_t kind = 0;
      if (bytes.size() >= offsetof(iot_proc, kind) + sizeof kind) {
        std::memcpy(&kind, bytes.data() + offsetof(iot_proc, kind), sizeof kind);
      }
      if (kind == IOT_PROC_THREAD) PatchZeroField(bytes, offsetof(iot_proc, child_tgid), pid);
      break;
    }
    case IOT_REC_FD_SNAPSHOT:
      PatchZeroField(bytes, offsetof(iot_fd_snapshot, tgid), pid);
      break;
    case IOT_REC_IOVEC:
      PatchZeroField(bytes, offsetof(iot_iovec, tid), pid);
      break;
    case IOT_REC_ASYNC_IO:
      PatchZeroField(bytes, offsetof(iot_async_io, tgid), pid);
      PatchZeroField(bytes, offsetof(iot_async_io, tid), pid);
      break;
    default:
      break;
  }
}

}  // namespace

// Emit only ever resolves with the --pid option's pid, which is 0 whenever a placeholder exists.
Status StraceTasks::ResolvePlaceholder(uint32_t pid) {
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
    if (on_placeholder_resolved) on_placeholder_resolved(pid);
    stats_->counters["placeholder_pid_resolved"]++;
  } else {
    stats_->counters["placeholder_pid_unknown"]++;
  }
  for (auto& bytes : held_) {
    if (pid != 0) PatchPlaceholderPid(bytes, pid);
    IOTWIN_RETURN_IF_ERROR(sink_->Append(reinterpret_cast<const iot_rec_hdr*>(bytes.data())));
  }
  held_.clear();
  held_.shrink_to_fit();
  return Status::Ok();
}

Status StraceTasks::Finish() { return holding_ ? ResolvePlaceholder(option_pid_) : Status::Ok(); }

Status StraceTasks::Emit(const iot_rec_hdr* rec) {
  if (holding_) {
    const auto* p = reinterpret_cast<const uint8_t*>(rec);
    held_.emplace_back(p, p + rec->size);
    if (held_.size() >= kMaxHeldRecords) return ResolvePlaceholder(option_pid_);
    return Status::Ok();
  }
  return sink_->Append(rec);
}

// ---- the importer's task lines ------------------------------------------------------------------

Status StraceImporter::ExitLine(uint32_t pid, std::string_view body, uint64_t ts,
                                const LinePos& pos, std::string_view text) {
  Task& task = tasks_.TaskFor(pid);
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
    IOTWIN_RETURN_IF_ERROR(Complete(pid, pend.name, pend.args, "", pend.ts, pend.ts, true));
  }
  const uint32_t tgid = task.tgid;
  const bool others = tasks_.OthersAlive(pid, tgid);
  tasks_.Remove(pid);
  if (!others) {
    p.flags |= IOT_PROCF_GROUP_DEAD;
    fds_.DropProcess(tgid);  // readers drop it too: a later process of this number is new
    aio_.DropProcess(tgid);
  }
  return tasks_.Emit(p);
}

Status StraceImporter::Clone(uint32_t pid, Task& task, std::string_view name, const Args& a,
                             const RetInfo& r, uint64_t ts) {
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
    std::string_view group = FirstBraceGroup(a[0]);
    flags = FlagsValue(FieldValue(group, "flags")).value_or(0);
    if (auto sig = FieldValue(group, "exit_signal"); !sig.empty()) {
      flags |= FlagsValue(sig).value_or(0);
    }
  } else if (name == "vfork") {
    flags = CLONE_VFORK | CLONE_VM;
  }
  auto child = static_cast<uint32_t>(r.ret);
  bool thread = (flags & CLONE_THREAD) != 0;
  uint32_t child_tgid = thread ? task.tgid : child;
  tasks_.NoteClone(child, child_tgid);
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
  return tasks_.Emit(p);
}

// The child's descriptors and cwd at its parent's clone() result. strace -f often prints a
// child's first calls before that result: what the child opened then stays, and it inherits
// the parent's descriptors on the numbers it has not used (one it closed meanwhile comes back,
// a lesser error than losing what it opened).
void StraceImporter::InheritTables(uint32_t parent_tgid, uint32_t child) {
  const Task* t = tasks_.Find(child);
  bool child_has_fds = false;
  fds_.ForEachFd(child, [&](int32_t, const model::Descriptor&) { child_has_fds = true; });
  const bool seen = t != nullptr && t->alive && child_has_fds;
  if (!seen) fds_.Fork(parent_tgid, child);
  if (seen) {
    stats_.counters["child_seen_before_clone_result"]++;
    std::vector<std::pair<int32_t, model::Descriptor>> inherited;
    fds_.ForEachFd(parent_tgid, [&](int32_t fd, const model::Descriptor& d) {
      if (!fds_.Fd(child, fd)) inherited.emplace_back(fd, d);
    });
    for (const auto& [fd, d] : inherited) fds_.Bind(child, fd, d.desc, d.cloexec);
  }
  if (seen && fds_.Cwd(child).empty()) fds_.SetCwd(child, std::string(fds_.Cwd(parent_tgid)));
}

Status StraceImporter::Exec(uint32_t pid, Task& task, std::string_view name, const Args& a,
                            uint64_t ts) {
  size_t path_arg = name == "execveat" ? 1 : 0;
  std::optional<std::string> path;
  if (a.size() > path_arg) path = Unquote(a[path_arg]);
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
  return tasks_.Emit(p);
}

void StraceImporter::OnPlaceholderResolved(uint32_t pid) {
  fds_.RenameProcess(0, pid);
  aio_.RenameProcess(0, pid);
}

}  // namespace iotwin::interop::strace
