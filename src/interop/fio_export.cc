// `iotwin export --fio DIR`: fio iolog v3 files, one per traced thread (or per device with
// --layer block), and a job file that replays them (docs/interop.md).
//
// Two passes over the trace: the first learns what the job file must say before any iolog line is
// written (the start time, each file's extent for preparation, each thread's queue depth and
// whether it used O_DIRECT, which threads have I/O at all); the second writes the iologs. Both
// passes run the same Walker, so they make the same decisions.
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "base/bytes_text.h"
#include "base/checked_math.h"
#include "base/output_file.h"
#include "format/op_info.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "interop/block_text.h"
#include "interop/exporters.h"
#include "interop/text_util.h"
#include "model/block_requests.h"
#include "model/path.h"
#include "model/trace_state.h"

namespace iotwin::interop {

nlohmann::json FioExportResult::ToJson() const {
  nlohmann::json per_file_json = nlohmann::json::array();
  for (const FioFileResult& f : per_file) {
    nlohmann::json row = {{"original", BytesToText(f.original)}, {"extent_bytes", f.extent}};
    if (f.left_out.empty()) {
      row["fio_name"] = BytesToText(f.fio_name);
      row["reads"] = f.reads;
      row["writes"] = f.writes;
      row["trims"] = f.trims;
      row["syncs"] = f.syncs;
      row["read_bytes"] = f.read_bytes;
      row["write_bytes"] = f.write_bytes;
    } else {
      row["left_out"] = f.left_out;
    }
    per_file_json.push_back(std::move(row));
  }
  nlohmann::json out = {{"job_file", BytesToText(job_file)},
          {"jobs", jobs},
          {"reads", reads},
          {"writes", writes},
          {"trims", trims},
          {"syncs", syncs},
          {"read_bytes", read_bytes},
          {"write_bytes", write_bytes},
          {"files", files},
          {"files_left_out", files_left_out},
          {"prepare_bytes", prepare_bytes},
          {"per_file", std::move(per_file_json)},
          {"skipped", skipped}};
  if (!scope.is_null()) out["scope"] = scope;
  return out;
}

namespace {

// fio reads iolog names with "%256s" into a 256+16 byte buffer, and splits filename= options at
// ':'; remapped names stay below this and use a safe alphabet.
constexpr size_t kMaxFioName = 255;
// fio parses an iolog length as u32.
constexpr uint64_t kMaxFioLength = 1ull << 30;
// The largest offset a read, write or trim can reach: file offsets are off_t (signed 64 bits).
constexpr uint64_t kMaxFileOffset = INT64_MAX;
constexpr const char* kPastLargestOffset = "request ending past the largest file offset (2^63 - 1)";
constexpr const char* kOutOfScope = "out of scope";
// Per-stream reorder window: records of one thread are nearly in time order already.
constexpr size_t kReorderWindow = 512;

// Lexical normalisation that keeps a relative path relative ("a/../b" -> "b", "../x" stays):
// for names fio resolves itself (a relative --fio-root, a traced name whose base the trace never
// showed). Paths of the trace are resolved by the model (TraceState::Resolve).
std::string NormalizeKeepingRelative(std::string_view path) {
  bool absolute = !path.empty() && path[0] == '/';
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t s = path.find('/', i);
    if (s == std::string_view::npos) s = path.size();
    std::string_view c = path.substr(i, s - i);
    if (c == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!absolute) {
        parts.push_back(c);
      }
    } else if (!c.empty() && c != ".") {
      parts.push_back(c);
    }
    i = s + 1;
  }
  std::string out = absolute ? "/" : "";
  for (size_t k = 0; k < parts.size(); k++) {
    if (k) out += '/';
    out.append(parts[k]);
  }
  if (out.empty()) out = ".";
  return out;
}

std::string SafeName(std::string_view s) {
  std::string out;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_';
    out.push_back(ok ? c : '_');
  }
  return out;
}

enum class Act { kOpen, kClose, kRead, kWrite, kTrim, kSync, kDatasync };

// What an iolog line needs to know of a file.
struct FileRef {
  std::string_view path;
  uint16_t ftype = 0;  // S_IFMT >> 12, 0 unknown
  bool direct = false;
  uint64_t ino = 0;  // 0: no identity recorded
};

FileRef RefOf(const model::OpenFileDescription& d) {
  return FileRef{d.path, d.ftype, d.direct, d.ino};
}

struct Event {
  uint64_t ts = 0;
  Act act = Act::kRead;
  uint32_t file = 0;
  uint64_t offset = 0, length = 0;
};

struct FileInfo {
  std::string original;
  std::string name;  // path fio uses
  uint64_t extent = 0;
  bool prepare = true;  // false for device paths given by the user
  bool mapped = false;  // the program mapped it (pass 1)
  uint64_t first_ts = UINT64_MAX;  // its earliest event (pass 1)
  // Reads, writes, trims and syncs of the whole trace (pass 1): a file without any is left out
  // of the job (fio would open it, and nothing creates it).
  uint64_t traced_ops = 0;
  // What the iologs hold (pass 2): whether any names it, and its I/O lines.
  bool in_log = false;
  uint64_t reads = 0, writes = 0, trims = 0, syncs = 0, read_bytes = 0, write_bytes = 0;
};

struct StreamStats {
  std::string job;
  uint32_t tgid = 0, tid = 0;
  uint32_t dev = 0;
  uint64_t io_lines = 0;
  uint64_t direct_ios = 0, buffered_ios = 0;
  int64_t inflight = 0, max_inflight = 0;
  bool async = false;
};

