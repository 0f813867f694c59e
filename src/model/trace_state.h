// TraceState: the meaning of a trace as the traced kernel held it, rebuilt one record at a time.
//
// What it models, per traced process (by tgid):
// - threads (tid -> tgid) from IOT_REC_PROC records: fork copies the parent's descriptor table
//   (the copies share open file descriptions), cwd and file mappings; a thread start adds a
//   thread; exec closes the close-on-exec descriptors and drops the mappings; the last thread's
//   exit (or IOT_PROCF_GROUP_DEAD) drops the process;
// - the descriptor table: each descriptor points at a shared open file description and carries
//   its own close-on-exec flag (open O_CLOEXEC, dup3 O_CLOEXEC, F_DUPFD_CLOEXEC and io_uring_setup
//   set it; dup, dup2 and F_DUPFD clear it; F_SETFD and close_range CLOSE_RANGE_CLOEXEC change
//   it); close, close_range, dup2/dup3 over an open number;
// - open file descriptions: path (normalised, resolved against the cwd or dirfd), open flags,
//   access mode, O_APPEND, O_DIRECT and O_DIRECTORY decoded for the trace's machine
//   architecture (SetArch), the file position and whether it is known (implicit-offset reads,
//   writes and copies advance it, O_APPEND writes land at the end the record's file size shows,
//   lseek sets it, F_SETFL changes the settable flags; a position not known is learnt from the
//   first call that records one), and the file identity (dev, ino, ftype). Which descriptor a
//   call reads, writes or uses, and which offset field is whose, come from GetOpInfo. A
//   description lives while a descriptor or mapping of any process refers to it;
//   a call of another thread that started before a dup2/dup3/close replaced its descriptor
//   but reaches the state after it still sees the previous description (see Replaced);
// - the cwd (chdir, fchdir, attach/cwd records) and the resolution of *at() paths; a renamed
//   directory (rename, renameat, renameat2 with both path texts given to OnSyscall, or
//   RenamePaths) moves the paths of descriptions and the cwds at or below it, as the kernel's
//   dentries do; a renamed regular file's descriptions keep the name they were opened by;
// - file mappings (mmap, munmap, mremap, map snapshots): address ranges -> description and
//   file offset, split by partial unmaps and replaced by mappings over them (MAP_FIXED); a
//   mapping keeps its description alive, as vm_file does;
// - async contexts: libaio contexts from io_setup/io_destroy; io_uring instances are
//   descriptions marked `ring`.
//
// What it does not model: descriptor tables shared between processes (CLONE_FILES without
// CLONE_THREAD: each process gets a copy), fs structs shared by CLONE_FS, MREMAP_DONTUNMAP,
// anonymous mappings (an anonymous or unknown-file mmap only removes what it replaces), file
// contents, sizes, locks, the file set or any ordering between calls. The path text of a record
// comes from the caller (each consumer has its own string table); paths are bytes.
//
// Consumers attach data of their own to a description through its id, stable while the
// description lives, and the `user` slot (0 when the description is made); mappings have a
// `user` slot too. An id is reused only after its description is gone and the next record has
// been fed, so a consumer can still read the description a record just closed. OnSyscall
// returns what the call did (SyscallEffect) so that a hot consumer looks nothing up twice.
//
// Traces are untrusted: negative descriptor numbers are never stored, a descriptor table's
// memory follows the descriptors it holds (not the highest number named), close_range walks the
// descriptors that exist (not the range it is given), and the number of processes, threads,
// descriptors, descriptions, mappings and async contexts is capped (TraceStateLimits); what a cap
// turns away is counted in drops().
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "format/op_info.h"
#include "iotwin_abi.h"

