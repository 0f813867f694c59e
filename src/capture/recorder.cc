#include "capture/recorder.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/units.h"
#include "capture/capture_bpf.h"
#include "capture/capture_cost.h"
#include "capture/launcher.h"
#include "capture/live_status.h"
#include "capture/memory_tracker.h"
#include "capture/proc_snapshot.h"
#include "capture/ring_consumer.h"
#include "format/records.h"
#include "format/trace_writer.h"
#include "iotwin_abi.h"

namespace iotwin::capture {
namespace {

using nlohmann::json;

constexpr uint64_t kNsPerSec = 1000000000ull;
constexpr uint64_t kClockEveryNs = 5 * kNsPerSec;
constexpr uint64_t kStatusEveryNs = kNsPerSec;
constexpr uint64_t kGraceNs = 5 * kNsPerSec;  // after a signal, time the command has to exit
constexpr int kTerminateGraceMs = 5000;       // after a failed recording, SIGTERM to SIGKILL

std::string DescribeWait(int wait_status) {
  if (WIFEXITED(wait_status)) return fmt::format("exit status {}", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) return fmt::format("ended by {}", strsignal(WTERMSIG(wait_status)));
  return "reaped";
}

uint64_t NowNs(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * kNsPerSec + static_cast<uint64_t>(ts.tv_nsec);
}
uint64_t Mono() { return NowNs(CLOCK_MONOTONIC); }

// ---- signals ---------------------------------------------------------------------------------
volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_signal_count = 0;
volatile sig_atomic_t g_signal_from_user = 0;  // sent with kill() to us, not by the terminal

void OnStopSignal(int sig, siginfo_t* info, void*) {
  g_signal = sig;
  g_signal_count = g_signal_count + 1;
  g_signal_from_user =
      info && (info->si_code == SI_USER || info->si_code == SI_QUEUE) && info->si_pid != getpid();
}

// Installs the stop handlers for the capture's lifetime and restores the old ones after.
class StopSignals {
 public:
  StopSignals() {
    g_signal = 0;
    g_signal_count = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = OnStopSignal;
    sa.sa_flags = SA_SIGINFO;  // no SA_RESTART: the poll wakes up
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < kCount; i++) sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~StopSignals() {
    for (size_t i = 0; i < kCount; i++) sigaction(kSignals[i], &old_[i], nullptr);
  }

 private:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
  static constexpr size_t kCount = sizeof(kSignals) / sizeof(kSignals[0]);
  struct sigaction old_[kCount];
};

// ---- the marker file ---------------------------------------------------------------------------
// The file whose writes are intent markers (IOTWIN_MARKER): only the traced command may open it
// (owned by the uid the command runs as, mode 0600, in a directory of root's that others may
// pass through but not list or change, 0711), and it never holds more than kMarkerFileBound:
// the capture reads markers from the write calls, never from the file, so the recorder empties
// it when it grows past the bound and counts what it dropped (`marker_file_trimmed_bytes`).
inline constexpr uint64_t kMarkerFileBound = uint64_t{1} << 20;

class MarkerFile {
 public:
  static Result<std::unique_ptr<MarkerFile>> Create(const std::optional<UserCredentials>& user) {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/iotwin-marker-XXXXXX";
    if (!mkdtemp(tmpl.data())) return Status::FromErrno(errno, "creating the marker directory");
    std::unique_ptr<MarkerFile> m(new MarkerFile());
    m->dir_ = tmpl;
    m->path_ = tmpl + "/marker";
    if (chmod(m->dir_.c_str(), 0711) != 0) return Status::FromErrno(errno, "chmod " + m->dir_);
    m->fd_ = open(m->path_.c_str(), O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0600);
    if (m->fd_ < 0) return Status::FromErrno(errno, "creating " + m->path_);
    if (user && fchown(m->fd_, user->uid, user->gid) != 0) {
      return Status::FromErrno(errno, "giving " + m->path_ + " to " + user->name);
    }
    if (fchmod(m->fd_, 0600) != 0) return Status::FromErrno(errno, "chmod " + m->path_);
    struct stat st;
    if (fstat(m->fd_, &st) != 0) return Status::FromErrno(errno, "stat " + m->path_);
    m->ino_ = st.st_ino;
    m->dev_ = KernelDev(st.st_dev);
    return m;
  }
  ~MarkerFile() {
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  // Empties the file once it holds more than kMarkerFileBound. A writer's position is its own:
  // its next line lands past a hole, which holds no blocks.
  void Trim() {
    struct stat st;
    if (fstat(fd_, &st) != 0) return;
    const uint64_t held = static_cast<uint64_t>(st.st_blocks) * 512;
    if (held <= kMarkerFileBound || ftruncate(fd_, 0) != 0) return;
    trimmed_ += held;
  }
  const std::string& path() const { return path_; }
  uint64_t ino() const { return ino_; }
  uint32_t dev() const { return dev_; }
  uint64_t trimmed() const { return trimmed_; }

 private:
  MarkerFile() = default;
  std::string dir_, path_;
  int fd_ = -1;
  uint64_t ino_ = 0;
  uint32_t dev_ = 0;
  uint64_t trimmed_ = 0;
};

// ---- preconditions -----------------------------------------------------------------------------
bool HasCapability(int cap) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) == 0) {
      uint64_t caps = strtoull(line.c_str() + 7, nullptr, 16);
      return (caps >> cap) & 1;
    }
  }
  return false;
}

