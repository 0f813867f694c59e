#include "model/trace_model.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_set>

#include "base/checked_math.h"
#include "format/records.h"
#include "model/op_fields.h"
#include "model/ordering.h"
#include "model/path.h"

namespace iotwin::model {

std::string_view OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kSyscall: return "syscall";
    case OpKind::kPageFault: return "page_fault";
    case OpKind::kAsyncSubmit: return "async_submit";
    case OpKind::kFork: return "fork";
    case OpKind::kThreadStart: return "thread_start";
    case OpKind::kExec: return "exec";
    case OpKind::kExit: return "exit";
  }
  return "unknown";
}

std::string_view SkipName(Skip skip) {
  switch (skip) {
    case Skip::kReplayable: return "replayable";
    case Skip::kUnknownFd: return "unknown_fd";
    case Skip::kUnknownPath: return "unknown_path";
    case Skip::kPseudoFs: return "pseudo_fs";
    case Skip::kUnknownMapping: return "unknown_mapping";
    case Skip::kUnsupported: return "unsupported";
  }
  return "unknown";
}

std::vector<uint32_t> TraceModel::InitialFileSet() const {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < files_.size(); i++) {
    if (files_[i].origin == FileOrigin::kPreexisting) out.push_back(i);
  }
  std::sort(out.begin(), out.end(), [&](uint32_t a, uint32_t b) {
    return paths_[files_[a].path] < paths_[files_[b].path];
  });
  return out;
}

std::vector<uint32_t> TraceModel::CreatedFiles() const {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < files_.size(); i++) {
    if (files_[i].origin == FileOrigin::kCreated) out.push_back(i);
  }
  return out;
}

namespace {

constexpr uint16_t kFtypeDir = S_IFDIR >> 12;
constexpr size_t kMaxPathBytes = 4096;  // PATH_MAX, the terminating NUL included
constexpr uint64_t kIovMax = 1024;      // IOV_MAX: the most iovecs a vectored call takes
constexpr uint32_t kUringMaxEntries = 32768;  // IORING_MAX_ENTRIES

// Offsets, lengths and times come from the trace: sums saturate instead of wrapping.
uint64_t Sum(uint64_t a, uint64_t b) { return SaturatingAdd(a, b); }
constexpr uint16_t kFtypeReg = S_IFREG >> 12;

enum EvType : uint8_t { kEvSyscall, kEvProc, kEvFdSnap, kEvMapSnap, kEvFault, kEvAsync, kEvCache };

struct Event {
  uint64_t ts;
  uint64_t seq;  // order key within equal ts (file order, or the submitting syscall's)
  uint8_t sub;   // async submits sort just before their submitting syscall (0 before 1)
  uint64_t orig; // file order
  uint8_t type;
  uint32_t index;
  uint8_t after = 0;  // 1: sorts after the event whose (ts, seq, sub) it took (a descriptor
                      // handover, PostponeDescriptorHandovers)
};

bool EventBefore(const Event& a, const Event& b) {
  if (a.ts != b.ts) return a.ts < b.ts;
  if (a.seq != b.seq) return a.seq < b.seq;
  if (a.sub != b.sub) return a.sub < b.sub;
  if (a.after != b.after) return a.after < b.after;
  return a.orig < b.orig;
}

struct FdEntry {
  uint32_t ofd;
  bool cloexec;
};

struct Ofd {
  PathId path = kNone;
  uint32_t file = kNone;
  uint32_t flags = 0;
  uint64_t pos = 0;
  bool pseudo = false;
  bool path_unknown = false;
  bool ring = false;  // an io_uring instance
  // A ring's io_uring_setup call (thread, op index): its close tears down the context the model
  // links to that call.
  uint32_t ring_setup_thread = kNone;
  uint32_t ring_setup_op = kNone;
};

struct MapPiece {
  uint64_t end;
  uint32_t mapping;
};

// Descriptor numbers a process's ops have named, visited in ascending order: small numbers in
// a bitmap, the rest in a set, so memory follows how many numbers a trace names, not how large
// they are.
class FdSlots {
 public:
  // Notes `fd` (>= 0); returns whether it is new.
  bool Insert(int32_t fd) {
    if (fd < 0) return false;
    if (fd < kDense) {
      if (static_cast<size_t>(fd) >= low_.size()) low_.resize(static_cast<size_t>(fd) + 1, false);
      if (low_[fd]) return false;
      low_[fd] = true;
      return true;
    }
    return high_.insert(fd).second;
  }
  template <typename F>
  void ForEach(F&& visit) const {
    for (size_t fd = 0; fd < low_.size(); fd++) {
      if (low_[fd]) visit(static_cast<int32_t>(fd));
    }
    for (int32_t fd : high_) visit(fd);
  }

 private:
  static constexpr int32_t kDense = 1024;
  std::vector<bool> low_;
  std::set<int32_t> high_;
};

struct ProcState {
  std::unordered_map<int32_t, FdEntry> fds;
  // Numbers named as descriptor resources so far (ordering), and each thread's latest fork of
  // this process: a number named for the first time after a fork was not in the copied table.
  FdSlots slots;
  std::unordered_map<uint32_t, uint32_t> last_fork;  // thread -> op index
  PathId cwd = kNone;
  std::map<uint64_t, MapPiece> maps;  // recorded address ranges -> mapping
  uint32_t live_threads = 0;
};

bool IsVectored(uint16_t op) {
  return op == IOT_OP_READV || op == IOT_OP_WRITEV || op == IOT_OP_PREADV ||
         op == IOT_OP_PWRITEV || op == IOT_OP_PREADV2 || op == IOT_OP_PWRITEV2;
}

bool IsSubmitCall(uint16_t op) { return op == IOT_OP_IO_URING_ENTER || op == IOT_OP_IO_SUBMIT; }

uint32_t EffectiveOpenFlags(const iot_syscall& sc) {
  if (sc.op == IOT_OP_CREAT) return O_CREAT | O_WRONLY | O_TRUNC | (sc.flags & O_CLOEXEC);
  return sc.flags;
}

// Async opcodes: reads and writes of io_uring (IORING_OP_*) and libaio (IOCB_CMD_*).
bool AsyncIsRead(const iot_async_io& a) {
  if (a.engine == IOT_AIO_ENGINE_LIBAIO) return a.opcode == 0 /*PREAD*/ || a.opcode == 7 /*PREADV*/;
  return a.opcode == 1 /*READV*/ || a.opcode == 4 /*READ_FIXED*/ || a.opcode == 22 /*READ*/;
}
bool AsyncIsWrite(const iot_async_io& a) {
  if (a.engine == IOT_AIO_ENGINE_LIBAIO) return a.opcode == 1 /*PWRITE*/ || a.opcode == 8;
  return a.opcode == 2 /*WRITEV*/ || a.opcode == 5 /*WRITE_FIXED*/ || a.opcode == 23 /*WRITE*/;
}

}  // namespace

struct ModelBuilder::Impl {
  ModelOptions options;
  std::unique_ptr<TraceModel> m = std::make_unique<TraceModel>();

  // ---- collected records (Add) ----
  // Strings by id. Fed by a TraceReader (LoadTraceModel), the builder looks strings up in the
  // reader's table rather than keeping a second copy of each.
  const TraceReader* string_reader = nullptr;
  std::unordered_map<uint32_t, std::string> strings;
  // Ids whose string is no usable path: truncated by the capture, or too long to be one.
  std::unordered_set<uint32_t> unusable_strings;
  // The string `id` names; nullopt when unknown or unusable.
  std::optional<std::string_view> String(uint32_t id) const {
    if (id == 0 || unusable_strings.count(id)) return std::nullopt;
    if (string_reader != nullptr) {
      if (!string_reader->HasString(id)) return std::nullopt;
      return string_reader->String(id);
    }
    auto it = strings.find(id);
    if (it == strings.end()) return std::nullopt;
    return std::string_view(it->second);
  }
  std::vector<Event> events;
  uint64_t seq = 0;
  std::vector<iot_syscall> syscalls;
  std::vector<iot_proc> procs;
  std::vector<iot_fd_snapshot> fd_snaps;
  std::vector<iot_map_snapshot> map_snaps;
  std::vector<iot_page_fault> faults;
  std::vector<iot_async_io> asyncs;
  std::vector<iot_cache_state> caches;
  std::vector<iot_block> blocks;
  std::map<std::pair<uint32_t, uint64_t>, std::vector<uint64_t>> iovecs;  // (tid, ts) -> lens
  std::map<std::pair<uint32_t, uint64_t>, uint16_t> iovec_counts;
  std::map<std::pair<uint16_t, uint16_t>, uint64_t> lost;  // (source, cpu) -> cumulative

  // ---- reconstruction state (Finish) ----
  // Interned paths: ids hashed and compared by their text in paths_, so each path is stored once.
  struct PathText {
    using is_transparent = void;
    const std::vector<std::string>* paths;
    std::string_view operator()(std::string_view s) const { return s; }
    std::string_view operator()(PathId id) const { return (*paths)[id]; }
  };
  struct PathHash : PathText {
    size_t operator()(auto key) const {
      return std::hash<std::string_view>{}(PathText::operator()(key));
    }
  };
  struct PathEqual : PathText {
    bool operator()(auto a, auto b) const {
      return PathText::operator()(a) == PathText::operator()(b);
    }
  };
  std::unordered_set<PathId, PathHash, PathEqual> path_ids{
      0, PathHash{{&m->paths_}}, PathEqual{{&m->paths_}}};
  std::vector<PathId> parent_of;  // parallel to paths
  std::vector<ProcState> pstate;  // parallel to processes
  std::unordered_map<uint32_t, uint32_t> proc_by_tgid;
  std::unordered_map<uint32_t, uint32_t> thread_by_tid;
  std::vector<Ofd> ofds;
  std::unordered_map<PathId, uint32_t> file_by_path;
  std::unordered_set<PathId> absent;
  std::set<std::pair<uint32_t, int32_t>> unknown_fds;
  std::unordered_map<uint64_t, uint32_t> async_ctx_index;  // AsyncContextKey -> index
  static uint64_t AsyncContextKey(uint8_t engine, uint64_t ctx) {
    return (static_cast<uint64_t>(engine) << 56) ^ ctx;
  }
  std::map<std::pair<uint64_t, uint64_t>, std::pair<uint32_t, uint32_t>> async_pending;
  std::vector<uint32_t> async_inflight;
  // Async reads submitted while their file was pristine: (ctx key, request) -> (file, offset,
  // length). The bytes such a read needs are its offset + the bytes its completion returned (an
  // O_DIRECT read of a rounded-up length comes back short at end of file), known only then.
  struct PendingGrowth {
    uint32_t file;
    uint64_t offset, length;
  };
  std::map<std::pair<uint64_t, uint64_t>, PendingGrowth> async_growth;
  // Sizes of async contexts being set up: libaio by context address, io_uring by thread (its
  // last io_uring_setup not yet claimed by a context).
  std::unordered_map<uint64_t, uint32_t> aio_setup_size;
  std::unordered_map<uint32_t, uint32_t> uring_setup_size;
  // ... and the setup calls themselves: libaio by context address -> (thread, op), io_uring by
  // thread -> op. The context's first request links the call to it, so that replay sets the
  // context up at the recorded call, not later at the first request.
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> aio_setup_op;
  std::unordered_map<uint32_t, uint32_t> uring_setup_op;
  std::unordered_map<uint32_t, uint32_t> uring_setups;  // thread -> rings it has set up

