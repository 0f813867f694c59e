// ModelBuilder's reconstruction state, shared by the files that implement it: trace_model.cc
// (records, processes, attach snapshots, faults, async requests, the final passes) and
// model_syscalls.cc (system calls, one handler per family). Not part of the model's interface.
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/checked_math.h"
#include "format/trace_reader.h"
#include "iotwin_abi.h"
#include "model/initial_residency.h"
#include "model/op_fields.h"
#include "model/ordering.h"
#include "model/path.h"
#include "model/program_images.h"
#include "model/trace_model.h"
#include "model/trace_state.h"

namespace iotwin::model {

struct ModelBuilder::Impl {
  // Facts of the kernel the model needs.
  static constexpr uint16_t kFtypeDir = S_IFDIR >> 12;
  static constexpr uint16_t kFtypeRegular = S_IFREG >> 12;
  static constexpr uint16_t kFtypeReg = S_IFREG >> 12;
  static constexpr size_t kMaxPathBytes = 4096;  // PATH_MAX, the terminating NUL included
  static constexpr uint64_t kIovMax = 1024;      // IOV_MAX: the most iovecs a vectored call takes
  static constexpr uint32_t kUringMaxEntries = 32768;  // IORING_MAX_ENTRIES

  // Offsets, lengths and times come from the trace: sums saturate instead of wrapping.
  static uint64_t Sum(uint64_t a, uint64_t b) { return SaturatingAdd(a, b); }

  enum EvType : uint8_t {
    kEvSyscall, kEvProc, kEvFdSnap, kEvMapSnap, kEvFault, kEvAsync, kEvCache
  };

  struct Event {
    uint64_t ts;
    uint64_t seq;  // order key within equal ts (file order, or the submitting syscall's)
    uint8_t sub;   // async submits sort just before their submitting syscall (0 before 1)
    uint64_t orig; // file order
    uint8_t type;
    uint32_t index;
    uint8_t after = 0;  // > 0: sorts after the event whose (ts, seq, sub) it took (a descriptor
                        // handover, PostponeDescriptorHandovers; a race, ReorderRaces)
  };

  static bool EventBefore(const Event& a, const Event& b) {
    if (a.ts != b.ts) return a.ts < b.ts;
    if (a.seq != b.seq) return a.seq < b.seq;
    if (a.sub != b.sub) return a.sub < b.sub;
    if (a.after != b.after) return a.after < b.after;
    return a.orig < b.orig;
  }

  // The model's open file description: its identity (index in `ofds`, kept for good: ops and
  // mappings name it) and what the model knows of it. The descriptors that refer to it, its
  // flags and its position are `fd_table`'s description's, which carries the index in its
  // `user` slot.
  struct Ofd {
    DescriptionId desc = kNoDescription;  // fd_table's description (and path), while it lives
    uint32_t file = kNone;
    bool pseudo = false;
    bool path_unknown = false;
    bool ring = false;  // an io_uring instance
    // A ring's io_uring_setup call (thread, op index): its close tears down the context the model
    // links to that call.
    uint32_t ring_setup_thread = kNone;
    uint32_t ring_setup_op = kNone;
    // A description open before the trace began (FD_SNAPSHOT): the process and the index of its
    // InitialFd, whose access mode the calls that succeed on it may widen.
    uint32_t initial_proc = kNone;
    uint32_t initial_fd = kNone;
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
    // Numbers named as descriptor resources so far (ordering), and each thread's latest fork of
    // this process: a number named for the first time after a fork was not in the copied table.
    FdSlots slots;
    std::unordered_map<uint32_t, uint32_t> last_fork;  // thread -> op index
    uint32_t live_threads = 0;
  };