Status CheckPrivileges() {
  constexpr int kCapSysAdmin = 21, kCapPerfmon = 38, kCapBpf = 39;
  if (geteuid() == 0 || HasCapability(kCapSysAdmin) ||
      (HasCapability(kCapBpf) && HasCapability(kCapPerfmon))) {
    return Status::Ok();
  }
  return Status::Permission(
      "iotwin record needs root (or CAP_BPF and CAP_PERFMON) to load eBPF programs");
}

Status CheckBtf() {
  if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
    return Status::Unsupported(
        "this kernel exposes no BTF (/sys/kernel/btf/vmlinux is missing): iotwin record needs a "
        "kernel built with CONFIG_DEBUG_INFO_BTF=y");
  }
  return Status::Ok();
}

// ---- header meta --------------------------------------------------------------------------------
json HostMeta() {
  json host;
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  struct utsname u;
  uname(&u);
  host["hostname"] = name;
  host["kernel"] = u.release;
  host["arch"] = u.machine;
  host["cpus"] = sysconf(_SC_NPROCESSORS_ONLN);
  host["page_size"] = sysconf(_SC_PAGESIZE);
  host["clock"] = "monotonic";
  host["anchor"] = {{"monotonic_ns", NowNs(CLOCK_MONOTONIC)},
                    {"realtime_ns", NowNs(CLOCK_REALTIME)},
                    {"boottime_ns", NowNs(CLOCK_BOOTTIME)}};
  return host;
}

iot_clock ClockRecord() {
  iot_clock c;
  memset(&c, 0, sizeof c);
  InitRecord(&c, IOT_REC_CLOCK);
  c.monotonic_ns = NowNs(CLOCK_MONOTONIC);
  c.realtime_ns = NowNs(CLOCK_REALTIME);
  c.boottime_ns = NowNs(CLOCK_BOOTTIME);
  return c;
}

iot_proc ProcRecord(uint16_t kind, pid_t pid, const std::string& comm) {
  iot_proc p;
  memset(&p, 0, sizeof p);
  InitRecord(&p, IOT_REC_PROC);
  p.kind = kind;
  p.ts = Mono();
  p.tgid = static_cast<uint32_t>(pid);
  p.tid = static_cast<uint32_t>(pid);
  strncpy(p.comm, comm.c_str(), sizeof(p.comm) - 1);
  return p;
}

// ---- the block side (block, nvme, sched, pmu layers; capture/block_bpf.h) ----------------------------
void AddBlockMeta(const CaptureBpf& bpf, json* layers, json* meta) {
  const BlockLayerPlan& plan = bpf.block_plan();
  (*layers)["block"] = plan.block.ToJson();
  (*layers)["nvme"] = plan.nvme.ToJson();
  (*layers)["sched"] = plan.sched.ToJson();
  (*layers)["pmu"] = plan.pmu.ToJson();
  json lba = json::object();
  json devices = json::object();
  for (const BlockDeviceInfo& d : ReadBlockDevices()) {
    if (d.name.rfind("nvme", 0) == 0) lba[d.name] = d.logical_block_size;
    devices[d.name] = d.ToJson();
  }
  (*meta)["lba_sizes"] = lba;
  (*meta)["block_devices"] = devices;
}

void AddBlockSummary(const CaptureBpf& bpf, const DropCounts& drops, json* lost, json* summary) {
  const BlockLayerPlan& plan = bpf.block_plan();
  if (plan.block.enabled) (*lost)["block"] = drops.Total(IOT_SRC_BLOCK);
  if (plan.nvme.enabled) (*lost)["nvme"] = drops.Total(IOT_SRC_NVME);
  if (plan.sched.enabled) (*lost)["sched"] = drops.Total(IOT_SRC_SCHED);
  if (bpf.block()) (*summary)["block"] = bpf.block()->Stats();
}

// ---- the capture ---------------------------------------------------------------------------------
class Capture {
 public:
  explicit Capture(const RecordOptions& o) : opt_(o) {}
  Result<RecordOutcome> Run();

