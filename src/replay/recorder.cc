#include "replay/recorder.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include "base/checked_math.h"
#include "base/fd.h"
#include "base/output_file.h"
#include "format/op_info.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "format/trace_writer.h"
#include "model/op_fields.h"
#include "model/trace_state.h"
#include "replay/interrupt.h"

namespace iotwin::replay {

namespace {

class SubprocessRecorder final : public ReplayRecorder {
 public:
  SubprocessRecorder(std::string bin, std::string output, std::vector<std::string> options)
      : bin_(std::move(bin)),
        output_(std::move(output)),
        tmp_(output_ + ".capture.tmp"),
        options_(std::move(options)) {}
  ~SubprocessRecorder() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    unlink(tmp_.c_str());
  }

  Status Start() override {
    std::string self = std::to_string(getpid());
    // The tracer writes a byte on fd 3 once our pid is traced and its snapshot written
    // (`iotwin record --ready-fd`): no replayed call runs before it, whatever the load.
    std::vector<std::string> argv = {bin_,  "record",      "--pid", self,       "-o",
                                     tmp_,  "--no-status", "--ready-fd", "3"};
    argv.insert(argv.end(), options_.begin(), options_.end());
    std::string log = output_ + ".capture.log";
    // Everything is allocated before fork: the child of a multi-threaded process may only make
    // async-signal-safe calls until it execs.
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe for iotwin record");
    UniqueFd ready_read(ready[0]), ready_write(ready[1]);
    // The log is an OutputFile (base/output_file.h): kept at its name only when it has
    // something to explain (Start or Finish failed), never written through a planted symlink.
    IOTWIN_ASSIGN_OR_RETURN(log_, OutputFile::Create(log));
    const int logfd = log_.fd();
    pid_ = fork();
    if (pid_ < 0) return Status::FromErrno(errno, "fork for iotwin record");
    if (pid_ == 0) {
      if (logfd >= 0) {
        dup2(logfd, 1);
        dup2(logfd, 2);
      }
      // fd 3 without close-on-exec (dup2 onto itself would keep the flag).
      if (ready[1] == 3) fcntl(3, F_SETFD, 0);
      else dup2(ready[1], 3);
      setpgid(0, 0);  // a terminal's Ctrl-C reaches the replay; we stop the tracer ourselves
      InterruptWatcher::UnblockInChild();  // the tracer stops on the SIGINT Finish sends
      execv(args[0], args.data());
      _exit(127);
    }
    ready_write.Reset();
    Status traced = WaitReady(ready_read.get(), log);
    if (!traced.ok()) (void)log_.Commit();
    return traced;
  }

  Status Finish(const std::vector<pid_t>& tids, const nlohmann::json& meta) override {
    if (pid_ <= 0) return Status::Internal("recorder not running");
    kill(pid_, SIGINT);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    Status st = FilterTraceToThreads(tmp_, output_, tids, meta);
    unlink(tmp_.c_str());
    if (st.ok()) {
      log_.Discard();
    } else if (log_.is_open()) {
      (void)log_.Commit();
    }
    return st;
  }

 private:
  // Waits for the tracer's byte on `fd`; fails when it exits first or takes over 60 s.
  Status WaitReady(int fd, const std::string& log) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool closed = false;
    while (!closed && std::chrono::steady_clock::now() < deadline) {
      pollfd p = {fd, POLLIN, 0};
      int r = poll(&p, 1, 100);
      if (r < 0 && errno != EINTR) return Status::FromErrno(errno, "poll on iotwin record");
      if (r > 0) {
        char byte = 0;
        ssize_t n = read(fd, &byte, 1);
        if (n == 1) return Status::Ok();
        if (n == 0) closed = true;  // closed without the byte: it is exiting
      }
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return Status::Io("iotwin record exited before tracing started (status {}); see {}",
                          status, log);
      }
    }
    if (closed) {
      int status = 0;
      waitpid(pid_, &status, 0);
      pid_ = -1;
      return Status::Io("iotwin record exited before tracing started (status {}); see {}", status,
                        log);
    }
    // Still running, never ready: the destructor stops it.
    return Status::Io("iotwin record did not start tracing within 60 s; see {}", log);
  }

  std::string bin_, output_, tmp_;
  std::vector<std::string> options_;
  OutputFile log_;
  pid_t pid_ = -1;
};

}  // namespace

std::unique_ptr<ReplayRecorder> MakeSubprocessRecorder(
    const std::string& iotwin_bin, const std::string& output,
    const std::vector<std::string>& record_options) {
  return std::make_unique<SubprocessRecorder>(iotwin_bin, output, record_options);
}