  ModelOptions options;
  ProgramImages program_images;  // fed only when the scope leaves program images out
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
  // Which pages the workload found in the page cache (initial_residency.h): from reads and
  // writes as the ops are built, faults and PAGE_CACHE records as they are read.
  ResidencyEvidence residency;
  bool page_cache_recorded = false;  // the header says the memory layer recorded the page cache
  // (dev, ino) -> the file an open reached first: links CACHE_STATE records, whose path is the
  // kernel's name for the inode (/usr/lib/... where the workload opened /lib/...), to files.
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> file_by_identity;
  std::vector<iot_block> blocks;
  std::map<std::pair<uint32_t, uint64_t>, std::vector<uint64_t>> iovecs;  // (tid, ts) -> lens
  std::map<std::pair<uint32_t, uint64_t>, uint16_t> iovec_counts;
  // FDLIST records by (tid, ts) of their call: the header and the captured entries.
  struct FdList {
    iot_fdlist head;
    std::vector<iot_fdlist_entry> entries;
  };
  std::map<std::pair<uint32_t, uint64_t>, FdList> fdlists;
  // io_uring registered files, by the ring's ofd: slot -> the descriptor number registered there
  // and the ofd it named then (a request uses it only while that number still names it).
  struct UringFiles {
    uint32_t process = kNone;  // that registered them
    std::unordered_map<uint32_t, std::pair<int32_t, uint32_t>> slots;
  };
  std::map<uint32_t, UringFiles> uring_files;
  std::map<uint32_t, uint32_t> uring_enter_ring;  // thread -> ring ofd of its latest enter
  // ring ofd -> submitting thread -> index of its latest request on the ring: a waiting
  // io_uring_enter is ordered after the requests other threads submitted before it began.
  std::map<uint32_t, std::map<uint32_t, uint32_t>> uring_requests;
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
    // Another descriptor of any process still refers to it.
    const OpenFileDescription* d = fd_table.FdDescription(proc, fd);
    if (d == nullptr || d->refs != 1) return;
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
    fd_table.RenamePaths(from_s, to_s);
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
    // The cwd and a dirfd's path are fd_table's, which follow renamed directories.
    std::string_view base;
    if (dirfd == kAtFdcwd) {
      base = fd_table.Cwd(process);
    } else if (const OpenFileDescription* d = fd_table.FdDescription(process, dirfd)) {
      base = d->path;
    }
    if (s.empty()) *empty = true;
    if (base.empty()) {
      *skip = Skip::kUnknownPath;
      return kNone;
    }
    return Intern(ResolvePath(base, s));
  }

  // ---- descriptors ------------------------------------------------------------------------
  // The descriptor tables: the one trace interpreter's, driven through its primitives. Its
  // processes are keyed by the model's process index, not the tgid: a tgid reused while threads
  // of its old process still show up is a new process to the model, with a table of its own.
  // Descriptions carry the paths the model resolved (empty: unknown) and follow renamed
  // directories; so do the cwds.
  TraceState fd_table;
  // `process`'s cwd (kNone unknown): a path the model interned when it set it.
  PathId Cwd(uint32_t process) {
    const std::string_view cwd = fd_table.Cwd(process);
    return cwd.empty() ? kNone : Intern(std::string(cwd));
  }
  void SetCwd(uint32_t process, PathId cwd) {
    fd_table.SetCwd(process, cwd == kNone ? std::string_view() : m->paths_[cwd]);
  }
  // The flags and position of `ofd`, which a descriptor still refers to (its description lives).
  OpenFileDescription& Desc(uint32_t ofd) { return *fd_table.Description(ofds[ofd].desc); }
  // The model's open file description behind `fd` of `process`, kNone when none is open.
  uint32_t OfdOf(uint32_t process, int32_t fd) const {
    const OpenFileDescription* d = fd_table.Description(fd_table.DescriptionOf(process, fd));
    return d ? d->user : kNone;
  }

  void MarkUnknownFd(uint32_t process, int32_t fd, Op* op) {
    op->fd_state = FdState::kUnknown;
    if (op->skip == Skip::kReplayable) op->skip = Skip::kUnknownFd;
    unknown_fds.insert({process, fd});
  }

  // Binds descriptor `fd` of op->process to the op's data descriptor state.
  void BindDataFd(int32_t fd, Op* op) {
    const uint32_t ofd = OfdOf(op->process, fd);
    if (ofd == kNone) {
      MarkUnknownFd(op->process, fd, op);
      return;
    }
    op->fd_state = FdState::kKnown;
    op->ofd = ofd;
    const Ofd& o = ofds[ofd];
    op->file = o.file;
    if (op->path == kNone) op->path = DescriptionPath(o.desc);
    if (op->skip == Skip::kReplayable) {
      if (o.pseudo) op->skip = Skip::kPseudoFs;
      else if (o.path_unknown) op->skip = Skip::kUnknownPath;
    }
  }

  // Opens descriptor `fd` of `process` on `ofd`, just made by NewOfd.
  void SetFd(uint32_t process, int32_t fd, uint32_t ofd, bool cloexec) {
    fd_table.Bind(process, fd, ofds[ofd].desc, cloexec);
    NoteFd(process, fd);
  }