 private:
  Status Validate();
  Status Setup();
  Status AttachMeasuringCost(std::optional<CaptureCost>* cost, std::string* note);
  void IdentifyMarker();
  json Meta(const std::optional<CaptureCost>& cost, const std::string& cost_note) const;
  void SetupMemory();
  json Footer(const RecordOutcome& out);
  Status StartCommand();
  Status AttachPids();
  Status Loop();
  Status Stop();
  // After a failed recording: the command iotwin started, stopped and reaped as --on-failure
  // says; the words to add to the error.
  std::string StopCommandAfterFailure();
  Status WriteLost(bool final_round);
  void PrintStatus();
  uint64_t EventCount() const;
  // Appends a record the capture makes itself (not from the ring), counting it.
  template <typename T>
  Status Write(const T& rec) {
    IOTWIN_RETURN_IF_ERROR(writer_->Append(rec));
    own_counts_[rec.hdr.type]++;
    return Status::Ok();
  }
  uint64_t Count(size_t type) const {
    return consumer_->counts().records[type] + own_counts_[type];
  }

  const RecordOptions& opt_;
  std::string mode_;         // "command", "pid", "cgroup"
  std::vector<pid_t> pids_;  // --pid targets as processes
  uint64_t cgroup_id_ = 0;
  std::optional<UserCredentials> user_;
  std::unique_ptr<MarkerFile> marker_;
  std::string marker_note_;
  std::unique_ptr<CaptureBpf> bpf_;
  std::unique_ptr<TraceWriter> writer_;
  std::unique_ptr<RingConsumer> consumer_;
  std::unique_ptr<MemoryTracker> memory_;
  std::optional<StoppedCommand> command_;
  bool output_created_ = false;

  uint64_t start_ns_ = 0;
  std::string stop_reason_;
  int stop_signal_ = 0;
  std::map<std::pair<uint16_t, uint16_t>, uint64_t> lost_written_;  // (source, cpu) -> count
  DropCounts drops_;
  std::array<uint64_t, IOT_REC_MAX + 1> own_counts_{};
  bool status_tty_ = false;
  std::unique_ptr<LiveStatus> status_line_;  // while status_tty_
  uint64_t last_status_ns_ = 0, last_status_events_ = 0;
};

Status Capture::Validate() {
  int modes = !opt_.command.empty() + !opt_.pids.empty() + !opt_.cgroup.empty();
  if (modes == 0)
    return Status::Invalid("nothing to trace: give a command after --, --pid or --cgroup");
  if (modes > 1) return Status::Invalid("give only one of: a command, --pid, --cgroup");
  if (opt_.output.empty()) return Status::Invalid("no output file (-o)");
  if (!opt_.user.empty() && opt_.command.empty()) {
    return Status::Invalid("--user applies to a command started by iotwin record");
  }
  if (opt_.duration_s < 0) return Status::Invalid("--duration must be positive");
  mode_ = !opt_.command.empty() ? "command" : !opt_.pids.empty() ? "pid" : "cgroup";
  IOTWIN_RETURN_IF_ERROR(CheckPrivileges());
  IOTWIN_RETURN_IF_ERROR(CheckBtf());
  for (pid_t p : opt_.pids) {
    if (p <= 0 || !ProcessExists(p)) return Status::NotFound("no process with pid {}", p);
    // A thread id stands for its process: the traced set holds processes.
    IOTWIN_ASSIGN_OR_RETURN(pid_t tgid, ThreadGroupOf(p));
    if (tgid == getpid()) return Status::Invalid("cannot trace iotwin itself (pid {})", p);
    if (std::find(pids_.begin(), pids_.end(), tgid) == pids_.end()) pids_.push_back(tgid);
  }
  if (!opt_.cgroup.empty()) {
    IOTWIN_ASSIGN_OR_RETURN(cgroup_id_, CgroupId(opt_.cgroup));
  }
  if (!opt_.user.empty()) {
    IOTWIN_ASSIGN_OR_RETURN(UserCredentials u, LookupUser(opt_.user));
    user_ = std::move(u);
  }
  if (!opt_.uprobes.empty() && access("/sys/bus/event_source/devices/uprobe", F_OK) != 0) {
    return Status::Unsupported(
        "--uprobe: this kernel has no uprobes (built without CONFIG_UPROBE_EVENTS); use the "
        "IOTWIN_MARKER channel instead");
  }
  for (const auto& u : opt_.uprobes) {
    if (access(u.binary.c_str(), R_OK) != 0 && u.binary.find('/') != std::string::npos) {
      return Status::NotFound("--uprobe: cannot read binary '{}'", u.binary);
    }
  }
  return Status::Ok();
}