namespace iotwin::model {

using DescriptionId = uint32_t;
inline constexpr DescriptionId kNoDescription = UINT32_MAX;

struct OpenFileDescription {
  std::string path;  // normalised absolute path; empty when unknown (or paths are not kept)
  uint64_t pos = 0;  // file position
  uint64_t ino = 0;
  uint32_t dev = 0;
  uint32_t flags = 0;  // open flags as recorded (the trace's architecture)
  uint32_t user = 0;   // the consumer's slot
  uint32_t refs = 0;   // descriptors and mappings that refer to it; 0: gone
  uint16_t ftype = 0;  // S_IFMT >> 12, 0 unknown
  uint8_t access = 0;  // flags & O_ACCMODE
  bool pos_known = false;
  bool append = false;
  bool direct = false;
  bool directory = false;  // opened O_DIRECTORY
  bool ring = false;       // an io_uring instance
  // The open that made it, for the hand-over rule (TraceState::SetHandoverRule): its thread and
  // its end (start + duration); 0 when the rule is off or the open had no duration.
  uint32_t open_tid = 0;
  uint64_t open_end = 0;
};

struct Descriptor {
  DescriptionId desc = kNoDescription;
  bool cloexec = false;
};

struct FileMapping {
  uint64_t start = 0, end = 0;  // [start, end), page-rounded
  uint64_t file_offset = 0;     // file offset of `start`
  uint32_t prot = 0, flags = 0;
  DescriptionId desc = kNoDescription;
  // The consumer's slot: kept by the pieces an unmap leaves, by the copies fork makes and by
  // the move of mremap; 0 for a new mapping.
  uint32_t user = 0;
};

struct AsyncContextState {
  uint64_t ctx = 0;  // the kernel's context id (libaio: the aio_context_t)
  uint32_t tgid = 0;
  uint32_t entries = 0;
};

struct TraceStateLimits {
  size_t processes = size_t{1} << 20;
  size_t threads = size_t{1} << 22;
  size_t descriptors = size_t{1} << 24;  // over all processes
  size_t descriptions = size_t{1} << 24;
  size_t mappings = size_t{1} << 22;
  size_t async_contexts = size_t{1} << 20;
};

struct TraceStateOptions {
  TraceStateLimits limits;
  // Paths of descriptions and cwds; a consumer that never asks for them saves the copies.
  bool keep_paths = true;
  // Whether a call's record teaches positions: a position not known is learnt from the offset
  // a read or write recorded, and an O_APPEND write lands at the end the record's file size
  // shows. A consumer that writes those offsets itself from a log that shows no sizes (the
  // strace importer) turns it off: a position not known stays unknown until lseek sets it, and
  // an O_APPEND write lands at the end its record's size shows when that is not 0 (the consumer
  // filled it: it knew the file's size), else leaves the position unknown.
  bool learn_positions = true;
  // A successful read or write at the current position, or lseek, on a descriptor the state
  // does not know (opened before the capture attached, no snapshot) makes it a description,
  // whose position that call tells.
  bool adopt_unknown = false;
};

// What the caps turned away, and records that named impossible values.
struct TraceStateDrops {
  uint64_t processes = 0, threads = 0, descriptors = 0, descriptions = 0, mappings = 0,
           async_contexts = 0;
  uint64_t bad_fds = 0;  // negative descriptor numbers a record tried to create
  // Positions a call would carry past 2^63 - 1 (loff_t): unknown from there, not wrapped.
  uint64_t positions_past_largest = 0;
};

// The effect of one system call, as OnSyscall applied it.
struct SyscallEffect {
  // The description of the call's data descriptor before the call (by GetOpInfo: the one read
  // from, else the one written to or used); kNoDescription when the call names none or it is
  // unknown. For close it is the description just closed.
  DescriptionId desc = kNoDescription;
  // Reads and writes: the file offset the call used (the explicit offset, the description's
  // position, the end of file for O_APPEND writes, or the recorded offset when the position is
  // not known) and whether it was known rather than taken from the record.
  uint64_t pos = 0;
  bool pos_known = false;
  // Opens, dups, io_uring_setup: the descriptor made and its description.
  int32_t new_fd = -1;
  DescriptionId created = kNoDescription;
  // Descriptors the call used that were the previous instances of their numbers (the hand-over
  // rule, SetHandoverRule): left as they were (reads, writes, lseek, close: 1; close_range: how
  // many of its range). A read or write then has no description and uses its recorded offset.
  uint32_t previous_instances = 0;
};

class TraceState {
 public:
  explicit TraceState(TraceStateOptions options = {});
  ~TraceState();
  TraceState(const TraceState&) = delete;
  TraceState& operator=(const TraceState&) = delete;

  // The traced machine, from the header's host.arch and host.page_size: flag values that differ
  // between architectures (O_DIRECT and O_DIRECTORY on arm, arm64 and powerpc) and mapping
  // granularity.
  void SetArch(std::string_view arch);
  void SetPageSize(uint64_t page_size);
  uint32_t o_append_flag() const { return o_append_; }
  uint32_t o_direct_flag() const { return o_direct_; }
  uint32_t o_directory_flag() const { return o_directory_; }