  // The close of `fd` (open file `ofd`) in `proc`: when it closes an io_uring instance for good
  // and the ring's context is known without doubt, the op tears that context down (`async_ctx`),
  // and the context's identity is forgotten so a ring later set up at the same kernel address
  // is a new context. Doubt (a dup of the ring still open anywhere, or a thread that set up more
  // than one ring, whose setup-to-context link is then a guess) leaves the close as it was:
  // the replay skips it and the engine goes when the replay ends.
  void RingClosed(uint32_t proc, int32_t fd, uint32_t ofd, Op* op) {
    const Ofd& o = ofds[ofd];
    if (!o.ring || o.ring_setup_thread == kNone || uring_setups[o.ring_setup_thread] != 1) return;
    for (uint32_t p = 0; p < pstate.size(); p++) {
      for (const auto& [other_fd, e] : pstate[p].fds) {
        if (e.ofd == ofd && !(p == proc && other_fd == fd)) return;
      }
    }
    const uint32_t ci = m->threads_[o.ring_setup_thread].ops[o.ring_setup_op].async_ctx;
    if (ci == kNone) return;
    op->async_ctx = ci;
    const AsyncContext& c = m->async_contexts_[ci];
    auto key = async_ctx_index.find(AsyncContextKey(c.engine, c.ctx));
    if (key != async_ctx_index.end() && key->second == ci) async_ctx_index.erase(key);
  }
  std::unordered_map<uint32_t, std::pair<uint32_t, uint64_t>> last_batch;  // thread -> (batch, key)
  uint32_t next_batch = 0;
  DependencyTracker deps;
  uint64_t page_size = 4096;

  // ---------------------------------------------------------------------------------------
  PathId Intern(std::string s) {
    auto it = path_ids.find(std::string_view(s));
    if (it != path_ids.end()) return *it;
    PathId id = static_cast<PathId>(m->paths_.size());
    m->paths_.push_back(std::move(s));
    parent_of.push_back(kNone);
    path_ids.insert(id);
    return id;
  }
  PathId Parent(PathId p) {
    if (parent_of[p] != kNone) return parent_of[p];
    const std::string& s = m->paths_[p];
    if (s.empty() || s[0] != '/' || s == "/") return kNone;
    PathId parent = Intern(std::string(ParentPath(s)));
    parent_of[p] = parent;
    return parent;
  }
  bool Pseudo(PathId p) { return IsPseudoFsPath(m->paths_[p]); }
  uint64_t PageRound(uint64_t n) const { return Sum(n, page_size - 1) & ~(page_size - 1); }

  uint32_t ProcessFor(uint32_t tgid) {
    auto it = proc_by_tgid.find(tgid);
    if (it != proc_by_tgid.end()) return it->second;
    uint32_t idx = static_cast<uint32_t>(m->processes_.size());
    m->processes_.push_back(Process{});
    m->processes_.back().tgid = tgid;
    pstate.emplace_back();
    proc_by_tgid[tgid] = idx;
    return idx;
  }

  uint32_t ThreadFor(uint32_t tid, uint32_t tgid, uint64_t ts) {
    auto it = thread_by_tid.find(tid);
    if (it != thread_by_tid.end()) return it->second;
    return NewThread(tid, tgid, ProcessFor(tgid), ts, kNone, kNone);
  }

  uint32_t NewThread(uint32_t tid, uint32_t tgid, uint32_t process, uint64_t ts, uint32_t creator,
                     uint32_t creator_op) {
    uint32_t idx = static_cast<uint32_t>(m->threads_.size());
    Thread t;
    t.tid = tid;
    t.tgid = tgid;
    t.process = process;
    t.start_ts = ts;
    t.creator = creator;
    t.creator_op = creator_op;
    m->threads_.push_back(std::move(t));
    m->processes_[process].threads.push_back(idx);
    pstate[process].live_threads++;
    thread_by_tid[tid] = idx;
    return idx;
  }

  void NoteFd(uint32_t process, int32_t fd) {
    if (fd > m->processes_[process].max_fd) m->processes_[process].max_fd = fd;
  }

  // ---- file set -------------------------------------------------------------------------
  uint32_t NewFile(PathId p, FileOrigin origin, bool is_dir) {
    uint32_t idx = static_cast<uint32_t>(m->files_.size());
    FileInfo f;
    f.path = p;
    f.origin = origin;
    m->files_.push_back(f);
    file_kind.emplace_back();
    file_by_path[p] = idx;
    absent.erase(p);
    if (is_dir || m->paths_[p] == "/") MarkDir(idx, kNone);
    return idx;
  }

  // The op being modelled (thread, index it will have), for the evidence of file kinds;
  // kNone for records that are no op (snapshots, cwd records).
  uint32_t cur_thread = kNone, cur_op = kNone;
  // Why the model takes a file for a directory, and where it saw data I/O on it: the first
  // evidence of each, to name both in a warning when one file has both.
  struct KindEvidence {
    uint32_t dir_thread = kNone, dir_op = kNone;
    PathId dir_child = kNone;  // a name below it, when that is the evidence
    uint32_t data_thread = kNone, data_op = kNone;
    bool dir = false, data = false, conflict = false;
  };
  std::vector<KindEvidence> file_kind;  // parallel to files_

  // File `f` is a directory: a name below it exists (`child`), or an op treats it as one.
  void MarkDir(uint32_t f, PathId child) {
    if (f == kNone) return;
    FileInfo& fi = m->files_[f];
    fi.is_dir = true;
    fi.ftype = kFtypeDir;
    KindEvidence& k = file_kind[f];
    if (!k.dir) {
      k.dir = true;
      k.dir_thread = cur_thread;
      k.dir_op = cur_op;
      k.dir_child = child;
    }
    if (k.data) k.conflict = true;
  }
  // File `f` had bytes read or written (or was truncated or mapped): a regular file.
  void DataUse(uint32_t f) {
    if (f == kNone) return;
    KindEvidence& k = file_kind[f];
    if (!k.data) {
      k.data = true;
      k.data_thread = cur_thread;
      k.data_op = cur_op;
    }
    if (k.dir) k.conflict = true;
  }
  void AddKindWarnings();

  // Every existing ancestor of `p` is a directory; those the trace has not shown yet existed
  // before it (pre-existing directories).
  void EnsureParentDirs(PathId p) {
    for (PathId q = Parent(p), child = p; q != kNone; child = q, q = Parent(q)) {
      auto it = file_by_path.find(q);
      if (it != file_by_path.end()) {
        MarkDir(it->second, child);
        return;
      }
      if (Pseudo(q) || m->paths_[q] == "/") return;
      NewFile(q, FileOrigin::kPreexisting, true);
    }
  }

  // A path the trace shows existing at this point. Returns its file (kNone for pseudo paths).
  uint32_t Exists(PathId p, bool is_dir, uint64_t size, const iot_syscall* sc) {
    if (Pseudo(p)) return kNone;
    uint32_t f;
    auto it = file_by_path.find(p);
    if (it != file_by_path.end()) {
      f = it->second;
    } else if (absent.count(p)) {
      // Known absent earlier and never created in the trace: something untraced made it.
      // It is not part of the initial set (it did not exist at start).
      f = NewFile(p, FileOrigin::kCreated, is_dir);
      EnsureParentDirs(p);
    } else {
      f = NewFile(p, FileOrigin::kPreexisting, is_dir);
      EnsureParentDirs(p);
    }
    if (is_dir) MarkDir(f, kNone);
    FileInfo& fi = m->files_[f];
    if (sc != nullptr) {
      if (sc->ftype == kFtypeDir) MarkDir(f, kNone);
      else if (sc->ftype != 0 && !fi.is_dir) fi.ftype = sc->ftype;
      if (sc->ino != 0) {
        fi.ino = sc->ino;
        fi.dev = sc->dev;
      }
    }
    GrowInitial(f, size);
    return f;
  }

  void GrowInitial(uint32_t f, uint64_t size) {
    if (f == kNone) return;
    FileInfo& fi = m->files_[f];
    if (fi.origin != FileOrigin::kPreexisting || fi.modified || fi.is_dir) return;
    fi.initial_size = std::max(fi.initial_size, size);
  }

  uint32_t Created(PathId p, bool is_dir) {
    if (Pseudo(p)) return kNone;
    uint32_t f = NewFile(p, FileOrigin::kCreated, is_dir);
    EnsureParentDirs(p);
    return f;
  }

  void Modified(uint32_t f) {
    if (f != kNone) m->files_[f].modified = true;
  }

  void Removed(PathId p) { file_by_path.erase(p); absent.insert(p); }

  void Renamed(PathId from, PathId to, bool exchange) {
    auto it = file_by_path.find(from);
    uint32_t f = it == file_by_path.end() ? kNone : it->second;
    auto jt = file_by_path.find(to);
    uint32_t g = jt == file_by_path.end() ? kNone : jt->second;
    if (f == kNone) return;
    bool dir = m->files_[f].is_dir;
    const std::string from_s = m->paths_[from], to_s = m->paths_[to];
    file_by_path.erase(from);
    if (exchange && g != kNone) file_by_path[from] = g; else absent.insert(from);
    file_by_path[to] = f;
    absent.erase(to);
    if (!dir) return;
    // A directory moved: everything known below it moves too, open descriptors included.
    std::vector<std::pair<PathId, uint32_t>> moved;
    for (auto& [p, file] : file_by_path) {
      if (p != to && p != from && PathIsWithin(m->paths_[p], from_s)) moved.push_back({p, file});
    }
    for (auto& [p, file] : moved) {
      file_by_path.erase(p);
      file_by_path[Intern(ReplacePrefix(m->paths_[p], from_s, to_s))] = file;
    }
    for (auto& o : ofds) {
      if (o.path != kNone && PathIsWithin(m->paths_[o.path], from_s)) {
        o.path = Intern(ReplacePrefix(m->paths_[o.path], from_s, to_s));
      }
    }
  }

  // ---- paths ------------------------------------------------------------------------------
  // Resolves a recorded path string against dirfd/cwd. Sets *skip when it cannot.
  PathId ResolveArg(uint32_t process, uint32_t id, uint16_t sflags, int dirfd, Skip* skip,
                    bool* empty) {
    *empty = false;
    std::optional<std::string_view> str = String(id);
    if (!str || (sflags & (IOT_SCF_PATH_TRUNC | IOT_SCF_PATH_FAULT))) {
      *skip = Skip::kUnknownPath;
      return kNone;
    }
    const std::string_view s = *str;
    if (!s.empty() && s[0] == '/') return Intern(NormalizePath(s));
    PathId base = kNone;
    ProcState& ps = pstate[process];
    if (dirfd == kAtFdcwd) {
      base = ps.cwd;
    } else {
      auto fit = ps.fds.find(dirfd);
      if (fit != ps.fds.end()) base = ofds[fit->second.ofd].path;
    }
    if (s.empty()) *empty = true;
    if (base == kNone) {
      *skip = Skip::kUnknownPath;
      return kNone;
    }
    return Intern(ResolvePath(m->paths_[base], s));
  }

