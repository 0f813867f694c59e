// Analyzer: one streaming pass over a trace's records that aggregates everything `iotwin report`
// and `iotwin compare` show. Memory is bounded by fixed-size histograms plus state per thread,
// process, file, open descriptor and in-flight request; it does not grow with the number of
// records (except the optional per-thread operation sequences that compare asks for).
//
// Descriptors, open file descriptions, their positions and the processes that hold them are the
// trace interpreter's (model::TraceState, fed every record): the analyzer keeps no descriptor
// state of its own. It uses the position the interpreter tracked for the offsets of
// read/write/readv/writev (no explicit offset); the record's own `offset` field is used only
// while a descriptor's position is unknown (opened before the capture attached and no fd
// snapshot). Disagreements between the two are counted ("offsets.tracked_vs_recorded_mismatch"
// in the model).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
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

#include <nlohmann/json.hpp>

#include "analysis/flat_map.h"
#include "analysis/newest_items.h"
#include "analysis/histogram.h"
#include "analysis/page_ranges.h"
#include "analysis/pattern.h"
#include "iotwin_abi.h"
#include "model/block_requests.h"
#include "model/path.h"
#include "model/program_images.h"
#include "model/scope.h"
#include "model/trace_state.h"

namespace iotwin::analysis {

namespace analyzer_detail {
struct ReadPages;
}

// Identity of one system call within a trace: its thread and start time (a thread never starts
// two calls in the same nanosecond). Kept whole: a hash of the two could make two calls one.
struct CallId {
  uint32_t tid = 0;
  uint64_t ts = 0;
  bool operator==(const CallId&) const = default;
};
struct CallIdHash {
  size_t operator()(const CallId& c) const { return MixBits(c.ts ^ (uint64_t{c.tid} << 40)); }
};
inline CallId CallKey(uint32_t tid, uint64_t ts) { return {tid, ts}; }
using CallSet = std::unordered_set<CallId, CallIdHash>;

// Which records count. Empty lists mean "all"; times are seconds from the trace start.

struct AnalysisFilter {
  std::vector<uint32_t> tgids;
  std::vector<uint32_t> tids;
  // Glob patterns (model::GlobMatch) on the names a file was opened by, as recorded or resolved
  // to absolute paths (relative and dirfd-relative opens, descriptors inherited at attach).
  std::vector<std::string> file_globs;
  std::vector<uint16_t> ops;            // IOT_OP_* codes
  // Hosts of a merged trace by name (format/hosts.h); SetMeta finds their indices in `hosts`
  // (a name the trace does not have matches nothing).
  std::vector<std::string> host_names;
  std::vector<uint32_t> hosts;
  std::optional<double> from_s;
  std::optional<double> to_s;
  // Calls left out of the statistics (compare: calls a replay does not re-issue); descriptor and
  // mapping state still follows them.
  std::shared_ptr<const CallSet> excluded_calls;
  // The data scope, on resolved absolute paths; what it leaves out is counted apart (the
  // model's "scope").
  model::Scope scope;
  // The program images a scope that leaves them out finds in a first pass over the trace
  // (model/program_images.h); null when it admits them.
  std::shared_ptr<const std::set<model::ProgramImages::Key>> program_images;

  bool empty() const {
    return tgids.empty() && tids.empty() && file_globs.empty() && ops.empty() &&
           host_names.empty() && !from_s &&
           !to_s && !excluded_calls && scope.IsAll();
  }
  nlohmann::json ToJson() const;
};

// Files whose offset heat map and offset-over-time samples are collected (second pass of an
// HTML report, when the busiest files are known).
struct HeatmapTarget {
  uint32_t dev = 0;
  uint64_t ino = 0;
  uint64_t max_offset = 0;   // end of the largest request seen (offset axis)
  uint64_t sample_every = 1;  // keep every n-th request as a scatter point
};

struct AnalyzerOptions {
  AnalysisFilter filter;
  size_t top = 20;  // rows kept in per-file/thread/process/size tables (0: all)
  // compare: keep each thread's sequence of operation fingerprints (8 bytes per syscall).
  bool collect_sequences = false;
  size_t max_sequence_ops = 50'000'000;  // per trace; beyond it sequences are truncated
  // compare: distributions of request sizes, offsets and inter-arrival times (request_sizes(),
  // offsets(), inter_arrival()); off for report, which does not show them.
  bool collect_distributions = false;
  std::vector<HeatmapTarget> heatmaps;
  uint64_t heatmap_span_ns = 0;  // time axis of the heat maps (from the first pass)
  uint64_t start_ns_override = 0;  // set by the second pass so both share the time origin
};

// File identity (dev, ino).
struct FileKey {
  uint32_t dev = 0;
  uint64_t ino = 0;
  bool operator<(const FileKey& o) const { return dev != o.dev ? dev < o.dev : ino < o.ino; }
  bool operator==(const FileKey& o) const { return dev == o.dev && ino == o.ino; }
};

// Fingerprint of one system call for sequence comparison: op and its arguments (offset,
// length, flags, whence), never descriptors, addresses or times.
uint64_t OpFingerprint(uint16_t op, uint64_t offset, uint64_t length, uint32_t flags,
                       uint64_t whence);

// "READ", "WRITEV", "PREAD", ... for an async request's opcode (io_uring IORING_OP_* or libaio
// IOCB_CMD_*); the number when unknown.
std::string AsyncOpName(uint8_t engine, uint8_t opcode);
// Direction of an async opcode: 0 read, 1 write, -1 neither.
int AsyncDirection(uint8_t engine, uint8_t opcode);

class Analyzer {
 public:
  explicit Analyzer(AnalyzerOptions options = {});
  ~Analyzer();
  Analyzer(const Analyzer&) = delete;
  Analyzer& operator=(const Analyzer&) = delete;

