#include "replay/recorder.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <set>
#include <tuple>
#include <unordered_map>
#include <thread>

#include "format/records.h"
#include "format/trace_reader.h"
#include "format/trace_writer.h"

namespace iotwin::replay {

namespace {

// BPF links the process holds: the tracer is attached once it has some.
int CountBpfLinks(pid_t pid) {
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    char target[256];
    std::string p = dir + "/" + e->d_name;
    ssize_t len = readlink(p.c_str(), target, sizeof target - 1);
    if (len <= 0) continue;
    target[len] = 0;
    if (std::strstr(target, "bpf_link") || std::strstr(target, "bpf-link")) n++;
  }
  closedir(d);
  return n;
}

class SubprocessRecorder final : public ReplayRecorder {
 public:
  SubprocessRecorder(std::string bin, std::string output)
      : bin_(std::move(bin)), output_(std::move(output)), tmp_(output_ + ".capture.tmp") {}
  ~SubprocessRecorder() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    unlink(tmp_.c_str());
  }

  Status Start() override {
    std::string self = std::to_string(getpid());
    std::vector<std::string> argv = {bin_, "record", "--pid", self, "-o", tmp_, "--no-status"};
    std::string log = output_ + ".capture.log";
    // Everything is allocated before fork: the child of a multi-threaded process may only make
    // async-signal-safe calls until it execs.
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    int logfd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_ = fork();
    if (pid_ < 0) {
      if (logfd >= 0) close(logfd);
      return Status::FromErrno(errno, "fork for iotwin record");
    }
    if (pid_ == 0) {
      if (logfd >= 0) {
        dup2(logfd, 1);
        dup2(logfd, 2);
      }
      setpgid(0, 0);  // a terminal's Ctrl-C reaches the replay; we stop the tracer ourselves
      execv(args[0], args.data());
      _exit(127);
    }
    if (logfd >= 0) close(logfd);
    // Attached = BPF links present and the recorder still running; then a grace period for it
    // to add our pid to the traced set and snapshot us from /proc.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return Status::Io("iotwin record exited before tracing started (status {}); see {}",
                          status, log);
      }
      if (CountBpfLinks(pid_) > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        return Status::Ok();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return Status::Io("iotwin record did not attach within 30 s; see {}", log);
  }

  Status Finish(const std::vector<pid_t>& tids, const nlohmann::json& meta) override {
    if (pid_ <= 0) return Status::Internal("recorder not running");
    kill(pid_, SIGINT);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    Status st = FilterTraceToThreads(tmp_, output_, tids, meta);
    unlink(tmp_.c_str());
    if (st.ok()) unlink((output_ + ".capture.log").c_str());
    return st;
  }

 private:
  std::string bin_, output_, tmp_;
  pid_t pid_ = -1;
};

}  // namespace

std::unique_ptr<ReplayRecorder> MakeSubprocessRecorder(const std::string& iotwin_bin,
                                                       const std::string& output) {
  return std::make_unique<SubprocessRecorder>(iotwin_bin, output);
}