  // ---- descriptors ------------------------------------------------------------------------
  const FdEntry* LookupFd(uint32_t process, int32_t fd) {
    auto& fds = pstate[process].fds;
    auto it = fds.find(fd);
    return it == fds.end() ? nullptr : &it->second;
  }

  void MarkUnknownFd(uint32_t process, int32_t fd, Op* op) {
    op->fd_state = FdState::kUnknown;
    if (op->skip == Skip::kReplayable) op->skip = Skip::kUnknownFd;
    unknown_fds.insert({process, fd});
  }

  // Binds descriptor `fd` of op->process to the op's data descriptor state.
  void BindDataFd(int32_t fd, Op* op) {
    const FdEntry* e = LookupFd(op->process, fd);
    if (e == nullptr) {
      MarkUnknownFd(op->process, fd, op);
      return;
    }
    op->fd_state = FdState::kKnown;
    op->ofd = e->ofd;
    const Ofd& o = ofds[e->ofd];
    op->file = o.file;
    if (op->path == kNone) op->path = o.path;
    if (op->skip == Skip::kReplayable) {
      if (o.pseudo) op->skip = Skip::kPseudoFs;
      else if (o.path_unknown) op->skip = Skip::kUnknownPath;
    }
  }

  void SetFd(uint32_t process, int32_t fd, uint32_t ofd, bool cloexec) {
    pstate[process].fds[fd] = FdEntry{ofd, cloexec};
    NoteFd(process, fd);
  }

  uint32_t NewOfd(PathId path, uint32_t file, uint32_t flags, bool path_unknown) {
    Ofd o;
    o.path = path;
    o.file = file;
    o.flags = flags;
    o.path_unknown = path_unknown;
    o.pseudo = path != kNone && Pseudo(path);
    ofds.push_back(o);
    return static_cast<uint32_t>(ofds.size() - 1);
  }

  uint64_t FileKey(uint32_t file) { return ResourceKey(ResourceTag::kFile, file); }
  uint64_t LockKey(uint32_t file) { return ResourceKey(ResourceTag::kLock, file); }

  // The ordering resource of descriptor number `fd` of `proc`, for declarations inside Push.
  // The number is noted among the process's slots, which fork and exit visit (rather than every
  // number up to the highest, which a trace can put near INT_MAX); a number named for the first
  // time follows the process's earlier forks, as it would have had the fork visited it.
  uint64_t FdKey(uint32_t proc, int32_t fd) {
    ProcState& ps = pstate[proc];
    if (ps.slots.Insert(fd)) {
      for (const auto& [thread, index] : ps.last_fork) deps.After(thread, index);
    }
    return FdResource(proc, fd);
  }

  // Declares the path resources of a path argument: ancestors shared, the name itself shared or
  // exclusive.
  void PathResources(PathId p, bool exclusive) {
    if (p == kNone) return;
    for (PathId q = Parent(p); q != kNone; q = Parent(q)) {
      deps.Read(ResourceKey(ResourceTag::kPath, q));
    }
    if (exclusive) deps.Write(ResourceKey(ResourceTag::kPath, p));
    else deps.Read(ResourceKey(ResourceTag::kPath, p));
  }

  // ---- mappings -----------------------------------------------------------------------------
  uint32_t FindMapping(uint32_t process, uint64_t addr) {
    auto& maps = pstate[process].maps;
    auto it = maps.upper_bound(addr);
    if (it == maps.begin()) return kNone;
    --it;
    if (addr >= it->second.end) return kNone;
    return it->second.mapping;
  }

  // The one mapping whose pieces cover [start, end) contiguously, or kNone.
  uint32_t CoveringMapping(uint32_t process, uint64_t start, uint64_t end) {
    auto& maps = pstate[process].maps;
    auto it = maps.upper_bound(start);
    if (it == maps.begin()) return kNone;
    --it;
    if (it->second.end <= start) return kNone;
    uint32_t id = it->second.mapping;
    uint64_t covered = it->second.end;
    while (covered < end) {
      ++it;
      if (it == maps.end() || it->first != covered || it->second.mapping != id) return kNone;
      covered = it->second.end;
    }
    return id;
  }

  void UnmapRange(uint32_t process, uint64_t start, uint64_t end) {
    auto& maps = pstate[process].maps;
    auto it = maps.upper_bound(start);
    if (it != maps.begin()) --it;
    std::vector<std::pair<uint64_t, MapPiece>> keep;
    while (it != maps.end() && it->first < end) {
      if (it->second.end <= start) {
        ++it;
        continue;
      }
      if (it->first < start) keep.push_back({it->first, MapPiece{start, it->second.mapping}});
      if (it->second.end > end) keep.push_back({end, it->second});
      it = maps.erase(it);
    }
    for (auto& k : keep) maps.emplace(k.first, k.second);
  }

  uint32_t AddMapping(Mapping mp) {
    uint32_t id = static_cast<uint32_t>(m->mappings_.size());
    UnmapRange(mp.process, mp.start, Sum(mp.start, mp.length));
    pstate[mp.process].maps.emplace(mp.start, MapPiece{Sum(mp.start, mp.length), id});
    m->mappings_.push_back(mp);
    return id;
  }

  // ---- ops ----------------------------------------------------------------------------------
  // Appends `op` to thread `t`, with the resources declared by `declare` (called between
  // DependencyTracker::Begin and End).
  template <typename F>
  uint32_t Push(uint32_t t, Op op, F&& declare) {
    Thread& th = m->threads_[t];
    uint32_t index = static_cast<uint32_t>(th.ops.size());
    if (options.compute_dependencies) {
      deps.Begin(t, index, op.ts, op.end);
      if (index == 0 && th.creator != kNone) deps.After(th.creator, th.creator_op);
      declare();
      op.dep_begin = static_cast<uint32_t>(m->deps_.size());
      op.dep_count = deps.End(&m->deps_);
    }
    th.ops.push_back(op);
    return index;
  }
  uint32_t Push(uint32_t t, Op op) {
    return Push(t, op, [] {});
  }

  void HandleSyscall(const iot_syscall& sc);
  void HandleProc(const iot_proc& p);
  void HandleFdSnapshot(const iot_fd_snapshot& s);
  void HandleMapSnapshot(const iot_map_snapshot& s);
  void HandleFault(const iot_page_fault& f);
  void HandleAsync(const iot_async_io& a);
  void HandleCache(const iot_cache_state& c);
  bool PostponeDescriptorHandovers();
  void BuildBlockRequests();
  Status Finish();
};