// Attaches the programs, measuring what the capture adds to each call (capture_cost.h):
// untraced turns before they are attached, traced ones right after, before anything of the
// workload is traced. A cost not measured leaves `cost` empty and says why in `note`.
Status Capture::AttachMeasuringCost(std::optional<CaptureCost>* cost, std::string* note) {
  CaptureCostProbe cost_probe;
  Status untraced = cost_probe.Untraced();
  IOTWIN_RETURN_IF_ERROR(bpf_->Attach());
  if (untraced.ok() && cgroup_id_ == 0) {
    pid_t calibrated = 0;
    auto trace = [&](pid_t pid) {
      calibrated = pid;
      return bpf_->TraceProcess(pid);
    };
    Result<CaptureCost> c = cost_probe.Traced(trace, bpf_->ring_fd());
    if (calibrated) (void)bpf_->UntraceProcess(calibrated);
    // The calibration's process touched iotwin's own libraries: the workload's first touch of
    // them must still record their page-cache state.
    IOTWIN_RETURN_IF_ERROR(bpf_->ForgetFilesTouched());
    if (c.ok()) *cost = *c;
    else *note = "capture cost not measured: " + c.status().message();
  } else {
    *note = cgroup_id_ ? "capture cost not measured: the traced set is a cgroup"
                       : "capture cost not measured: " + untraced.message();
  }
  return Status::Ok();
}

// The kernel's identity of the marker file; markers off when the kernel cannot name it.
void Capture::IdentifyMarker() {
  if (!marker_) return;
  uint64_t ino = 0;
  uint32_t dev = 0;
  Status st = bpf_->IdentifyMarker(marker_->path(), &ino, &dev);
  if (!st.ok()) {
    // Markers off rather than a marker test that might match another file.
    marker_note_ = "intent markers disabled: " + st.message();
    marker_.reset();
  } else if (ino != marker_->ino() || dev != marker_->dev()) {
    marker_note_ = fmt::format(
        "marker file identity: kernel {}:{} ino {}, stat {}:{} ino {} (the kernel's is used)",
        dev >> 20, dev & 0xfffff, ino, marker_->dev() >> 20, marker_->dev() & 0xfffff,
        marker_->ino());
  }
}

// The trace header: the capture's layers, mode, notes and measured cost.
json Capture::Meta(const std::optional<CaptureCost>& cost, const std::string& cost_note) const {
  json meta;
  meta["tool"] = "iotwin record 0.1.0";
  meta["host"] = HostMeta();
  meta["command"] = opt_.command;
  json layers;
  layers["syscall"] = {{"enabled", true}, {"reason", bpf_->syscall_reason()}};
  layers["process"] = {{"enabled", true},
                       {"reason", bpf_->proc_attach_kind() + " sched_process_fork/exec/exit"}};
  std::string async_reason =
      "io_uring_submit_req/io_uring_complete tracepoints; libaio from io_submit/io_getevents";
  for (const auto& n : bpf_->notes()) {
    if (n.rfind("async", 0) == 0) async_reason = n;
  }
  layers["async"] = {{"enabled", bpf_->async_attached()}, {"reason", async_reason}};
  layers["intent"] = {
      {"enabled", marker_ != nullptr || !opt_.uprobes.empty()},
      {"reason",
       marker_
           ? "IOTWIN_MARKER file channel" + std::string(opt_.uprobes.empty() ? "" : " and uprobes")
           : (opt_.uprobes.empty() ? "no marker channel (not a command)" : "uprobes")}};
  layers["memory"] = bpf_->memory_plan().ToJson();
  AddBlockMeta(*bpf_, &layers, &meta);
  meta["layers"] = layers;
  json cap;
  cap["mode"] = mode_;
  cap["attach"] = bpf_->attach_kind();
  cap["ring_bytes"] = opt_.ring_bytes;
  if (!pids_.empty()) cap["pids"] = pids_;
  if (!opt_.cgroup.empty()) cap["cgroup"] = {{"path", opt_.cgroup}, {"id", cgroup_id_}};
  if (user_) cap["user"] = user_->name;
  if (marker_) cap["marker"] = marker_->path();
  json probes = json::array();
  for (const auto& u : opt_.uprobes) {
    probes.push_back({{"binary", u.binary}, {"function", u.function}, {"label", u.label}});
  }
  cap["uprobes"] = probes;
  json notes = bpf_->notes();
  if (!marker_note_.empty()) notes.push_back(marker_note_);
  if (!cost_note.empty()) notes.push_back(cost_note);
  cap["notes"] = notes;
  if (cost) cap["cost"] = cost->ToJson();
  meta["capture"] = cap;
  return meta;
}