Result<std::string> ResolveRecordPath(const std::string& record_out) {
  // The replay's own output (its summary, --json) is on standard output: the trace needs a file.
  if (record_out == "-") {
    return Status::Invalid("--record -: the replay's trace needs a file (standard output carries "
                           "the replay's summary)");
  }
  std::error_code ec;
  std::filesystem::path out = std::filesystem::absolute(record_out, ec);
  if (ec) return Status::Invalid("--record {}: {}", record_out, ec.message());
  std::filesystem::path dir = out.parent_path();
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    return Status::FromErrno(errno, fmt::format("--record {}: directory {}", record_out,
                                                dir.string()));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::Invalid("--record {}: {} is not a directory", record_out, dir.string());
  }
  if (access(dir.c_str(), W_OK) != 0) {
    return Status::FromErrno(errno, fmt::format("--record {}: directory {} is not writable",
                                                record_out, dir.string()));
  }
  return out.string();
}

namespace {

// The thread a record belongs to; nullopt for records of no thread (strings, clocks, losses,
// snapshots, memory and device layers, and the process-wide attach/cwd/start records).
std::optional<uint32_t> RecordThread(const iot_rec_hdr* rec) {
  switch (rec->type) {
    case IOT_REC_SYSCALL: return As<iot_syscall>(rec).tid;
    case IOT_REC_IOVEC: return As<iot_iovec>(rec).tid;
    case IOT_REC_FDLIST: return As<iot_fdlist>(rec).tid;
    case IOT_REC_PAGE_FAULT: return As<iot_page_fault>(rec).tid;
    case IOT_REC_ASYNC_IO: return As<iot_async_io>(rec).tid;
    case IOT_REC_INTENT: return As<iot_intent>(rec).tid;
    case IOT_REC_SCHED: return As<iot_sched>(rec).tid;
    case IOT_REC_PROC: {
      const auto& p = As<iot_proc>(rec);
      if (p.kind == IOT_PROC_ATTACH || p.kind == IOT_PROC_CWD || p.kind == IOT_PROC_START) {
        return std::nullopt;
      }
      return p.tid;
    }
    default:
      return std::nullopt;
  }
}

using RequestKey = std::tuple<uint8_t, uint64_t, uint64_t>;  // (engine, context, request)
RequestKey AsyncRequestKey(const iot_async_io& a) {
  return std::make_tuple(a.engine, a.ctx, a.req_id != 0 ? a.req_id : a.user_data);
}

// Async requests the workers submitted. Their completions are often posted by another task
// (io_uring's io-wq workers for punted buffered writes, an interrupt's context) and belong with
// the submission. A pass of its own: records from different CPUs are not in time order.
Result<std::set<RequestKey>> KeptRequests(const std::string& in, const TraceReaderOptions& ro,
                                          const std::set<uint32_t>& keep) {
  std::set<RequestKey> kept;
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(in, ro));
  while (true) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* rec, reader->Next());
    if (!rec) break;
    if (rec->type != IOT_REC_ASYNC_IO) continue;
    const auto& a = As<iot_async_io>(rec);
    if (a.phase == IOT_AIO_SUBMIT && keep.count(a.tid)) kept.insert(AsyncRequestKey(a));
  }
  return kept;
}

// The replaying process's descriptor tables, from every thread's records, so that descriptors
// and mappings the bookkeeping threads make (copies at fork, mappings of inherited files) are
// described to readers of the filtered trace as snapshots instead of vanishing.
class BookkeeperSnapshots {
 public:
  BookkeeperSnapshots(TraceWriter* writer, const std::set<uint32_t>* keep)
      : writer_(writer), keep_(keep) {}

  Status OnRecord(const iot_rec_hdr* rec) {
    switch (rec->type) {
      case IOT_REC_SYSCALL:
        return OnSyscall(As<iot_syscall>(rec));
      case IOT_REC_PROC:
        fds_.OnProc(As<iot_proc>(rec));
        return Status::Ok();
      case IOT_REC_FD_SNAPSHOT: {
        const auto& s = As<iot_fd_snapshot>(rec);
        if (auto* d = fds_.Description(fds_.OnFdSnapshot(s, std::nullopt))) d->user = s.path_id;
        return Status::Ok();
      }
      default:
        return Status::Ok();
    }
  }
  uint64_t written() const { return written_; }

 private:
  Status OnSyscall(const iot_syscall& sc) {
    const model::SyscallEffect e = fds_.OnSyscall(sc);
    if (OpOpensFd(sc.op)) {
      if (auto* d = fds_.Description(e.created)) d->user = sc.path_id;
      return Status::Ok();
    }
    if (keep_->count(sc.tid) || sc.ret < 0) return Status::Ok();
    if (e.new_fd >= 0) return DescribeFd(sc, e.new_fd);
    if (GetOpInfo(sc.op).mapping == OpMapping::kMaps && model::OpHasDataFd(sc)) {
      return DescribeMapping(sc);
    }
    return Status::Ok();
  }