void ModelBuilder::Impl::HandleSyscall(const iot_syscall& sc) {
  uint32_t t = ThreadFor(sc.tid, sc.tgid, sc.ts);
  uint32_t proc = m->threads_[t].process;
  ProcState& ps = pstate[proc];
  cur_thread = t;
  cur_op = static_cast<uint32_t>(m->threads_[t].ops.size());
  Op op;
  op.kind = OpKind::kSyscall;
  op.sc = sc;
  op.process = proc;
  op.ts = sc.ts;
  op.interrupted = (sc.sflags & IOT_SCF_INTERRUPTED) != 0;
  op.end = op.interrupted ? UINT64_MAX : Sum(sc.ts, sc.dur);
  op.result = sc.ret;
  const bool ok = !op.interrupted && sc.ret >= 0;
  const uint16_t code = sc.op;
  if (code <= IOT_OP_MAX) m->stats_.ops_by_kind[code]++;
  m->stats_.syscalls++;

  // iovec layout
  if (IsVectored(code)) {
    auto key = std::make_pair(sc.tid, sc.ts);
    auto it = iovecs.find(key);
    std::vector<uint64_t> lens;
    uint64_t count = sc.aux;
    if (it != iovecs.end()) {
      lens = it->second;
      count = std::max<uint64_t>(iovec_counts[key], lens.size());
      iovecs.erase(it);
    }
    if (count == 0) count = 1;
    count = std::min(count, kIovMax);
    if (lens.size() > count) lens.resize(count);
    uint64_t known = 0;
    for (auto l : lens) known = Sum(known, l);
    uint64_t missing = count - lens.size();
    uint64_t rest = sc.length > known ? sc.length - known : 0;
    for (uint64_t i = 0; i < missing; i++) {
      uint64_t share = rest / missing + (i < rest % missing ? 1 : 0);
      lens.push_back(share);
    }
    op.extra_begin = static_cast<uint32_t>(m->extra_.size());
    op.extra_count = static_cast<uint32_t>(lens.size());
    m->extra_.insert(m->extra_.end(), lens.begin(), lens.end());
  }

  // Paths.
  bool empty = false;
  if (OpTakesPath(code)) {
    op.path = ResolveArg(proc, sc.path_id, sc.sflags, PathDirFd(sc), &op.skip, &empty);
    if (empty) {
      // AT_EMPTY_PATH: the op acts on the dirfd itself.
      op.empty_path = true;
      op.skip = Skip::kReplayable;
      BindDataFd(PathDirFd(sc), &op);
    }
  } else if (code == IOT_OP_SYMLINK || code == IOT_OP_SYMLINKAT) {
    std::optional<std::string_view> target = String(sc.path_id);
    if (!target) op.skip = Skip::kUnknownPath;
    else op.path = Intern(std::string(*target));  // the target, verbatim
  }
  if (OpTakesPath2(code)) {
    Skip s2 = Skip::kReplayable;
    bool e2 = false;
    op.path2 = ResolveArg(proc, sc.path2_id, sc.sflags, Path2DirFd(sc), &s2, &e2);
    if (s2 != Skip::kReplayable && op.skip == Skip::kReplayable) op.skip = s2;
  }
  if (op.skip == Skip::kReplayable && OpTakesPath(code) && op.path != kNone && Pseudo(op.path)) {
    op.skip = Skip::kPseudoFs;
  }
  if (op.skip == Skip::kReplayable && op.path2 != kNone && Pseudo(op.path2)) {
    op.skip = Skip::kPseudoFs;
  }

  // Descriptors.
  if (OpHasDataFd(sc)) {
    int dfd = DataFd(sc);
    if (dfd >= 0) BindDataFd(dfd, &op);
    else MarkUnknownFd(proc, dfd, &op);
  }
  if (code == IOT_OP_MMAP && (sc.flags & MAP_ANONYMOUS)) op.skip = Skip::kUnsupported;
  int sfd = SecondFd(sc);
  if (sfd != -1) {
    const FdEntry* e = LookupFd(proc, sfd);
    op.fd2_state = e ? FdState::kKnown : FdState::kUnknown;
    if (!e) unknown_fds.insert({proc, sfd});
    // sendfile to a socket is still a file read: replay sends to a sink instead.
    if (!e && code == IOT_OP_COPY_FILE_RANGE && op.skip == Skip::kReplayable) {
      op.skip = Skip::kUnknownFd;
    }
  }
  if (code == IOT_OP_SPLICE || code == IOT_OP_UNKNOWN || code > IOT_OP_MAX) {
    if (op.skip == Skip::kReplayable) op.skip = Skip::kUnsupported;
  }
  if (code == IOT_OP_FCNTL && op.skip == Skip::kReplayable) {
    const int cmd = FcntlCmd(sc);
    switch (cmd) {
      case F_DUPFD: case F_DUPFD_CLOEXEC: case F_GETFD: case F_SETFD: case F_GETFL:
      case F_SETFL: case F_GETLEASE:
        break;
      default:
        // Record locks are replayed from their recorded struct flock, unless the capture could
        // not read it. Leases are not: breaking one signals the holder (SIGIO would kill the
        // replay). Owners, signals, seals and pipe sizes are not storage.
        if (!FcntlIsLock(cmd) || LockType(sc) == -1) op.skip = Skip::kUnsupported;
    }
  }
  if (op.ofd != kNone && ofds[op.ofd].ring &&
      (code == IOT_OP_MMAP || code == IOT_OP_MUNMAP) && op.skip == Skip::kReplayable) {
    op.skip = Skip::kUnsupported;  // ring memory, recreated by the async back end
  }

  // Effects on the model, with the resources each op touches.
  uint32_t index_in_thread = static_cast<uint32_t>(m->threads_[t].ops.size());
  std::vector<uint64_t> fd_list;  // close_range / etc.
  auto declare_fd_use = [&, this](int fd) {
    if (fd >= 0) deps.Read(FdKey(proc, fd));
  };
  std::vector<std::function<void()>> decl;  // resource declarations, run inside Push

  const bool ofd = op.ofd != kNone;  // the data descriptor's open file is known
  uint32_t file = op.file;

  switch (code) {
    case IOT_OP_OPEN: case IOT_OP_OPENAT: case IOT_OP_OPENAT2: case IOT_OP_CREAT: {
      uint32_t flags = EffectiveOpenFlags(sc);
      bool creat = flags & O_CREAT, excl = flags & O_EXCL, trunc = flags & O_TRUNC;
      PathId p = op.path;
      uint32_t f = kNone;
      if (p != kNone && !Pseudo(p)) {
        if (ok) {
          auto it = file_by_path.find(p);
          bool dir = sc.ftype == kFtypeDir || (flags & O_DIRECTORY);
          if (it != file_by_path.end()) {
            f = Exists(p, dir, trunc ? 0 : sc.fsize, &sc);
          } else if (creat && (excl || trunc || sc.fsize == 0)) {
            f = Created(p, false);
            FileInfo& fi = m->files_[f];
            fi.ino = sc.ino;
            fi.dev = sc.dev;
            fi.ftype = sc.ftype;
          } else {
            f = Exists(p, dir, trunc ? 0 : sc.fsize, &sc);
          }
          if (trunc) {
            Modified(f);
            DataUse(f);
          }
        } else if (sc.ret == -ENOENT) {
          if (!file_by_path.count(p)) absent.insert(p);
        } else if (sc.ret == -EEXIST || sc.ret == -EISDIR) {
          f = Exists(p, sc.ret == -EISDIR, 0, nullptr);
        }
      }
      op.file = f;
      if (ok) {
        int32_t nfd = static_cast<int32_t>(sc.ret);
        uint32_t o = NewOfd(op.skip == Skip::kUnknownPath ? kNone : p, f, flags,
                            op.skip == Skip::kUnknownPath);
        SetFd(proc, nfd, o, flags & O_CLOEXEC);
        op.ofd = o;
      }
      decl.push_back([=, this] {
        PathResources(p, creat || trunc);
        if (ok) deps.Write(FdKey(proc, static_cast<int32_t>(sc.ret)));
        if (trunc && f != kNone) deps.WriteRange(FileKey(f), 0, UINT64_MAX);
      });
      break;
    }
    case IOT_OP_CLOSE: {
      if (op.fd_state == FdState::kKnown && sc.ret != -EBADF) {
        // Closing an io_uring instance: the replay tears its engine down here, so the ring's
        // close (and unmapping) happens where the original's did.
        auto it = ps.fds.find(sc.fd);
        if (ok && it != ps.fds.end()) RingClosed(proc, sc.fd, it->second.ofd, &op);
        ps.fds.erase(sc.fd);
      }
      decl.push_back([=, this] { if (sc.fd >= 0) deps.Write(FdKey(proc, sc.fd)); });
      break;
    }
    case IOT_OP_CLOSE_RANGE: {
      uint32_t first = CloseRangeFirst(sc), last = CloseRangeLast(sc);
      if (ok) {
        std::vector<int32_t> hit;
        for (auto& [fd, e] : ps.fds) {
          if (static_cast<uint32_t>(fd) >= first && static_cast<uint32_t>(fd) <= last) {
            hit.push_back(fd);
          }
        }
        std::sort(hit.begin(), hit.end());
        for (int32_t fd : hit) {
          if (sc.flags & CLOSE_RANGE_CLOEXEC) ps.fds[fd].cloexec = true;
          else ps.fds.erase(fd);
          fd_list.push_back(static_cast<uint64_t>(fd));
        }
      }
      op.fd_state = FdState::kKnown;
      decl.push_back([=, this] {
        for (auto fd : fd_list) deps.Write(FdKey(proc, static_cast<int32_t>(fd)));
      });
      break;
    }
    case IOT_OP_DUP: case IOT_OP_DUP2: case IOT_OP_DUP3: case IOT_OP_FCNTL: {
      int cmd = code == IOT_OP_FCNTL ? FcntlCmd(sc) : -1;
      bool dupping = code != IOT_OP_FCNTL || cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC;
      int32_t newfd = -1;
      if (dupping && ok) newfd = static_cast<int32_t>(sc.ret);
      if ((code == IOT_OP_DUP2 || code == IOT_OP_DUP3) && sc.fd2 >= 0) {
        if (LookupFd(proc, sc.fd2)) op.fd2_state = FdState::kKnown;
        NoteFd(proc, sc.fd2);
      }
      if (newfd >= 0 && newfd != sc.fd) {
        const FdEntry* e = LookupFd(proc, sc.fd);
        if (e) SetFd(proc, newfd, e->ofd, OpResultCloexec(sc));
        else { ps.fds.erase(newfd); NoteFd(proc, newfd); }
      }
      if (code == IOT_OP_FCNTL && ok && op.fd_state == FdState::kKnown) {
        if (cmd == F_SETFD) ps.fds[sc.fd].cloexec = (FcntlArg(sc) & FD_CLOEXEC) != 0;
        if (cmd == F_SETFL && op.ofd != kNone) {
          // F_SETFL changes only these; the access mode and creation flags stay.
          constexpr uint32_t kSettable = O_APPEND | O_ASYNC | O_DIRECT | O_NOATIME | O_NONBLOCK;
          uint32_t& f = ofds[op.ofd].flags;
          f = (f & ~kSettable) | (static_cast<uint32_t>(FcntlArg(sc)) & kSettable);
        }
      }
      const bool locks = code == IOT_OP_FCNTL && (FcntlIsLock(cmd) || cmd == F_SETLEASE ||
                                                  cmd == F_GETLEASE);
      decl.push_back([=, this] {
        declare_fd_use(sc.fd);
        if (newfd >= 0) deps.Write(FdKey(proc, newfd));
        if (locks && file != kNone) deps.UseInOrder(LockKey(file));
      });
      break;
    }
    case IOT_OP_FLOCK: {
      decl.push_back([=, this] {
        declare_fd_use(sc.fd);
        if (file != kNone) deps.UseInOrder(LockKey(file));
      });
      break;
    }
    case IOT_OP_READ: case IOT_OP_WRITE: case IOT_OP_READV: case IOT_OP_WRITEV:
    case IOT_OP_PREAD64: case IOT_OP_PWRITE64: case IOT_OP_PREADV: case IOT_OP_PWRITEV:
    case IOT_OP_PREADV2: case IOT_OP_PWRITEV2: {
      bool positional = OpHasExplicitOffset(code) &&
                        !((code == IOT_OP_PREADV2 || code == IOT_OP_PWRITEV2) &&
                          sc.offset == kNoOffset);
      bool is_write = OpIsWrite(code);
      uint64_t pos = sc.offset;
      if (!positional && ofd) {
        pos = ofds[op.ofd].pos;
        if (is_write && (ofds[op.ofd].flags & O_APPEND) && ok && sc.fsize >= uint64_t(sc.ret)) {
          pos = sc.fsize - static_cast<uint64_t>(sc.ret);
        }
      }
      op.pos = pos;
      uint64_t n = ok ? static_cast<uint64_t>(sc.ret) : 0;
      if (ofd && ok && !positional) ofds[op.ofd].pos = Sum(pos, n);
      if (ok && n > 0) DataUse(file);
      if (file != kNone) {
        if (is_write) {
          if (ok && n > 0) Modified(file);
        } else if (ok) {
          GrowInitial(file, Sum(pos, n));
          GrowInitial(file, sc.fsize);
        }
      }
      uint32_t pos_ofd = positional ? kNone : op.ofd;
      decl.push_back([=, this] {
        declare_fd_use(sc.fd);
        if (pos_ofd != kNone) deps.Write(ResourceKey(ResourceTag::kPosition, pos_ofd));
        if (file != kNone && n > 0) {
          if (is_write) {
            deps.WriteRange(FileKey(file), pos, Sum(pos, n));
            deps.Read(FileKey(file));
          } else {
            deps.ReadRange(FileKey(file), pos, Sum(pos, n));
          }
        }
      });
      break;
    }
    case IOT_OP_LSEEK: {
      if (ok && ofd) ofds[op.ofd].pos = static_cast<uint64_t>(sc.ret);
      if (file != kNone && ok) GrowInitial(file, sc.fsize);
      uint32_t pos_ofd = op.ofd;
      decl.push_back([=, this] {
        declare_fd_use(sc.fd);
        if (pos_ofd != kNone) deps.Write(ResourceKey(ResourceTag::kPosition, pos_ofd));
      });
      break;
    }
    case IOT_OP_FSYNC: case IOT_OP_FDATASYNC: case IOT_OP_SYNC_FILE_RANGE: {
      decl.push_back([=, this] {
        declare_fd_use(sc.fd);
        if (file != kNone) deps.Write(FileKey(file));
      });
      break;
    }
    case IOT_OP_FALLOCATE: case IOT_OP_FTRUNCATE: {
      if (ok) {
        Modified(file);
        DataUse(file);
      }
      uint64_t b = code == IOT_OP_FALLOCATE ? sc.offset : 0;
      uint64_t e = code == IOT_OP_FALLOCATE ? Sum(sc.offset, sc.length) : UINT64_MAX;
      decl.push_back([=, this] {
        declare_fd_use(sc.fd);
        if (file != kNone) deps.WriteRange(FileKey(file), b, e);
      });
      break;
    }
    case IOT_OP_TRUNCATE: {
      uint32_t f = kNone;
      if (op.path != kNone && op.skip == Skip::kReplayable) {
        if (ok) f = Exists(op.path, false, 0, nullptr);
        if (ok) {
          Modified(f);
          DataUse(f);
        }
      }
      op.file = f;
      PathId p = op.path;
      decl.push_back([=, this] {
        PathResources(p, false);
        if (f != kNone) deps.WriteRange(FileKey(f), 0, UINT64_MAX);
      });
      break;
    }
    case IOT_OP_FADVISE64: case IOT_OP_READAHEAD: case IOT_OP_FSTAT: case IOT_OP_GETDENTS64:
    case IOT_OP_SYNCFS: {
      if (ok && file != kNone) GrowInitial(file, sc.fsize);
      if (ok && code == IOT_OP_GETDENTS64) MarkDir(file, kNone);
      uint32_t pos_ofd = code == IOT_OP_GETDENTS64 ? op.ofd : kNone;  // directory position
      decl.push_back([=, this] {
        declare_fd_use(sc.fd);
        if (pos_ofd != kNone) deps.Write(ResourceKey(ResourceTag::kPosition, pos_ofd));
      });
      break;
    }
    case IOT_OP_COPY_FILE_RANGE: case IOT_OP_SENDFILE: {
      uint64_t n = ok ? static_cast<uint64_t>(sc.ret) : 0;
      int in_fd = DataFd(sc), out_fd = SecondFd(sc);
      uint64_t in_pos = sc.offset;
      if (in_pos == kNoOffset && ofd) in_pos = ofds[op.ofd].pos;
      if (sc.offset == kNoOffset && ofd && ok) ofds[op.ofd].pos = Sum(ofds[op.ofd].pos, n);
      op.pos = in_pos;
      if (file != kNone && ok) GrowInitial(file, Sum(in_pos, n));
      if (ok && n > 0) DataUse(file);
      uint32_t out_file = kNone;
      uint64_t out_pos = 0;
      if (const FdEntry* e = LookupFd(proc, out_fd)) {
        Ofd& oo = ofds[e->ofd];
        out_file = oo.file;
        out_pos = code == IOT_OP_COPY_FILE_RANGE && CopyOutOffset(sc) != kNoOffset
                      ? CopyOutOffset(sc) : oo.pos;
        bool positional_out = code == IOT_OP_COPY_FILE_RANGE && CopyOutOffset(sc) != kNoOffset;
        if (!positional_out && ok) oo.pos = Sum(oo.pos, n);
        if (ok && n) {
          Modified(out_file);
          DataUse(out_file);
        }
      }
      uint32_t in_pos_ofd = sc.offset == kNoOffset ? op.ofd : kNone;
      const FdEntry* oe = LookupFd(proc, out_fd);
      uint32_t out_pos_ofd =
          oe && !(code == IOT_OP_COPY_FILE_RANGE && CopyOutOffset(sc) != kNoOffset) ? oe->ofd : kNone;
      decl.push_back([=, this] {
        declare_fd_use(in_fd);
        declare_fd_use(out_fd);
        if (in_pos_ofd != kNone) deps.Write(ResourceKey(ResourceTag::kPosition, in_pos_ofd));
        if (out_pos_ofd != kNone) deps.Write(ResourceKey(ResourceTag::kPosition, out_pos_ofd));
        if (file != kNone && n) deps.ReadRange(FileKey(file), in_pos, Sum(in_pos, n));
        if (out_file != kNone && n) deps.WriteRange(FileKey(out_file), out_pos, Sum(out_pos, n));
      });
      break;
    }
    case IOT_OP_MMAP: {
      if (ok && op.skip == Skip::kReplayable && (sc.flags & (MAP_FIXED | MAP_FIXED_NOREPLACE))) {
        uint64_t start = static_cast<uint64_t>(sc.ret);
        uint32_t in = CoveringMapping(proc, start, Sum(start, PageRound(sc.length)));
        if (in != kNone) {
          op.fixed_in = in;
          op.map_offset = start - m->mappings_[in].start;
        }
      }
      if (ok && op.skip == Skip::kReplayable) {
        Mapping mp;
        mp.process = proc;
        mp.start = static_cast<uint64_t>(sc.ret);
        mp.length = PageRound(sc.length);  // the kernel maps whole pages
        mp.file_offset = sc.offset;
        mp.prot = sc.mode;
        mp.flags = sc.flags;
        mp.path = op.path;
        mp.file = file;
        mp.ofd = op.ofd;
        mp.thread = t;
        mp.op = index_in_thread;
        mp.fd = sc.fd;
        op.mapping = AddMapping(mp);
        if (file != kNone) GrowInitial(file, sc.fsize);
        DataUse(file);
      } else if (ok) {
        UnmapRange(proc, static_cast<uint64_t>(sc.ret),
                   Sum(static_cast<uint64_t>(sc.ret), PageRound(sc.length)));
      }
      uint32_t mid = op.mapping;
      decl.push_back([=, this] {
        declare_fd_use(sc.fd);
        if (mid != kNone) deps.Write(ResourceKey(ResourceTag::kMapping, mid));
      });
      break;
    }
    case IOT_OP_MUNMAP: case IOT_OP_MSYNC: case IOT_OP_MADVISE: case IOT_OP_MREMAP: {
      uint64_t addr = MemAddr(sc);
      op.mapping = FindMapping(proc, addr);
      if (op.mapping == kNone) {
        if (op.skip == Skip::kReplayable) op.skip = Skip::kUnknownMapping;
      } else {
        const Mapping& mp = m->mappings_[op.mapping];
        op.map_offset = addr - mp.start;
        op.path = mp.path;
        op.file = mp.file;
      }
      uint32_t mid = op.mapping;
      uint32_t new_mid = kNone;
      uint64_t len = PageRound(MemLength(sc));
      if (ok && code == IOT_OP_MUNMAP) UnmapRange(proc, addr, Sum(addr, len));
      if (ok && code == IOT_OP_MREMAP && mid != kNone) {
        Mapping mp = m->mappings_[mid];
        UnmapRange(proc, addr, Sum(addr, len));
        mp.file_offset += addr - mp.start;
        mp.start = static_cast<uint64_t>(sc.ret);
        mp.length = PageRound(MremapNewLength(sc));
        mp.thread = t;
        mp.op = index_in_thread;
        mp.inherited_from = kNone;
        new_mid = AddMapping(mp);
        // The op refers to the old mapping; the new one is recorded in extra.
        fd_list.push_back(new_mid);
      }
      bool excl = code == IOT_OP_MUNMAP || code == IOT_OP_MREMAP;
      decl.push_back([=, this] {
        if (mid == kNone) return;
        if (excl) deps.Write(ResourceKey(ResourceTag::kMapping, mid));
        else deps.Read(ResourceKey(ResourceTag::kMapping, mid));
        if (new_mid != kNone) deps.Write(ResourceKey(ResourceTag::kMapping, new_mid));
        if (code == IOT_OP_MSYNC && m->mappings_[mid].file != kNone) {
          deps.Write(FileKey(m->mappings_[mid].file));
        }
      });
      break;
    }
    case IOT_OP_STAT: case IOT_OP_LSTAT: case IOT_OP_NEWFSTATAT: case IOT_OP_STATX: {
      PathId p = op.path;
      if (p != kNone && !op.empty_path && op.skip == Skip::kReplayable) {
        if (ok) op.file = Exists(p, sc.ftype == kFtypeDir, sc.fsize, &sc);
        else if (sc.ret == -ENOENT && !file_by_path.count(p)) absent.insert(p);
      }
      bool emp = op.empty_path;
      int dirfd = PathDirFd(sc);
      decl.push_back([=, this] {
        if (emp) declare_fd_use(dirfd);
        else PathResources(p, false);
      });
      break;
    }
    case IOT_OP_MKDIR: case IOT_OP_MKDIRAT: {
      PathId p = op.path;
      if (p != kNone && op.skip == Skip::kReplayable) {
        if (ok) op.file = Created(p, true);
        else if (sc.ret == -EEXIST) op.file = Exists(p, true, 0, nullptr);
      }
      decl.push_back([=, this] { PathResources(p, true); });
      break;
    }
    case IOT_OP_UNLINK: case IOT_OP_UNLINKAT: case IOT_OP_RMDIR: {
      PathId p = op.path;
      bool dir = code == IOT_OP_RMDIR || (code == IOT_OP_UNLINKAT && (sc.flags & AT_REMOVEDIR));
      if (p != kNone && op.skip == Skip::kReplayable) {
        if (ok) {
          op.file = Exists(p, dir, 0, nullptr);
          Removed(p);
        } else if (sc.ret == -ENOENT && !file_by_path.count(p)) {
          absent.insert(p);
        }
      }
      decl.push_back([=, this] { PathResources(p, true); });
      break;
    }
    case IOT_OP_RENAME: case IOT_OP_RENAMEAT: case IOT_OP_RENAMEAT2: {
      PathId p = op.path, q = op.path2;
      if (p != kNone && q != kNone && op.skip == Skip::kReplayable && ok) {
        op.file = Exists(p, sc.ftype == kFtypeDir, 0, nullptr);
        bool exchange = code == IOT_OP_RENAMEAT2 && (sc.flags & 2 /*RENAME_EXCHANGE*/);
        if (exchange) Exists(q, false, 0, nullptr);
        EnsureParentDirs(q);
        Renamed(p, q, exchange);
      }
      decl.push_back([=, this] {
        PathResources(p, true);
        PathResources(q, true);
      });
      break;
    }
    case IOT_OP_LINK: case IOT_OP_LINKAT: {
      PathId p = op.path, q = op.path2;
      if (p != kNone && q != kNone && op.skip == Skip::kReplayable && ok) {
        uint32_t f = Exists(p, false, 0, nullptr);
        op.file = f;
        EnsureParentDirs(q);
        file_by_path[q] = f;
        absent.erase(q);
      }
      decl.push_back([=, this] {
        PathResources(p, false);
        PathResources(q, true);
      });
      break;
    }
    case IOT_OP_SYMLINK: case IOT_OP_SYMLINKAT: {
      PathId q = op.path2;
      if (q != kNone && op.skip == Skip::kReplayable && ok) {
        op.file = Created(q, false);
        m->files_[op.file].ftype = S_IFLNK >> 12;
      }
      decl.push_back([=, this] { PathResources(q, true); });
      break;
    }
    case IOT_OP_CHDIR: {
      PathId p = op.path;
      if (p != kNone && op.skip == Skip::kReplayable && ok) {
        op.file = Exists(p, true, 0, nullptr);
        ps.cwd = p;
      }
      decl.push_back([=, this] { PathResources(p, false); });
      break;
    }
    case IOT_OP_FCHDIR: {
      if (ok && ofd) ps.cwd = ofds[op.ofd].path;
      if (ok) MarkDir(file, kNone);
      decl.push_back([=, this] { declare_fd_use(sc.fd); });
      break;
    }
    case IOT_OP_IO_SETUP: {
      // length = nr_events, aux = the context address written to *ctxp (the async records' ctx)
      if (ok && sc.length > 0) {
        aio_setup_size[sc.aux] = static_cast<uint32_t>(std::min<uint64_t>(sc.length, UINT32_MAX));
      }
      break;
    }
    case IOT_OP_IO_URING_SETUP: {
      if (ok && sc.length > 0) {
        // The kernel takes no more entries (or clamps to this with IORING_SETUP_CLAMP).
        uring_setup_size[t] = static_cast<uint32_t>(std::min<uint64_t>(sc.length, kUringMaxEntries));
      }
      if (ok) {
        uint32_t o = NewOfd(kNone, kNone, O_RDWR, false);
        ofds[o].ring = true;
        SetFd(proc, static_cast<int32_t>(sc.ret), o, true);
        op.ofd = o;
      }
      decl.push_back([=, this] {
        if (ok) deps.Write(FdKey(proc, static_cast<int32_t>(sc.ret)));
      });
      break;
    }
    case IOT_OP_IO_URING_ENTER: case IOT_OP_IO_URING_REGISTER: {
      decl.push_back([=, this] { declare_fd_use(sc.fd); });
      break;
    }
    default:
      break;
  }

  if (!fd_list.empty()) {
    op.extra_begin = static_cast<uint32_t>(m->extra_.size());
    op.extra_count = static_cast<uint32_t>(fd_list.size());
    m->extra_.insert(m->extra_.end(), fd_list.begin(), fd_list.end());
  }
  if (code <= IOT_OP_MAX && op.skip == Skip::kReplayable) m->stats_.replayable_by_kind[code]++;
  m->stats_.skipped_by_reason[static_cast<size_t>(op.skip)]++;
  uint32_t pushed = Push(t, op, [&] {
    for (auto& d : decl) d();
  });
  if (ok && code == IOT_OP_IO_SETUP) aio_setup_op[sc.aux] = {t, pushed};
  if (ok && code == IOT_OP_IO_URING_SETUP) {
    uring_setup_op[t] = pushed;
    uring_setups[t]++;
    ofds[op.ofd].ring_setup_thread = t;
    ofds[op.ofd].ring_setup_op = pushed;
  }
}

