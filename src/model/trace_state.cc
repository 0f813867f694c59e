#include "model/trace_state.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <utility>

#include "format/op_info.h"
#include "model/op_fields.h"
#include "model/path.h"

namespace iotwin::model {
namespace {

constexpr uint16_t kFtypeDirectory = S_IFDIR >> 12;  // ftype: S_IFMT >> 12

uint64_t SatAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

// The descriptor whose description a call acts on: the one data are read from (copies read one
// and write the other), else the one written to or used; -1 when the call names none.
// Which field that is for each op: 1 fd, 2 fd2, 0 none.
int8_t DataFdField(const OpInfo& info) {
  for (FdRole role : {FdRole::kReadFrom, FdRole::kWriteTo, FdRole::kUsed, FdRole::kRing}) {
    if (info.fd == role) return 1;
    if (info.fd2 == role) return 2;
  }
  return 0;
}

// What OnSyscall reads of every record's op, taken from the op table once: the table's call
// and the walk over the descriptor roles cost, per record, a sizeable part of a read's
// interpretation.
struct OpFacts {
  const OpInfo* info = nullptr;
  int8_t data_fd = 0;  // DataFdField
  bool changes_table = false;  // a case of OnTableCall (else its position is OnDataPosition's)
};
bool ChangesTable(uint16_t op) {
  switch (op) {
    case IOT_OP_OPEN: case IOT_OP_OPENAT: case IOT_OP_OPENAT2: case IOT_OP_CREAT:
    case IOT_OP_CLOSE: case IOT_OP_CLOSE_RANGE: case IOT_OP_DUP: case IOT_OP_DUP2:
    case IOT_OP_DUP3: case IOT_OP_FCNTL: case IOT_OP_CHDIR: case IOT_OP_FCHDIR:
    case IOT_OP_MMAP: case IOT_OP_MUNMAP: case IOT_OP_MREMAP: case IOT_OP_RENAME:
    case IOT_OP_RENAMEAT: case IOT_OP_RENAMEAT2: case IOT_OP_IO_SETUP: case IOT_OP_IO_DESTROY:
    case IOT_OP_IO_URING_SETUP:
      return true;
    default:
      return false;
  }
}
const std::array<OpFacts, IOT_OP_MAX + 1> kOpFacts = [] {
  std::array<OpFacts, IOT_OP_MAX + 1> facts{};
  for (uint16_t op = 0; op <= IOT_OP_MAX; op++) {
    facts[op].info = &GetOpInfo(op);
    facts[op].data_fd = DataFdField(*facts[op].info);
    facts[op].changes_table = ChangesTable(op);
  }
  return facts;
}();
const OpFacts& FactsOf(uint16_t op) { return kOpFacts[op <= IOT_OP_MAX ? op : IOT_OP_UNKNOWN]; }

int32_t DataFdOf(const iot_syscall& sc, const OpFacts& facts) {
  return facts.data_fd == 1 ? sc.fd : facts.data_fd == 2 ? sc.fd2 : -1;
}

}  // namespace

TraceState::TraceState(TraceStateOptions options) : options_(options) {}
TraceState::~TraceState() = default;

void TraceState::SetArch(std::string_view arch) {
  // asm-generic and x86: O_DIRECT 040000, O_DIRECTORY 0200000. arm and arm64 swap them
  // (O_DIRECTORY 040000, O_DIRECT 0200000); powerpc has O_DIRECTORY 040000, O_DIRECT 0400000.
  // O_APPEND is 02000 on all of them.
  if (arch == "aarch64" || arch == "arm64" || arch == "arm" || arch.starts_with("armv")) {
    o_direct_ = 0200000;
    o_directory_ = 040000;
  } else if (arch == "powerpc64" || arch == "ppc64le" || arch == "ppc64" || arch == "powerpc") {
    o_direct_ = 0400000;
    o_directory_ = 040000;
  } else {
    o_direct_ = 040000;
    o_directory_ = 0200000;
  }
  for (OpenFileDescription& d : descs_) Decode(d);
}

void TraceState::SetPageSize(uint64_t page_size) {
  if (page_size >= 512 && (page_size & (page_size - 1)) == 0) page_size_ = page_size;
}

uint64_t TraceState::PageRound(uint64_t n) const {
  return SatAdd(n, page_size_ - 1) & ~(page_size_ - 1);
}

void TraceState::Decode(OpenFileDescription& d) const {
  d.access = static_cast<uint8_t>(d.flags & O_ACCMODE);
  d.append = (d.flags & o_append_) != 0;
  d.direct = (d.flags & o_direct_) != 0;
  d.directory = (d.flags & o_directory_) != 0;
}

// ---- processes and threads -------------------------------------------------------------------

TraceState::Process* TraceState::FindSlow(uint32_t tgid) const {
  auto it = procs_.find(tgid);
  if (it == procs_.end()) return nullptr;
  last_tgid_ = tgid;
  last_proc_ = const_cast<Process*>(&it->second);
  return last_proc_;
}

TraceState::Process* TraceState::Get(uint32_t tgid) {
  if (Process* p = Find(tgid)) return p;
  if (procs_.size() >= options_.limits.processes) {
    ++drops_.processes;
    return nullptr;
  }
  Process* p = &procs_[tgid];
  last_tgid_ = tgid;
  last_proc_ = p;
  return p;
}

void TraceState::NoteThreadSlow(uint32_t tid, uint32_t tgid) {
  KnownThread& known = known_threads_[tid % kKnownThreads];
  auto it = threads_.find(tid);
  if (it != threads_.end() && it->second == tgid) {
    known = KnownThread{tid, tgid};
    return;
  }
  Process* p = Get(tgid);
  if (!p) return;
  if (it != threads_.end()) {
    // A reused tid: the thread it named is gone.
    if (Process* old = Find(it->second); old && old->live_threads > 0) old->live_threads--;
    it->second = tgid;
    p = Find(tgid);
  } else {
    if (threads_.size() >= options_.limits.threads) {
      ++drops_.threads;
      return;
    }
    threads_.emplace(tid, tgid);
  }
  p->live_threads++;
  known = KnownThread{tid, tgid};
}

uint32_t TraceState::TgidOf(uint32_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? 0 : it->second;
}

void TraceState::DropProcess(uint32_t tgid) {
  auto it = procs_.find(tgid);
  if (it == procs_.end()) return;
  Process& p = it->second;
  for (size_t fd = 0; fd < p.low.size(); fd++) CloseIn(p, static_cast<int32_t>(fd));
  while (!p.high.empty()) CloseIn(p, p.high.begin()->first);
  UnmapIn(p, 0, UINT64_MAX);
  for (const Replaced& r : p.replaced) Unref(r.desc);
  p.replaced.clear();
  // Only a process that set contexts up pays for the walk over them.
  for (auto a = aio_.begin(); p.async_contexts > 0 && a != aio_.end();) {
    if (a->second.tgid == tgid) {
      a = aio_.erase(a);
      p.async_contexts--;
    } else {
      ++a;
    }
  }
  if (last_proc_ == &p) last_proc_ = nullptr;
  procs_.erase(it);
}

void TraceState::RenameProcess(uint32_t from, uint32_t to) {
  if (from == to) return;
  auto it = procs_.find(from);
  if (it == procs_.end()) return;
  DropProcess(to);
  auto node = procs_.extract(it);
  node.key() = to;
  procs_.insert(std::move(node));
  last_proc_ = nullptr;
  known_threads_.fill(KnownThread{});
  for (auto& [tid, tgid] : threads_) {
    if (tgid == from) tgid = to;
  }
  if (Find(to)->async_contexts > 0) {
    for (auto& [ctx, a] : aio_) {
      if (a.tgid == from) a.tgid = to;
    }
  }
}

void TraceState::Fork(uint32_t parent_tgid, uint32_t child_tgid) {
  if (parent_tgid == child_tgid) return;
  DropProcess(child_tgid);  // a stale process with the child's tgid (missed exit)
  const Process* parent = Find(parent_tgid);
  if (!parent) return;
  const Process& copy_from = *parent;  // procs_ keeps its elements in place when it grows
  Process* child = Get(child_tgid);
  if (!child) return;
  child->cwd = copy_from.cwd;
  auto inherit = [&](int32_t fd, const Descriptor& d) {
    if (descriptors_ >= options_.limits.descriptors) {
      ++drops_.descriptors;
      return;
    }
    *Slot(*child, fd) = d;
    ++child->fds;
    Ref(d.desc);
    ++descriptors_;
  };
  for (size_t fd = 0; fd < copy_from.low.size(); fd++) {
    if (copy_from.low[fd].desc != kNoDescription) inherit(static_cast<int32_t>(fd), copy_from.low[fd]);
  }
  for (const auto& [fd, d] : copy_from.high) inherit(fd, d);
  for (const auto& [start, m] : copy_from.maps) {
    if (mappings_ >= options_.limits.mappings) {
      ++drops_.mappings;
      break;
    }
    child->maps.emplace(start, m);
    Ref(m.desc);
    ++mappings_;
  }
}

void TraceState::Exec(uint32_t tgid) {
  Process* p = Find(tgid);
  if (!p) return;
  for (size_t fd = 0; fd < p->low.size(); fd++) {
    if (p->low[fd].desc != kNoDescription && p->low[fd].cloexec) CloseIn(*p, static_cast<int32_t>(fd));
  }
  for (auto it = p->high.begin(); it != p->high.end();) {
    const int32_t fd = it->first;
    const bool close = it->second.cloexec;
    ++it;
    if (close) CloseIn(*p, fd);
  }
  UnmapIn(*p, 0, UINT64_MAX);
}

void TraceState::OnExit(const iot_proc& p) {
  auto it = threads_.find(p.tid);
  bool last = false;
  if (it != threads_.end()) {
    if (Process* proc = Find(it->second); proc && proc->live_threads > 0) {
      last = --proc->live_threads == 0;
    }
    threads_.erase(it);
    ForgetKnownThread(p.tid);
  }
  if ((p.flags & IOT_PROCF_GROUP_DEAD) || last) DropProcess(p.tgid);
}

void TraceState::OnProc(const iot_proc& p, std::optional<std::string_view> path) {
  NextRecord();
  switch (p.kind) {
    case IOT_PROC_FORK:
      NoteThread(p.tid, p.tgid);
      Fork(p.tgid, p.child_tgid);
      NoteThread(p.child_tid, p.child_tgid);  // a stale thread with the child's tid is gone
      break;
    case IOT_PROC_THREAD:
      NoteThread(p.tid, p.tgid);
      NoteThread(p.child_tid, p.tgid);
      break;
    case IOT_PROC_EXEC:
      NoteThread(p.tid, p.tgid);
      Exec(p.tgid);
      break;
    case IOT_PROC_EXIT:
      OnExit(p);
      break;
    case IOT_PROC_ATTACH: case IOT_PROC_CWD: case IOT_PROC_START:
      if (!Get(p.tgid)) break;
      NoteThread(p.tid, p.tgid);
      if (p.kind != IOT_PROC_START && path && !path->empty() && (*path)[0] == '/') {
        SetCwd(p.tgid, NormalizePath(*path));
      }
      break;
    default:
      break;
  }
}

void TraceState::SetCwd(uint32_t tgid, std::string_view normalized) {
  if (!options_.keep_paths) return;
  if (Process* p = Get(tgid)) p->cwd.assign(normalized);
}

void TraceState::RenamePaths(std::string_view from, std::string_view to) {
  MovePaths(from, to, /*exchange=*/false, /*from_is_dir=*/true);
}

void TraceState::MovePaths(std::string_view from, std::string_view to, bool exchange,
                           bool from_is_dir) {
  if (!options_.keep_paths || from == to) return;
  // `from` and `to` may be the text of a path this walk rewrites: copies.
  const std::string a(from), b(to);
  // `is_dir`: whether a path equal to a renamed name is a directory and so follows it.
  auto move = [&](std::string& path, bool is_dir) {
    if (path.empty()) return;
    for (const auto& [old_prefix, new_prefix] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
      if (PathIsWithin(path, *old_prefix) && (is_dir || path != *old_prefix)) {
        path = ReplacePrefix(path, *old_prefix, *new_prefix);
        return;
      }
      if (!exchange) return;
    }
  };
  for (DescriptionId id = 0; id < descs_.size(); id++) {
    if (is_free_[id]) continue;
    OpenFileDescription& d = descs_[id];
    move(d.path, from_is_dir || d.directory || d.ftype == kFtypeDirectory);
  }
  for (auto& [tgid, p] : procs_) move(p.cwd, true);
}

std::string_view TraceState::Cwd(uint32_t tgid) const {
  const Process* p = Find(tgid);
  return p ? std::string_view(p->cwd) : std::string_view();
}

std::optional<std::string> TraceState::Resolve(uint32_t tgid, int dirfd,
                                               std::string_view path) const {
  if (!path.empty() && path[0] == '/') return NormalizePath(path);
  std::string_view base;
  if (dirfd == kAtFdcwd) {
    base = Cwd(tgid);
  } else if (const OpenFileDescription* d = Description(DescriptionOf(tgid, dirfd))) {
    base = d->path;
  }
  // A base that is not absolute is a consumer's name for a directory whose own base the trace
  // never showed (fio's relative names): as unknown as none.
  if (base.empty() || base[0] != '/') return std::nullopt;
  return ResolvePath(base, path);
}

// ---- descriptions and descriptors ------------------------------------------------------------

DescriptionId TraceState::NewDescription(uint32_t flags, std::string_view path) {
  DescriptionId id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
    is_free_[id] = false;
    descs_[id] = OpenFileDescription{};
  } else {
    if (descs_.size() >= options_.limits.descriptions) {
      ++drops_.descriptions;
      return kNoDescription;
    }
    id = static_cast<DescriptionId>(descs_.size());
    descs_.emplace_back();
    is_free_.push_back(false);
  }
  OpenFileDescription& d = descs_[id];
  d.flags = flags;
  if (options_.keep_paths) d.path.assign(path);
  Decode(d);
  // Unreferenced until bound: released at the next record unless something refers to it.
  released_.push_back(id);
  ++live_descs_;
  return id;
}