  // The descriptor hand-over rule, for a consumer that reads records in the order the capture
  // wrote them (at exit, stamped with their start): the close that freed a number, or a call on
  // the old file before it, can arrive after the open that reused the number. A call of another
  // thread that began before that open returned cannot have been handed the new number: it used
  // the number's previous instance, whose description is gone, and changes nothing here. The
  // rule needs start times and durations on one fine clock. (The replay model sorts calls by
  // start instead and corrects the same case in PostponeDescriptorHandovers.)
  void SetHandoverRule(bool on) { handover_rule_ = on; }
  static bool UsesPreviousInstance(const OpenFileDescription& d, const iot_syscall& sc) {
    return sc.ts < d.open_end && sc.tid != d.open_tid;
  }

  // ---- feeding records ----
  // `path` and `path2` are the texts of sc.path_id and sc.path2_id (nullopt: unknown). By
  // reference: a copy of a nullopt made at every call costs a stalled load (a hot path).
  SyscallEffect OnSyscall(const iot_syscall& sc,
                          const std::optional<std::string_view>& path = std::nullopt,
                          const std::optional<std::string_view>& path2 = std::nullopt);
  // `path`: the text of p.path_id (attach and cwd records carry the cwd).
  void OnProc(const iot_proc& p, std::optional<std::string_view> path = {});
  // Descriptors and mappings open before the capture attached.
  DescriptionId OnFdSnapshot(const iot_fd_snapshot& s, std::optional<std::string_view> path);
  void OnMapSnapshot(const iot_map_snapshot& s, std::optional<std::string_view> path);

  // ---- primitives (what the records do; for consumers that interleave their own logic) ----
  // Starts a record: the ids of descriptions gone during the previous one become reusable.
  // The On* calls do it; a consumer that drives the primitives alone calls it per record.
  void NextRecord() {
    if (!released_.empty()) ReleaseGone();  // most records release nothing (a hot path)
  }
  // A description with no references: it lives once Bind or Map refers to it, and is reused
  // after the next record otherwise. kNoDescription at the cap.
  DescriptionId NewDescription(uint32_t flags, std::string_view path = {});
  // Points descriptor `fd` of `tgid` at `desc` (closing what it held). False when refused
  // (negative fd, unknown description, cap).
  bool Bind(uint32_t tgid, int32_t fd, DescriptionId desc, bool cloexec);
  void Close(uint32_t tgid, int32_t fd);
  // close_range(first, last): closes, or with `cloexec_only` marks close-on-exec. `acted_on`
  // (when given) receives the descriptors it closed or marked, in ascending order.
  void CloseRange(uint32_t tgid, uint32_t first, uint32_t last, bool cloexec_only,
                  std::vector<uint64_t>* acted_on = nullptr);
  // newfd refers to oldfd's description; when oldfd is unknown newfd is closed (whatever it
  // held is gone). Nothing when newfd == oldfd.
  void Dup(uint32_t tgid, int32_t oldfd, int32_t newfd, bool cloexec);
  void SetCloexec(uint32_t tgid, int32_t fd, bool cloexec);
  // fcntl(F_SETFL, flags) on a description: the settable flags (O_APPEND, O_DIRECT, O_ASYNC,
  // O_NOATIME, O_NONBLOCK) take their values from `flags`, the access mode and creation flags
  // stay, and append/direct are decoded again. Nothing for an id out of range.
  void SetFlags(DescriptionId id, uint32_t flags);
  void Fork(uint32_t parent_tgid, uint32_t child_tgid);
  void Exec(uint32_t tgid);
  void DropProcess(uint32_t tgid);
  // Moves a process's state to another tgid (a placeholder pid resolved later).
  void RenameProcess(uint32_t from, uint32_t to);
  void SetCwd(uint32_t tgid, std::string_view normalized);
  // A directory renamed from `from` to `to` (both normalised): the paths of descriptions and
  // the cwds at or below `from` move below `to`, as the kernel's dentries do.
  void RenamePaths(std::string_view from, std::string_view to);
  // Maps [start, start + length) of `tgid` to `desc` (kNoDescription: only unmaps the range).
  // The new mapping, or nullptr when none was made (no description, cap).
  FileMapping* Map(uint32_t tgid, uint64_t start, uint64_t length, uint64_t file_offset,
                   uint32_t prot, uint32_t flags, DescriptionId desc);
  void Unmap(uint32_t tgid, uint64_t start, uint64_t end);