  // The path of a live description, interned; kNone when unknown.
  PathId DescriptionPath(DescriptionId desc) {
    const OpenFileDescription* d = fd_table.Description(desc);
    if (d == nullptr || d->path.empty()) return kNone;
    auto it = path_ids.find(std::string_view(d->path));
    return it != path_ids.end() ? *it : Intern(d->path);
  }

  uint32_t NewOfd(PathId path, uint32_t file, uint32_t flags, bool path_unknown) {
    Ofd o;
    o.file = file;
    o.path_unknown = path_unknown;
    o.pseudo = path != kNone && Pseudo(path);
    const auto id = static_cast<uint32_t>(ofds.size());
    o.desc = fd_table.NewDescription(
        flags, path == kNone ? std::string_view() : std::string_view(m->paths_[path]));
    if (OpenFileDescription* d = fd_table.Description(o.desc)) {
      d->user = id;
      d->pos_known = true;  // 0 after an open
    }
    ofds.push_back(o);
    return id;
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
  // The mapping tables are fd_table's; a FileMapping's `user` is the model's mapping id (kept by
  // the pieces an unmap leaves).
  uint32_t FindMapping(uint32_t process, uint64_t addr) const {
    const FileMapping* fm = fd_table.MappingAt(process, addr);
    return fm ? fm->user : kNone;
  }

  // The one mapping whose pieces cover [start, end) contiguously, or kNone.
  uint32_t CoveringMapping(uint32_t process, uint64_t start, uint64_t end) {
    uint32_t id = kNone;
    uint64_t covered = start;
    bool contiguous = true;
    fd_table.ForEachMappingIn(process, start, end, [&](const FileMapping& fm) {
      if (!contiguous) return;
      if (id == kNone && covered == start) {
        contiguous = fm.start <= start;
        id = fm.user;
      } else {
        contiguous = fm.start == covered && fm.user == id;
      }
      covered = fm.end;
    });
    return contiguous && covered >= end && covered > start ? id : kNone;
  }

  // The mappings `process` still maps (each id once, ascending): what its exit or exec unmaps.
  std::vector<uint32_t> LiveMappings(uint32_t process) {
    std::vector<uint32_t> ids;
    fd_table.ForEachMapping(process, [&](const FileMapping& fm) { ids.push_back(fm.user); });
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
  }
  // Declares the unmapping of `ids` (inside Push): after every use of them by other threads.
  void DeclareUnmapped(const std::vector<uint32_t>& ids) {
    for (uint32_t id : ids) deps.Write(ResourceKey(ResourceTag::kMapping, id));
  }

  void UnmapRange(uint32_t process, uint64_t start, uint64_t end) {
    fd_table.Unmap(process, start, end);
  }

  // Records `mp` as a new mapping of the model, mapped in fd_table onto `desc` (which keeps the
  // description alive).
  uint32_t AddMapping(const Mapping& mp, DescriptionId desc) {
    const auto id = static_cast<uint32_t>(m->mappings_.size());
    FileMapping* fm =
        fd_table.Map(mp.process, mp.start, mp.length, mp.file_offset, mp.prot, mp.flags, desc);
    if (fm) fm->user = id;
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
      // A request's completion is not known yet: its uses of its descriptor and context are
      // over at submission (the kernel holds its own references from then on), so later
      // closes and teardowns are ordered after it instead of left free.
      deps.Begin(t, index, op.ts, op.kind == OpKind::kAsyncSubmit ? op.ts : op.end);
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

  // ---- system calls (model_syscalls.cc) ----------------------------------------------------
  // One system call being modelled: HandleSyscall fills in what every call has (thread, paths,
  // descriptors, why it cannot be replayed), then the handler of its family applies its effects
  // to the model and queues the resources it touches (`declare`, run inside Push). Not copyable:
  // the declarations capture what they need by value, never the step.
  struct SyscallStep {
    SyscallStep(const iot_syscall& call) : sc(call) {}
    SyscallStep(const SyscallStep&) = delete;
    SyscallStep& operator=(const SyscallStep&) = delete;
    const iot_syscall& sc;
    uint32_t thread = kNone;
    uint32_t proc = kNone;
    uint32_t index = 0;  // the op's index in its thread
    bool ok = false;     // returned, without error
    Op op;
    std::vector<uint64_t> extra;  // Op::extra_* when not iovec lengths (fd lists, mremap result)
    std::vector<std::function<void()>> declare;
  };
  // `given`: the path of a call the model made up (a descriptor received by recvmsg, replayed as
  // an open of its file), instead of the record's path_id.
  void HandleSyscall(const iot_syscall& sc, PathId given = kNone);
  // recvmsg with SCM_RIGHTS (model_syscalls.cc): each received descriptor becomes an open of the
  // file the sender's descriptor was on, found by its identity.
  void HandleReceivedDescriptors(const iot_syscall& sc);
  // io_uring_register of files: the ring's registered-file table (slot -> descriptor number).
  void RegisterUringFiles(const SyscallStep& s);
  // The descriptor a request with IOSQE_FIXED_FILE names through slot `slot` of a ring of
  // process `proc` submitted by thread `t`, or -1.
  int32_t FixedFileFd(uint32_t proc, uint32_t t, uint32_t slot);
  void LayOutIovecs(SyscallStep& s);
  void LayOutIovecs(uint32_t tid, uint64_t ts, uint64_t count, uint64_t total, Op& op);
  void ResolvePaths(SyscallStep& s);
  void ClassifyDescriptors(SyscallStep& s);
  // Each returns false for a call outside its family.
  bool ApplyDescriptorOp(SyscallStep& s);  // open, creat, close, close_range, dup*, fcntl, flock
  void ApplyOpen(SyscallStep& s);
  // An importer may not know the access mode of a descriptor open before the trace (strace
  // prints only its path): a read or write that succeeded on it proves the mode allowed it.
  void WidenInitialAccess(uint32_t ofd, bool write);
  bool ApplyDataOp(SyscallStep& s);        // read/write family, lseek, syncs, size changes, hints
  bool ApplyCopyOp(SyscallStep& s);        // copy_file_range, sendfile
  bool ApplyMemoryOp(SyscallStep& s);      // mmap, munmap, msync, madvise, mremap
  bool ApplyNamespaceOp(SyscallStep& s);   // truncate, stat*, mkdir, unlink, chdir; then:
  bool ApplyNameOp(SyscallStep& s);        // rename, link, symlink, bind
  bool ApplyAsyncSetupOp(SyscallStep& s);  // io_setup, io_uring_setup/enter/register
  // O_TMPFILE and its names (tmpfile.cc): linkat(AT_FDCWD, "/proc/self/fd/N", ...,
  // AT_SYMLINK_FOLLOW) names descriptor N's file (true, N in *fd); the unnamed file an O_TMPFILE
  // open of directory `dir` made.
  bool ProcFdLink(const SyscallStep& s, int* fd);
  uint32_t TmpFileIn(PathId dir, const iot_syscall& sc);
  // After the push: links an async setup call to the context its first request names.
  void NoteAsyncSetup(const SyscallStep& s, uint32_t pushed);
  void DeclareFdUse(uint32_t proc, int fd) {
    if (fd >= 0) deps.Read(FdKey(proc, fd));
  }

  // The parts of ModelBuilder::Add that keep a record's content for later.
  Status AddString(const iot_rec_hdr* rec);
  void AddIovec(const iot_rec_hdr* rec);
  void AddFdList(const iot_rec_hdr* rec);
  void NoteFaultResidency(const iot_page_fault& pf);
  void NotePageCacheResidency(const iot_page_cache& pc);
  void HandleProc(const iot_proc& p);
  void HandleFork(const iot_proc& p, Op& op);
  void HandleExec(const iot_proc& p, Op& op);
  void HandleExit(const iot_proc& p, Op& op);
  void HandleFdSnapshot(const iot_fd_snapshot& s);
  void HandleMapSnapshot(const iot_map_snapshot& s);
  void HandleFault(const iot_page_fault& f);
  void HandleAsync(const iot_async_io& a);
  void HandleAsyncCompletion(const iot_async_io& a, uint64_t ckey, uint64_t req);
  uint32_t AsyncContextFor(const iot_async_io& a, uint64_t ckey, uint32_t t);
  void BindAsyncFd(const iot_async_io& a, uint32_t t, Op* op);
  uint32_t UringSetupThread(uint32_t t) const;
  void HandleCache(const iot_cache_state& c);
  // A buffered read or write that returned: the pages it used (initial_residency.h).
  void NoteDataPages(const SyscallStep& s);
  // Links each cache state to its file (CacheState::file).
  void LinkCacheStates();
  // Fills the cache states' resident extents when the trace's memory layer saw the page cache.
  void ResolveInitialResidency();
  bool PostponeDescriptorHandovers();
  // Racing calls on one name or one file's end in the order their results show (race_order.cc).
  bool ReorderRaces();
  void BuildBlockRequests();
  Status Finish();
};

}  // namespace iotwin::model