  // The trace header (host facts: page size, arch, start anchor). Call before Consume.
  void SetMeta(const nlohmann::json& meta);
  // One record, already validated and zero-extended (TraceReader::Next()).
  void Consume(const iot_rec_hdr* rec);

  // The report model: a JSON object holding every table and series (docs/report.md describes
  // it). `summary` is the trace footer, when the trace has one; `trace_facts` (path, size,
  // damage, ...) is copied under "trace".
  nlohmann::json Model(const std::optional<nlohmann::json>& summary,
                       const nlohmann::json& trace_facts = nlohmann::json::object()) const;

  // For compare: threads with their fingerprint sequences, in order of first appearance.
  struct ThreadSequence {
    uint32_t tgid = 0, tid = 0;
    uint64_t first_ts = 0;
    uint32_t process_rank = 0;  // order of first appearance of the process
    uint32_t thread_rank = 0;   // order of first appearance within its process
    const std::vector<uint64_t>* ops = nullptr;
  };
  std::vector<ThreadSequence> Sequences() const;
  bool sequences_truncated() const { return sequences_truncated_; }

  // Distributions compare measures (valid after the pass).
  const LogLinearHistogram& request_sizes(int dir) const { return req_size_ll_[dir]; }
  const LogLinearHistogram& offsets(int dir) const { return offset_ll_[dir]; }
  const LogLinearHistogram& inter_arrival() const { return inter_arrival_; }
  const LogLinearHistogram* op_latency(uint16_t op) const;
  const LogLinearHistogram& block_sizes(int dir) const { return block_size_ll_[dir]; }
  const TimeSeries& series() const { return series_; }
  uint64_t records_seen() const { return records_; }
  uint64_t start_ns() const { return start_; }

  // Series in series(): application (syscall + async) and block, per direction.
  enum SeriesId : size_t {
    kAppReadOps = 0, kAppWriteOps, kAppReadBytes, kAppWriteBytes,
    kBlockReadOps, kBlockWriteOps, kBlockReadBytes, kBlockWriteBytes, kMajorFaults,
    kMmapReadOps, kMmapWriteOps, kMmapReadBytes, kMmapWriteBytes, kSeriesCount
  };