  // The description behind `fd` of `tgid` when the path it was opened with is known.
  const model::OpenFileDescription* Known(uint32_t tgid, int32_t fd) {
    const model::OpenFileDescription* d = fds_.FdDescription(tgid, fd);
    return d && d->user != 0 ? d : nullptr;
  }

  Status DescribeFd(const iot_syscall& sc, int32_t fd) {
    const model::OpenFileDescription* d = Known(sc.tgid, fd);
    if (!d) return Status::Ok();
    iot_fd_snapshot snap{};
    InitRecord(&snap, IOT_REC_FD_SNAPSHOT);
    snap.tgid = sc.tgid;
    snap.ts = sc.ts;
    snap.ino = sc.ino;
    snap.fsize = sc.fsize;
    snap.pos = d->pos_known ? d->pos : 0;  // the new descriptor shares the description's
    snap.fd = fd;
    // The open flags, with close-on-exec the new descriptor's own (a dup does not inherit it,
    // F_DUPFD_CLOEXEC sets it).
    const model::Descriptor* desc = fds_.Fd(sc.tgid, fd);
    snap.flags = (d->flags & ~static_cast<uint32_t>(O_CLOEXEC)) |
                 (desc && desc->cloexec ? static_cast<uint32_t>(O_CLOEXEC) : 0u);
    snap.dev = sc.dev;
    snap.path_id = d->user;
    snap.ftype = sc.ftype;
    written_++;
    return writer_->Append(snap);
  }

  Status DescribeMapping(const iot_syscall& sc) {
    const model::OpenFileDescription* d = Known(sc.tgid, sc.fd);
    if (!d) return Status::Ok();
    iot_map_snapshot ms{};
    InitRecord(&ms, IOT_REC_MAP_SNAPSHOT);
    ms.tgid = sc.tgid;
    ms.ts = sc.ts;
    ms.start = static_cast<uint64_t>(sc.ret);
    ms.end = SaturatingAdd(ms.start, sc.length);  // a recorded length is not trusted to fit
    ms.pgoff = sc.offset;
    ms.ino = sc.ino;
    ms.dev = sc.dev;
    ms.path_id = d->user;
    ms.prot = sc.mode;
    ms.flags = sc.flags;
    written_++;
    return writer_->Append(ms);
  }

  TraceWriter* writer_;
  const std::set<uint32_t>* keep_;
  // A description's `user` is the string id of the path it was opened with.
  model::TraceState fds_{model::TraceStateOptions{.keep_paths = false}};
  uint64_t written_ = 0;
};

}  // namespace

Status FilterTraceToThreads(const std::string& in, const std::string& out,
                            const std::vector<pid_t>& tids, const nlohmann::json& replay_meta) {
  TraceReaderOptions ro;
  ro.salvage = true;
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(in, ro));
  nlohmann::json meta = reader->meta();
  meta["replay"] = replay_meta;
  IOTWIN_ASSIGN_OR_RETURN(auto writer, TraceWriter::Create(out, meta));
  // A filter that fails leaves nothing at `out`.
  struct DiscardUnlessFinished {
    TraceWriter* writer;
    bool finished = false;
    ~DiscardUnlessFinished() {
      if (!finished) writer->Discard();
    }
  } guard{writer.get()};
  const std::set<uint32_t> keep(tids.begin(), tids.end());
  IOTWIN_ASSIGN_OR_RETURN(const std::set<RequestKey> kept_requests, KeptRequests(in, ro, keep));
  BookkeeperSnapshots snapshots(writer.get(), &keep);
  uint64_t kept = 0, dropped = 0;
  while (true) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* rec, reader->Next());
    if (!rec) break;
    if (rec->type == IOT_REC_ASYNC_IO) {
      const auto& a = As<iot_async_io>(rec);
      if (a.phase == IOT_AIO_COMPLETE && !keep.count(a.tid) &&
          kept_requests.count(AsyncRequestKey(a))) {
        IOTWIN_RETURN_IF_ERROR(writer->Append(rec));
        kept++;
        continue;
      }
    }
    IOTWIN_RETURN_IF_ERROR(snapshots.OnRecord(rec));
    const std::optional<uint32_t> tid = RecordThread(rec);
    if (tid && !keep.count(*tid)) {
      dropped++;
      continue;
    }
    IOTWIN_RETURN_IF_ERROR(writer->Append(rec));
    kept++;
  }
  nlohmann::json summary = reader->summary().value_or(nlohmann::json::object());
  summary["replay_filter"] = {{"kept", kept}, {"dropped", dropped},
                              {"snapshots", snapshots.written()}, {"threads", tids.size()}};
  IOTWIN_RETURN_IF_ERROR(writer->Finish(summary));
  guard.finished = true;
  return Status::Ok();
}

}  // namespace iotwin::replay