struct PairHash {
  size_t operator()(const std::pair<uint64_t, uint64_t>& p) const {
    return std::hash<uint64_t>()(p.first * 0x9e3779b97f4a7c15ull ^ p.second);
  }
};

// Turns trace records into per-stream fio events. A stream is a thread (tgid, tid) or, with
// --layer block, a device.
class Walker {
 public:
  using Sink = std::function<Status(uint64_t stream, const Event&)>;

  Walker(const FioExportOptions& options, std::vector<FileInfo>* files,
         std::unordered_map<std::string, uint32_t>* file_index,
         std::map<uint64_t, StreamStats>* streams, std::map<std::string, uint64_t>* skipped,
         bool count)
      : options_(options),
        files_(files),
        file_index_(file_index),
        streams_(streams),
        skipped_(skipped),
        count_(count) {}

  // Files the data scope left out (pass 1).
  size_t out_of_scope_files() const { return out_of_scope_.size(); }

  Status Run(TraceReader& r, const Sink& sink) {
    sink_ = &sink;
    if (const auto host = r.meta().find("host"); host != r.meta().end() && host->is_object()) {
      if (auto arch = host->find("arch"); arch != host->end() && arch->is_string()) {
        fds_.SetArch(arch->get<std::string>());
      }
    }
    // A live capture records every file's type: a file identity without one is an anonymous
    // inode (as the analyzer reads it); imports leave types they cannot see at 0.
    const auto capture = r.meta().find("capture");
    types_recorded_ = capture != r.meta().end() && capture->is_object();
    for (;;) {
      IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* h, r.Next());
      if (!h) break;
      switch (h->type) {
        case IOT_REC_SYSCALL:
          if (!options_.block_layer) IOTWIN_RETURN_IF_ERROR(Syscall(As<iot_syscall>(h), r));
          break;
        case IOT_REC_PROC:
          Proc(As<iot_proc>(h), r);
          break;
        case IOT_REC_FD_SNAPSHOT:
          FdSnapshot(As<iot_fd_snapshot>(h), r);
          break;
        case IOT_REC_ASYNC_IO:
          if (!options_.block_layer) IOTWIN_RETURN_IF_ERROR(Async(As<iot_async_io>(h)));
          break;
        case IOT_REC_PAGE_FAULT:
          if (!options_.block_layer) IOTWIN_RETURN_IF_ERROR(Fault(As<iot_page_fault>(h)));
          break;
        case IOT_REC_BLOCK:
          if (options_.block_layer) IOTWIN_RETURN_IF_ERROR(Block(As<iot_block>(h)));
          break;
        default:
          break;
      }
    }
    return Status::Ok();
  }

 private:
  void Skip(const std::string& why, uint64_t n = 1) {
    if (count_) (*skipped_)[why] += n;
  }

  uint64_t ThreadStream(uint32_t tgid, uint32_t tid) {
    uint64_t key = (uint64_t{tgid} << 32) | tid;
    auto& s = (*streams_)[key];
    if (s.job.empty()) {
      s.job = fmt::format("p{}-t{}", tgid, tid);
      s.tgid = tgid;
      s.tid = tid;
    }
    return key;
  }

  uint32_t FileFor(std::string_view path) {
    auto it = file_index_->find(std::string(path));
    if (it != file_index_->end()) return it->second;
    auto idx = static_cast<uint32_t>(files_->size());
    FileInfo f;
    f.original = std::string(path);
    std::string tail = SafeName(path);
    while (!tail.empty() && tail[0] == '_') tail.erase(0, 1);
    std::string prefix = options_.fio_root + fmt::format("/f{:05}_", idx);
    size_t room = kMaxFioName > prefix.size() ? kMaxFioName - prefix.size() : 0;
    if (tail.size() > room) tail = tail.substr(tail.size() - room);
    f.name = prefix + tail;
    files_->push_back(f);
    file_index_->emplace(std::string(path), idx);
    return idx;
  }

  // The text of a record's path, nullopt for none or one the capture could not read whole.
  static std::optional<std::string_view> PathText(TraceReader& r, uint32_t id, uint16_t sflags) {
    if (id == 0 || (sflags & (IOT_SCF_PATH_TRUNC | IOT_SCF_PATH_FAULT))) return std::nullopt;
    return r.String(id);
  }

  // Why fio cannot replay I/O on a file, or nullptr when it can: storage (model::ClassifyFile)
  // in the data scope that fio can open as a file, with a known name.
  const char* NotReplayable(const FileRef& f) {
    if (f.path.empty()) return "no path known for the descriptor";
    const char* kind = NotStorage(f.ftype, f.ino, f.path);
    if (kind) return kind;
    if (!InScope(f.path)) return kOutOfScope;
    if (f.ftype == 4) return "directory (fio replays files)";
    if (f.ftype != 0 && f.ftype != 8 && f.ftype != 6) return "not a regular file";
    return nullptr;
  }

  // Storage files are in scope by their resolved absolute path (a path whose base is unknown
  // counts as unknown); pass 1 notes those left out.
  bool InScope(std::string_view path) {
    if (options_.scope.IsAll()) return true;
    const std::string_view absolute = !path.empty() && path[0] == '/' ? path : std::string_view();
    if (options_.scope.Admits(absolute, model::FileKind::kStorage)) return true;
    if (count_) out_of_scope_.emplace(path);
    return false;
  }

  // Why a file is not storage, or nullptr when it is (model::ClassifyFile decides).
  const char* NotStorage(uint16_t ftype, uint64_t ino, std::string_view path) const {
    const std::string_view absolute = !path.empty() && path[0] == '/' ? path : std::string_view();
    switch (model::ClassifyFile(ftype, absolute, types_recorded_ && ftype == 0 && ino != 0)) {
      case model::FileKind::kStorage: return nullptr;
      case model::FileKind::kPipe: return "pipe (not storage)";
      case model::FileKind::kSocket: return "socket (not storage)";
      case model::FileKind::kCharDevice: return "character device: tty, /dev/null, ... (not storage)";
      case model::FileKind::kAnonInode: return "anonymous inode: eventfd, epoll, timerfd, ... (not storage)";
      case model::FileKind::kPseudoFs: return "pseudo-file (/proc, /sys, /dev)";
    }
    return nullptr;
  }

  Status Io(uint64_t stream, uint64_t ts, Act act, const FileRef& f, uint64_t offset,
            uint64_t length) {
    const bool data = act == Act::kRead || act == Act::kWrite || act == Act::kTrim;
    if (data && (offset > kMaxFileOffset || length > kMaxFileOffset - offset)) {
      Skip(options_.block_layer ? std::string("block: ") + kPastLargestOffset : kPastLargestOffset);
      return Status::Ok();
    }
    uint32_t file = FileFor(f.path);
    StreamStats& st = (*streams_)[stream];
    if (count_ && act != Act::kOpen && act != Act::kClose) (*files_)[file].traced_ops++;
    if (data) {
      if (count_) {
        st.io_lines++;
        if (f.direct) {
          st.direct_ios++;
        } else {
          st.buffered_ios++;
        }
        FileInfo& fi = (*files_)[file];
        fi.extent = std::max(fi.extent, offset + length);
      }
    }
    // fio parses lengths as u32: long transfers become several lines.
    do {
      uint64_t piece = std::min(length, kMaxFioLength);
      IOTWIN_RETURN_IF_ERROR((*sink_)(stream, Event{ts, act, file, offset, piece}));
      offset += piece;
      length -= piece;
    } while (length > 0);
    return Status::Ok();
  }

  Status Syscall(const iot_syscall& sc, TraceReader& r) {
    const OpInfo& info = GetOpInfo(sc.op);
    // The model follows every call: descriptors, positions, the paths of opens and the cwd
    // (chdir, fchdir), all as model::TraceState interprets them.
    const model::SyscallEffect e =
        fds_.OnSyscall(sc, PathText(r, sc.path_id, sc.sflags), PathText(r, sc.path2_id, sc.sflags));
    switch (info.family) {
      case OpFamily::kOpen:
        return Opened(sc, e, r);
      case OpFamily::kRead:
      case OpFamily::kWrite:
        return ReadWrite(sc, info, e);
      case OpFamily::kDescriptor:
        // dup*, fcntl, close_range and flock only change the tables; a close may end a file.
        return info.fd_effect == FdEffect::kCloses ? Closed(sc, e) : Status::Ok();
      case OpFamily::kSync:
        return Synced(sc, info, e);
      case OpFamily::kSpace:
        return Space(sc, info, e);
      case OpFamily::kAdvice:
      case OpFamily::kCopy:
        return NoAction(sc.op);
      case OpFamily::kMemory:
        return Memory(sc, info, e);
      case OpFamily::kDirectory:
        return NameChange(sc, info);
      default:
        return Status::Ok();  // lseek, metadata, cwd, async set-up: no I/O of their own
    }
  }

  // fsync, fdatasync and sync_file_range sync one file; syncfs and sync have no iolog action.
  Status Synced(const iot_syscall& sc, const OpInfo& info, const model::SyscallEffect& e) {
    if (info.sync == SyncScope::kFileSystem || info.sync == SyncScope::kAll) {
      return NoAction(sc.op);
    }
    if (sc.ret < 0) return SkipFailed(sc.op);
    const model::OpenFileDescription* f = fds_.Description(e.desc);
    const char* why = f ? NotReplayable(RefOf(*f)) : "descriptor not known";
    if (why) {
      Skip(std::string(OpName(sc.op)) + ": " + why);
      return Status::Ok();
    }
    // fio's iolog reader has no sync_file_range: the closest is a data sync.
    if (info.sync == SyncScope::kFileRange) Skip("sync_file_range replayed as datasync");
    return Io(ThreadStream(sc.tgid, sc.tid), sc.ts,
              info.sync == SyncScope::kFile ? Act::kSync : Act::kDatasync, RefOf(*f), 0, 0);
  }

  // fallocate's PUNCH_HOLE trims; other space calls have no iolog action.
  Status Space(const iot_syscall& sc, const OpInfo& info, const model::SyscallEffect& e) {
    if (info.space != SpaceEffect::kFallocates || !(sc.mode & FALLOC_FL_PUNCH_HOLE)) {
      return NoAction(sc.op);
    }
    if (sc.ret < 0) return SkipFailed(sc.op);
    const model::OpenFileDescription* f = fds_.Description(e.desc);
    const char* why = f ? NotReplayable(RefOf(*f)) : "descriptor not known";
    if (why) {
      Skip(std::string(OpName(sc.op)) + ": " + why);
      return Status::Ok();
    }
    return Io(ThreadStream(sc.tgid, sc.tid), sc.ts, Act::kTrim, RefOf(*f), sc.offset, sc.length);
  }

  // Mapped I/O is the page faults' (--faults); unmapping and moving do none.
  Status Memory(const iot_syscall& sc, const OpInfo& info, const model::SyscallEffect& e) {
    if (info.mapping == OpMapping::kUnmaps || info.mapping == OpMapping::kRemaps) {
      return Status::Ok();
    }
    if (info.mapping == OpMapping::kMaps) Mapped(sc, e);
    return NoAction(sc.op);
  }

  // Names created, renamed or removed: fio's iolog has no namespace actions.
  Status NameChange(const iot_syscall& sc, const OpInfo& info) {
    switch (info.names) {
      case NameEffect::kRenames:
      case NameEffect::kRemoves:
      case NameEffect::kMakesDir:
        return NoAction(sc.op);
      default:
        return Status::Ok();
    }
  }

  Status NoAction(uint16_t op) {
    Skip(std::string(OpName(op)) + ": no fio iolog action");
    return Status::Ok();
  }

  // Notes that a file fio could replay was mapped: the job leaves it out unless it has I/O
  // (with --fio-faults, its major faults are reads).
  void Mapped(const iot_syscall& sc, const model::SyscallEffect& e) {
    if (!count_ || sc.ret < 0 || (sc.flags & MAP_ANONYMOUS)) return;
    const model::OpenFileDescription* f = fds_.Description(e.desc);
    if (!f || NotReplayable(RefOf(*f))) return;
    (*files_)[FileFor(f->path)].mapped = true;
  }

  Status Opened(const iot_syscall& sc, const model::SyscallEffect& e, TraceReader& r) {
    model::OpenFileDescription* d = fds_.Description(e.created);
    if (!d) return Status::Ok();
    // The model resolved the path; one whose base the trace never showed is kept relative, for
    // fio to name.
    if (d->path.empty()) {
      if (auto text = PathText(r, sc.path_id, sc.sflags)) d->path = NormalizeKeepingRelative(*text);
    }
    if (d->directory) d->ftype = 4;
    if (sc.ino != 0) by_inode_[{sc.dev, sc.ino}] = d->path;
    if (NotReplayable(RefOf(*d))) return Status::Ok();
    return Io(ThreadStream(sc.tgid, sc.tid), sc.ts, Act::kOpen, RefOf(*d), 0, 0);
  }

  // A close ends fio's use of the file once no other descriptor of the process names it.
  Status Closed(const iot_syscall& sc, const model::SyscallEffect& e) {
    const model::OpenFileDescription* f = fds_.Description(e.desc);
    if (f && !NotReplayable(RefOf(*f)) && !StillOpen(sc.tgid, f->path)) {
      return Io(ThreadStream(sc.tgid, sc.tid), sc.ts, Act::kClose, RefOf(*f), 0, 0);
    }
    return Status::Ok();
  }

  Status SkipFailed(uint16_t op) {
    Skip(std::string(OpName(op)) + ": failed call");
    return Status::Ok();
  }

  // Another descriptor of the process still names the file: fio keeps one open per name.
  bool StillOpen(uint32_t tgid, std::string_view path) { return fds_.HasPath(tgid, path); }

  Status ReadWrite(const iot_syscall& sc, const OpInfo& info, const model::SyscallEffect& e) {
    if (sc.ret <= 0) {
      Skip(sc.ret < 0 ? std::string(OpName(sc.op)) + ": failed call"
                      : std::string(OpName(sc.op)) + ": zero bytes transferred");
      return Status::Ok();
    }
    const model::OpenFileDescription* f = fds_.Description(e.desc);
    if (!f) {
      // The record's own identity still tells a pipe or socket made without an open.
      const char* kind = (sc.sflags & IOT_SCF_NO_FILE) || (sc.ftype == 0 && sc.ino == 0)
                             ? nullptr
                             : NotStorage(sc.ftype, sc.ino, {});
      Skip(std::string(OpName(sc.op)) + ": " +
           (kind ? kind : "descriptor opened before the trace, not known"));
      return Status::Ok();
    }
    if (const char* why = NotReplayable(RefOf(*f))) {
      Skip(std::string(OpName(sc.op)) + ": " + why);
      return Status::Ok();
    }
    // e.pos: the explicit offset, the tracked position, the end of file for appends, or the
    // recorded position where none is tracked.
    return Io(ThreadStream(sc.tgid, sc.tid), sc.ts,
              info.direction == OpDirection::kRead ? Act::kRead : Act::kWrite, RefOf(*f), e.pos,
              static_cast<uint64_t>(sc.ret));
  }

  void Proc(const iot_proc& p, TraceReader& r) {
    if (p.path_id == 0) {
      fds_.OnProc(p);
    } else {
      fds_.OnProc(p, r.String(p.path_id));
    }
  }

  // A snapshot names a file by its absolute path; the model keeps no other ("pipe:[...]").
  void FdSnapshot(const iot_fd_snapshot& s, TraceReader& r) {
    std::optional<std::string_view> text;
    if (s.path_id) text = r.String(s.path_id);
    model::OpenFileDescription* d = fds_.Description(fds_.OnFdSnapshot(s, text));
    if (d && s.ino && !d->path.empty()) by_inode_[{s.dev, s.ino}] = d->path;
  }

  Status Async(const iot_async_io& io) {
    uint64_t id = io.req_id ? io.req_id : io.user_data;
    std::pair<uint64_t, uint64_t> key{(uint64_t{io.engine} << 56) ^ io.ctx ^ (uint64_t{io.tgid} << 32), id};
    if (io.phase == IOT_AIO_COMPLETE) {
      auto it = async_.find(key);
      if (it != async_.end()) {
        if (count_) (*streams_)[it->second].inflight--;
        async_.erase(it);
      }
      return Status::Ok();
    }
    if (io.phase != IOT_AIO_SUBMIT) return Status::Ok();
    // Plain reads, writes and syncs; the back end and the model read any engine but libaio as
    // io_uring, and so does the export.
    const uint8_t engine =
        io.engine == IOT_AIO_ENGINE_LIBAIO ? IOT_AIO_ENGINE_LIBAIO : IOT_AIO_ENGINE_URING;
    const AsyncOpInfo op = AsyncOp(engine, io.opcode);
    Act act;
    bool sync = false;
    switch (op.kind) {
      case AsyncKind::kRead: act = Act::kRead; break;
      case AsyncKind::kWrite: act = Act::kWrite; break;
      case AsyncKind::kFsync: {
        // io_uring says datasync per request, in its fsync flags.
        const bool datasync =
            op.datasync || (engine == IOT_AIO_ENGINE_URING && (io.flags & IORING_FSYNC_DATASYNC));
        act = datasync ? Act::kDatasync : Act::kSync;
        sync = true;
        break;
      }
      default:
        Skip("async request: opcode without fio equivalent");
        return Status::Ok();
    }
    const model::OpenFileDescription* f = fds_.FdDescription(io.tgid, io.fd);
    const char* why = f ? NotReplayable(RefOf(*f)) : "descriptor not known";
    if (why) {
      Skip(std::string("async request: ") + why);
      return Status::Ok();
    }
    uint64_t stream = ThreadStream(io.tgid, io.tid);
    if (count_) {
      StreamStats& st = (*streams_)[stream];
      st.async = true;
      st.inflight++;
      st.max_inflight = std::max(st.max_inflight, st.inflight);
    }
    async_[key] = stream;
    if (async_.size() > (1u << 20)) async_.clear();  // completions lost: do not grow forever
    return Io(stream, io.ts, act, RefOf(*f), sync ? 0 : io.offset, sync ? 0 : io.length);
  }

  Status Fault(const iot_page_fault& pf) {
    if (!options_.faults) return Status::Ok();
    if (!(pf.flags & IOT_PFF_MAJOR)) return Status::Ok();  // minor faults did no I/O
    auto it = by_inode_.find({pf.dev, pf.ino});
    if (it == by_inode_.end()) {
      Skip("page fault: file not opened in the trace");
      return Status::Ok();
    }
    const FileRef f{it->second, 8, false, pf.ino};
    if (const char* why = NotReplayable(f)) {
      Skip(std::string("page fault: ") + why);
      return Status::Ok();
    }
    const uint64_t pages = pf.nr_pages ? pf.nr_pages : 1;
    uint64_t offset = 0;
    if (__builtin_mul_overflow(pf.pgoff, uint64_t{4096}, &offset)) {
      Skip(kPastLargestOffset);
      return Status::Ok();
    }
    return Io(ThreadStream(pf.tgid, pf.tid), pf.ts, Act::kRead, f, offset, pages * 4096);
  }

  Status Block(const iot_block& b) {
    std::pair<uint64_t, uint64_t> key{b.dev, b.rq_id ? b.rq_id : (b.sector | (1ull << 63))};
    // A requeued request issued again is the same request (model/block_requests.h): one I/O,
    // in flight once; a partial completion leaves it in flight.
    const model::BlockStep step = block_rule_.Step(b);
    if (step == model::BlockStep::kReissue || step == model::BlockStep::kPartial) {
      return Status::Ok();
    }
    if (b.phase == IOT_BLK_COMPLETE) {
      auto it = block_.find(key);
      if (it != block_.end()) {
        if (count_) (*streams_)[it->second].inflight--;
        block_.erase(it);
      }
      return Status::Ok();
    }
    if (b.phase != IOT_BLK_ISSUE) return Status::Ok();
    const uint64_t bytes = b.bytes ? b.bytes : uint64_t{b.nr_sector} * 512;
    uint64_t offset = 0;
    const bool past_offsets = __builtin_mul_overflow(b.sector, uint64_t{512}, &offset) ||
                              offset > kMaxFileOffset || bytes > kMaxFileOffset - offset;
    if (past_offsets && bytes > 0) {  // left out before it counts towards the queue depth
      Skip(std::string("block: ") + kPastLargestOffset);
      return Status::Ok();
    }
    uint64_t stream = uint64_t{b.dev};
    auto& st = (*streams_)[stream];
    if (st.job.empty()) {
      st.job = fmt::format("dev-{}-{}", b.dev >> 20, b.dev & 0xfffff);
      st.dev = b.dev;
    }
    auto mapped = options_.device_paths.find(b.dev);
    const std::string dev_path = mapped != options_.device_paths.end()
                                     ? mapped->second
                                     : fmt::format("/dev/block/{}:{}", b.dev >> 20, b.dev & 0xfffff);
    const FileRef dev{dev_path, 6, true};
    if (count_) {
      st.inflight++;
      st.max_inflight = std::max(st.max_inflight, st.inflight);
    }
    block_[key] = stream;
    if (block_.size() > (1u << 20)) block_.clear();
    if (b.flags & (IOT_BLKF_DISCARD | IOT_BLKF_SECURE_ERASE)) {
      return Io(stream, b.ts, Act::kTrim, dev, offset, bytes);
    }
    const bool writes = bytes > 0 && (b.flags & (IOT_BLKF_WRITE | IOT_BLKF_WRITE_ZEROES));
    if (b.flags & (IOT_BLKF_PREFLUSH | IOT_BLKF_FLUSH)) {
      // A flush is a sync; a preflush with data, a sync and then the write.
      IOTWIN_RETURN_IF_ERROR(Io(stream, b.ts, Act::kSync, dev, 0, 0));
      if (!writes) return Status::Ok();
      if (b.flags & IOT_BLKF_PREFLUSH) Skip("block: preflush replayed as a sync before the write");
    }
    if (b.flags & IOT_BLKF_FUA) Skip("block: FUA not expressible (plain write)");
    if (b.flags & IOT_BLKF_WRITE_ZEROES) Skip("block: write-zeroes replayed as a write");
    if (b.flags & (IOT_BLKF_WRITE | IOT_BLKF_WRITE_ZEROES)) {
      return Io(stream, b.ts, Act::kWrite, dev, offset, bytes);
    }
    if (b.flags & IOT_BLKF_READ) return Io(stream, b.ts, Act::kRead, dev, offset, bytes);
    Skip("block: request type without fio equivalent");
    return Status::Ok();
  }

  const FioExportOptions& options_;
  std::vector<FileInfo>* files_;
  std::unordered_map<std::string, uint32_t>* file_index_;
  std::map<uint64_t, StreamStats>* streams_;
  std::map<std::string, uint64_t>* skipped_;
  bool count_;
  bool types_recorded_ = false;
  std::unordered_set<std::string> out_of_scope_;  // pass 1: files the scope left out
  const Sink* sink_ = nullptr;
  model::TraceState fds_;
  std::map<std::pair<uint32_t, uint64_t>, std::string> by_inode_;
  std::unordered_map<std::pair<uint64_t, uint64_t>, uint64_t, PairHash> async_;
  std::unordered_map<std::pair<uint64_t, uint64_t>, uint64_t, PairHash> block_;
  model::BlockRequestRule block_rule_;
};