void TraceState::Unref(DescriptionId id) {
  OpenFileDescription& d = descs_[id];
  if (d.refs > 0 && --d.refs == 0) released_.push_back(id);
}

void TraceState::ReleaseGone() {
  for (DescriptionId id : released_) {
    // Rebound since (a description made and bound in the same record), or listed twice.
    if (descs_[id].refs != 0 || is_free_[id]) continue;
    is_free_[id] = true;
    free_.push_back(id);
    if (live_descs_ > 0) --live_descs_;
  }
  released_.clear();
}

Descriptor* TraceState::Slot(Process& p, int32_t fd) {
  const size_t i = static_cast<size_t>(fd);
  if (i < p.low.size()) return &p.low[i];
  if (fd < kDenseFds && i < kDenseSlack + 2 * size_t{p.fds}) {
    p.low.resize(i + 1);
    while (!p.high.empty() && static_cast<size_t>(p.high.begin()->first) <= i) {
      auto node = p.high.extract(p.high.begin());
      p.low[static_cast<size_t>(node.key())] = node.mapped();
    }
    return &p.low[i];
  }
  return &p.high[fd];
}

const Descriptor* TraceState::HighFd(const Process& p, int32_t fd) {
  auto it = p.high.find(fd);
  return it == p.high.end() ? nullptr : &it->second;
}