void ModelBuilder::Impl::HandleProc(const iot_proc& p) {
  Op op;
  op.proc = p;
  op.ts = p.ts;
  op.end = p.ts;
  switch (p.kind) {
    case IOT_PROC_FORK: {
      uint32_t parent_t = ThreadFor(p.tid, p.tgid, p.ts);
      uint32_t parent = m->threads_[parent_t].process;
      // A stale process with the child's tgid (missed exit) is forgotten.
      proc_by_tgid.erase(p.child_tgid);
      uint32_t child = ProcessFor(p.child_tgid);
      m->processes_[child].parent = parent;
      pstate[child].fds = pstate[parent].fds;
      pstate[child].cwd = pstate[parent].cwd;
      m->processes_[child].initial_cwd = pstate[parent].cwd;
      m->processes_[child].max_fd = m->processes_[parent].max_fd;
      // Mappings are inherited: the child gets its own copies.
      auto parent_maps = pstate[parent].maps;
      for (auto& [start, piece] : parent_maps) {
        Mapping mp = m->mappings_[piece.mapping];
        mp.process = child;
        mp.file_offset += start - mp.start;
        mp.start = start;
        mp.length = piece.end - start;
        mp.thread = kNone;
        mp.op = kNone;
        mp.inherited_from = piece.mapping;
        uint32_t id = AddMapping(mp);
        m->processes_[child].inherited_mappings.push_back(id);
      }
      op.kind = OpKind::kFork;
      op.process = parent;
      op.child = child;
      // The copy reads every descriptor slot of the parent: it follows earlier opens and closes
      // by the parent's other threads (numbers first named later follow it, FdKey).
      uint32_t idx = Push(parent_t, op, [&] {
        pstate[parent].slots.ForEach([&](int32_t fd) { deps.Read(FdResource(parent, fd)); });
      });
      if (options.compute_dependencies) pstate[parent].last_fork[parent_t] = idx;
      thread_by_tid.erase(p.child_tid);
      NewThread(p.child_tid, p.child_tgid, child, p.ts, parent_t, idx);
      break;
    }
    case IOT_PROC_THREAD: {
      uint32_t creator = ThreadFor(p.tid, p.tgid, p.ts);
      uint32_t proc = m->threads_[creator].process;
      op.kind = OpKind::kThreadStart;
      op.process = proc;
      thread_by_tid.erase(p.child_tid);
      uint32_t idx = static_cast<uint32_t>(m->threads_[creator].ops.size());
      uint32_t nt = NewThread(p.child_tid, p.tgid, proc, p.ts, creator, idx);
      op.child = nt;
      Push(creator, op, [&] {});
      break;
    }
    case IOT_PROC_EXEC: {
      uint32_t t = ThreadFor(p.tid, p.tgid, p.ts);
      uint32_t proc = m->threads_[t].process;
      ProcState& ps = pstate[proc];
      std::vector<uint64_t> closed;
      for (auto it = ps.fds.begin(); it != ps.fds.end();) {
        if (it->second.cloexec) {
          closed.push_back(static_cast<uint64_t>(it->first));
          it = ps.fds.erase(it);
        } else {
          ++it;
        }
      }
      std::sort(closed.begin(), closed.end());
      ps.maps.clear();
      op.kind = OpKind::kExec;
      op.process = proc;
      op.extra_begin = static_cast<uint32_t>(m->extra_.size());
      op.extra_count = static_cast<uint32_t>(closed.size());
      m->extra_.insert(m->extra_.end(), closed.begin(), closed.end());
      Push(t, op, [&] {
        for (auto fd : closed) deps.Write(FdKey(proc, static_cast<int32_t>(fd)));
      });
      break;
    }
    case IOT_PROC_EXIT: {
      auto it = thread_by_tid.find(p.tid);
      if (it == thread_by_tid.end()) break;
      uint32_t t = it->second;
      uint32_t proc = m->threads_[t].process;
      op.kind = OpKind::kExit;
      op.process = proc;
      ProcState& ps = pstate[proc];
      if (ps.live_threads > 0) ps.live_threads--;
      op.process_exit = (p.flags & IOT_PROCF_GROUP_DEAD) || ps.live_threads == 0;
      bool dead = op.process_exit;
      Push(t, op, [&] {
        // The last thread's exit closes every descriptor of the process (numbers never named
        // have no earlier use to follow).
        if (dead) ps.slots.ForEach([&](int32_t fd) { deps.Write(FdResource(proc, fd)); });
      });
      thread_by_tid.erase(it);
      if (op.process_exit) {
        ps.fds.clear();
        ps.maps.clear();
        auto pit = proc_by_tgid.find(p.tgid);
        if (pit != proc_by_tgid.end() && pit->second == proc) proc_by_tgid.erase(pit);
      }
      break;
    }
    case IOT_PROC_ATTACH: case IOT_PROC_CWD: case IOT_PROC_START: {
      uint32_t proc = ProcessFor(p.tgid);
      if (p.kind == IOT_PROC_ATTACH) m->processes_[proc].attached = true;
      if (p.tid != 0) ThreadFor(p.tid, p.tgid, p.ts);
      if (p.kind != IOT_PROC_START && p.path_id != 0) {
        std::optional<std::string_view> s = String(p.path_id);
        if (s && !s->empty() && (*s)[0] == '/') {
          PathId cwd = Intern(NormalizePath(*s));
          pstate[proc].cwd = cwd;
          if (m->processes_[proc].initial_cwd == kNone) m->processes_[proc].initial_cwd = cwd;
          if (!Pseudo(cwd)) Exists(cwd, true, 0, nullptr);
        }
      }
      break;
    }
    default:
      break;
  }
}