Status MakeDirs(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); i++) {
    if (i == path.size() || (path[i] == '/' && i > 0)) {
      cur = path.substr(0, i);
      if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
        return Status::FromErrno(errno, "cannot create directory " + cur);
      }
    }
  }
  return Status::Ok();
}

std::string Absolute(const std::string& p) {
  if (!p.empty() && p[0] == '/') return model::NormalizePath(p);
  char buf[4096];
  if (!::getcwd(buf, sizeof buf)) return p;
  return model::ResolvePath(buf, p);
}

const char* ActName(Act a) {
  switch (a) {
    case Act::kOpen: return "open";
    case Act::kClose: return "close";
    case Act::kRead: return "read";
    case Act::kWrite: return "write";
    case Act::kTrim: return "trim";
    case Act::kSync: return "sync";
    case Act::kDatasync: return "datasync";
  }
  return "?";
}

// Pass-2 writer of one stream's iolog: reorders within a small window, adds the file actions fio
// needs (add, then open before the first I/O; close at the end).
class IologWriter {
 public:
  IologWriter(std::string path, std::vector<FileInfo>* files, uint64_t t0)
      : path_(std::move(path)), files_(files), t0_(t0) {}

  Status Add(const Event& e, FioExportResult* res) {
    pending_.emplace(e.ts, e);
    if (pending_.size() > kReorderWindow) return Flush(1, res);
    return Status::Ok();
  }