size_t TraceState::dense_descriptor_slots() const {
  size_t slots = 0;
  for (const auto& [tgid, p] : procs_) slots += p.low.capacity();
  return slots;
}

bool TraceState::Bind(uint32_t tgid, int32_t fd, DescriptionId desc, bool cloexec) {
  if (fd < 0) {
    ++drops_.bad_fds;
    return false;
  }
  if (desc >= descs_.size()) return false;
  Process* p = Get(tgid);
  if (!p) return false;
  CloseIn(*p, fd);
  if (descriptors_ >= options_.limits.descriptors) {
    ++drops_.descriptors;
    return false;
  }
  *Slot(*p, fd) = Descriptor{desc, cloexec};
  ++p->fds;
  Ref(desc);
  ++descriptors_;
  return true;
}

void TraceState::CloseIn(Process& p, int32_t fd) {
  if (fd < 0) return;
  DescriptionId desc = kNoDescription;
  if (static_cast<size_t>(fd) < p.low.size()) {
    desc = std::exchange(p.low[static_cast<size_t>(fd)].desc, kNoDescription);
  } else {
    auto it = p.high.find(fd);
    if (it == p.high.end()) return;
    desc = it->second.desc;
    p.high.erase(it);
  }
  if (desc == kNoDescription) return;
  --p.fds;
  --descriptors_;
  Unref(desc);
}