void ModelBuilder::Impl::HandleFdSnapshot(const iot_fd_snapshot& s) {
  uint32_t proc = ProcessFor(s.tgid);
  m->processes_[proc].attached = true;
  InitialFd ifd;
  ifd.fd = s.fd;
  ifd.flags = s.flags;
  ifd.pos = s.pos;
  std::optional<std::string_view> name = String(s.path_id);
  // Sockets, pipes, anonymous inodes and deleted files stay unknown descriptors.
  if (!name || name->empty() || (*name)[0] != '/' ||
      (s.ftype != 0 && s.ftype != kFtypeReg && s.ftype != kFtypeDir) ||
      name->find(" (deleted)") != std::string_view::npos) {
    return;
  }
  PathId p = Intern(NormalizePath(*name));
  uint32_t f = kNone;
  if (!Pseudo(p)) {
    iot_syscall fake{};
    fake.ftype = s.ftype;
    fake.ino = s.ino;
    fake.dev = s.dev;
    f = Exists(p, s.ftype == kFtypeDir, s.fsize, &fake);
  }
  uint32_t o = NewOfd(p, f, s.flags, false);
  ofds[o].pos = s.pos;
  SetFd(proc, s.fd, o, s.flags & O_CLOEXEC);
  ifd.path = p;
  ifd.file = f;
  m->processes_[proc].initial_fds.push_back(ifd);
}

void ModelBuilder::Impl::HandleMapSnapshot(const iot_map_snapshot& s) {
  uint32_t proc = ProcessFor(s.tgid);
  m->processes_[proc].attached = true;
  std::optional<std::string_view> name = String(s.path_id);
  if (!name || name->empty() || (*name)[0] != '/') return;
  PathId p = Intern(NormalizePath(*name));
  if (Pseudo(p)) return;
  iot_syscall fake{};
  fake.ino = s.ino;
  fake.dev = s.dev;
  if (s.end <= s.start) return;  // no range: nothing mapped
  uint32_t f = Exists(p, false, Sum(s.pgoff, 1), &fake);
  DataUse(f);
  Mapping mp;
  mp.process = proc;
  mp.start = s.start;
  mp.length = s.end - s.start;
  mp.file_offset = s.pgoff;
  mp.prot = s.prot;
  mp.flags = s.flags;
  mp.path = p;
  mp.file = f;
  uint32_t id = AddMapping(mp);
  m->processes_[proc].initial_mappings.push_back(id);
}

void ModelBuilder::Impl::HandleFault(const iot_page_fault& pf) {
  uint32_t t = ThreadFor(pf.tid, pf.tgid, pf.ts);
  uint32_t proc = m->threads_[t].process;
  Op op;
  cur_thread = t;
  cur_op = static_cast<uint32_t>(m->threads_[t].ops.size());
  op.kind = OpKind::kPageFault;
  op.pf = pf;
  op.process = proc;
  op.ts = pf.ts;
  op.end = pf.ts;
  m->stats_.page_faults++;
  op.mapping = FindMapping(proc, pf.addr);
  bool write = pf.flags & IOT_PFF_WRITE;
  uint32_t file = kNone;
  uint64_t page_start = pf.addr & ~(page_size - 1);
  if (op.mapping == kNone) {
    op.skip = Skip::kUnknownMapping;
  } else {
    const Mapping& mp = m->mappings_[op.mapping];
    op.map_offset = page_start - mp.start;
    op.path = mp.path;
    op.file = file = mp.file;
    op.pos = Sum(mp.file_offset, op.map_offset);
    if (file != kNone) {
      if (write) Modified(file);
      else GrowInitial(file, Sum(op.pos, 1));
      DataUse(file);
    }
  }
  m->stats_.skipped_by_reason[static_cast<size_t>(op.skip)]++;
  uint32_t mid = op.mapping;
  uint64_t pos = op.pos;
  Push(t, op, [&] {
    if (mid == kNone) return;
    deps.Read(ResourceKey(ResourceTag::kMapping, mid));
    if (file != kNone) {
      if (write) deps.WriteRange(FileKey(file), pos, Sum(pos, page_size));
      else deps.ReadRange(FileKey(file), pos, Sum(pos, page_size));
    }
  });
}