Status Capture::Setup() {
  if (mode_ == "command" && opt_.markers) {
    IOTWIN_ASSIGN_OR_RETURN(marker_, MarkerFile::Create(user_));
  }
  CaptureBpfConfig cfg;
  cfg.ring_bytes = opt_.ring_bytes;
  cfg.wake_bytes = opt_.wake_bytes;
  cfg.cgroup_id = cgroup_id_;
  cfg.self_tgid = static_cast<uint32_t>(getpid());
  cfg.async = opt_.async;
  cfg.uprobes = !opt_.uprobes.empty();
  cfg.memory = opt_.memory;
  cfg.block = opt_.block;
  IOTWIN_ASSIGN_OR_RETURN(bpf_, CaptureBpf::Load(cfg));
  std::optional<CaptureCost> cost;
  std::string cost_note;
  IOTWIN_RETURN_IF_ERROR(AttachMeasuringCost(&cost, &cost_note));
  IdentifyMarker();
  const json meta = Meta(cost, cost_note);

  // zstd level 1: on syscall records it compresses as well as the default level 3 (about 9.5
  // bytes per pread record either way) at about twice the speed, and the consumer's CPU time
  // is taken from the traced workload on small machines.
  TraceWriterOptions wopt;
  wopt.zstd_level = opt_.zstd_level;
  wopt.publish_at_start = true;  // at its name while recording, without footer until the end
  IOTWIN_ASSIGN_OR_RETURN(writer_, TraceWriter::Create(opt_.output, meta, wopt));
  output_created_ = true;
  IOTWIN_RETURN_IF_ERROR(Write(ClockRecord()));

  for (const auto& u : opt_.uprobes) {
    IOTWIN_ASSIGN_OR_RETURN(uint32_t label, writer_->InternString(u.label));
    IOTWIN_RETURN_IF_ERROR(bpf_->AttachUprobe(u.binary, u.function, label));
  }
  IOTWIN_ASSIGN_OR_RETURN(consumer_, RingConsumer::Create(bpf_->ring_fd(), writer_.get()));
  SetupMemory();
  return Status::Ok();
}

// The memory layer's user-space half: fed by the consumer, writing through Write()'s counting.
void Capture::SetupMemory() {
  const MemoryLayerState& plan = bpf_->memory_plan();
  if (!plan.AnyKernelPart() && !plan.state.enabled) return;
  memory_ = std::make_unique<MemoryTracker>(
      opt_.memory, plan, bpf_->memory(), writer_.get(), [this](const iot_rec_hdr* rec) -> Status {
        IOTWIN_RETURN_IF_ERROR(writer_->Append(rec));
        if (rec->type <= IOT_REC_MAX) own_counts_[rec->type]++;
        return Status::Ok();
      });
  memory_->Connect(consumer_.get());
}

Status Capture::StartCommand() {
  LaunchOptions lo;
  lo.argv = opt_.command;
  lo.user = user_;
  if (marker_) lo.set_env.push_back("IOTWIN_MARKER=" + marker_->path());
  if (user_) {
    // As su/sudo do, so that the command finds its own home and name.
    lo.set_env.push_back("HOME=" + user_->home);
    lo.set_env.push_back("USER=" + user_->name);
    lo.set_env.push_back("LOGNAME=" + user_->name);
  }
  IOTWIN_ASSIGN_OR_RETURN(StoppedCommand cmd, StoppedCommand::Start(lo));
  command_.emplace(std::move(cmd));
  pid_t pid = command_->pid();
  IOTWIN_RETURN_IF_ERROR(bpf_->TraceProcess(pid));

  std::string comm = std::filesystem::path(opt_.command[0]).filename().string();
  iot_proc start = ProcRecord(IOT_PROC_START, pid, comm);
  IOTWIN_RETURN_IF_ERROR(Write(start));
  std::error_code ec;
  std::string cwd = std::filesystem::current_path(ec).string();
  iot_proc cwd_rec = ProcRecord(IOT_PROC_CWD, pid, comm);
  IOTWIN_ASSIGN_OR_RETURN(cwd_rec.path_id, writer_->InternString(cwd));
  IOTWIN_RETURN_IF_ERROR(Write(cwd_rec));
  return command_->Release();
}

Status Capture::AttachPids() {
  for (pid_t pid : pids_) {
    // Trace first, then snapshot: a call between the two is captured and also reflected in the
    // snapshot, never missed.
    IOTWIN_RETURN_IF_ERROR(bpf_->TraceProcess(pid));
    auto comm = ProcessComm(pid);
    auto cwd = ProcessCwd(pid);
    auto fds = SnapshotFds(pid);
    auto maps = SnapshotFileMaps(pid);
    iot_proc attach = ProcRecord(IOT_PROC_ATTACH, pid, comm.ok() ? comm.value() : "");
    if (cwd.ok()) {
      IOTWIN_ASSIGN_OR_RETURN(attach.path_id, writer_->InternString(cwd.value()));
    }
    if (!comm.ok() || !fds.ok()) {
      attach.flags |= IOT_PROCF_GROUP_DEAD;  // exited during attach
    }
    IOTWIN_RETURN_IF_ERROR(Write(attach));
    if (memory_) IOTWIN_RETURN_IF_ERROR(memory_->OnAttach(pid));
    if (fds.ok()) {
      for (const FdEntry& f : fds.value()) {
        iot_fd_snapshot s;
        memset(&s, 0, sizeof s);
        InitRecord(&s, IOT_REC_FD_SNAPSHOT);
        s.tgid = static_cast<uint32_t>(pid);
        s.ts = Mono();
        s.ino = f.ino;
        s.pos = f.pos;
        s.fsize = f.size;
        s.fd = f.fd;
        s.flags = f.flags;
        s.dev = f.dev;
        s.ftype = f.ftype;
        IOTWIN_ASSIGN_OR_RETURN(s.path_id, writer_->InternString(f.path));
        IOTWIN_RETURN_IF_ERROR(Write(s));
      }
    }
    if (maps.ok()) {
      for (const MapEntry& m : maps.value()) {
        iot_map_snapshot s;
        memset(&s, 0, sizeof s);
        InitRecord(&s, IOT_REC_MAP_SNAPSHOT);
        s.tgid = static_cast<uint32_t>(pid);
        s.ts = Mono();
        s.start = m.start;
        s.end = m.end;
        s.pgoff = m.pgoff;
        s.ino = m.ino;
        s.dev = m.dev;
        s.prot = m.prot;
        s.flags = m.flags;
        IOTWIN_ASSIGN_OR_RETURN(s.path_id, writer_->InternString(m.path));
        IOTWIN_RETURN_IF_ERROR(Write(s));
      }
    }
  }
  return Status::Ok();
}