  Status Close(FioExportResult* res) {
    IOTWIN_RETURN_IF_ERROR(Flush(pending_.size(), res));
    for (uint32_t f : open_order_) {
      if (open_.erase(f)) IOTWIN_RETURN_IF_ERROR(Write(last_us_, (*files_)[f].name, "close"));
    }
    if (!out_.is_open()) return Status::Ok();
    IOTWIN_RETURN_IF_ERROR(out_.Write(buf_));
    buf_.clear();
    return out_.Commit();  // renamed to its name when whole (base/output_file.h)
  }

 private:
  Status Write(uint64_t us, const std::string& name, std::string_view rest) {
    if (!out_.is_open()) {
      IOTWIN_ASSIGN_OR_RETURN(out_, OutputFile::Create(path_));
      buf_ = "fio version 3 iolog\n";
    }
    // The name as far as a NUL, as fio reads it.
    fmt::format_to(std::back_inserter(buf_), "{} {} {}\n", us, std::string_view(name.c_str()), rest);
    if (buf_.size() < (1u << 16)) return Status::Ok();
    IOTWIN_RETURN_IF_ERROR(out_.Write(buf_));
    buf_.clear();
    return Status::Ok();
  }

  Status Flush(size_t n, FioExportResult* res) {
    while (n-- > 0 && !pending_.empty()) {
      Event e = pending_.begin()->second;
      pending_.erase(pending_.begin());
      // Timestamps never go back in a log (fio would not wait, then wait too long after).
      uint64_t us = e.ts > t0_ ? (e.ts - t0_) / 1000 : 0;
      us = std::max(us, last_us_);
      last_us_ = us;
      const std::string& name = (*files_)[e.file].name;
      if (!added_.count(e.file)) {
        added_.insert(e.file);
        (*files_)[e.file].in_log = true;
        IOTWIN_RETURN_IF_ERROR(Write(us, name, "add"));
      }
      if (e.act == Act::kClose) {
        if (open_.erase(e.file)) IOTWIN_RETURN_IF_ERROR(Write(us, name, "close"));
        continue;
      }
      if (!open_.count(e.file)) {
        open_.insert(e.file);
        open_order_.push_back(e.file);
        IOTWIN_RETURN_IF_ERROR(Write(us, name, "open"));
      }
      if (e.act == Act::kOpen) continue;
      IOTWIN_RETURN_IF_ERROR(
          Write(us, name, fmt::format("{} {} {}", ActName(e.act), e.offset, e.length)));
      FileInfo& f = (*files_)[e.file];
      switch (e.act) {
        case Act::kRead:
          res->reads++;
          res->read_bytes += e.length;
          f.reads++;
          f.read_bytes += e.length;
          break;
        case Act::kWrite:
          res->writes++;
          res->write_bytes += e.length;
          f.writes++;
          f.write_bytes += e.length;
          break;
        case Act::kTrim:
          res->trims++;
          f.trims++;
          break;
        default:
          res->syncs++;
          f.syncs++;
      }
    }
    return Status::Ok();
  }

