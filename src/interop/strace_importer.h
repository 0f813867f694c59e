// The strace importer (MakeStraceImporter): `strace -f -ttt -T -y` and its variants (-yy, -s N,
// -tt, -t, -r, no timestamps, pid prefixes of -o files and of stderr, -ff files). See
// docs/interop.md. Its jobs live in their own files:
//   strace_line.*   the grammar of a line (prefix, time, call, result, resumed lines), the clock
//   strace_args.*   decoders of printed arguments
//   strace_tasks.*  pids, tasks, the placeholder and the record gate; clone, exec and exit lines
//   strace_calls.cc one SYSCALL record per finished call, by the op's family
//   strace_aio.*    libaio requests (ASYNC_IO records)
//   strace_import.cc the lines' dispatch and the finished calls
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/op_info.h"
#include "interop/importer.h"
#include "interop/strace_aio.h"
#include "interop/strace_args.h"
#include "interop/strace_line.h"
#include "interop/strace_tasks.h"
#include "interop/strace_text.h"
#include "model/trace_state.h"

namespace iotwin::interop::strace {

// What the record builders leave for the call's update of the descriptor tables (Syscall).
struct CallOut {
  std::optional<std::string> path;  // the text of the record's first path, when it names one
  bool at_position = false;         // the call reads or writes at its descriptor's position
  bool offset_is_position = false;  // and its record's offset is that position
};

// One finished call being turned into a SYSCALL record.
struct CallText {
  uint32_t pid;
  Task& task;
  uint16_t op;
  std::string_view raw_name;
  const Args& a;
  const RetInfo& r;
  uint64_t ts;
  bool ok;
  CallOut* out;
};

class StraceImporter : public Importer {
 public:
  StraceImporter(RecordSink* sink, const ImportOptions& options);

  nlohmann::json Meta() const override;
  Status BeginSource(uint32_t index, std::string_view name) override;
  std::optional<uint64_t> MergeKey(std::string_view text) const override;
  Status Line(std::string_view text, const LinePos& pos) override;
  Status Finish() override;

 private:
  // ---- line kinds (strace_import.cc, strace_tasks.cc) ----
  Status ExitLine(uint32_t pid, std::string_view body, uint64_t ts, const LinePos& pos,
                  std::string_view text);
  Status CallLine(uint32_t pid, std::string_view body, uint64_t ts, const LinePos& pos,
                  std::string_view text);
  Status ResumedLine(uint32_t pid, std::string_view body, uint64_t ts, const LinePos& pos,
                     std::string_view text);
  // One finished call (or one that never returned: `interrupted`).
  Status Complete(uint32_t pid, std::string_view raw_name, std::string_view args_text,
                  std::string_view result, uint64_t start_ts, uint64_t end_ts, bool interrupted);

  // ---- tasks (strace_tasks.cc) ----
  Status Clone(uint32_t pid, Task& task, std::string_view name, const Args& a, const RetInfo& r,
               uint64_t ts);
  void InheritTables(uint32_t parent_tgid, uint32_t child);
  Status Exec(uint32_t pid, Task& task, std::string_view name, const Args& a, uint64_t ts);
  void OnPlaceholderResolved(uint32_t pid);

  // ---- SYSCALL records (strace_calls.cc) ----
  Status Syscall(uint32_t pid, Task& task, uint16_t op, std::string_view raw_name, const Args& a,
                 const RetInfo& r, uint64_t ts, uint64_t dur, bool interrupted);
  Status FillCall(const CallText& c, iot_syscall& sc, std::vector<uint64_t>* iov_lens);
  Status OpenCall(const CallText& c, iot_syscall& sc);
  Status DescriptorCall(const CallText& c, iot_syscall& sc);
  Status ReadWriteCall(const CallText& c, const OpInfo& info, iot_syscall& sc,
                       std::vector<uint64_t>* iov_lens);
  Status FdCall(const CallText& c, iot_syscall& sc);
  Status CopyCall(const CallText& c, iot_syscall& sc);
  Status MemoryCall(const CallText& c, iot_syscall& sc);
  Status PathCall(const CallText& c, iot_syscall& sc);
  Status AsyncCall(const CallText& c, iot_syscall& sc);
  Status EmitIovec(uint32_t tid, uint64_t ts, uint64_t count, const std::vector<uint64_t>& lens);

  // Descriptor argument: number plus -y decoration; a decorated descriptor this importer has not
  // seen opened is recorded once as an FD_SNAPSHOT (it was open before tracing started).
  Result<FdText> FdArg(uint32_t pid, Task& task, const Args& a, size_t i, uint64_t ts);
  // The descriptor argument `i` of a call (FdArg with the call's process, task and time).
  Result<FdText> FdAt(const CallText& c, size_t i) { return FdArg(c.pid, c.task, c.a, i, c.ts); }
  Status NoteCwd(uint32_t pid, Task& task, const std::string& cwd, uint64_t ts);
  Status PathArg(const Args& a, size_t i, uint32_t* id, uint16_t* sflags,
                 std::string* out = nullptr);
  static void SetIdentity(iot_syscall* sc, const FdText& fd);
  void CountFdResultOutOfRange(const RetInfo& r);
  // The call's effect on the descriptor tables, positions and cwd, by TraceState's rules
  // (OnSyscall); a read or write at its descriptor's position records the position TraceState
  // says it used, or 0 (counted) when that is not known.
  void ApplyToTables(iot_syscall& sc, const CallOut& out);
  // File sizes (known_sizes_): an O_APPEND write's record gets the size of its file after it,
  // where known (SizeOfAppend, before the tables see it); the call's effect on the sizes known
  // (NoteSizes, after).
  void SizeOfAppend(iot_syscall& sc);
  void NoteSizes(const iot_syscall& sc, const model::SyscallEffect& e);

  StraceClock clock_;
  StraceTasks tasks_;
  StraceAio aio_;
  // The traced processes' descriptor tables, positions and cwds: what the records emitted so
  // far mean. strace shows no file sizes: positions are not learnt from the offsets this
  // importer writes, and an O_APPEND write leaves its position unknown.
  model::TraceState fds_{model::TraceStateOptions{.learn_positions = false}};
  // The sizes of the files this importer knows, by path (strace shows none): a file it saw made
  // empty (opened O_TRUNC for writing, or created O_CREAT|O_EXCL), then changed only by the
  // writes and ftruncates it records. Forgotten on what it does not follow: a write at an
  // unknown position; all of them on fallocate, truncate by path, copies, async I/O, renames
  // and removals.
  std::unordered_map<std::string, uint64_t> known_sizes_;
  std::string carry_;
};

}  // namespace iotwin::interop::strace