 private:
  struct OpStats {
    uint64_t count = 0, errors = 0, bytes = 0, requested = 0, io_ns = 0;
    std::unique_ptr<LogLinearHistogram> latency;
    std::unique_ptr<SizeHistogram> sizes;  // data ops: requested lengths
    std::unique_ptr<TopValues> top;
  };
  struct ThreadStats {
    uint32_t tid = 0, tgid = 0, proc = 0;
    uint64_t first_ts = 0, first_op_ts = 0, last_ts = 0, prev_enter = 0;
    uint64_t ops = 0, io_ns = 0, faults = 0, offcpu_ns = 0;
    std::array<uint64_t, 2> data_ops{}, bytes{};
    std::array<char, 16> comm{};
    std::vector<uint64_t> seq;
    // This thread's pattern streams on files below index kDirectStreamFiles, by StreamSlot():
    // index in stream_states_ + 1, 0 for none yet. Grown on demand; stays empty for threads
    // from index kDirectStreamThreads on.
    std::vector<uint32_t> streams;
  };
  // A process's operation counts are its threads' sums, added up by Model() (not per record).
  struct ProcStats {
    uint32_t tgid = 0, parent = 0, exe_id = 0, threads = 0;
    uint64_t first_ts = 0;
    uint64_t faults = 0;
    std::array<char, 16> comm{};
    int32_t exit_code = 0;
    bool exited = false;
  };
  static constexpr int kMaxNames = 4;
  // An access to pages [first, end) of a file (Access*), noted when the trace's time was
  // seen_ts.
  struct RecentRead {
    uint64_t first = 0, end = 0, seen_ts = 0;
    uint8_t access = 0;
  };
  static constexpr size_t kRecentReads = 32;
  // The fields every data system call updates come first, in three cache lines: a random mix
  // of files then touches three lines per call rather than six.
  struct alignas(64) FileStats {
    uint64_t ino = 0;
    uint32_t dev = 0;
    int8_t glob = -1;  // file-glob filter: -1 undecided, 0 no, 1 yes
    int8_t scope = -1;  // the scope's verdict on its resolved names: -1 none yet, 0 out, 1 in
    uint64_t first_ts = 0, ops = 0, io_ns = 0, fsize = 0, max_end = 0, read_pages = 0;
    std::array<uint64_t, 2> data_ops{}, bytes{}, requested{};
    uint64_t direct_ops = 0;
    std::array<std::array<uint64_t, kAccessKinds>, 2> access{};
    // Colder: opens, mappings, names, asynchronous I/O and the memory layer.
    uint64_t opens = 0, maps = 0;
    // Ids in the name table (NameText): the paths it was opened or named by, as the interpreter
    // resolved them (absolute, renamed directories followed), else as recorded.
    std::array<uint32_t, kMaxNames> names{};
    uint32_t nnames = 0, more_names = 0;
    std::array<uint64_t, 2> async_ops{}, async_bytes{};
    uint64_t faults = 0, faults_major = 0, faults_write = 0, fault_pages = 0;
    uint64_t pc_add = 0, pc_delete = 0, ra_windows = 0, ra_pages = 0;
    uint64_t wb_dirtied = 0, wb_written = 0;
    int64_t cache_resident = -1, cache_total = -1;
    // What the file is (model::ClassifyFile of its first recorded type and first absolute
    // name); `untyped`: a call showed its identity without a type.
    uint16_t ftype = 0;
    model::FileKind kind = model::FileKind::kStorage;
    bool untyped = false;
    bool tmpfile = false;  // made by an O_TMPFILE open: names of its directory are not its own
    uint32_t kind_path = 0;  // its first absolute name (a name-table id), 0 none
    // Mapped I/O: pages read by read faults (fault-around included, each page once per run of
    // faults on one window), pages dirtied through shared writable mappings. Instruction
    // fetches (exec faults) are code, not data: counted apart.
    uint64_t read_faults = 0, mmap_read_pages = 0, shared_write_faults = 0, mmap_write_pages = 0;
    uint64_t exec_faults = 0, exec_pages = 0;
    // Cache misses: pages read (by calls, by faults) that entered the page cache during the
    // trace for this read (see NoteAccess).
    uint64_t missed_call_pages = 0, missed_fault_pages = 0;
    // Its pages in pending_pages_, all within [pending_first, pending_end) (while any).
    uint64_t pending_pages = 0, pending_first = 0, pending_end = 0;
    // The file's last access, for insertions recorded after the access that caused them.
    uint64_t last_first = 0, last_end = 0;
    uint64_t fault_window_first = 0, fault_window_end = 0;  // of its last read fault
    uint8_t last_access = 0;  // Access*
    // Its latest accesses (read calls, faults, writes; contiguous calls merged), oldest first,
    // at most kRecentReads: the capture writes a run of insertions when the run ends, after the
    // accesses that found or wrote its pages; NotePageAdd counts them as those reads' misses
    // (a write's pages are its own, not misses).
    NewestItems<RecentRead, kRecentReads> recent_reads;
  };
  enum : uint8_t { kAccessNone = 0, kAccessCall, kAccessFault, kAccessWrite };
  // What OnSyscall's descriptor step found: the file, the offset the call used, and whether
  // its descriptor is O_DIRECT.
  struct CallTarget {
    int32_t file = -1;
    uint64_t offset = 0;
    bool direct = false;
  };
  struct AsyncPending {
    uint64_t ts = 0, offset = 0, length = 0, ctx = 0;
    uint32_t tgid = 0, tid = 0;
    int32_t file = -1;
    uint8_t engine = 0, opcode = 0;
    bool direct = false;  // submitted on an O_DIRECT descriptor
    bool length_known = true;  // false: an older writer's vectored request (its result counts)
  };
  struct AsyncStats {
    uint8_t engine = 0, opcode = 0;
    uint64_t count = 0, errors = 0, bytes = 0, requested = 0;
    SizeHistogram sizes;
    TopValues top;
    LogLinearHistogram latency;
  };
  struct BlockDevStats {
    uint64_t queued = 0, issued = 0, completed = 0, merges = 0, splits = 0, requeues = 0;
    uint64_t errors = 0, flushes = 0, discards = 0, readahead = 0, sync = 0, fua = 0;
    std::array<uint64_t, 2> ops{}, bytes{};
    std::array<SizeHistogram, 2> sizes;
    std::array<TopValues, 2> top;
    std::array<StreamState, 2> stream;
    std::array<std::array<uint64_t, kAccessKinds>, 2> access{};
    SeekHistogram seek;
    LogLinearHistogram q2q;
    uint64_t last_queue_ts = 0;
    uint64_t reissues = 0;  // issues of requeued requests (not requests of their own)
    // Completed requests' times in flight: from start to completion (iostat's aqu-sz) and on
    // the device (issue to requeue or completion), [start, end) in ns. While every request so
    // far was on the device from its start to its completion (issued at once, never requeued),
    // the two are the same and device_times stays empty (device_apart false).
    model::IntervalTimes queue_times, device_times;
    bool device_apart = false;
  };
  // A block request in flight (one entry per request: the rule's state and the analyzer's
  // times): when it started (its first bio queued, inserted or issued), when it was last issued
  // (0 while given back by a requeue), and the issue its D2C runs from (until a completion,
  // partial or not, takes it).
  struct BlockInFlight {
    uint64_t start = 0, issue = 0, d2c_issue = 0;
    uint32_t dev = 0;
    bool d2c_open = false;
    model::BlockRequestState state = model::BlockRequestState::kIssued;
  };
  // Data ops on one kind of file that is not storage (pipes, sockets, ...).
  // ops/bytes/requested: system calls; async_*: asynchronous requests.
  struct NonStorageStats {
    std::array<uint64_t, 2> ops{}, bytes{}, requested{}, async_ops{}, async_bytes{};
  };
  struct LabelStats {
    uint64_t count = 0, instants = 0, total_ns = 0, max_ns = 0, open = 0;
    uint64_t ops = 0, bytes = 0;
  };
  struct Heatmap {
    static constexpr int kTimeBins = 120;
    static constexpr int kOffsetBins = 64;
    int32_t file = -1;
    uint64_t max_offset = 1, sample_every = 1, seen = 0;
    std::vector<uint64_t> ops;    // [time][offset] request counts
    std::vector<uint64_t> bytes;  // [time][offset] bytes
    struct Point {
      uint64_t ts, offset, length;
      int dir;
    };
    std::vector<Point> points;
  };