  std::string path_;
  std::vector<FileInfo>* files_;
  uint64_t t0_;
  OutputFile out_;
  std::string buf_;  // lines not yet written
  std::multimap<uint64_t, Event> pending_;
  std::unordered_set<uint32_t> added_, open_;
  std::vector<uint32_t> open_order_;
  uint64_t last_us_ = 0;
};

// The options as the export uses them: absolute output directory, fio root absolute unless the
// user gave a relative one (fio resolves it against its working directory: each server's own in
// client/server mode), names fio can parse.
Result<FioExportOptions> CheckedOptions(const FioExportOptions& in_options) {
  FioExportOptions options = in_options;
  if (options.dir.empty()) return Status::Invalid("export --fio: no output directory");
  options.dir = Absolute(options.dir);
  options.fio_root = options.fio_root.empty() ? options.dir + "/files"
                                              : NormalizeKeepingRelative(options.fio_root);
  // The job file is line-oriented (read_iolog=DIR/...): a line break in DIR would start a new
  // option.
  if (options.dir.find_first_of("\n\r") != std::string::npos) {
    return Status::Invalid("export --fio {}: the directory name holds a line break",
                           BytesToText(options.dir));
  }
  if (options.fio_root.find_first_of(": \t\n") != std::string::npos) {
    return Status::Invalid("--fio-root {}: fio names may hold no ':' or whitespace",
                           options.fio_root);
  }
  if (options.fio_root.size() > 160) {
    return Status::Invalid("--fio-root {}: too long for fio's 256-character names",
                           options.fio_root);
  }
  for (const auto& [dev, path] : options.device_paths) {
    if (path.size() > kMaxFioName || path.find_first_of(": \t\n") != std::string::npos) {
      return Status::Invalid("device path '{}': fio names are at most 255 characters, no ':' or "
                             "whitespace", path);
    }
  }
  return options;
}