void ModelBuilder::Impl::HandleAsync(const iot_async_io& a) {
  uint64_t ckey = AsyncContextKey(a.engine, a.ctx);
  uint64_t req = a.req_id != 0 ? a.req_id : a.user_data;
  if (a.phase == IOT_AIO_COMPLETE) {
    auto it = async_pending.find({ckey, req});
    if (it == async_pending.end()) return;
    auto [t, idx] = it->second;
    Op& op = m->threads_[t].ops[idx];
    op.result = a.res;
    op.end = a.ts;
    op.interrupted = false;
    if (op.async_ctx != kNone && async_inflight[op.async_ctx] > 0) async_inflight[op.async_ctx]--;
    async_pending.erase(it);
    auto g = async_growth.find({ckey, req});
    if (g != async_growth.end()) {
      // Judged at submission (a later write does not undo what this read found); a failed read
      // proves nothing about the size.
      FileInfo& fi = m->files_[g->second.file];
      if (a.res > 0) {
        fi.initial_size =
            std::max(fi.initial_size, Sum(g->second.offset, static_cast<uint64_t>(a.res)));
      }
      async_growth.erase(g);
    }
    return;
  }
  if (a.phase != IOT_AIO_SUBMIT) return;
  uint32_t t = ThreadFor(a.tid, a.tgid, a.ts);
  uint32_t proc = m->threads_[t].process;
  auto cit = async_ctx_index.find(ckey);
  uint32_t ci;
  if (cit == async_ctx_index.end()) {
    ci = static_cast<uint32_t>(m->async_contexts_.size());
    AsyncContext c;
    c.engine = a.engine;
    c.ctx = a.ctx;
    c.process = proc;
    uint32_t setup_op = kNone;  // the setup call, when this thread made it
    if (a.engine == IOT_AIO_ENGINE_LIBAIO) {
      auto sz = aio_setup_size.find(a.ctx);
      if (sz != aio_setup_size.end()) c.setup_size = sz->second;
      auto so = aio_setup_op.find(a.ctx);
      if (so != aio_setup_op.end() && so->second.first == t) setup_op = so->second.second;
    } else {
      auto sz = uring_setup_size.find(t);
      if (sz != uring_setup_size.end()) {
        c.setup_size = sz->second;
        uring_setup_size.erase(sz);
      }
      auto so = uring_setup_op.find(t);
      if (so != uring_setup_op.end()) {
        setup_op = so->second;
        uring_setup_op.erase(so);
      }
    }
    m->async_contexts_.push_back(c);
    if (setup_op != kNone) m->threads_[t].ops[setup_op].async_ctx = static_cast<uint32_t>(m->async_contexts_.size() - 1);
    async_inflight.push_back(0);
    async_ctx_index[ckey] = ci;
  } else {
    ci = cit->second;
  }
  AsyncContext& ctx = m->async_contexts_[ci];
  ctx.requests++;
  ctx.max_inflight = std::max(ctx.max_inflight, ++async_inflight[ci]);
  m->stats_.async_requests++;

  cur_thread = t;
  cur_op = static_cast<uint32_t>(m->threads_[t].ops.size());
  Op op;
  op.kind = OpKind::kAsyncSubmit;
  op.aio = a;
  op.process = proc;
  op.ts = a.ts;
  op.end = UINT64_MAX;  // until the completion is seen
  op.interrupted = true;
  op.async_ctx = ci;
  op.pos = a.offset;
  BindDataFd(a.fd, &op);
  bool is_read = AsyncIsRead(a), is_write = AsyncIsWrite(a);
  if (!is_read && !is_write && a.opcode != 3 /*FSYNC*/ && op.skip == Skip::kReplayable) {
    // io_uring: NOP(0) and fsync(3) are replayable; libaio: fsync(2)/fdsync(3)
    bool ok_nop = a.engine == IOT_AIO_ENGINE_URING ? a.opcode == 0 : (a.opcode == 2 || a.opcode == 3);
    if (!ok_nop) op.skip = Skip::kUnsupported;
  }
  uint32_t file = op.file;
  if (is_read || is_write) DataUse(file);
  if (file != kNone) {
    if (is_write) {
      Modified(file);
    } else if (is_read) {
      const FileInfo& fi = m->files_[file];
      if (fi.origin == FileOrigin::kPreexisting && !fi.modified && !fi.is_dir) {
        async_growth[{ckey, req}] = PendingGrowth{file, a.offset, a.length};
      }
    }
  }
  // Batching: requests of the same thread and context submitted in the same call (same sort key)
  // or at the same instant form one batch.
  uint64_t bkey = (ckey * 31) ^ a.ts;
  auto lb = last_batch.find(t);
  auto& ops = m->threads_[t].ops;
  bool same = lb != last_batch.end() && !ops.empty() && ops.back().kind == OpKind::kAsyncSubmit &&
              ops.back().batch == lb->second.first && lb->second.second == bkey;
  if (!same) last_batch[t] = {next_batch++, bkey};
  op.batch = last_batch[t].first;
  m->stats_.skipped_by_reason[static_cast<size_t>(op.skip)]++;
  uint32_t idx = Push(t, op, [&] {
    deps.Read(ResourceKey(ResourceTag::kAsyncCtx, ci));
    if (a.fd >= 0) deps.Read(FdKey(proc, a.fd));
    if (file != kNone && a.length) {
      if (is_write) deps.WriteRange(FileKey(file), a.offset, Sum(a.offset, a.length));
      else if (is_read) deps.ReadRange(FileKey(file), a.offset, Sum(a.offset, a.length));
    }
  });
  async_pending[{ckey, req}] = {t, idx};
}

void ModelBuilder::Impl::HandleCache(const iot_cache_state& c) {
  std::optional<std::string_view> name = String(c.path_id);
  if (!name || name->empty() || (*name)[0] != '/') return;
  PathId p = Intern(NormalizePath(*name));
  CacheState cs;
  cs.path = p;
  cs.fsize = c.fsize;
  cs.resident_pages = c.resident_pages;
  cs.total_pages = c.total_pages;
  m->cache_states_.push_back(cs);
}

void ModelBuilder::Impl::BuildBlockRequests() {
  std::vector<const iot_block*> sorted;
  for (const auto& b : blocks) sorted.push_back(&b);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const iot_block* a, const iot_block* b) { return a->ts < b->ts; });
  std::map<std::tuple<uint32_t, uint64_t, uint64_t>, size_t> open;  // (dev, rq or sector) -> req
  std::unordered_map<uint32_t, uint32_t> inflight;
  for (const iot_block* b : sorted) {
    uint64_t id = b->rq_id != 0 ? b->rq_id : b->sector;
    if (b->phase == IOT_BLK_ISSUE) {
      BlockRequest r;
      r.ts = b->ts;
      r.sector = b->sector;
      r.bytes = b->bytes != 0 ? b->bytes
                              : static_cast<uint32_t>(std::min<uint64_t>(
                                    uint64_t{b->nr_sector} * kSectorBytes, UINT32_MAX));
      r.flags = b->flags;
      r.dev = b->dev;
      r.inflight = ++inflight[b->dev];
      open[{b->dev, id, 0}] = m->block_requests_.size();
      m->block_requests_.push_back(r);
    } else if (b->phase == IOT_BLK_COMPLETE) {
      auto it = open.find({b->dev, id, 0});
      if (it == open.end()) continue;
      BlockRequest& r = m->block_requests_[it->second];
      r.end = b->ts;
      r.error = b->error;
      if (inflight[b->dev] > 0) inflight[b->dev]--;
      open.erase(it);
    }
  }
}

// Events are taken in start order, and the kernel takes and frees descriptor numbers at the start
// of a call too, so start order is the order of the descriptor table's changes, except where the
// capture's timestamps of two calls that began within a microsecond disagree with the kernel: an
// open that got number N can be stamped before the close (in another thread of the process) that
// freed N. Taken in that order, the open would replace the old instance of N in the table, the
// close would then remove the new one, and uses of the old instance stamped in between would be
// bound to the new file. Such an open is moved to just after that close: a successful close of N
// by another thread that starts while an open returning N is in progress can only be freeing the
// previous instance (the opener's thread cannot have handed N out before the open returned).
// Nothing else of the opening thread lies in between (it was inside the open). Returns whether
// anything moved.
bool ModelBuilder::Impl::PostponeDescriptorHandovers() {
  std::unordered_map<uint64_t, size_t> creator;  // (tgid, fd) -> event of the latest creating call
  auto key = [](uint32_t tgid, int64_t fd) {
    return (static_cast<uint64_t>(tgid) << 32) | static_cast<uint32_t>(fd);
  };
  bool moved = false;
  // The closing call at event i freed the number the creating call at event c got: postpone that
  // call to just after the close when it began within the creating call.
  auto postpone = [&](size_t c, size_t i, const iot_syscall& close) {
    Event& open_ev = events[c];
    const iot_syscall& open = syscalls[open_ev.index];
    if (open.tid != close.tid && close.ts >= open.ts && close.ts < Sum(open.ts, open.dur)) {
      open_ev.ts = events[i].ts;
      open_ev.seq = events[i].seq;
      open_ev.sub = events[i].sub;
      open_ev.after = 1;
      moved = true;
    }
  };
  for (size_t i = 0; i < events.size(); i++) {
    if (events[i].type != kEvSyscall) continue;
    const iot_syscall& sc = syscalls[events[i].index];
    if (sc.ret < 0 || (sc.sflags & IOT_SCF_INTERRUPTED)) continue;
    if (sc.op == IOT_OP_CLOSE && sc.fd >= 0) {
      auto it = creator.find(key(sc.tgid, sc.fd));
      if (it == creator.end()) continue;
      postpone(it->second, i, sc);
      creator.erase(it);
    } else if (sc.op == IOT_OP_CLOSE_RANGE &&
               !(sc.flags & (CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE))) {
      // Frees every number in [first, last] of the shared table (with UNSHARE it closes in a
      // private copy, and CLOEXEC frees nothing).
      const uint32_t first = CloseRangeFirst(sc), last = CloseRangeLast(sc);
      for (auto it = creator.begin(); it != creator.end();) {
        const auto fd = static_cast<uint32_t>(it->first);
        if (static_cast<uint32_t>(it->first >> 32) == sc.tgid && fd >= first && fd <= last) {
          postpone(it->second, i, sc);
          it = creator.erase(it);
        } else {
          ++it;
        }
      }
    } else if (OpReturnsFd(sc) && sc.op != IOT_OP_DUP2 && sc.op != IOT_OP_DUP3) {
      creator[key(sc.tgid, sc.ret)] = i;
    }
  }
  return moved;
}