  void OnString(const iot_rec_hdr* rec);
  void OnSyscall(const iot_syscall& r);
  void OnProc(const iot_proc& r);
  void OnFdSnapshot(const iot_fd_snapshot& r);
  void OnMapSnapshot(const iot_map_snapshot& r);
  void OnPageFault(const iot_page_fault& r);
  void OnPageCache(const iot_page_cache& r);
  void OnWriteback(const iot_writeback& r);
  void OnBlock(const iot_block& r);
  void OnBlockIssue(const iot_block& r, BlockDevStats& d);
  void OnBlockComplete(const iot_block& r, BlockDevStats& d);
  void OnNvme(const iot_nvme& r);
  void OnAsync(const iot_async_io& r);
  // A submission (`key`: its request's key in async_pending_).
  void OnAsyncSubmit(const iot_async_io& r, uint64_t key);
  void OnIntent(const iot_intent& r);
  // Phases (analyzer_phases.cc): a data call or a fault of thread `tid` while phases are open.
  void NotePhaseCall(const iot_syscall& r, int dir, uint64_t bytes);
  void NotePhaseFault(uint32_t tid, uint64_t mapped_pages, bool major);
  nlohmann::json IntentsModel() const;
  void OnLost(const iot_lost& r);
  void OnCacheState(const iot_cache_state& r);
  void OnSched(const iot_sched& r);

  // Fixes the report's start time at the first timestamped record (inline: runs per record).
  bool ensure_start(uint64_t ts) { return started_ || StartAt(ts); }
  bool StartAt(uint64_t ts);
  bool TimeAllowed(uint64_t ts) {
    ensure_start(ts);
    return ts >= from_ns_ && ts <= to_ns_;
  }
  // The filter checks and lookups below run for nearly every record: inline fast paths, with
  // the rest out of line.
  bool TaskAllowed(uint32_t tgid, uint32_t tid) const {
    return !task_filter_ || TaskAllowedSlow(tgid, tid);
  }
  bool TaskAllowedSlow(uint32_t tgid, uint32_t tid) const;
  bool FileAllowed(int32_t file_index) {
    return !path_filter_ || FileAllowedSlow(file_index);
  }
  bool FileAllowedSlow(int32_t file_index);
  // The scope's part of FileAllowed.
  bool InScope(int32_t file_index) const;
  // Counts what the scope alone left out (a call and its bytes, an async request, a fault).
  void NoteScopedOut(int32_t file_index, uint64_t* count, uint64_t* bytes, uint64_t n);
  bool OpAllowed(uint16_t op) const { return options_.filter.ops.empty() || OpAllowedSlow(op); }
  bool OpAllowedSlow(uint16_t op) const;