void TraceState::Close(uint32_t tgid, int32_t fd) {
  if (Process* p = Find(tgid)) CloseIn(*p, fd);
}

void TraceState::CloseRange(uint32_t tgid, uint32_t first, uint32_t last, bool cloexec_only,
                            std::vector<uint64_t>* acted_on) {
  Process* p = Find(tgid);
  if (!p || first > last) return;
  auto act = [&](int32_t fd, Descriptor& d) {
    if (acted_on) acted_on->push_back(static_cast<uint64_t>(fd));
    if (cloexec_only) d.cloexec = true;
    else CloseIn(*p, fd);
  };
  // Only the descriptors that exist are visited, whatever the bounds.
  const uint64_t low_end = std::min<uint64_t>(p->low.size(), uint64_t{last} + 1);
  for (uint64_t fd = first; fd < low_end; fd++) {
    Descriptor& d = p->low[fd];
    if (d.desc != kNoDescription) act(static_cast<int32_t>(fd), d);
  }
  // Descriptors are int32_t: no number past INT32_MAX exists, so a range starting there names
  // none, and the bounds are compared as 64-bit numbers, never cast to int32_t.
  if (uint64_t{last} < p->low.size() || first > static_cast<uint32_t>(INT32_MAX)) return;
  const int32_t from = static_cast<int32_t>(first);
  for (auto it = p->high.lower_bound(from); it != p->high.end();) {
    if (static_cast<int64_t>(it->first) > int64_t{last}) break;
    auto next = std::next(it);
    act(it->first, it->second);
    it = next;
  }
}

void TraceState::Dup(uint32_t tgid, int32_t oldfd, int32_t newfd, bool cloexec) {
  if (newfd == oldfd) return;
  if (newfd < 0) {
    ++drops_.bad_fds;
    return;
  }
  const DescriptionId desc = DescriptionOf(tgid, oldfd);
  if (desc == kNoDescription) {
    Close(tgid, newfd);
    return;
  }
  Bind(tgid, newfd, desc, cloexec);
}

void TraceState::SetCloexec(uint32_t tgid, int32_t fd, bool cloexec) {
  if (fd < 0) return;
  Process* p = Find(tgid);
  if (!p) return;
  if (Descriptor* d = const_cast<Descriptor*>(Fd(tgid, fd))) d->cloexec = cloexec;
}

void TraceState::SetFlags(DescriptionId id, uint32_t flags) {
  if (id >= descs_.size()) return;
  // F_SETFL changes only these; the access mode and creation flags stay.
  const uint32_t settable = o_append_ | o_direct_ | O_ASYNC | O_NOATIME | O_NONBLOCK;
  OpenFileDescription& d = descs_[id];
  d.flags = (d.flags & ~settable) | (flags & settable);
  Decode(d);
}

bool TraceState::HasPath(uint32_t tgid, std::string_view path) const {
  bool found = false;
  ForEachFd(tgid, [&](int32_t, const Descriptor& d) {
    if (!found && descs_[d.desc].path == path) found = true;
  });
  return found;
}

void TraceState::AddAsyncContext(uint32_t tgid, uint64_t ctx, uint32_t entries) {
  if (aio_.size() >= options_.limits.async_contexts && !aio_.count(ctx)) {
    ++drops_.async_contexts;
    return;
  }
  Process* p = Get(tgid);
  if (!p) return;
  RemoveAsyncContext(ctx);  // a context id reused without its io_destroy seen
  aio_[ctx] = AsyncContextState{ctx, tgid, entries};
  p->async_contexts++;
}

void TraceState::RemoveAsyncContext(uint64_t ctx) {
  auto it = aio_.find(ctx);
  if (it == aio_.end()) return;
  if (Process* owner = Find(it->second.tgid); owner && owner->async_contexts > 0) {
    owner->async_contexts--;
  }
  aio_.erase(it);
}

const AsyncContextState* TraceState::AsyncContext(uint64_t ctx) const {
  auto it = aio_.find(ctx);
  return it == aio_.end() ? nullptr : &it->second;
}

// ---- mappings ---------------------------------------------------------------------------------

void TraceState::UnmapIn(Process& p, uint64_t start, uint64_t end) {
  if (start >= end) return;
  auto it = p.maps.upper_bound(start);
  if (it != p.maps.begin()) --it;
  std::vector<FileMapping> keep;
  while (it != p.maps.end() && it->first < end) {
    const FileMapping m = it->second;
    if (m.end <= start) {
      ++it;
      continue;
    }
    if (m.start < start) {
      FileMapping head = m;
      head.end = start;
      keep.push_back(head);
    }
    if (m.end > end) {
      FileMapping tail = m;
      tail.file_offset = SatAdd(m.file_offset, end - m.start);
      tail.start = end;
      keep.push_back(tail);
    }
    it = p.maps.erase(it);
    --mappings_;
    if (m.desc != kNoDescription) Unref(m.desc);
  }
  for (const FileMapping& k : keep) {
    // The pieces of a split mapping: within the cap by construction (one out, at most two in,
    // and the one that went was counted), but counted as drops when it is reached.
    if (mappings_ >= options_.limits.mappings) {
      ++drops_.mappings;
      continue;
    }
    p.maps.emplace(k.start, k);
    if (k.desc != kNoDescription) Ref(k.desc);
    ++mappings_;
  }
}

