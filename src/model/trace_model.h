// TraceModel: what a trace says the workload did, reconstructed into the shapes replay, reports
// and exports need:
//
//   - every path as one canonical absolute string (recorded cwd, chdir/fchdir, dirfds of *at()
//     calls; lexical normalisation, see path.h), interned as a PathId;
//   - per-process descriptor tables replayed through open/dup*/fcntl(F_DUPFD*)/close/close_range,
//     inheritance at fork (threads share a table) and close-on-exec at exec, so every operation
//     on a descriptor knows the open file behind it, or knows that the descriptor was never opened
//     in the trace ("unknown": sockets, pipes, inherited stdio; counted, never guessed);
//   - the initial file set: directories and files that existed before the capture, with the
//     size the workload needs them to have; files the workload created are listed separately.
//     A name is a directory when the trace shows a name below it, opens it O_DIRECTORY, lists
//     it (getdents64), creates it with mkdir, changes into it, or records its type as one; "/"
//     always is. A name also used for data I/O (read, write, truncate, mapping) is still taken
//     as a directory, with a warning (warnings()) naming both uses;
//   - per-thread operation streams in recorded order (system calls, file page faults, async
//     request submissions and the process events that change descriptor tables), each op carrying
//     its resolved paths, the open file behind its descriptor, its effective byte offset;
//   - cross-thread ordering dependencies: ops of different threads that shared a resource (a path,
//     a descriptor, overlapping written byte ranges of a file, a mapping) and did not overlap in
//     time keep their recorded order (resource-oriented ordering, as ARTC, SOSP'13); nothing else
//     is serialised.
//
// Build it with LoadTraceModel(path) or feed records to a ModelBuilder (tests, importers). The
// model is immutable once built and safe to read from several threads.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "format/trace_reader.h"
#include "model/dependency.h"
#include "model/initial_residency.h"
#include "model/program_images.h"
#include "model/scope.h"
#include "iotwin_abi.h"