  ThreadStats& Thread(uint32_t tgid, uint32_t tid, uint64_t ts) {
    const uint64_t key = (static_cast<uint64_t>(tgid) << 32) | tid;
    const KeySlot& slot = thread_cache_[KeyCacheSlot(key)];
    if (slot.key == key && slot.value != UINT32_MAX) return threads_[slot.value];
    return ThreadSlow(tgid, tid, ts);
  }
  ThreadStats& ThreadSlow(uint32_t tgid, uint32_t tid, uint64_t ts);
  ProcStats& Proc(uint32_t tgid, uint64_t ts);
  int32_t FileIndex(uint32_t dev, uint64_t ino, bool create);
  // `resolved`: the name as a normalised absolute path, empty when unknown or not needed.
  void AddFileName(int32_t file_index, uint32_t path_id, std::string_view resolved = {});
  // The path of a call, resolved against its process's cwd or dirfd; empty when unknown or
  // truncated.
  std::string ResolvedName(const iot_syscall& r) const;
  // The name table: each distinct name once (ids from 1), for FileStats::names and kind_path.
  uint32_t NameId(std::string_view text);
  std::string_view NameText(uint32_t id) const;
  // An absolute recorded name (snapshots), normalised; empty otherwise.
  std::string AbsoluteName(uint32_t path_id) const;

  // The file the description behind `fd` of `tgid` was seen on (its `user` slot: file index +
  // 1, 0 for none yet); -1 when unknown.
  int32_t DescriptorFile(uint32_t tgid, int32_t fd) const;
  // The text of a path the interpreter resolves.
  std::optional<std::string_view> PathText(uint32_t path_id) const;
  // Whether `path_id` is a recorded empty path (an *at() call on its dirfd: AT_EMPTY_PATH).
  bool EmptyPath(uint32_t path_id) const {
    auto it = path_id ? strings_.find(path_id) : strings_.end();
    return it != strings_.end() && it->second.empty();
  }
  // Feeds call `r` to the interpreter and finds the file and offset it used.
  [[gnu::always_inline]] inline CallTarget TrackDescriptors(const iot_syscall& r, uint16_t op,
                                                            int dir, bool ok, uint64_t ret);
  // Its step for a read or write (`dir` 0 or 1), from what the interpreter did (`e`).
  [[gnu::always_inline]] inline void TrackDataCall(const iot_syscall& r, uint16_t op, int dir,
                                                   bool ok, uint64_t ret, bool has_file,
                                                   const model::SyscallEffect& e, CallTarget& c);
  // An open that succeeded: the new description's file, the file's name.
  void NoteOpen(const iot_syscall& r, int32_t file, const model::SyscallEffect& e);

  // Inlined into OnSyscall, its only caller (saves a call per data operation).
  [[gnu::always_inline]] inline void DataOp(const iot_syscall& r, ThreadStats& t, int dir,
                                            uint64_t offset, uint64_t bytes, int32_t file_index,
                                            bool direct);
  // The pattern stream of thread `t`'s requests to `file` in direction `dir` (0 read, 1 write),
  // its system calls' or (`async`) its asynchronous submissions', created on first use; nullptr
  // when kMaxStreams exist (counted in streams_dropped_). A thread's streams on files of low
  // index are found by direct index, two dependent loads: on a random mix of threads and files a
  // hash probe cost a fifth of the analysis. The rest go through stream_index_.
  StreamState* Stream(ThreadStats& t, int32_t file, int dir, bool async) {
    const size_t at = StreamSlot(file, dir, async);
    if (at < t.streams.size() && t.streams[at] != 0) return &stream_states_[t.streams[at] - 1];
    return StreamSlow(t, file, dir, async);
  }
  static size_t StreamSlot(int32_t file, int dir, bool async) {
    return static_cast<size_t>(file) * 4 + (async ? 2u : 0u) + static_cast<size_t>(dir);
  }
  StreamState* StreamSlow(ThreadStats& t, int32_t file, int dir, bool async);
  // Syscall data-op totals per direction (ops, bytes, requested), summed from ops_.
  void SyscallDirectionTotals(std::array<uint64_t, 2>* ops, std::array<uint64_t, 2>* bytes,
                              std::array<uint64_t, 2>* requested) const;
  void Heat(int32_t file_index, uint64_t ts, uint64_t offset, uint64_t bytes, int dir);
  nlohmann::json FileJson(const FileStats& f) const;
  // Sums over the files (analyzer_model.cc): mapped I/O and misses of storage files, files of
  // each kind.
  struct FileSums;
  FileSums SumFiles() const;
  nlohmann::json TotalsJson(uint64_t span, const FileSums& sums) const;
  nlohmann::json NonStorageJson(const FileSums& sums) const;
  // Each layer's part of the model, in that layer's file: null when the trace has none of it.
  nlohmann::json MemoryModel(const analyzer_detail::ReadPages& read) const;
  // `blk_bytes`: the block layer's bytes per direction (amplification).
  nlohmann::json BlockModel(std::array<uint64_t, 2>* blk_bytes) const;
  nlohmann::json NvmeModel() const;
  // The system calls' sections: "offsets", "ops", "sizes", "pattern".
  void SyscallModel(nlohmann::json& m) const;
  nlohmann::json AsyncModel() const;
  nlohmann::json AmplificationModel(const FileSums& sums, const std::array<uint64_t, 2>& blk) const;