void TraceState::Unmap(uint32_t tgid, uint64_t start, uint64_t end) {
  if (Process* p = Find(tgid)) UnmapIn(*p, start, end);
}

FileMapping* TraceState::Map(uint32_t tgid, uint64_t start, uint64_t length,
                             uint64_t file_offset, uint32_t prot, uint32_t flags,
                             DescriptionId desc) {
  Process* p = Get(tgid);
  if (!p || length == 0) return nullptr;
  const uint64_t end = SatAdd(start, length);
  UnmapIn(*p, start, end);
  if (desc >= descs_.size()) return nullptr;
  if (mappings_ >= options_.limits.mappings) {
    ++drops_.mappings;
    return nullptr;
  }
  auto [it, inserted] = p->maps.emplace(start, FileMapping{start, end, file_offset, prot, flags, desc});
  Ref(desc);
  ++mappings_;
  return &it->second;
}

const FileMapping* TraceState::MappingAt(uint32_t tgid, uint64_t addr) const {
  const Process* p = Find(tgid);
  if (!p) return nullptr;
  auto it = p->maps.upper_bound(addr);
  if (it == p->maps.begin()) return nullptr;
  --it;
  return addr < it->second.end ? &it->second : nullptr;
}

// ---- records ----------------------------------------------------------------------------------

DescriptionId TraceState::OnFdSnapshot(const iot_fd_snapshot& s,
                                       std::optional<std::string_view> path) {
  NextRecord();
  std::string resolved;
  if (path && !path->empty() && (*path)[0] == '/') resolved = NormalizePath(*path);
  const DescriptionId id = NewDescription(s.flags, resolved);
  if (id == kNoDescription) return id;
  OpenFileDescription& d = descs_[id];
  d.pos = s.pos;
  d.pos_known = true;
  d.ino = s.ino;
  d.dev = s.dev;
  d.ftype = s.ftype;
  Bind(s.tgid, s.fd, id, (s.flags & O_CLOEXEC) != 0);
  return id;
}

void TraceState::OnMapSnapshot(const iot_map_snapshot& s, std::optional<std::string_view> path) {
  NextRecord();
  if (s.end <= s.start) return;
  std::string resolved;
  if (path && !path->empty() && (*path)[0] == '/') resolved = NormalizePath(*path);
  const DescriptionId id = NewDescription(O_RDONLY, resolved);
  if (id == kNoDescription) return;
  descs_[id].ino = s.ino;
  descs_[id].dev = s.dev;
  Map(s.tgid, s.start, s.end - s.start, s.pgoff, s.prot, s.flags, id);
}

void TraceState::LearnIdentity(OpenFileDescription& d, const iot_syscall& sc) const {
  if (d.ino == 0 && sc.ino != 0 && !(sc.sflags & IOT_SCF_NO_FILE)) {
    d.ino = sc.ino;
    d.dev = sc.dev;
    if (d.ftype == 0) d.ftype = sc.ftype;
  }
}

void TraceState::OnOpen(const iot_syscall& sc, std::optional<std::string_view> path,
                        SyscallEffect& e) {
  if (sc.ret < 0 || (sc.sflags & IOT_SCF_INTERRUPTED)) return;
  const uint32_t flags = EffectiveOpenFlags(sc);
  std::optional<std::string> resolved;
  if (path && options_.keep_paths && !(sc.sflags & (IOT_SCF_PATH_TRUNC | IOT_SCF_PATH_FAULT))) {
    resolved = Resolve(sc.tgid, PathDirFd(sc), *path);
  }
  const DescriptionId id = NewDescription(flags, resolved ? *resolved : std::string_view());
  if (id == kNoDescription) return;
  OpenFileDescription& d = descs_[id];
  d.pos_known = true;
  if (!(sc.sflags & IOT_SCF_NO_FILE)) {
    d.ino = sc.ino;
    d.dev = sc.dev;
    d.ftype = sc.ftype;
  }
  if (handover_rule_ && sc.dur > 0) {
    d.open_tid = sc.tid;
    d.open_end = SatAdd(sc.ts, sc.dur);
  }
  const int32_t fd = static_cast<int32_t>(sc.ret);
  if (sc.ret > INT32_MAX || !Bind(sc.tgid, fd, id, (flags & O_CLOEXEC) != 0)) return;
  e.new_fd = fd;
  e.created = id;
}

void TraceState::Advance(DescriptionId id, uint64_t pos, uint64_t n) {
  OpenFileDescription& d = descs_[id];
  // Positions are loff_t: one carried past 2^63 - 1 is no position, the trace is inconsistent.
  constexpr uint64_t kLargestPosition = INT64_MAX;
  if (pos > kLargestPosition || n > kLargestPosition - pos) {
    d.pos_known = false;
    ++drops_.positions_past_largest;
    return;
  }
  d.pos = pos + n;
  d.pos_known = true;
}

