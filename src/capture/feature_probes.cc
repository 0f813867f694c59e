// The half of Features that touches the system: loads and attaches trivial programs, reads BTF,
// tracefs, sysfs, /proc and the kernel config into KernelFacts, then hands them to Evaluate.
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "base/fd.h"
#include "base/page_cache.h"
#include "capture/feature_table.h"
#include "capture/features.h"

namespace iotwin::capture {
namespace {

namespace fs = std::filesystem;

// Modules whose own BTF holds tracepoints iotwin uses (NVMe tracepoints live in nvme-core; ext4's
// in ext4 when it is a module).
constexpr const char* kTracepointModules[] = {"nvme_core", "nvme", "ext4"};
// A function every kernel has, for the fentry probe (first one found in BTF is used).
constexpr const char* kFentryTargets[] = {"vfs_read", "ksys_read"};

}  // namespace

namespace {

struct BtfDeleter {
  void operator()(btf* b) const { btf__free(b); }
};
using BtfPtr = std::unique_ptr<btf, BtfDeleter>;

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::optional<std::string> ReadGzipFile(const std::string& path) {
  gzFile gz = gzopen(path.c_str(), "rb");
  if (!gz) return std::nullopt;
  std::string text;
  char buf[65536];
  int n;
  while ((n = gzread(gz, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  bool failed = n < 0;
  gzclose(gz);
  if (failed) return std::nullopt;
  return text;
}

Attempt Failed(int err, std::string detail) { return Attempt{false, err, std::move(detail)}; }

// The last non-empty line of a verifier log, which names the reason for a rejection.
std::string LastLogLine(const char* log) {
  std::string_view text(log);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  size_t nl = text.rfind('\n');
  return std::string(nl == std::string_view::npos ? text : text.substr(nl + 1));
}

// The btf_trace_ typedefs of `b` from type `first_id` on; `module` (null for vmlinux) is noted
// as the source of those vmlinux lacks.
void CollectBtfTracepoints(const btf* b, uint32_t first_id, const char* module, KernelFacts& f) {
  constexpr std::string_view kPrefix = "btf_trace_";
  uint32_t count = btf__type_cnt(b);
  for (uint32_t id = first_id; id < count; id++) {
    const btf_type* t = btf__type_by_id(b, id);
    if (!t || btf_kind(t) != BTF_KIND_TYPEDEF) continue;
    std::string_view name = btf__name_by_offset(b, t->name_off);
    if (!name.starts_with(kPrefix)) continue;
    auto [it, added] = f.btf_tracepoints.emplace(name.substr(kPrefix.size()));
    if (added && module) f.btf_tracepoint_modules.emplace(*it, module);
  }
}

// Loads `r0 = 0; exit` as the given program type and attaches it (raw_tp_name for raw_tp; the
// BTF id for tracing programs). The program runs for an instant on every hit and is removed.
Attempt LoadAndAttach(bpf_prog_type type, bpf_attach_type attach_type, uint32_t attach_btf_id,
                      const char* raw_tp_name, const std::string& what) {
  const bpf_insn insns[] = {
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .src_reg = 0, .off = 0, .imm = 0},
      {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
  };
  char log[4096] = "";
  bpf_prog_load_opts opts{};
  opts.sz = sizeof opts;
  opts.expected_attach_type = attach_type;
  opts.attach_btf_id = attach_btf_id;
  opts.log_buf = log;  // libbpf retries a failed load with a log level to fill it
  opts.log_size = sizeof log;
  int prog = bpf_prog_load(type, "iotwin_probe", "GPL", insns, 2, &opts);
  if (prog < 0) {
    int err = errno;
    std::string reason = LastLogLine(log);
    return Failed(err, fmt::format("load as {} failed: {}{}", what, ErrnoText(err),
                                   reason.empty() ? "" : "; verifier: " + reason));
  }
  UniqueFd prog_fd(prog);
  int link = bpf_raw_tracepoint_open(raw_tp_name, prog_fd.get());
  if (link < 0) {
    int err = errno;
    return Failed(err, fmt::format("{} loaded, but attach failed: {}", what, ErrnoText(err)));
  }
  UniqueFd link_fd(link);
  return Attempt{true, 0, fmt::format("loaded and attached a program as {}", what)};
}

// Mounts tracefs in a child's private mount namespace, so the host's mounts stay as they are, and
// lets `use` read it through /proc/<child>/root while the child waits.
Attempt WithPrivateTracefs(const std::function<void(const std::string&)>& use) {
  int ready[2], hold[2];
  if (pipe2(ready, O_CLOEXEC) != 0) return Failed(errno, "pipe: " + ErrnoText(errno));
  UniqueFd ready_r(ready[0]), ready_w(ready[1]);
  if (pipe2(hold, O_CLOEXEC) != 0) return Failed(errno, "pipe: " + ErrnoText(errno));
  UniqueFd hold_r(hold[0]), hold_w(hold[1]);
  pid_t pid = fork();
  if (pid < 0) return Failed(errno, "fork: " + ErrnoText(errno));
  if (pid == 0) {
    // Child: async-signal-safe calls only (the parent may have threads); _exit skips destructors.
    // Closing our copy of the hold pipe's write end lets the parent's close end the wait.
    close(hold_w.get());
    close(ready_r.get());
    int result[2] = {0, 0};  // failed step, errno
    if (unshare(CLONE_NEWNS) != 0) {
      result[0] = 1, result[1] = errno;
    } else if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      result[0] = 2, result[1] = errno;
    } else if (mount("nodev", kTracefsDir, "tracefs", 0, nullptr) != 0) {
      result[0] = 3, result[1] = errno;
    }
    if (write(ready_w.get(), result, sizeof result) != sizeof result) _exit(1);
    char byte;
    while (read(hold_r.get(), &byte, 1) < 0 && errno == EINTR) {
    }
    _exit(0);
  }
  ready_w.Reset();
  hold_r.Reset();
  int result[2] = {0, 0};
  ssize_t n;
  while ((n = read(ready_r.get(), result, sizeof result)) < 0 && errno == EINTR) {
  }
  Attempt attempt;
  if (n != sizeof result) {
    attempt = Failed(ECHILD, "the mount-namespace probe process died");
  } else if (result[1] != 0) {
    const char* step = result[0] == 1   ? "unshare(CLONE_NEWNS)"
                       : result[0] == 2 ? "making / private"
                                        : "mount -t tracefs";
    attempt = Failed(result[1], fmt::format("{} failed: {}", step, ErrnoText(result[1])));
  } else {
    use(fmt::format("/proc/{}/root{}", pid, kTracefsDir));
    attempt = Attempt{true, 0,
                      "mounting works (tried in a private mount namespace; "
                      "iotwin check --mount-tracefs mounts it for real)"};
  }
  hold_w.Reset();
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  return attempt;
}

void ListTracefs(const std::string& root, KernelFacts& f) {
  std::error_code ec;
  fs::directory_iterator groups(root + "/events", ec);
  if (ec) return;
  f.tracefs_listed = true;
  for (const auto& group : groups) {
    if (!group.is_directory(ec)) continue;
    std::string group_name = group.path().filename().string();
    for (const auto& event : fs::directory_iterator(group.path(), ec)) {
      if (event.is_directory(ec)) {
        f.tracefs_events.insert(group_name + "/" + event.path().filename().string());
      }
    }
  }
  f.kprobe_events_file = fs::exists(root + "/kprobe_events", ec);
  f.uprobe_events_file = fs::exists(root + "/uprobe_events", ec);
}

// The kernel's BTF and the btf_trace_ typedefs of vmlinux and of the modules in
// kTracepointModules; null when vmlinux BTF cannot be parsed.
BtfPtr ProbeBtf(KernelFacts& f) {
  std::error_code ec;
  f.btf_present = fs::exists(kVmlinuxBtf, ec);
  BtfPtr vmlinux(btf__load_vmlinux_btf());
  if (!vmlinux) {
    int err = errno;
    f.btf_parse = Failed(err, "btf__load_vmlinux_btf: " + ErrnoText(err));
    return vmlinux;
  }
  f.btf_parse = Attempt{true, 0, "parsed"};
  CollectBtfTracepoints(vmlinux.get(), 1, nullptr, f);
  for (const char* module : kTracepointModules) {
    if (!fs::exists(fmt::format("/sys/kernel/btf/{}", module), ec)) continue;
    BtfPtr mod(btf__load_module_btf(module, vmlinux.get()));
    if (!mod) continue;
    CollectBtfTracepoints(mod.get(), btf__type_cnt(vmlinux.get()), module, f);
    f.btf_modules.push_back(module);
  }
  return vmlinux;
}

// tp_btf, raw_tp and fentry: each loads and attaches `r0 = 0; exit`.
void ProbeProgramTypes(const btf* vmlinux, KernelFacts& f) {
  // tp_btf: a tracing program typed by the btf_trace_sys_enter typedef.
  int sys_enter_id =
      vmlinux ? btf__find_by_name_kind(vmlinux, "btf_trace_sys_enter", BTF_KIND_TYPEDEF) : -1;
  if (!vmlinux) {
    f.tp_btf = Failed(0, "not tried: no parseable kernel BTF");
  } else if (sys_enter_id < 0) {
    f.tp_btf = Failed(ENOENT, "no btf_trace_sys_enter typedef in BTF");
  } else {
    f.tp_btf = LoadAndAttach(BPF_PROG_TYPE_TRACING, BPF_TRACE_RAW_TP,
                             static_cast<uint32_t>(sys_enter_id), nullptr, "tp_btf/sys_enter");
  }
  f.raw_tp = LoadAndAttach(BPF_PROG_TYPE_RAW_TRACEPOINT, bpf_attach_type{} /* none for raw_tp */, 0,
                           "sys_enter", "raw_tp/sys_enter");

  // fentry: a trampoline on a common kernel function.
  if (!vmlinux) {
    f.fentry = Failed(0, "not tried: no parseable kernel BTF");
    return;
  }
  f.fentry = Failed(ENOENT, "no target function found in BTF");
  for (const char* target : kFentryTargets) {
    int id = btf__find_by_name_kind(vmlinux, target, BTF_KIND_FUNC);
    if (id < 0) continue;
    f.fentry = LoadAndAttach(BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY, static_cast<uint32_t>(id),
                             nullptr, fmt::format("fentry/{}", target));
    break;
  }
}

Attempt ProbeRingbuf() {
  long page = sysconf(_SC_PAGESIZE);
  int map = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "iotwin_probe", 0, 0,
                           static_cast<uint32_t>(page > 0 ? page : 4096), nullptr);
  if (map < 0) {
    int err = errno;
    return Failed(err, "BPF_MAP_TYPE_RINGBUF creation failed: " + ErrnoText(err));
  }
  UniqueFd map_fd(map);
  return Attempt{true, 0, "created a BPF_MAP_TYPE_RINGBUF map"};
}

// libbpf's helper probe cannot tell "no privileges" from "helper accepted", so it only counts
// once a program of the same family has loaded.
Attempt ProbeFindVma(const KernelFacts& f) {
  if (!f.raw_tp.ok) return Failed(0, "not tried: raw_tp programs do not load here");
  int rc = libbpf_probe_bpf_helper(BPF_PROG_TYPE_RAW_TRACEPOINT, BPF_FUNC_find_vma, nullptr);
  if (rc == 1) return Attempt{true, 0, "the verifier accepts bpf_find_vma in tracing programs"};
  if (rc == 0) return Failed(EINVAL, "the verifier rejects bpf_find_vma (helper unknown)");
  return Failed(-rc, "libbpf_probe_bpf_helper: " + ErrnoText(-rc));
}

void ProbeBtfAndPrograms(KernelFacts& f) {
  BtfPtr vmlinux = ProbeBtf(f);
  ProbeProgramTypes(vmlinux.get(), f);
  f.ringbuf = ProbeRingbuf();
  f.find_vma = ProbeFindVma(f);
  f.rdonly_cast = vmlinux ? ProbeKfuncRdonlyCast(vmlinux.get())
                          : Failed(0, "not tried: no parseable kernel BTF");
}

// The answer the capture and replay act on (base/page_cache.h: residency by cachestat, else
// mincore), probed once per process.
Attempt ProbeCachestat() {
  if (CachestatAvailable()) {
    return Attempt{true, 0, "syscall 451 answers: page-cache residency is read with it"};
  }
  return Failed(ENOSYS, "syscall 451: " + ErrnoText(ENOSYS));
}

Attempt ProbeHardwarePmu() {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_HARDWARE;
  attr.config = PERF_COUNT_HW_INSTRUCTIONS;
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) {
    int err = errno;
    std::error_code ec;
    bool cpu_pmu = fs::exists(fmt::format("{}/cpu", kPmuDir), ec);
    return Failed(err, fmt::format("unavailable: perf_event_open(PERF_COUNT_HW_INSTRUCTIONS): {}{}",
                                   ErrnoText(err),
                                   cpu_pmu ? "" : fmt::format("; no cpu PMU in {}", kPmuDir)));
  }
  UniqueFd perf_fd(fd);
  return Attempt{true, 0, "perf_event_open(PERF_COUNT_HW_INSTRUCTIONS) works"};
}

void ProbeKernelConfig(KernelFacts& f) {
  struct Source {
    std::string path;
    bool gzip;
  };
  const Source sources[] = {{"/proc/config.gz", true},
                            {"/boot/config-" + f.release, false},
                            {"/lib/modules/" + f.release + "/config", false}};
  for (const Source& s : sources) {
    auto text = s.gzip ? ReadGzipFile(s.path) : ReadFile(s.path);
    if (!text) continue;
    f.config = ParseKernelConfig(*text);
    f.config_source = s.path;
    return;
  }
}

void ProbeSysfs(KernelFacts& f) {
  std::error_code ec;
  f.kprobe_pmu = fs::exists(fmt::format("{}/kprobe", kPmuDir), ec);
  f.uprobe_pmu = fs::exists(fmt::format("{}/uprobe", kPmuDir), ec);
  for (const auto& entry : fs::directory_iterator("/sys/module", ec)) {
    f.modules.insert(entry.path().filename().string());
  }
  for (const auto& entry : fs::directory_iterator("/sys/block", ec)) {
    std::string dev = entry.path().filename().string();
    auto text = ReadFile(entry.path().string() + "/queue/logical_block_size");
    if (!text) continue;
    try {
      f.lba_sizes[dev] = static_cast<uint32_t>(std::stoul(*text));
    } catch (const std::exception&) {
      // Not a number: leave the device out rather than guess.
    }
  }
}

}  // namespace

Result<Features> Features::Probe(const ProbeOptions& options) {
  KernelFacts f;
  utsname uts{};
  if (uname(&uts) != 0) return Status::FromErrno(errno, "uname");
  f.release = uts.release;
  f.arch = uts.machine;
  f.euid = geteuid();
  auto status = ReadFile("/proc/self/status");
  if (!status) return Status::Io("cannot read /proc/self/status: is /proc mounted?");
  f.cap_eff = ParseCapEff(*status);
  auto mounts = ReadFile("/proc/self/mounts");
  if (!mounts) return Status::Io("cannot read /proc/self/mounts: is /proc mounted?");

  ProbeKernelConfig(f);
  ProbeSysfs(f);

  if (auto mount_point = FindTracefsMount(*mounts)) {
    f.tracefs_mount = *mount_point;
    ListTracefs(f.tracefs_mount, f);
  } else if (options.mount_tracefs) {
    if (mount("nodev", kTracefsDir, "tracefs", 0, nullptr) == 0) {
      f.tracefs_mount = kTracefsDir;
      f.tracefs_mount_try = Attempt{true, 0, fmt::format("mounted at {}", kTracefsDir)};
      ListTracefs(f.tracefs_mount, f);
    } else {
      int err = errno;
      f.tracefs_mount_try =
          Failed(err, fmt::format("mount -t tracefs at {} failed: {}", kTracefsDir, ErrnoText(err)));
    }
  } else {
    f.tracefs_mount_try = WithPrivateTracefs([&f](const std::string& root) { ListTracefs(root, f); });
  }

  ProbeBtfAndPrograms(f);
  f.syscall_compat_forced = SyscallCompatForced();
  f.cachestat = ProbeCachestat();
  f.pmu = ProbeHardwarePmu();
  return Evaluate(std::move(f));
}

bool SyscallCompatForced() {
  const char* e = getenv("IOTWIN_BPF_COMPAT");
  return e && *e && std::string_view(e) != "0";
}

Attempt ProbeKfuncRdonlyCast(const struct btf* vmlinux) {
  BtfPtr owned;
  if (!vmlinux) {
    owned.reset(btf__load_vmlinux_btf());
    if (!owned) {
      int err = errno;
      return Failed(err, "btf__load_vmlinux_btf: " + ErrnoText(err));
    }
    vmlinux = owned.get();
  }
  int id = btf__find_by_name_kind(vmlinux, "bpf_rdonly_cast", BTF_KIND_FUNC);
  if (id > 0) return Attempt{true, 0, fmt::format("in the kernel's BTF (FUNC id {})", id)};
  return Failed(ENOENT, "no bpf_rdonly_cast FUNC in the kernel's BTF (kernel before 6.2)");
}

const Features& Features::Get() {
  static const Features kFeatures = [] {
    auto probed = Probe();
    if (probed.ok()) return std::move(probed).value();
    // /proc unreadable: every capture verdict is "no", with the reason.
    KernelFacts facts;
    facts.btf_parse = Failed(0, probed.status().message());
    return Evaluate(std::move(facts));
  }();
  return kFeatures;
}

}  // namespace iotwin::capture