// Why a file is left out of the job, or "" for a file the job replays: no read, write, trim or
// sync in the trace (fio would open it and fail, since no preparation job makes it), or none in
// a job fio runs.
std::string LeftOutReason(const FileInfo& f, const FioExportOptions& options) {
  if (f.traced_ops > 0) {
    if (f.in_log) return "";
    return options.block_layer ? "only flushes, on a device without reads, writes or trims"
                               : "only syncs, by threads without reads, writes or trims";
  }
  if (!f.mapped) return "opened without reads, writes, trims or syncs";
  return options.faults ? "only mapped, without major page faults"
                        : "only mapped (--fio-faults replays its major page faults as reads)";
}

// files.tsv (the names of the files the job replays), the per-file counts of the result and the
// preparation jobs: every replayed file at its traced extent rounded up to 4 KiB (at least one
// page: fio makes no empty file).
std::string PrepareFiles(const std::vector<FileInfo>& files, const FioExportOptions& options,
                         FioExportResult* result, std::string* tsv) {
  std::string jobs;
  *tsv = "fio_name\toriginal\textent_bytes\n";
  for (size_t i = 0; i < files.size(); i++) {
    const FileInfo& f = files[i];
    FioFileResult row{f.name, f.original, f.extent, f.reads, f.writes, f.trims, f.syncs,
                      f.read_bytes, f.write_bytes, LeftOutReason(f, options)};
    const bool replayed = row.left_out.empty();
    if (replayed) {
      result->files++;
      // Names are bytes: tabs and newlines in them would split the columns and rows.
      *tsv += fmt::format("{}\t{}\t{}\n", BytesToText(f.name), BytesToText(f.original), f.extent);
    } else {
      result->files_left_out[row.left_out]++;
    }
    result->per_file.push_back(std::move(row));
    if (!replayed || !f.prepare) continue;
    const uint64_t size = std::max<uint64_t>(4096, (f.extent + 4095) / 4096 * 4096);
    result->prepare_bytes = SaturatingAdd(result->prepare_bytes, size);
    if (size > result->largest_prepare_bytes) {
      result->largest_prepare_bytes = size;
      result->largest_prepare = f.name;
    }
    jobs += fmt::format("[prepare-{}]\nfilename={}\nsize={}\nrw=write\nbs={}\ncreate_only=1\n\n",
                        i, f.name, size, size >= (1u << 20) ? "1M" : "4k");
  }
  return jobs;
}