uint64_t Capture::EventCount() const {
  // Events: what happened in the workload (not strings, iovec layouts, clocks or loss reports).
  uint64_t n = 0;
  for (size_t t = 0; t <= IOT_REC_MAX; t++) {
    if (t != IOT_REC_STRING && t != IOT_REC_IOVEC && t != IOT_REC_FDLIST && t != IOT_REC_CLOCK &&
        t != IOT_REC_LOST) {
      n += Count(t);
    }
  }
  return n;
}

Status Capture::WriteLost(bool final_round) {
  auto d = bpf_->ReadDrops();
  if (!d.ok()) return d.status();
  drops_ = std::move(d).value();
  uint64_t now = Mono();
  for (uint16_t src = 1; src < drops_.per_cpu.size(); src++) {
    for (size_t cpu = 0; cpu < drops_.per_cpu[src].size(); cpu++) {
      uint64_t count = drops_.per_cpu[src][cpu];
      auto key = std::make_pair(src, static_cast<uint16_t>(cpu));
      auto it = lost_written_.find(key);
      uint64_t before = it == lost_written_.end() ? 0 : it->second;
      if (count == before) continue;
      iot_lost l;
      memset(&l, 0, sizeof l);
      InitRecord(&l, IOT_REC_LOST);
      l.source = src;
      l.cpu = static_cast<uint16_t>(cpu);
      l.ts = now;
      l.count = count;
      IOTWIN_RETURN_IF_ERROR(Write(l));
      lost_written_[key] = count;
    }
  }
  (void)final_round;
  return Status::Ok();
}

void Capture::PrintStatus() {
  if (!status_tty_) return;
  uint64_t now = Mono();
  uint64_t events = EventCount();
  double dt = (now - last_status_ns_) / 1e9;
  double rate = dt > 0 ? (events - last_status_events_) / dt : 0;
  last_status_ns_ = now;
  last_status_events_ = events;
  std::string line = fmt::format("iotwin record: {} events ({:.0f}/s), {} written, {} lost", events,
                                 rate, units::HumanBytes(writer_->bytes_written()), drops_.Total());
  status_line_->Draw(line);
}

Status Capture::Loop() {
  uint64_t deadline =
      opt_.duration_s > 0 ? start_ns_ + static_cast<uint64_t>(opt_.duration_s * 1e9) : UINT64_MAX;
  uint64_t next_clock = start_ns_ + kClockEveryNs;
  uint64_t next_status = start_ns_ + kStatusEveryNs;
  uint64_t next_liveness = 0;
  uint64_t grace_until = 0;
  int handled_signals = 0;
  for (;;) {
    IOTWIN_RETURN_IF_ERROR(consumer_->Poll(opt_.poll_ms));
    uint64_t now = Mono();
    if (memory_) IOTWIN_RETURN_IF_ERROR(memory_->Poll(now));
    if (marker_) marker_->Trim();
    if (command_ && command_->TryWait()) {
      stop_reason_ = grace_until ? stop_reason_ : "command exited";
      return Status::Ok();
    }
    if (mode_ == "pid" && now >= next_liveness) {
      next_liveness = now + 100'000'000;
      bool any = std::any_of(pids_.begin(), pids_.end(), ProcessExists);
      if (!any) {
        stop_reason_ = "all processes exited";
        return Status::Ok();
      }
    }
    if (g_signal_count > handled_signals) {
      int sig = g_signal;
      bool from_user = g_signal_from_user;
      handled_signals = g_signal_count;
      stop_signal_ = sig;
      stop_reason_ = fmt::format("signal {}", strsignal(sig));
      if (!command_ || handled_signals > 1) return Status::Ok();
      // A terminal's SIGINT reaches the command too; a signal sent to iotwin alone is passed
      // on. Either way the command gets a moment to exit so its last calls are captured.
      if (from_user) kill(command_->pid(), sig);
      grace_until = now + kGraceNs;
    }
    if (grace_until && now >= grace_until) return Status::Ok();
    if (now >= deadline) {
      stop_reason_ = "duration";
      return Status::Ok();
    }
    if (now >= next_status) {
      next_status = now + kStatusEveryNs;
      IOTWIN_RETURN_IF_ERROR(WriteLost(false));
      PrintStatus();
    }
    if (now >= next_clock) {
      next_clock = now + kClockEveryNs;
      IOTWIN_RETURN_IF_ERROR(Write(ClockRecord()));
    }
  }
}