  // ---- queries ----
  const Descriptor* Fd(uint32_t tgid, int32_t fd) const {
    if (fd < 0) return nullptr;
    const Process* p = Find(tgid);
    if (!p) return nullptr;
    if (static_cast<size_t>(fd) < p->low.size()) {
      const Descriptor& d = p->low[static_cast<size_t>(fd)];
      return d.desc == kNoDescription ? nullptr : &d;
    }
    return HighFd(*p, fd);
  }
  DescriptionId DescriptionOf(uint32_t tgid, int32_t fd) const {
    const Descriptor* d = Fd(tgid, fd);
    return d ? d->desc : kNoDescription;
  }
  // nullptr for kNoDescription or an id out of range; a gone description (refs 0) stays
  // readable until the next record.
  OpenFileDescription* Description(DescriptionId id) {
    return id < descs_.size() ? &descs_[id] : nullptr;
  }
  const OpenFileDescription* Description(DescriptionId id) const {
    return id < descs_.size() ? &descs_[id] : nullptr;
  }
  // The description behind a descriptor, or nullptr.
  OpenFileDescription* FdDescription(uint32_t tgid, int32_t fd) {
    return Description(DescriptionOf(tgid, fd));
  }
  // Empty when unknown.
  std::string_view Cwd(uint32_t tgid) const;
  // `path` as the traced kernel resolves it for an *at() call with `dirfd` (AT_FDCWD: the cwd);
  // an empty path names the dirfd itself. nullopt when the base is unknown (or not absolute).
  std::optional<std::string> Resolve(uint32_t tgid, int dirfd, std::string_view path) const;
  // The mapping containing `addr` (after OnSyscall of an mmap: MappingAt(tgid, sc.ret)).
  const FileMapping* MappingAt(uint32_t tgid, uint64_t addr) const;
  FileMapping* MappingAt(uint32_t tgid, uint64_t addr) {
    return const_cast<FileMapping*>(std::as_const(*this).MappingAt(tgid, addr));
  }
  // Visits the mappings of `tgid` by address: visit(FileMapping&).
  template <typename F>
  void ForEachMapping(uint32_t tgid, F&& visit);
  // Visits the mappings of `tgid` that overlap [start, end), by address: visit(FileMapping&).
  template <typename F>
  void ForEachMappingIn(uint32_t tgid, uint64_t start, uint64_t end, F&& visit);
  // Visits each open descriptor of `tgid` in ascending order: visit(int32_t fd, const Descriptor&).
  template <typename F>
  void ForEachFd(uint32_t tgid, F&& visit) const;
  // Whether any descriptor of `tgid` refers to a description with this path.
  bool HasPath(uint32_t tgid, std::string_view path) const;
  const AsyncContextState* AsyncContext(uint64_t ctx) const;
  // The thread's process, or 0 when the thread is unknown.
  uint32_t TgidOf(uint32_t tid) const;
  bool HasProcess(uint32_t tgid) const { return procs_.count(tgid) != 0; }

  size_t process_count() const { return procs_.size(); }
  size_t descriptor_count() const { return descriptors_; }
  size_t description_count() const { return live_descs_; }
  size_t mapping_count() const { return mappings_; }
  // The descriptor slots the dense parts of all tables have allocated (a walk over the
  // processes): what the tables cost beyond their descriptors.
  size_t dense_descriptor_slots() const;
  const TraceStateDrops& drops() const { return drops_; }