// The job file: preparation jobs, then one job per stream with I/O.
std::string JobFile(const std::string& trace, const FioExportOptions& options,
                    const std::string& prepare_jobs, const std::map<uint64_t, StreamStats>& streams,
                    FioExportResult* result) {
  std::string job = fmt::format(
      "# Generated by iotwin export --fio from {}\n"
      "# Replay: fio {}/replay.fio   (client/server: copy {} to the same path on each server)\n"
      "# One job per traced {}; files remapped under {} (map in files.tsv).\n",
      BytesToText(trace), options.dir, options.dir,
      options.block_layer ? "device" : "thread", options.fio_root);
  if (options.fio_root[0] != '/') {
    job += "# The files' directory is relative: fio resolves it against its working directory.\n";
  }
  if (!options.scope.IsAll()) {
    // Globs are bytes: escaped, a line break in one cannot start a job option.
    job += fmt::format("# Scope: {}.\n", BytesToText(options.scope.Describe()));
  }
  for (const auto& [why, n] : result->files_left_out) {
    job += fmt::format("# Left out: {} file{} {}.\n", n, n == 1 ? "" : "s", why);
  }
  job += "\n" + prepare_jobs;
  bool first = true;
  for (const auto& [stream, st] : streams) {
    if (st.io_lines == 0) continue;
    bool direct = options.direct >= 0 ? options.direct == 1
                                      : (options.block_layer || (st.direct_ios > 0 && st.buffered_ios == 0));
    bool aio = options.block_layer || st.async;
    job += fmt::format("[{}]\n", st.job);
    if (first && !prepare_jobs.empty()) job += "stonewall\n";
    first = false;
    job += fmt::format("read_iolog={}/{}.iolog\n", options.dir, st.job);
    if (aio) {
      job += fmt::format("ioengine=libaio\niodepth={}\n", std::max<int64_t>(1, st.max_inflight));
    } else {
      job += "ioengine=psync\n";
    }
    if (direct) job += "direct=1\n";
    job += "\n";
    result->jobs++;
  }
  return job;
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  IOTWIN_ASSIGN_OR_RETURN(OutputFile out, OutputFile::Create(path));
  IOTWIN_RETURN_IF_ERROR(out.Write(text));
  return out.Commit();
}

}  // namespace