  // What file `file_index` is, learnt from a record's type (0: none) and, in AddFileName, its
  // first absolute name.
  void NoteFileType(int32_t file_index, uint16_t ftype) {
    FileStats& f = files_[static_cast<size_t>(file_index)];
    if (f.ftype != 0 || (ftype == 0 && f.untyped)) return;
    NoteFileTypeSlow(f, ftype);
  }
  void NoteFileTypeSlow(FileStats& f, uint16_t ftype);
  void NameLinkedDescriptor(const iot_syscall& r);
  void UpdateFileKind(FileStats& f);
  bool IsStorageFile(int32_t file_index) const {
    return file_index < 0 || model::IsStorage(files_[static_cast<size_t>(file_index)].kind);
  }
  // The page cache's side of a read: pages [first, end) of `f` read by a call or a fault, or
  // written; returns the pages of the range that entered the cache during the trace and were
  // not read since (misses). Insertions recorded after the access count for it (NotePageAdd).
  // Inline: every data call on storage comes here (a hot path; forced, since with the recent
  // reads' step inside it the compiler called it out of line).
  [[gnu::always_inline]] uint64_t NoteAccess(int32_t file_index, FileStats& f, uint8_t access,
                                             uint64_t first, uint64_t end) {
    f.last_access = access;
    f.last_first = first;
    f.last_end = end;
    NoteRecentRead(f, access, first, end);
    const uint64_t taken = TakePending(file_index, f, first, end);
    return access == kAccessWrite ? 0 : taken;
  }
  void NotePageAdd(int32_t file_index, FileStats& f, uint64_t first, uint64_t count, uint64_t ts);
  // Inline (forced: the compiler called it out of line): NoteAccess's part for every data call
  // on storage, where the call cost a third of its work.
  [[gnu::always_inline]] void NoteRecentRead(FileStats& f, uint8_t access, uint64_t first,
                                             uint64_t end) {
    auto& reads = f.recent_reads;  // the newest kRecentReads
    if (access != kAccessFault && !reads.empty() && reads.back().access == access &&
        reads.back().end == first) {
      reads.back().end = end;
      reads.back().seen_ts = last_ts_;
      return;
    }
    reads.push_back({.first = first, .end = end, .seen_ts = last_ts_, .access = access});
  }
  // Pages of [first, end) that `r` read: counted as its misses, and no longer its.
  void CreditRecentRead(FileStats& f, RecentRead& r, uint64_t lo, uint64_t hi, uint64_t ts);
  void AddPending(int32_t file_index, FileStats& f, uint64_t first, uint64_t end);
  uint64_t TakePending(int32_t file_index, FileStats& f, uint64_t first, uint64_t end) {
    if (f.pending_pages == 0 || end <= f.pending_first || first >= f.pending_end) return 0;
    // Only the pending span can hold pending pages: a wide access is looked up there alone.
    const uint64_t taken = pending_pages_.Take(static_cast<uint32_t>(file_index),
                                               std::max(first, f.pending_first),
                                               std::min(end, f.pending_end));
    f.pending_pages -= std::min(f.pending_pages, taken);
    return taken;
  }
  // A data op (`async`: an asynchronous request) on a file that is not storage.
  void NonStorageOp(FileStats& f, int dir, uint64_t bytes, uint64_t requested, bool async);
  // The mapped side of a fault on storage file `f`: pages read or dirtied through the mapping,
  // and whether the fault missed the cache (see docs/report.md).
  bool MappedFault(const iot_page_fault& r, int32_t file, FileStats& f, uint64_t pages);
  uint64_t PageIndex(uint64_t byte_offset) const {
    return page_shift_ >= 0 ? byte_offset >> page_shift_ : byte_offset / page_size_;
  }