// Inline into OnSyscall, its only caller, which runs it for every data call (a hot path).
[[gnu::always_inline]] inline void TraceState::OnDataPosition(const iot_syscall& sc,
                                                              const OpInfo& info, bool ok,
                                                              SyscallEffect& e) {
  const uint64_t n = ok ? static_cast<uint64_t>(sc.ret) : 0;
  if (info.family == OpFamily::kSeek) {
    if (ok && e.desc == kNoDescription && options_.adopt_unknown && !e.previous_instances)
      e.desc = Adopt(sc);
    if (ok && e.desc != kNoDescription) Advance(e.desc, n, 0);
    return;
  }
  if (info.family == OpFamily::kCopy) {
    // A side's position moves when its offset pointer was NULL (or the call takes none: the
    // output of sendfile).
    if (!ok) return;
    auto side = [&](FdRole role, FieldUse offset_use) {
      const int32_t fd = info.fd == role ? sc.fd : info.fd2 == role ? sc.fd2 : -1;
      const DescriptionId id = DescriptionOf(sc.tgid, fd);
      if (id == kNoDescription || !descs_[id].pos_known) return;
      const uint64_t offset = info.offset == offset_use ? sc.offset
                              : info.aux == offset_use  ? sc.aux
                                                        : kNoOffset;
      if (offset == kNoOffset) Advance(id, descs_[id].pos, n);
    };
    side(FdRole::kReadFrom, FieldUse::kInOffset);
    side(FdRole::kWriteTo, FieldUse::kOutOffset);
    return;
  }
  if (info.family != OpFamily::kRead && info.family != OpFamily::kWrite) return;
  const bool positional = info.offset == FieldUse::kFileOffset ||
                          (info.offset == FieldUse::kOffsetOrCurrent && sc.offset != kNoOffset);
  if (positional) {
    e.pos = sc.offset;
    e.pos_known = true;
    return;
  }
  e.pos = info.offset == FieldUse::kPositionBefore ? sc.offset : 0;  // until the description knows
  if (ok && e.desc == kNoDescription && options_.adopt_unknown && !e.previous_instances)
    e.desc = Adopt(sc);
  if (e.desc == kNoDescription) return;
  const OpenFileDescription& d = descs_[e.desc];
  if (!options_.learn_positions && info.family == OpFamily::kWrite && d.append) {
    // An O_APPEND write lands at the end of the file: the record's size after the call, which
    // such a consumer fills only where it knows it (0: not known, the position then is not).
    if (ok && sc.fsize >= n && sc.fsize > 0) {
      e.pos = sc.fsize - n;
      e.pos_known = true;
      Advance(e.desc, e.pos, n);
    } else if (ok) {
      descs_[e.desc].pos_known = false;
    }
    return;
  }
  if (info.family == OpFamily::kWrite && d.append && ok && sc.fsize >= n) {
    e.pos = sc.fsize - n;
    e.pos_known = true;
  } else if (d.pos_known) {
    e.pos = d.pos;
    e.pos_known = true;
  }
  // A position not known is learnt from a call that records one (read, write, readv, writev);
  // preadv2/pwritev2 at the current position record none.
  const bool learn = options_.learn_positions && info.offset == FieldUse::kPositionBefore;
  if (ok && (e.pos_known || learn)) Advance(e.desc, e.pos, n);
}

DescriptionId TraceState::Adopt(const iot_syscall& sc) {
  if (sc.fd < 0) return kNoDescription;
  const DescriptionId id = NewDescription(0);
  if (id == kNoDescription || !Bind(sc.tgid, sc.fd, id, false)) return kNoDescription;
  LearnIdentity(descs_[id], sc);
  return id;
}

bool TraceState::UsedPreviousInstance(const iot_syscall& sc, const OpInfo& info, bool ok,
                                      SyscallEffect& e) {
  const bool data = info.family == OpFamily::kRead || info.family == OpFamily::kWrite ||
                    info.family == OpFamily::kSeek;
  if (!data || !ok || e.desc == kNoDescription) return false;
  if (!UsesPreviousInstance(descs_[e.desc], sc)) return false;
  e.previous_instances = 1;
  e.desc = kNoDescription;
  return true;
}

uint32_t TraceState::CloseRangeHandingOver(const iot_syscall& sc, bool cloexec_only) {
  const uint32_t first = CloseRangeFirst(sc), last = CloseRangeLast(sc);
  std::vector<int32_t> acting;
  uint32_t previous = 0;
  ForEachFd(sc.tgid, [&](int32_t fd, const Descriptor& d) {
    if (static_cast<uint32_t>(fd) < first || static_cast<uint32_t>(fd) > last) return;
    if (UsesPreviousInstance(descs_[d.desc], sc))
      ++previous;
    else
      acting.push_back(fd);
  });
  for (int32_t fd : acting) {
    if (cloexec_only)
      SetCloexec(sc.tgid, fd, true);
    else
      Close(sc.tgid, fd);
  }
  return previous;
}

void TraceState::OnFcntl(const iot_syscall& sc, SyscallEffect& e) {
  const int cmd = FcntlCmd(sc);
  if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
    if (sc.ret < 0 || sc.ret > INT32_MAX) return;
    Dup(sc.tgid, sc.fd, static_cast<int32_t>(sc.ret), cmd == F_DUPFD_CLOEXEC);
    e.new_fd = static_cast<int32_t>(sc.ret);
  } else if (cmd == F_SETFD) {
    SetCloexec(sc.tgid, sc.fd, (FcntlArg(sc) & FD_CLOEXEC) != 0);
  } else if (cmd == F_SETFL) {
    SetFlags(e.desc, static_cast<uint32_t>(FcntlArg(sc)));
  }
}

