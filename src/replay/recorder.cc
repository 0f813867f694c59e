#include "replay/recorder.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <set>
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
  uint64_t kept = 0, dropped = 0;
  while (true) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* rec, reader->Next());
    if (!rec) break;
    uint32_t tid = 0;
    bool per_thread = true;
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
    if (per_thread && !keep.count(tid)) {
      dropped++;
      continue;
    }
    IOTWIN_RETURN_IF_ERROR(writer->Append(rec));
    kept++;
  }
  nlohmann::json summary = reader->summary().value_or(nlohmann::json::object());
  summary["replay_filter"] = {{"kept", kept}, {"dropped", dropped}, {"threads", tids.size()}};
  return writer->Finish(summary);
}

}  // namespace iotwin::replay