  AnalyzerOptions options_;
  nlohmann::json meta_;
  uint64_t page_size_ = 4096;
  int page_shift_ = 12;  // log2(page_size_) when a power of two, else -1 (divide)
  uint64_t anchor_ns_ = 0;
  uint64_t start_ = 0;
  bool started_ = false;
  uint64_t first_ts_ = UINT64_MAX, last_ts_ = 0;  // of records counted
  uint64_t data_first_ts_ = UINT64_MAX, data_last_ts_ = 0;  // issue times of data ops counted
  uint64_t from_ns_ = 0, to_ns_ = UINT64_MAX;
  bool task_filter_ = false;  // options_.filter names tgids or tids
  bool filtering_ = false;    // options_.filter is not empty
  // File globs or a scope: names are resolved (the interpreter keeps paths and cwds).
  bool path_filter_ = false;
  // What the scope alone left out: calls and the bytes they moved, async requests and their
  // bytes, page faults.
  uint64_t scoped_out_calls_ = 0, scoped_out_call_bytes_ = 0, scoped_out_async_ = 0,
           scoped_out_async_bytes_ = 0, scoped_out_faults_ = 0;

  // Strings (paths, labels) from STRING records.
  std::unordered_map<uint32_t, std::string> strings_;
  // Names of files (NameId): texts (stable addresses) and their ids.
  std::deque<std::string> name_texts_;
  std::unordered_map<std::string_view, uint32_t> name_ids_;

  uint64_t records_ = 0;
  uint64_t filtered_out_ = 0;
  uint64_t excluded_calls_ = 0;  // of filtered_out_: named in options_.filter.excluded_calls
  std::array<uint64_t, IOT_REC_MAX + 1> records_by_type_{};

  std::vector<OpStats> ops_;  // indexed by IOT_OP_*
  std::vector<ThreadStats> threads_;
  FlatMap<uint32_t> thread_index_;  // (tgid << 32 | tid) -> index
  std::vector<ProcStats> procs_;
  FlatMap<uint32_t> proc_index_;  // tgid -> index
  std::vector<FileStats> files_;
  FlatMap<uint32_t> file_index_;              // packed (dev, ino) -> index
  std::map<FileKey, uint32_t> file_index_wide_;  // keys that do not pack
  std::vector<uint32_t> devs_;                   // device numbers, for packing file keys
  uint32_t last_dev_ = UINT32_MAX, last_dev_index_ = 0;
  // Direct-mapped cache in front of thread_index_ (per-record lookups: a multiply and a compare
  // instead of a hash-table probe). Thread indices never change once assigned.
  struct KeySlot {
    uint64_t key = 0;
    uint32_t value = UINT32_MAX;  // UINT32_MAX: empty
  };
  // 256 slots (4 KiB per cache): with 64, a process's 65 open files already collided often
  // enough to cost 2 ns per record on the synthetic mix.
  static constexpr int kKeyCacheBits = 8;
  static size_t KeyCacheSlot(uint64_t key) {
    return static_cast<size_t>((key * 0x9e3779b97f4a7c15ULL) >> (64 - kKeyCacheBits));
  }
  std::array<KeySlot, size_t{1} << kKeyCacheBits> thread_cache_{};

  // Descriptor tables and open file descriptions (the one trace interpreter; files are known by
  // identity here, named by the paths it resolves). A description's `user` slot holds the
  // index + 1 of the file it was seen on.
  model::TraceState fd_state_;

  std::vector<StreamState> stream_states_;
  // (thread index, file, async, dir) -> index in stream_states_, for streams the threads' own
  // tables do not hold (files from kDirectStreamFiles on, threads from kDirectStreamThreads on).
  FlatMap<uint32_t> stream_index_;
  uint64_t streams_dropped_ = 0;

  // Per direction (0 read, 1 write) over syscall data ops (their totals: SyscallDirectionTotals).
  std::array<std::array<uint64_t, kAccessKinds>, 2> access_{};
  std::array<SeekHistogram, 2> seek_;
  std::array<LogLinearHistogram, 2> req_size_ll_;
  std::array<LogLinearHistogram, 2> offset_ll_;
  LogLinearHistogram inter_arrival_;
  uint64_t direct_ops_ = 0;
  uint64_t direct_bytes_ = 0;
  uint64_t offset_tracked_ = 0, offset_recorded_ = 0, offset_explicit_ = 0, offset_mismatch_ = 0;
  // Calls that used the previous instance of their descriptor's number (the interpreter's
  // hand-over rule, model::TraceState::SetHandoverRule; on unless the clock is too coarse for it:
  // strace's whole seconds (-t) or line numbers (no timestamps)).
  uint64_t previous_instance_calls_ = 0;
  uint64_t unattributed_ops_ = 0;
  // The trace records every file's type (a live capture): a file without one is an anonymous
  // inode (eventfd, ...). Imports and synthetic traces leave unknown types at 0.
  bool types_recorded_ = false;
  std::array<NonStorageStats, model::kFileKinds> non_storage_{};