Status Capture::Stop() {
  // Stop producing, then take everything that was produced.
  bpf_->Detach();
  IOTWIN_RETURN_IF_ERROR(consumer_->Drain());
  // A program that was already running on another CPU when detached may still submit: one more
  // short pass after it had time to finish.
  usleep(2000);
  IOTWIN_RETURN_IF_ERROR(consumer_->Drain());
  if (memory_) IOTWIN_RETURN_IF_ERROR(memory_->Finish(Mono()));
  IOTWIN_RETURN_IF_ERROR(WriteLost(true));
  IOTWIN_RETURN_IF_ERROR(Write(ClockRecord()));
  return Status::Ok();
}

std::string Capture::StopCommandAfterFailure() {
  if (!command_ || command_->exited() || command_->TryWait()) return "";
  const pid_t pid = command_->pid();
  bpf_.reset();  // nothing more is recorded
  switch (opt_.on_failure) {
    case OnFailure::kLeave:
      return fmt::format("; the command (pid {}) goes on running, untraced (--on-failure leave)",
                         pid);
    case OnFailure::kKill:
      return fmt::format("; the command (pid {}) was killed (SIGKILL): {}", pid,
                         DescribeWait(command_->Terminate(0)));
    case OnFailure::kTerminate:
      break;
  }
  return fmt::format("; the command (pid {}) was stopped (SIGTERM, SIGKILL after {} s): {}", pid,
                     kTerminateGraceMs / 1000, DescribeWait(command_->Terminate(kTerminateGraceMs)));
}

// The trace's footer: why the recording stopped, the events per type, the lost ones per source,
// and what the marker file and the memory layer add (the marker file is trimmed here).
json Capture::Footer(const RecordOutcome& out) {
  json summary;
  summary["stop_reason"] = stop_reason_;
  summary["exit_status"] =
      out.command_wait ? json(ExitStatusFromWait(*out.command_wait)) : json(nullptr);
  json events = json::object();
  const auto& counts = consumer_->counts();
  for (size_t t = 1; t <= IOT_REC_MAX; t++) {
    if (t != IOT_REC_STRING && Count(t)) {
      events[std::string(RecordTypeName(static_cast<uint16_t>(t)))] = Count(t);
    }
  }
  summary["events"] = events;
  json lost = json::object();
  for (uint16_t src :
       {IOT_SRC_SYSCALL, IOT_SRC_PROC, IOT_SRC_ASYNC, IOT_SRC_INTENT, IOT_SRC_JOIN,
        IOT_SRC_MEMORY}) {
    lost[std::string(SourceName(src))] = drops_.Total(src);
  }
  AddBlockSummary(*bpf_, drops_, &lost, &summary);
  summary["lost"] = lost;
  summary["duration_ns"] = Mono() - start_ns_;
  summary["malformed_ring_records"] = counts.malformed;
  summary["bad_markers"] = counts.bad_markers;
  if (marker_) {
    marker_->Trim();
    summary["marker_file_trimmed_bytes"] = marker_->trimmed();
  }
  summary["ring_bytes_consumed"] = counts.ring_bytes;
  if (memory_) summary["memory"] = memory_->Summary();
  return summary;
}