 private:
  // The dense part of a table covers the numbers below its size; it grows to a number only
  // while that stays under kDenseFds and under kDenseSlack + 2 * the descriptors the process
  // holds, so its memory follows what is open. Every number of `high` is at least low.size()
  // (growing moves the numbers it passes into `low`): dense then sparse is ascending.
  static constexpr int32_t kDenseFds = 1024;
  static constexpr size_t kDenseSlack = 64;
  // A descriptor's previous description, kept for the calls (of other threads) that started
  // before the call that replaced it (dup2/dup3 over it, close, close_range) but reach the
  // state after it: records come in the order calls end, and a call resolves its descriptors in
  // the table as it stood at its start, as the model has it (the model sorts calls by start, so
  // a call that started before the replacing call's start sees the previous description; at an
  // equal start, file order). Only while the process has more than one thread; the entry holds
  // a reference, and goes when the number is replaced again, when a close that started before
  // the replacement closes it, or (the oldest) past kMaxReplaced per process.
  struct Replaced {
    int32_t fd = -1;
    DescriptionId desc = kNoDescription;
    uint64_t ts = 0;  // the start of the replacing call
  };
  static constexpr size_t kMaxReplaced = 64;
  struct Process {
    std::vector<Descriptor> low;  // desc kNoDescription: closed
    std::map<int32_t, Descriptor> high;
    uint32_t fds = 0;  // descriptors held, in low and high
    std::string cwd;
    std::map<uint64_t, FileMapping> maps;  // by start
    uint32_t live_threads = 0;
    uint32_t async_contexts = 0;  // libaio contexts it set up (entries of aio_)
    std::vector<Replaced> replaced;  // at most kMaxReplaced; see Replaced
    uint64_t replaced_latest = 0;    // no entry started after this (a filter for the hot path)
  };

  // The last process found answers without the hash lookup (a hot path).
  Process* Find(uint32_t tgid) {
    return last_proc_ && last_tgid_ == tgid ? last_proc_ : FindSlow(tgid);
  }
  const Process* Find(uint32_t tgid) const {
    return last_proc_ && last_tgid_ == tgid ? last_proc_ : FindSlow(tgid);
  }
  Process* FindSlow(uint32_t tgid) const;
  static const Descriptor* HighFd(const Process& p, int32_t fd);
  // The description behind descriptor `fd` (>= 0) of `p`, kNoDescription when none.
  static DescriptionId DescriptionIn(const Process& p, int32_t fd) {
    if (static_cast<size_t>(fd) < p.low.size()) return p.low[static_cast<size_t>(fd)].desc;
    const Descriptor* d = HighFd(p, fd);
    return d ? d->desc : kNoDescription;
  }
  Process* Get(uint32_t tgid);  // creates; nullptr at the cap
  Descriptor* Slot(Process& p, int32_t fd);
  void CloseIn(Process& p, int32_t fd);
  void Ref(DescriptionId id) { descs_[id].refs++; }
  void Unref(DescriptionId id);
  void ReleaseGone();  // NextRecord's work
  // Records that thread `tid` belongs to `tgid`. Every record calls it: a thread already known
  // with that process is answered from known_threads_ without the hash lookup.
  void NoteThread(uint32_t tid, uint32_t tgid) {
    if (tid == 0) return;
    const KnownThread& k = known_threads_[tid % kKnownThreads];
    if (k.tid == tid && k.tgid == tgid) return;
    NoteThreadSlow(tid, tgid);
  }
  void NoteThreadSlow(uint32_t tid, uint32_t tgid);
  void ForgetKnownThread(uint32_t tid) {
    KnownThread& k = known_threads_[tid % kKnownThreads];
    if (k.tid == tid) k = KnownThread{};
  }
  void UnmapIn(Process& p, uint64_t start, uint64_t end);
  void Decode(OpenFileDescription& d) const;
  void LearnIdentity(OpenFileDescription& d, const iot_syscall& sc) const;
  uint64_t PageRound(uint64_t n) const;
  void Advance(DescriptionId id, uint64_t pos, uint64_t n);