  TimeSeries series_;

  // Memory layer.
  uint64_t faults_ = 0, faults_major_ = 0, faults_write_ = 0, fault_pages_ = 0;
  uint64_t faults_unattributed_ = 0;
  uint64_t pc_add_ = 0, pc_delete_ = 0, ra_windows_ = 0, ra_pages_ = 0;
  uint64_t wb_dirtied_ = 0, wb_written_ = 0, wb_works_ = 0, wb_waits_ = 0;
  bool have_page_cache_ = false;
  // Per file: pages that entered the page cache during the trace and were not read since.
  PendingPages pending_pages_;
  uint64_t cache_state_files_ = 0, cache_state_resident_ = 0, cache_state_total_ = 0;

  // Block layer.
  std::map<uint32_t, BlockDevStats> block_devs_;
  uint32_t last_block_dev_ = 0;
  BlockDevStats* last_block_stats_ = nullptr;  // map nodes are stable
  std::array<LogLinearHistogram, 2> block_size_ll_;
  LogLinearHistogram q2c_, d2c_, i2d_, q2d_;
  FlatMap<uint64_t> blk_insert_pending_;  // request key -> I ts
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> blk_queue_pending_;  // (dev, sector) -> Q ts
  uint64_t blk_queue_dropped_ = 0;
  std::array<uint64_t, 16> blk_phase_counts_{};
  // Requests in flight, by the identity the block request rule follows them by.
  FlatMap<BlockInFlight, model::BlockRequestKey, model::BlockRequestKeyHash> blk_in_flight_;
  bool have_block_ = false;

  // NVMe.
  uint64_t nvme_cmds_ = 0, nvme_bytes_ = 0, nvme_errors_ = 0;
  FlatMap<uint64_t> nvme_pending_;
  LogLinearHistogram nvme_latency_;
  bool have_nvme_ = false;

  // Async I/O.
  FlatMap<AsyncPending> async_pending_;
  std::array<uint64_t, 2> async_dir_ops_{}, async_dir_bytes_{};
  std::map<uint32_t, AsyncStats> async_stats_;  // (engine << 8 | opcode) -> stats
  uint64_t async_unpaired_ = 0;
  // Each io_uring ring's or libaio context's paired requests, submission to completion [ns),
  // for its queue depth: (engine, ctx) -> intervals.
  std::map<std::pair<uint8_t, uint64_t>, std::vector<std::pair<uint64_t, uint64_t>>>
      async_ctx_in_flight_;

  // Intent markers (analyzer_phases.cc). A begin opens a phase on its thread's stack; its end
  // closes it and the phases begun inside it.
  struct OpenIntent {
    uint32_t label = 0;
    uint64_t ts = 0;
    uint32_t phase = UINT32_MAX;  // its row in phases_; UINT32_MAX past kMaxPhases
  };
  struct PhaseDevice {
    uint32_t dev = 0;
    std::array<uint64_t, 2> ops{}, bytes{};
  };
  struct PhaseStats {
    uint32_t label = 0, tgid = 0, tid = 0, depth = 0;
    uint64_t begin_ts = 0, end_ts = 0;
    bool open = true;
    std::array<uint64_t, 2> calls{}, call_bytes{};
    // Each block device's requests and bytes per direction when the phase began (then, once it
    // ended, those issued while it was open), by device number.
    std::vector<PhaseDevice> devices;
    uint64_t faults = 0, faults_major = 0, mapped_pages = 0;
    std::array<std::unique_ptr<LogLinearHistogram>, 2> latency;  // data calls, per direction
  };
  static constexpr size_t kMaxPhases = 1024;
  std::unordered_map<uint32_t, LabelStats> labels_;  // label id -> stats
  std::unordered_map<uint32_t, std::vector<OpenIntent>> intent_stacks_;
  uint64_t intents_unmatched_ = 0;
  uint64_t open_intents_ = 0;  // entries on all stacks: 0 keeps every per-event hook one test
  std::vector<PhaseStats> phases_;
  uint64_t phases_dropped_ = 0;
  // Each block device's requests and bytes per direction so far (phases' device figures).
  std::vector<PhaseDevice> DeviceTotals() const;

  // Losses: cumulative counts per (source, cpu).
  std::map<std::pair<uint16_t, uint16_t>, uint64_t> lost_;

  // Scheduling interference.
  uint64_t offcpu_ns_ = 0, offcpu_intervals_ = 0, irq_ns_ = 0;

  // Heat maps (second pass).
  std::vector<Heatmap> heatmaps_;
  FlatMap<uint32_t> heatmap_of_file_;  // file index -> heatmap index + 1

  bool sequences_truncated_ = false;
  uint64_t sequence_ops_ = 0;
};

}  // namespace iotwin::analysis