void TraceState::OnRename(const iot_syscall& sc, std::optional<std::string_view> path,
                          std::optional<std::string_view> path2) {
  if (!path || !path2 || (sc.sflags & (IOT_SCF_PATH_TRUNC | IOT_SCF_PATH_FAULT))) return;
  // Both names are resolved before anything moves, as the kernel looks both up first.
  const std::optional<std::string> from = Resolve(sc.tgid, PathDirFd(sc), *path);
  const std::optional<std::string> to = Resolve(sc.tgid, Path2DirFd(sc), *path2);
  if (!from || !to) return;
  // The record's ftype is the type of the object at `from`; 0 (unknown, as in an imported log)
  // leaves it to each description (MovePaths). An exchange also moves the object at `to`,
  // whose type no record shows.
  const bool exchange = RenameExchanges(sc);
  if (sc.ftype != 0 && sc.ftype != kFtypeDirectory && !exchange) return;
  MovePaths(*from, *to, exchange, !exchange && sc.ftype == kFtypeDirectory);
}

void TraceState::RememberReplaced(const iot_syscall& sc, int32_t fd) {
  Process* p = Find(sc.tgid);
  const DescriptionId desc = DescriptionOf(sc.tgid, fd);
  if (!p || p->live_threads < 2 || desc == kNoDescription) return;
  if (Replaced* old = ReplacedFor(sc.tgid, fd, UINT64_MAX)) ForgetReplaced(*p, old);
  if (p->replaced.size() >= kMaxReplaced) {
    ForgetReplaced(*p, &*std::min_element(
                           p->replaced.begin(), p->replaced.end(),
                           [](const Replaced& a, const Replaced& b) { return a.ts < b.ts; }));
  }
  p->replaced.push_back(Replaced{fd, desc, sc.ts});
  p->replaced_latest = std::max(p->replaced_latest, sc.ts);
  Ref(desc);
}

TraceState::Replaced* TraceState::ReplacedIn(Process& p, int32_t fd, uint64_t ts) {
  // UINT64_MAX: any entry of fd, whatever its start.
  if (ts != UINT64_MAX && ts >= p.replaced_latest) return nullptr;
  for (Replaced& r : p.replaced) {
    if (r.fd == fd) return ts == UINT64_MAX || ts < r.ts ? &r : nullptr;
  }
  return nullptr;
}

void TraceState::ForgetReplaced(Process& p, Replaced* r) {
  Unref(r->desc);
  *r = p.replaced.back();
  p.replaced.pop_back();
}

void TraceState::OnMemory(const iot_syscall& sc) {
  const bool ok = sc.ret >= 0 && !(sc.sflags & IOT_SCF_INTERRUPTED);
  if (!ok) return;
  Process* p = Find(sc.tgid);
  switch (sc.op) {
    case IOT_OP_MMAP: {
      const uint64_t start = static_cast<uint64_t>(sc.ret);
      const uint64_t length = PageRound(sc.length);
      const DescriptionId desc =
          (sc.flags & MAP_ANONYMOUS) ? kNoDescription : DescriptionOf(sc.tgid, sc.fd);
      if (desc != kNoDescription) LearnIdentity(descs_[desc], sc);
      if (desc != kNoDescription || p) Map(sc.tgid, start, length, sc.offset, sc.mode, sc.flags, desc);
      break;
    }
    case IOT_OP_MUNMAP:
      if (p) UnmapIn(*p, MemAddr(sc), SatAdd(MemAddr(sc), PageRound(MemLength(sc))));
      break;
    case IOT_OP_MREMAP: {
      if (!p) break;
      const uint64_t addr = MemAddr(sc);
      const FileMapping* old = MappingAt(sc.tgid, addr);
      std::optional<FileMapping> moved;
      if (old) moved = *old;
      UnmapIn(*p, addr, SatAdd(addr, PageRound(MemLength(sc))));
      if (moved) {
        FileMapping* m = Map(sc.tgid, static_cast<uint64_t>(sc.ret),
                             PageRound(MremapNewLength(sc)),
                             SatAdd(moved->file_offset, addr - moved->start), moved->prot,
                             moved->flags, moved->desc);
        if (m) m->user = moved->user;
      }
      break;
    }
    default:
      break;
  }
}

SyscallEffect TraceState::OnSyscall(const iot_syscall& sc,
                                    const std::optional<std::string_view>& path,
                                    const std::optional<std::string_view>& path2) {
  NextRecord();
  NoteThread(sc.tid, sc.tgid);
  const bool ok = sc.ret >= 0 && !(sc.sflags & IOT_SCF_INTERRUPTED);
  const OpFacts& facts = FactsOf(sc.op);
  const OpInfo& info = *facts.info;
  SyscallEffect e;
  const int32_t data_fd = DataFdOf(sc, facts);
  // The process is looked up once, for the descriptor and for the numbers replaced under it.
  Process* const p = data_fd >= 0 ? Find(sc.tgid) : nullptr;
  e.desc = p ? DescriptionIn(*p, data_fd) : kNoDescription;
  if (handover_rule_ && UsedPreviousInstance(sc, info, ok, e)) {
    if (info.family != OpFamily::kSeek) OnDataPosition(sc, info, ok, e);  // recorded offset
    return e;
  }
  if (p && !p->replaced.empty()) {  // most calls: nothing replaced
    if (const Replaced* r = ReplacedIn(*p, data_fd, sc.ts)) e.desc = r->desc;
  }
  if (e.desc != kNoDescription && ok) LearnIdentity(descs_[e.desc], sc);
  if (facts.changes_table)
    OnTableCall(sc, path, path2, ok, e);
  else
    OnDataPosition(sc, info, ok, e);
  return e;
}