namespace iotwin::model {

using PathId = uint32_t;  // index into TraceModel::paths()

enum class OpKind : uint8_t {
  kSyscall,      // `sc` holds the recorded call
  kPageFault,    // `pf`: a fault on a file mapping (`mapping`, `map_offset` say where)
  kAsyncSubmit,  // `aio`: one io_uring / libaio request as submitted; completion in `result`
  kFork,         // this thread forked process `child` (its descriptor table is copied here)
  kThreadStart,  // this thread created thread `child` (index into threads())
  kExec,         // this thread's process exec'd: close-on-exec fds (extra list) and mappings drop
  kExit,         // this thread exited (`process_exit`: it was the last of its process)
};
std::string_view OpKindName(OpKind kind);

// Whether a descriptor argument refers to a file the trace opened.
enum class FdState : uint8_t {
  kNone,     // the op takes no descriptor here
  kKnown,    // opened (or inherited from an opened one) inside the trace
  kUnknown,  // never opened in the trace: socket, pipe, stdio, opened before capture
};

// Why an op cannot be replayed as recorded (kReplayable = it can).
enum class Skip : uint8_t {
  kReplayable = 0,
  kUnknownFd,      // a descriptor the trace never opened
  kUnknownPath,    // relative path with no known cwd/dirfd, or a path the capture truncated
  kPseudoFs,       // /proc, /sys, /dev: not storage
  kUnknownMapping, // a fault/munmap/msync/madvise on a mapping the trace never created
  kUnsupported,    // an op replay does not reproduce (fcntl locks, splice, anonymous mmap, ...)
  kOutOfScope,     // a file ModelOptions::scope leaves out
};
std::string_view SkipName(Skip skip);

struct Op {
  OpKind kind = OpKind::kSyscall;
  FdState fd_state = FdState::kNone;   // DataFd(sc) (dirfd for path ops is folded into `path`)
  FdState fd2_state = FdState::kNone;  // SecondFd(sc)
  Skip skip = Skip::kReplayable;
  bool process_exit = false;  // kExit: last thread of the process
  bool interrupted = false;   // the call never returned in the trace: result unknown
  bool empty_path = false;    // *at() call with an empty path (AT_EMPTY_PATH): acts on the dirfd
  // A successful write to /proc/sys/vm/drop_caches (skipped as kPseudoFs): the workload dropped
  // the page cache here, which replay reproduces on the sandbox's own files.
  bool drops_page_cache = false;
  uint32_t process = kNone;   // index into processes()
  uint64_t ts = 0;            // recorded start (CLOCK_MONOTONIC ns)
  uint64_t end = 0;           // recorded completion (ts + dur; async: completion time)
  int64_t result = 0;         // recorded result (async: completion res)
  PathId path = kNone;        // resolved absolute path of the first path argument
  PathId path2 = kNone;       // second path (rename/link/symlink link path)
  uint32_t file = kNone;      // index into files() of the file the op touches, where known
  uint32_t ofd = kNone;       // open file description behind DataFd (model-internal identity)
  uint64_t pos = 0;           // effective first byte for data ops (explicit offset or the model's
                              // file position for read/write/readv/writev)
  uint32_t mapping = kNone;   // mmap/munmap/msync/madvise/mremap/faults: index into mappings()
  uint64_t map_offset = 0;    // byte offset into the mapping (faults: start of the page)
  uint32_t child = kNone;     // kFork: process index; kThreadStart: thread index
  uint32_t fixed_in = kNone;  // mmap with MAP_FIXED*: the single earlier mapping whose pieces
                              // cover the whole fixed range (map_offset: where in it), so replay
                              // can map at the same place of its own live mapping
  uint32_t extra_begin = 0;   // vectored calls: iovec lengths; kExec/close_range: recorded fds
                              // affected; mremap: the mapping id of the result
  uint32_t extra_count = 0;   //   (indices into TraceModel::extra())
  uint32_t dep_begin = 0;     // indices into TraceModel::deps()
  uint32_t dep_count = 0;
  // kAsyncSubmit: index into async_contexts(); syscalls io_*: too; a close of an io_uring
  // instance: the context it tears down.
  uint32_t async_ctx = kNone;
  uint32_t batch = kNone;     // kAsyncSubmit: requests with the same batch were submitted together
  union {
    iot_syscall sc;     // kSyscall (also op/ts of the submitting syscall for kAsyncSubmit)
    iot_page_fault pf;  // kPageFault
    iot_async_io aio;   // kAsyncSubmit (the SUBMIT record)
    iot_proc proc;      // kFork / kThreadStart / kExec / kExit
  };
  Op() : sc{} {}
};

enum class FileOrigin : uint8_t {
  kPreexisting,  // existed before the capture: replay must create it first
  kCreated,      // created by the workload
};

struct FileInfo {
  PathId path = kNone;  // the name the workload first used
  FileOrigin origin = FileOrigin::kCreated;
  bool is_dir = false;
  uint16_t ftype = 0;         // S_IFMT >> 12 as recorded, 0 unknown
  uint32_t dev = 0;
  uint64_t ino = 0;
  uint64_t initial_size = 0;  // pre-existing files: size needed at start
  bool modified = false;      // the workload wrote/truncated it (later reads don't grow the size)
  bool out_of_scope = false;  // ModelOptions::scope leaves it out: not prepared, its ops skipped
};

// A file mapping: recreated by replay from the mmap op (or the attach snapshot).
struct Mapping {
  uint32_t process = kNone;
  uint64_t start = 0;        // recorded address
  uint64_t length = 0;
  uint64_t file_offset = 0;  // bytes
  uint32_t prot = 0;
  uint32_t flags = 0;        // MAP_SHARED / MAP_PRIVATE ...
  PathId path = kNone;
  uint32_t file = kNone;
  uint32_t ofd = kNone;          // descriptor's open file at mmap time
  uint32_t thread = kNone;       // creator op (kNone: attach snapshot or inherited at fork)
  uint32_t op = kNone;
  uint32_t inherited_from = kNone;  // mapping of the parent process copied at fork
  int32_t fd = -1;               // recorded fd passed to mmap
};

// A descriptor already open when the capture attached (IOT_REC_FD_SNAPSHOT).
struct InitialFd {
  int32_t fd = -1;
  uint32_t flags = 0;
  uint64_t pos = 0;
  PathId path = kNone;
  uint32_t file = kNone;
};

struct Process {
  uint32_t tgid = 0;
  uint32_t parent = kNone;      // process index of the parent when the fork was traced
  bool attached = false;        // found at --pid attach, not started in the trace
  PathId initial_cwd = kNone;   // cwd at first sight (kNone unknown)
  int32_t max_fd = -1;          // highest recorded descriptor number used (table size for replay)
  std::vector<uint32_t> threads;
  std::vector<InitialFd> initial_fds;        // attach snapshot
  std::vector<uint32_t> initial_mappings;    // attach snapshot (mapping indices)
  std::vector<uint32_t> inherited_mappings;  // mappings copied from the parent at fork
};

struct Thread {
  uint32_t tid = 0;
  uint32_t tgid = 0;
  uint32_t process = kNone;
  uint64_t start_ts = 0;       // creation (THREAD/FORK record) or first event
  uint32_t creator = kNone;    // thread that created it (kNone: root/attached)
  uint32_t creator_op = kNone; // the creator's kFork/kThreadStart op
  std::vector<Op> ops;
};

// An io_uring instance or libaio context.
struct AsyncContext {
  uint8_t engine = 0;  // IOT_AIO_ENGINE_*
  uint64_t ctx = 0;    // recorded identity
  uint32_t process = kNone;
  uint32_t max_inflight = 0;  // highest number of requests in flight seen
  uint64_t requests = 0;
  // Size the workload asked for: io_setup's nr_events (matched by the context address it
  // returned) or io_uring_setup's entries (the thread's last ring set up before its first
  // request); 0 when not seen. The replay sets its context up with the same size.
  uint32_t setup_size = 0;
};

// Initial page-cache residency of a file (IOT_REC_CACHE_STATE).
struct CacheState {
  // The record's path when it is absolute, else (a relative spelling) the linked file's path at
  // the start; kNone: neither.
  PathId path = kNone;
  uint32_t file = kNone;  // the file of the same inode (or, failing that, path); kNone: none
  uint32_t dev = 0;
  uint64_t ino = 0;
  uint64_t fsize = 0;
  uint64_t resident_pages = 0;  // the count the capture measured
  uint64_t total_pages = 0;
  // Which of its pages the workload found resident (initial_residency.h); known only when the
  // capture recorded the page cache's insertions and removals and lost none of them.
  bool extents_known = false;
  std::vector<PageExtent> resident_extents;
  std::vector<PageExtent> absent_extents;  // pages it found missing (inserted, major-faulted)
};

// One block request as issued to the device (from IOT_REC_BLOCK ISSUE + COMPLETE).
struct BlockRequest {
  uint64_t ts = 0;        // issue
  uint64_t end = 0;       // completion (0 unknown)
  uint64_t last_issue = 0;  // its last issue: after a requeue, later than ts (block_requests.h)
  uint64_t sector = 0;    // 512-byte units
  uint32_t bytes = 0;
  uint32_t flags = 0;     // IOT_BLKF_*
  uint32_t dev = 0;
  uint32_t inflight = 0;  // requests in flight on the device when issued (queue depth seen)
  int32_t error = 0;
};

struct ModelStats {
  uint64_t records = 0;
  std::array<uint64_t, IOT_REC_MAX + 1> records_by_type{};
  uint64_t syscalls = 0;
  std::array<uint64_t, IOT_OP_MAX + 1> ops_by_kind{};
  std::array<uint64_t, IOT_OP_MAX + 1> replayable_by_kind{};
  std::array<uint64_t, 8> skipped_by_reason{};  // indexed by Skip
  uint64_t page_faults = 0;
  uint64_t async_requests = 0;
  uint64_t unknown_fds = 0;          // distinct (process, fd) used but never opened
  uint64_t lost_events = 0;          // sum over LOST records (last cumulative count per source/cpu)
  uint64_t orphan_iovecs = 0;        // IOVEC records with no matching call
  uint64_t unmatched_async = 0;      // submits without completion
  uint64_t deps = 0;                 // cross-thread dependencies kept after reduction
  uint64_t first_ts = 0, last_ts = 0;
};

// Something in the trace the model cannot take at face value; it is built anyway, and says
// what it assumed.
struct ModelWarning {
  PathId path = kNone;    // the trace path concerned
  uint32_t file = kNone;  // index into files()
  // One line: the path (bytes outside printable ASCII as \xNN), the ops involved (syscall,
  // tid, index in the thread's ops), and what the model assumed.
  std::string message;
};

struct ModelOptions {
  bool compute_dependencies = true;
  // Files (not directories: they hold the names in scope) the scope leaves out are marked
  // FileInfo::out_of_scope and every op on them (Op::file, or the file of its mapping) is
  // skipped as kOutOfScope. A replay's trace is judged by its recorded names: paths below the
  // sandbox root its header names are judged as if the root were "/".
  Scope scope;
  // One host of a merged trace (format/hosts.h): records of other hosts' processes are left out
  // as if the trace held only this host's (`replay --mpi`), except that start_ts() stays the
  // first call of the whole job. Records without a process stay.
  std::optional<uint32_t> host;
};

class TraceModel {
 public:
  const nlohmann::json& meta() const { return meta_; }
  const std::vector<std::string>& paths() const { return paths_; }
  const std::string& path(PathId id) const { return paths_[id]; }
  const std::vector<FileInfo>& files() const { return files_; }
  const std::vector<Process>& processes() const { return processes_; }
  const std::vector<Thread>& threads() const { return threads_; }
  const std::vector<Mapping>& mappings() const { return mappings_; }
  const std::vector<Dep>& deps() const { return deps_; }
  const std::vector<AsyncContext>& async_contexts() const { return async_contexts_; }
  const std::vector<CacheState>& cache_states() const { return cache_states_; }
  const std::vector<BlockRequest>& block_requests() const { return block_requests_; }
  // Side data of ops (iovec lengths, lists of descriptors), see Op::extra_*.
  const std::vector<uint64_t>& extra() const { return extra_; }
  const ModelStats& stats() const { return stats_; }
  const std::vector<ModelWarning>& warnings() const { return warnings_; }