Result<RecordOutcome> Capture::Run() {
  IOTWIN_RETURN_IF_ERROR(Validate());
  StopSignals signals;
  status_tty_ = opt_.status_line == StatusLine::kOn ||
                (opt_.status_line == StatusLine::kAuto && isatty(STDERR_FILENO));
  if (status_tty_) status_line_ = std::make_unique<capture::LiveStatus>(STDERR_FILENO);
  // Every way out of Run gives the terminal's bottom row back before anything else is printed.
  struct ClearStatus {
    std::unique_ptr<capture::LiveStatus>& line;
    ~ClearStatus() {
      if (line) line->Clear();
    }
  } clear_status{status_line_};

  // Until the command runs, a failure removes the output: there is nothing worth keeping.
  auto setup = [&]() -> Status {
    IOTWIN_RETURN_IF_ERROR(Setup());
    start_ns_ = Mono();
    if (mode_ == "command") return StartCommand();
    if (mode_ == "pid") return AttachPids();
    return Status::Ok();
  }();
  if (!setup.ok()) {
    writer_.reset();
    if (output_created_) unlink(opt_.output.c_str());
    return setup;
  }
  if (opt_.ready_fd >= 0) {
    const char ready = '1';
    ssize_t n;
    do n = write(opt_.ready_fd, &ready, 1);
    while (n < 0 && errno == EINTR);
    close(opt_.ready_fd);
  }
  last_status_ns_ = start_ns_;

  Status st = Loop();
  if (st.ok()) st = Stop();
  RecordOutcome out;
  out.stop_reason = stop_reason_;
  out.lost = drops_.Total();
  out.events = EventCount();
  if (command_ && command_->exited()) out.command_wait = command_->TryWait();
  if (!st.ok()) {
    // The trace stays without footer: readers report it as truncated.
    st = st.WithContext(fmt::format("recording into {} (left without footer)", opt_.output));
    return Status::Error(st.code(), st.message() + StopCommandAfterFailure());
  }

  const json summary = Footer(out);
  const json& lost = summary["lost"];
  IOTWIN_RETURN_IF_ERROR(writer_->Finish(summary));
  out.file_bytes = writer_->bytes_written();
  // The live line gives way to the summary line that `iotwin record` prints.
  if (status_line_) status_line_->Clear();

  if (stop_reason_ == "duration" && command_ && !command_->exited()) {
    // The trace is complete; the command keeps running untraced and its status is still ours.
    bpf_.reset();
    out.command_wait = command_->Wait();
  }
  if (out.command_wait) {
    out.exit_status = ExitStatusFromWait(*out.command_wait);
  } else if (stop_signal_ && command_) {
    out.exit_status = 128 + stop_signal_;  // the command outlived its grace period
  }
  if (out.lost > 0) {
    std::string per;
    for (const auto& el : lost.items()) {
      uint64_t n = el.value().get<uint64_t>();
      if (n) per += fmt::format("{}{}: {}", per.empty() ? "" : ", ", el.key(), n);
    }
    fprintf(stderr, "iotwin record: %" PRIu64 " events LOST (%s); the trace says so\n", out.lost,
            per.c_str());
    if (opt_.fail_on_loss && out.exit_status == 0) out.exit_status = 1;
  }
  return out;
}

}  // namespace

Result<UprobeSpec> ParseUprobeSpec(const std::string& spec) {
  UprobeSpec u;
  size_t eq = spec.rfind('=');
  std::string target = eq == std::string::npos ? spec : spec.substr(0, eq);
  size_t colon = target.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == target.size()) {
    return Status::Invalid("--uprobe '{}': expected BINARY:FUNCTION[=label]", spec);
  }
  u.binary = target.substr(0, colon);
  u.function = target.substr(colon + 1);
  u.label = eq == std::string::npos ? u.function : spec.substr(eq + 1);
  if (u.label.empty()) return Status::Invalid("--uprobe '{}': empty label", spec);
  return u;
}

// Where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup on unified systems,
// /sys/fs/cgroup/unified on hybrid ones.
std::string Cgroup2Mount() {
  std::ifstream in("/proc/self/mounts");
  std::string dev, dir, type, rest;
  while (in >> dev >> dir >> type && std::getline(in, rest)) {
    if (type == "cgroup2") return dir;
  }
  return "/sys/fs/cgroup";
}

Result<uint64_t> CgroupId(const std::string& path) {
  std::string full = path;
  struct statfs fs;
  if (path.empty() || path[0] != '/' || statfs(path.c_str(), &fs) != 0 ||
      fs.f_type != CGROUP2_SUPER_MAGIC) {
    full = Cgroup2Mount() + "/" + (path.empty() || path[0] != '/' ? path : path.substr(1));
  }
  if (statfs(full.c_str(), &fs) != 0) {
    return Status::NotFound("--cgroup: no cgroup '{}' ({}: {})", path, full, strerror(errno));
  }
  if (fs.f_type != CGROUP2_SUPER_MAGIC) {
    return Status::Unsupported("--cgroup: '{}' is not on a cgroup v2 file system", full);
  }
  // The cgroup id is the 64-bit kernfs node id that makes up the cgroup's file handle.
  alignas(8) unsigned char buf[sizeof(struct file_handle) + sizeof(uint64_t)];
  auto* fh = reinterpret_cast<struct file_handle*>(buf);
  fh->handle_bytes = sizeof(uint64_t);
  int mount_id = 0;
  if (name_to_handle_at(AT_FDCWD, full.c_str(), fh, &mount_id, 0) == 0 &&
      fh->handle_bytes == sizeof(uint64_t)) {
    uint64_t id;
    memcpy(&id, buf + sizeof(struct file_handle), sizeof id);
    return id;
  }
  struct stat st;
  if (stat(full.c_str(), &st) != 0) return Status::FromErrno(errno, "stat " + full);
  return static_cast<uint64_t>(st.st_ino);
}

Result<RecordOutcome> Record(const RecordOptions& options) {
  Capture c(options);
  return c.Run();
}

}  // namespace iotwin::capture