Result<FioExportResult> ExportFio(const std::string& trace, const FioExportOptions& in_options) {
  IOTWIN_ASSIGN_OR_RETURN(const FioExportOptions options, CheckedOptions(in_options));
  IOTWIN_RETURN_IF_ERROR(MakeDirs(options.dir));
  // A relative root is made where fio runs, by the preparation jobs.
  if (options.fio_root[0] == '/') IOTWIN_RETURN_IF_ERROR(MakeDirs(options.fio_root));

  std::vector<FileInfo> files;
  std::unordered_map<std::string, uint32_t> file_index;
  std::map<uint64_t, StreamStats> streams;
  FioExportResult result;

  // Pass 1: extents, queue depths, which files have I/O; the start time is the earliest event
  // of a file the job replays.
  {
    IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(trace));
    Walker w(options, &files, &file_index, &streams, &result.skipped, true);
    Walker::Sink sink = [&](uint64_t, const Event& e) -> Status {
      files[e.file].first_ts = std::min(files[e.file].first_ts, e.ts);
      return Status::Ok();
    };
    IOTWIN_RETURN_IF_ERROR(w.Run(*reader, sink));
    if (w.out_of_scope_files() > 0) {
      result.files_left_out[kOutOfScope] = w.out_of_scope_files();
    }
  }
  if (!options.scope.IsAll()) result.scope = options.scope.ToJson();
  uint64_t t0 = UINT64_MAX;
  for (const FileInfo& f : files) {
    if (f.traced_ops > 0) t0 = std::min(t0, f.first_ts);
  }
  if (t0 == UINT64_MAX) t0 = 0;
  // Block devices: the replay target is the user's device or a stand-in file.
  for (auto& f : files) {
    if (!options.block_layer) continue;
    for (const auto& [dev, path] : options.device_paths) {
      if (f.original == path) {
        f.name = path;
        f.prepare = false;
      }
    }
  }

  // Pass 2: the iologs.
  std::map<uint64_t, std::unique_ptr<IologWriter>> writers;
  {
    IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(trace));
    std::map<std::string, uint64_t> unused;
    Walker w(options, &files, &file_index, &streams, &unused, false);
    Walker::Sink sink = [&](uint64_t stream, const Event& e) -> Status {
      StreamStats& st = streams[stream];
      if (st.io_lines == 0) return Status::Ok();  // fio refuses logs without reads/writes/trims
      // Opens and closes of a file left out (no I/O anywhere in the trace).
      if (files[e.file].traced_ops == 0) return Status::Ok();
      auto& wr = writers[stream];
      if (!wr) {
        wr = std::make_unique<IologWriter>(options.dir + "/" + st.job + ".iolog", &files, t0);
      }
      return wr->Add(e, &result);
    };
    IOTWIN_RETURN_IF_ERROR(w.Run(*reader, sink));
    for (auto& [stream, wr] : writers) IOTWIN_RETURN_IF_ERROR(wr->Close(&result));
  }
  for (const auto& [stream, st] : streams) {
    if (st.io_lines == 0) {
      result.skipped[fmt::format("{} without reads, writes or trims (fio needs one)",
                                 options.block_layer ? "device" : "thread")]++;
    }
  }

  std::string tsv;
  const std::string prepare_jobs = PrepareFiles(files, options, &result, &tsv);
  const std::string job = JobFile(trace, options, prepare_jobs, streams, &result);
  result.job_file = options.dir + "/replay.fio";
  IOTWIN_RETURN_IF_ERROR(WriteTextFile(result.job_file, job));
  IOTWIN_RETURN_IF_ERROR(WriteTextFile(options.dir + "/files.tsv", tsv));
  IOTWIN_RETURN_IF_ERROR(WriteTextFile(options.dir + "/export.json", result.ToJson().dump(2) + "\n"));
  return result;
}

}  // namespace iotwin::interop