Status FilterTraceToThreads(const std::string& in, const std::string& out,
                            const std::vector<pid_t>& tids, const nlohmann::json& replay_meta) {
  TraceReaderOptions ro;
  ro.salvage = true;
  IOTWIN_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(in, ro));
  nlohmann::json meta = reader->meta();
  meta["replay"] = replay_meta;
  IOTWIN_ASSIGN_OR_RETURN(auto writer, TraceWriter::Create(out, meta));
  std::set<uint32_t> keep(tids.begin(), tids.end());
  uint64_t kept = 0, dropped = 0, snapshots = 0;
  // Descriptors of the replaying process (one table: it is one process), from every thread, so
  // that descriptors the bookkeeper creates (copies at fork, mappings of inherited files) can be
  // described to readers of the filtered trace as snapshots instead of vanishing.
  struct FdInfo {
    uint32_t path_id = 0;
    uint32_t flags = 0;
  };
  std::unordered_map<int32_t, FdInfo> fds;
  auto track = [&](const iot_syscall& sc) {
    if (sc.ret < 0) return;
    switch (sc.op) {
      case IOT_OP_OPEN: case IOT_OP_OPENAT: case IOT_OP_OPENAT2: case IOT_OP_CREAT:
        fds[static_cast<int32_t>(sc.ret)] = FdInfo{sc.path_id, sc.flags};
        break;
      case IOT_OP_DUP: case IOT_OP_DUP2: case IOT_OP_DUP3: case IOT_OP_FCNTL: {
        if (sc.op == IOT_OP_FCNTL && sc.mode != F_DUPFD && sc.mode != F_DUPFD_CLOEXEC) break;
        auto it = fds.find(sc.fd);
        if (it != fds.end()) fds[static_cast<int32_t>(sc.ret)] = it->second;
        else fds.erase(static_cast<int32_t>(sc.ret));
        break;
      }
      case IOT_OP_CLOSE:
        fds.erase(sc.fd);
        break;
      default:
        break;
    }
  };
  // Async requests the workers submitted, by (engine, context, request): their completions are
  // often posted by another task (io_uring's io-wq workers for punted buffered writes, an
  // interrupt's context), and belong with the submission, not with that task.
  // A first pass collects them: records from different CPUs are not in time order in the file.
  std::set<std::tuple<uint8_t, uint64_t, uint64_t>> kept_requests;
  auto request_key = [](const iot_async_io& a) {
    return std::make_tuple(a.engine, a.ctx, a.req_id != 0 ? a.req_id : a.user_data);
  };
  {
    IOTWIN_ASSIGN_OR_RETURN(auto first, TraceReader::Open(in, ro));
    while (true) {
      IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* rec, first->Next());
      if (!rec) break;
      if (rec->type != IOT_REC_ASYNC_IO) continue;
      const auto& a = As<iot_async_io>(rec);
      if (a.phase == IOT_AIO_SUBMIT && keep.count(a.tid)) kept_requests.insert(request_key(a));
    }
  }
  while (true) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* rec, reader->Next());
    if (!rec) break;
    uint32_t tid = 0;
    bool per_thread = true;
    if (rec->type == IOT_REC_ASYNC_IO) {
      const auto& a = As<iot_async_io>(rec);
      if (a.phase == IOT_AIO_COMPLETE && !keep.count(a.tid) && kept_requests.count(request_key(a))) {
        IOTWIN_RETURN_IF_ERROR(writer->Append(rec));
        kept++;
        continue;
      }
    }
    switch (rec->type) {
      case IOT_REC_SYSCALL: tid = As<iot_syscall>(rec).tid; break;
      case IOT_REC_IOVEC: tid = As<iot_iovec>(rec).tid; break;
      case IOT_REC_PAGE_FAULT: tid = As<iot_page_fault>(rec).tid; break;
      case IOT_REC_ASYNC_IO: tid = As<iot_async_io>(rec).tid; break;
      case IOT_REC_INTENT: tid = As<iot_intent>(rec).tid; break;
      case IOT_REC_SCHED: tid = As<iot_sched>(rec).tid; break;
      case IOT_REC_PROC: {
        const auto& p = As<iot_proc>(rec);
        if (p.kind == IOT_PROC_ATTACH || p.kind == IOT_PROC_CWD || p.kind == IOT_PROC_START) {
          per_thread = false;
        } else {
          tid = p.tid;
        }
        break;
      }
      default:
        per_thread = false;  // strings, clocks, losses, snapshots, memory and device layers
    }
    if (rec->type == IOT_REC_SYSCALL) {
      const auto& sc = As<iot_syscall>(rec);
      int32_t before = -1;
      if (!keep.count(sc.tid) && sc.ret >= 0) {
        bool dup = sc.op == IOT_OP_DUP || sc.op == IOT_OP_DUP2 || sc.op == IOT_OP_DUP3 ||
                   (sc.op == IOT_OP_FCNTL && (sc.mode == F_DUPFD || sc.mode == F_DUPFD_CLOEXEC));
        if (dup) before = sc.fd;
      }
      track(sc);
      auto it = before >= 0 ? fds.find(static_cast<int32_t>(sc.ret)) : fds.end();
      if (it != fds.end() && it->second.path_id != 0) {
        iot_fd_snapshot snap{};
        InitRecord(&snap, IOT_REC_FD_SNAPSHOT);
        snap.tgid = sc.tgid;
        snap.ts = sc.ts;
        snap.ino = sc.ino;
        snap.fsize = sc.fsize;
        snap.fd = static_cast<int32_t>(sc.ret);
        snap.flags = it->second.flags;
        snap.dev = sc.dev;
        snap.path_id = it->second.path_id;
        snap.ftype = sc.ftype;
        IOTWIN_RETURN_IF_ERROR(writer->Append(snap));
        snapshots++;
      }
      if (!keep.count(sc.tid) && sc.op == IOT_OP_MMAP && sc.ret >= 0 && !(sc.flags & 0x20)) {
        auto f = fds.find(sc.fd);
        if (f != fds.end() && f->second.path_id != 0) {
          iot_map_snapshot ms{};
          InitRecord(&ms, IOT_REC_MAP_SNAPSHOT);
          ms.tgid = sc.tgid;
          ms.ts = sc.ts;
          ms.start = static_cast<uint64_t>(sc.ret);
          ms.end = ms.start + sc.length;
          ms.pgoff = sc.offset;
          ms.ino = sc.ino;
          ms.dev = sc.dev;
          ms.path_id = f->second.path_id;
          ms.prot = sc.mode;
          ms.flags = sc.flags;
          IOTWIN_RETURN_IF_ERROR(writer->Append(ms));
          snapshots++;
        }
      }
    }
    if (per_thread && !keep.count(tid)) {
      dropped++;
      continue;
    }
    IOTWIN_RETURN_IF_ERROR(writer->Append(rec));
    kept++;
  }
  nlohmann::json summary = reader->summary().value_or(nlohmann::json::object());
  summary["replay_filter"] = {{"kept", kept}, {"dropped", dropped}, {"snapshots", snapshots},
                              {"threads", tids.size()}};
  return writer->Finish(summary);
}

}  // namespace iotwin::replay