  // Directories and files that must exist before replay (pre-existing; sorted by path so parents
  // come before children).
  std::vector<uint32_t> InitialFileSet() const;
  // Files and directories the workload created (not pre-created by replay).
  std::vector<uint32_t> CreatedFiles() const;

  // Convenience views of an op's side data.
  const uint64_t* ExtraBegin(const Op& op) const { return extra_.data() + op.extra_begin; }
  const Dep* DepsBegin(const Op& op) const { return deps_.data() + op.dep_begin; }

  // Trace time origin: the earliest event.
  uint64_t start_ts() const { return stats_.first_ts; }

 private:
  friend class ModelBuilder;
  nlohmann::json meta_ = nlohmann::json::object();
  std::vector<std::string> paths_;
  std::vector<FileInfo> files_;
  std::vector<Process> processes_;
  std::vector<Thread> threads_;
  std::vector<Mapping> mappings_;
  std::vector<Dep> deps_;
  std::vector<AsyncContext> async_contexts_;
  std::vector<CacheState> cache_states_;
  std::vector<BlockRequest> block_requests_;
  std::vector<uint64_t> extra_;
  ModelStats stats_;
  std::vector<ModelWarning> warnings_;
};

// Builds a TraceModel from records given in file order. STRING records must precede their use,
// as in a trace file.
class ModelBuilder {
 public:
  explicit ModelBuilder(ModelOptions options = {});
  ~ModelBuilder();
  ModelBuilder(const ModelBuilder&) = delete;
  ModelBuilder& operator=(const ModelBuilder&) = delete;

  void SetMeta(const nlohmann::json& meta);
  // Strings are looked up in `reader`'s string table (which holds every STRING record it has
  // returned) instead of a copy kept here; `reader` must outlive Finish() and feed every record.
  void ReadStringsFrom(const TraceReader* reader);
  // Takes one record (any type; unknown types are counted and ignored). Fails on records whose
  // declared size is too small for their type.
  Status Add(const iot_rec_hdr* rec);
  // Reconstructs everything; the builder is spent afterwards.
  Result<std::unique_ptr<TraceModel>> Finish();

 private:
  static void ApplyScope(TraceModel& m, const Scope& scope,
                         const std::set<ProgramImages::Key>& program_images);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  // ModelOptions::host: the first call of the hosts left out. The model's time origin stays the
  // job's, so that a host which started after the others waits as long in a replay.
  uint64_t other_hosts_first_ts_ = UINT64_MAX;
};

// Reads a whole trace file into a model. Damage the reader reports (truncation) is kept in
// `*damage` when given; corrupt files fail with the reader's message.
Result<std::unique_ptr<TraceModel>> LoadTraceModel(const std::string& trace_path,
                                                   ModelOptions options = {},
                                                   TraceDamage* damage = nullptr);

}  // namespace iotwin::model