// Out of line: nearly every record is a read or a write, and this function's registers and
// stack would otherwise be set up for each of them.
[[gnu::noinline]] void TraceState::OnTableCall(const iot_syscall& sc,
                                               const std::optional<std::string_view>& path,
                                               const std::optional<std::string_view>& path2,
                                               bool ok, SyscallEffect& e) {
  const uint16_t op = sc.op;
  switch (op) {
    case IOT_OP_OPEN: case IOT_OP_OPENAT: case IOT_OP_OPENAT2: case IOT_OP_CREAT:
      // Every path returns `e` itself: the result is built in place (a hot path).
      e.desc = kNoDescription;
      OnOpen(sc, path, e);
      break;
    case IOT_OP_CLOSE:
      e.desc = DescriptionOf(sc.tgid, sc.fd);
      // close releases the number even when it fails later (EINTR, EIO); EBADF: nothing was open.
      if (sc.ret == -EBADF) break;
      if (handover_rule_ && e.desc != kNoDescription && UsesPreviousInstance(descs_[e.desc], sc)) {
        e.previous_instances = 1;  // closes the previous instance, which the open replaced
        break;
      }
      if (Replaced* r = ReplacedFor(sc.tgid, sc.fd, sc.ts)) {
        // It started before the call that replaced the number: it closed the previous one.
        e.desc = r->desc;
        if (Process* p = Find(sc.tgid)) ForgetReplaced(*p, r);
        break;
      }
      RememberReplaced(sc, sc.fd);
      Close(sc.tgid, sc.fd);
      break;
    case IOT_OP_CLOSE_RANGE:
      if (ok && handover_rule_) {
        e.previous_instances = CloseRangeHandingOver(sc, (sc.flags & CLOSE_RANGE_CLOEXEC) != 0);
      } else if (ok) {
        if (!(sc.flags & CLOSE_RANGE_CLOEXEC)) {
          std::vector<int32_t> closing;
          ForEachFd(sc.tgid, [&](int32_t fd, const Descriptor&) {
            const auto n = static_cast<uint32_t>(fd);
            if (n >= CloseRangeFirst(sc) && n <= CloseRangeLast(sc)) closing.push_back(fd);
          });
          for (int32_t fd : closing) RememberReplaced(sc, fd);
        }
        CloseRange(sc.tgid, CloseRangeFirst(sc), CloseRangeLast(sc),
                   (sc.flags & CLOSE_RANGE_CLOEXEC) != 0);
      }
      break;
    case IOT_OP_DUP: case IOT_OP_DUP2: case IOT_OP_DUP3:
      if (ok && sc.ret <= INT32_MAX) {
        e.new_fd = static_cast<int32_t>(sc.ret);
        if (e.new_fd != sc.fd && DescriptionOf(sc.tgid, e.new_fd) != DescriptionOf(sc.tgid, sc.fd))
          RememberReplaced(sc, e.new_fd);
        Dup(sc.tgid, sc.fd, e.new_fd, OpResultCloexec(sc));
      }
      break;
    case IOT_OP_FCNTL:
      if (ok) OnFcntl(sc, e);
      break;
    case IOT_OP_CHDIR:
      if (ok && path && !(sc.sflags & (IOT_SCF_PATH_TRUNC | IOT_SCF_PATH_FAULT))) {
        if (auto p = Resolve(sc.tgid, PathDirFd(sc), *path)) SetCwd(sc.tgid, *p);
      }
      break;
    case IOT_OP_FCHDIR:
      if (ok) {
        const OpenFileDescription* d = Description(DescriptionOf(sc.tgid, sc.fd));
        if (d && !d->path.empty()) SetCwd(sc.tgid, d->path);
      }
      break;
    case IOT_OP_MMAP: case IOT_OP_MUNMAP: case IOT_OP_MREMAP:
      OnMemory(sc);
      break;
    case IOT_OP_RENAME: case IOT_OP_RENAMEAT: case IOT_OP_RENAMEAT2:
      if (ok) OnRename(sc, path, path2);
      break;
    case IOT_OP_IO_SETUP:
      // length = nr_events, aux = the context id written to *ctxp.
      if (ok && sc.aux != 0) {
        AddAsyncContext(sc.tgid, sc.aux,
                        static_cast<uint32_t>(std::min<uint64_t>(sc.length, UINT32_MAX)));
      }
      break;
    case IOT_OP_IO_DESTROY:
      if (ok) RemoveAsyncContext(sc.aux);
      break;
    case IOT_OP_IO_URING_SETUP:
      if (ok && sc.ret <= INT32_MAX) {
        // The kernel returns the ring's descriptor O_RDWR | O_CLOEXEC.
        const DescriptionId id = NewDescription(O_RDWR);
        if (id == kNoDescription) break;
        descs_[id].ring = true;
        if (Bind(sc.tgid, static_cast<int32_t>(sc.ret), id, true)) {
          e.new_fd = static_cast<int32_t>(sc.ret);
          e.created = id;
        }
      }
      break;
    default:
      break;
  }
}

}  // namespace iotwin::model