Status ModelBuilder::Impl::Finish() {
  if (m->meta_.contains("host") && m->meta_["host"].is_object()) {
    // Meta is trace content too: a page size of another type or an absurd value is ignored.
    const nlohmann::json& host = m->meta_["host"];
    auto ps = host.find("page_size");
    if (ps != host.end() && ps->is_number_integer()) {
      const int64_t n = ps->get<int64_t>();
      if (n >= 512 && n <= (1 << 30) && (n & (n - 1)) == 0) page_size = static_cast<uint64_t>(n);
    }
  }
  // Async submits issued inside a submitting syscall of the same thread sort just before it, so
  // that replay queues the batch and the syscall flushes it.
  std::unordered_map<uint32_t, std::vector<std::pair<uint64_t, size_t>>> submit_calls;  // tid
  for (auto& e : events) {
    if (e.type != kEvSyscall) continue;
    const iot_syscall& sc = syscalls[e.index];
    if (IsSubmitCall(sc.op)) submit_calls[sc.tid].push_back({sc.ts, &e - events.data()});
  }
  for (auto& [tid, v] : submit_calls) std::sort(v.begin(), v.end());
  for (auto& e : events) {
    if (e.type != kEvAsync) continue;
    const iot_async_io& a = asyncs[e.index];
    if (a.phase != IOT_AIO_SUBMIT) continue;
    auto it = submit_calls.find(a.tid);
    if (it == submit_calls.end()) continue;
    auto& v = it->second;
    auto jt = std::upper_bound(v.begin(), v.end(), std::make_pair(a.ts, SIZE_MAX));
    if (jt == v.begin()) continue;
    --jt;
    const Event& ce = events[jt->second];
    const iot_syscall& sc = syscalls[ce.index];
    if (a.ts <= Sum(sc.ts, sc.dur) || (sc.sflags & IOT_SCF_INTERRUPTED)) {
      e.ts = ce.ts;
      e.seq = ce.seq;
      e.sub = 0;
    }
  }
  std::sort(events.begin(), events.end(), EventBefore);
  if (PostponeDescriptorHandovers()) std::sort(events.begin(), events.end(), EventBefore);
  if (!events.empty()) {
    m->stats_.first_ts = events.front().ts;
    m->stats_.last_ts = events.back().ts;
  }
  for (const auto& e : events) {
    cur_thread = cur_op = kNone;  // the handlers of ops set them
    switch (e.type) {
      case kEvSyscall: HandleSyscall(syscalls[e.index]); break;
      case kEvProc: HandleProc(procs[e.index]); break;
      case kEvFdSnap: HandleFdSnapshot(fd_snaps[e.index]); break;
      case kEvMapSnap: HandleMapSnapshot(map_snaps[e.index]); break;
      case kEvFault: HandleFault(faults[e.index]); break;
      case kEvAsync: HandleAsync(asyncs[e.index]); break;
      case kEvCache: HandleCache(caches[e.index]); break;
    }
  }
  // Mark threads' last event time for thread start of threads with no creator record.
  for (auto& th : m->threads_) {
    if (!th.ops.empty() && th.creator == kNone) th.start_ts = std::min(th.start_ts, th.ops[0].ts);
  }
  BuildBlockRequests();
  for (auto& [k, v] : lost) m->stats_.lost_events += v;
  m->stats_.unknown_fds = unknown_fds.size();
  m->stats_.orphan_iovecs = iovecs.size();
  m->stats_.unmatched_async = async_pending.size();
  // Reads whose completion was never seen: assume they returned everything they asked for.
  for (const auto& [key, g] : async_growth) {
    FileInfo& fi = m->files_[g.file];
    fi.initial_size = std::max(fi.initial_size, Sum(g.offset, g.length));
  }
  async_growth.clear();
  AddKindWarnings();
  m->stats_.deps = m->deps_.size();
  return Status::Ok();
}

namespace {
// Path bytes for a one-line message: printable ASCII as is, anything else as \xNN.
std::string Printable(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\\') out.push_back(static_cast<char>(c));
    else out += fmt::format("\\x{:02x}", c);
  }
  return out;
}
}  // namespace

void ModelBuilder::Impl::AddKindWarnings() {
  auto where = [&](uint32_t thread, uint32_t index) -> std::string {
    if (thread == kNone || index >= m->threads_[thread].ops.size()) {
      return "an attach snapshot or cwd record";
    }
    const Op& op = m->threads_[thread].ops[index];
    std::string_view what = op.kind == OpKind::kSyscall     ? OpName(op.sc.op)
                            : op.kind == OpKind::kAsyncSubmit ? std::string_view("async request")
                            : op.kind == OpKind::kPageFault   ? std::string_view("page fault")
                                                              : OpKindName(op.kind);
    return fmt::format("{} of tid {}, op #{}", what, m->threads_[thread].tid, index);
  };
  for (uint32_t f = 0; f < m->files_.size(); f++) {
    const KindEvidence& k = file_kind[f];
    if (!k.conflict) continue;
    std::string dir_use = where(k.dir_thread, k.dir_op);
    if (k.dir_child != kNone) {
      dir_use = fmt::format("'{}' lies below it: {}", Printable(m->paths_[k.dir_child]), dir_use);
    }
    ModelWarning w;
    w.path = m->files_[f].path;
    w.file = f;
    w.message = fmt::format(
        "'{}' is used both as a directory ({}) and as a file with data I/O ({}); the model "
        "takes it for a directory, so that data I/O does not replay as recorded",
        Printable(m->paths_[w.path]), dir_use, where(k.data_thread, k.data_op));
    m->warnings_.push_back(std::move(w));
  }
}

ModelBuilder::ModelBuilder(ModelOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
}
ModelBuilder::~ModelBuilder() = default;

void ModelBuilder::SetMeta(const nlohmann::json& meta) { impl_->m->meta_ = meta; }

void ModelBuilder::ReadStringsFrom(const TraceReader* reader) { impl_->string_reader = reader; }

Status ModelBuilder::Add(const iot_rec_hdr* rec) {
  Impl& s = *impl_;
  size_t need = RecordFixedSize(rec->type);
  s.m->stats_.records++;
  if (rec->type <= IOT_REC_MAX) s.m->stats_.records_by_type[rec->type]++;
  if (need == 0) return Status::Ok();  // unknown type: counted, ignored
  if (rec->size < need) {
    // Zero-extend short records (older writers), as TraceReader does.
    std::vector<uint8_t> buf(need, 0);
    std::memcpy(buf.data(), rec, rec->size);
    reinterpret_cast<iot_rec_hdr*>(buf.data())->size = static_cast<uint16_t>(need);
    if (rec->type == IOT_REC_STRING || rec->type == IOT_REC_IOVEC) {
      return Status::Corrupt("{} record of {} bytes is shorter than its {}-byte fixed part",
                             RecordTypeName(rec->type), rec->size, need);
    }
    return Add(reinterpret_cast<const iot_rec_hdr*>(buf.data()));
  }
  auto push = [&](uint8_t type, uint32_t index, uint64_t ts) {
    s.events.push_back(Event{ts, s.seq, 1, s.seq, type, index});
    s.seq++;
  };
  switch (rec->type) {
    case IOT_REC_STRING: {
      const auto& str = As<iot_string>(rec);
      if (sizeof(iot_string) + str.len > rec->size) {
        return Status::Corrupt("string record {} declares {} bytes but holds {}", str.id, str.len,
                               rec->size - sizeof(iot_string));
      }
      // PATH_MAX counts the terminating NUL: no longer string is a name the kernel took.
      if ((str.flags & IOT_STRF_TRUNCATED) || str.len >= kMaxPathBytes) {
        s.unusable_strings.insert(str.id);
        s.strings.erase(str.id);
        break;
      }
      s.unusable_strings.erase(str.id);
      if (s.string_reader == nullptr) {
        s.strings[str.id].assign(reinterpret_cast<const char*>(&str + 1), str.len);
      }
      break;
    }
    case IOT_REC_SYSCALL:
      s.syscalls.push_back(As<iot_syscall>(rec));
      push(kEvSyscall, static_cast<uint32_t>(s.syscalls.size() - 1), s.syscalls.back().ts);
      break;
    case IOT_REC_IOVEC: {
      const auto& iv = As<iot_iovec>(rec);
      size_t have = (rec->size - sizeof(iot_iovec)) / sizeof(uint64_t);
      size_t n = std::min<size_t>(iv.captured, have);
      std::vector<uint64_t> lens(n);
      if (n) std::memcpy(lens.data(), &iv + 1, n * sizeof(uint64_t));
      s.iovecs[{iv.tid, iv.ts}] = std::move(lens);
      s.iovec_counts[{iv.tid, iv.ts}] = iv.count;
      break;
    }
    case IOT_REC_PROC:
      s.procs.push_back(As<iot_proc>(rec));
      push(kEvProc, static_cast<uint32_t>(s.procs.size() - 1), s.procs.back().ts);
      break;
    case IOT_REC_FD_SNAPSHOT:
      s.fd_snaps.push_back(As<iot_fd_snapshot>(rec));
      push(kEvFdSnap, static_cast<uint32_t>(s.fd_snaps.size() - 1), s.fd_snaps.back().ts);
      break;
    case IOT_REC_MAP_SNAPSHOT:
      s.map_snaps.push_back(As<iot_map_snapshot>(rec));
      push(kEvMapSnap, static_cast<uint32_t>(s.map_snaps.size() - 1), s.map_snaps.back().ts);
      break;
    case IOT_REC_PAGE_FAULT:
      s.faults.push_back(As<iot_page_fault>(rec));
      push(kEvFault, static_cast<uint32_t>(s.faults.size() - 1), s.faults.back().ts);
      break;
    case IOT_REC_ASYNC_IO:
      s.asyncs.push_back(As<iot_async_io>(rec));
      push(kEvAsync, static_cast<uint32_t>(s.asyncs.size() - 1), s.asyncs.back().ts);
      break;
    case IOT_REC_CACHE_STATE:
      s.caches.push_back(As<iot_cache_state>(rec));
      push(kEvCache, static_cast<uint32_t>(s.caches.size() - 1), s.caches.back().ts);
      break;
    case IOT_REC_BLOCK:
      s.blocks.push_back(As<iot_block>(rec));
      break;
    case IOT_REC_LOST: {
      const auto& l = As<iot_lost>(rec);
      auto& v = s.lost[{l.source, l.cpu}];
      v = std::max(v, l.count);
      break;
    }
    default:
      break;
  }
  return Status::Ok();
}

Result<std::unique_ptr<TraceModel>> ModelBuilder::Finish() {
  IOTWIN_RETURN_IF_ERROR(impl_->Finish());
  return std::move(impl_->m);
}

Result<std::unique_ptr<TraceModel>> LoadTraceModel(const std::string& trace_path,
                                                   ModelOptions options, TraceDamage* damage) {
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(trace_path));
  ModelBuilder builder(options);
  builder.SetMeta(reader->meta());
  builder.ReadStringsFrom(reader.get());
  while (true) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* rec, reader->Next());
    if (rec == nullptr) break;
    IOTWIN_RETURN_IF_ERROR(builder.Add(rec).WithContext(trace_path));
  }
  if (damage) *damage = reader->damage();
  return builder.Finish();
}

}  // namespace iotwin::model