  void OnOpen(const iot_syscall& sc, std::optional<std::string_view> path, SyscallEffect& e);
  // `ok`: the call succeeded (OnSyscall's test, passed rather than made again per call).
  void OnDataPosition(const iot_syscall& sc, const OpInfo& info, bool ok, SyscallEffect& e);
  // The calls that change descriptor tables, cwds, mappings or async contexts (OnSyscall's
  // other part): opens, closes, dups, fcntl, chdir, mmap, renames, io_setup, ...
  void OnTableCall(const iot_syscall& sc, const std::optional<std::string_view>& path,
                   const std::optional<std::string_view>& path2, bool ok, SyscallEffect& e);
  // The hand-over rule's part of OnSyscall (see SetHandoverRule): whether the call used a
  // previous instance, and close_range over descriptors some of which are.
  bool UsedPreviousInstance(const iot_syscall& sc, const OpInfo& info, bool ok, SyscallEffect& e);
  uint32_t CloseRangeHandingOver(const iot_syscall& sc, bool cloexec_only);
  // adopt_unknown: the description of an unknown descriptor that call `sc` used.
  DescriptionId Adopt(const iot_syscall& sc);
  void OnFcntl(const iot_syscall& sc, SyscallEffect& e);
  // Replaced entries (see Replaced): remembers that the call `sc` is about to replace fd's
  // description; finds the entry of fd a call that started at `ts` still sees; forgets one.
  void RememberReplaced(const iot_syscall& sc, int32_t fd);
  Replaced* ReplacedFor(uint32_t tgid, int32_t fd, uint64_t ts) {
    Process* p = Find(tgid);
    if (!p || p->replaced.empty() || fd < 0) return nullptr;  // most calls: nothing replaced
    return ReplacedIn(*p, fd, ts);
  }
  static Replaced* ReplacedIn(Process& p, int32_t fd, uint64_t ts);
  void ForgetReplaced(Process& p, Replaced* r);
  // rename, renameat, renameat2 (RENAME_EXCHANGE swaps the two names).
  void OnRename(const iot_syscall& sc, std::optional<std::string_view> path,
                std::optional<std::string_view> path2);
  // RenamePaths with `exchange` (the paths below `to` move below `from` too) and with
  // `from_is_dir` false when the renamed object's type is unknown: a description at `from`
  // itself then moves only when it is known to be a directory, since a regular file's
  // descriptions keep the name they were opened by (as the model's files do); cwds always move.
  void MovePaths(std::string_view from, std::string_view to, bool exchange, bool from_is_dir);
  void OnMemory(const iot_syscall& sc);
  void OnExit(const iot_proc& p);
  void AddAsyncContext(uint32_t tgid, uint64_t ctx, uint32_t entries);
  void RemoveAsyncContext(uint64_t ctx);

  TraceStateOptions options_;
  uint32_t o_append_ = 02000;
  uint32_t o_direct_ = 040000;
  uint32_t o_directory_ = 0200000;
  uint64_t page_size_ = 4096;
  bool handover_rule_ = false;

  std::unordered_map<uint32_t, Process> procs_;
  mutable uint32_t last_tgid_ = 0;
  mutable Process* last_proc_ = nullptr;
  std::unordered_map<uint32_t, uint32_t> threads_;  // tid -> tgid
  // Entries of threads_ as they stand, by tid modulo kKnownThreads (tid 0: empty); an entry
  // goes when threads_ changes its tid.
  struct KnownThread {
    uint32_t tid = 0, tgid = 0;
  };
  static constexpr size_t kKnownThreads = 256;
  std::array<KnownThread, kKnownThreads> known_threads_{};
  std::vector<OpenFileDescription> descs_;
  std::vector<DescriptionId> free_, released_;
  std::vector<bool> is_free_;  // parallel to descs_
  std::unordered_map<uint64_t, AsyncContextState> aio_;
  size_t descriptors_ = 0, live_descs_ = 0, mappings_ = 0;
  TraceStateDrops drops_;
};

template <typename F>
void TraceState::ForEachMapping(uint32_t tgid, F&& visit) {
  Process* p = Find(tgid);
  if (!p) return;
  for (auto& [start, m] : p->maps) visit(m);
}

template <typename F>
void TraceState::ForEachMappingIn(uint32_t tgid, uint64_t start, uint64_t end, F&& visit) {
  Process* p = Find(tgid);
  if (!p || start >= end) return;
  auto it = p->maps.upper_bound(start);
  if (it != p->maps.begin() && std::prev(it)->second.end > start) --it;
  for (; it != p->maps.end() && it->first < end; ++it) visit(it->second);
}

template <typename F>
void TraceState::ForEachFd(uint32_t tgid, F&& visit) const {
  const Process* p = Find(tgid);
  if (!p) return;
  for (size_t fd = 0; fd < p->low.size(); fd++) {
    if (p->low[fd].desc != kNoDescription) visit(static_cast<int32_t>(fd), p->low[fd]);
  }
  for (const auto& [fd, d] : p->high) visit(fd, d);
}

}  // namespace iotwin::model
