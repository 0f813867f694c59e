// Features: what this kernel and this process can do for capture, found by probing (loading and
// attaching trivial programs, reading BTF, tracefs, sysfs), never by comparing kernel versions.
// One job per file: feature_table.cc (what each feature is for and what replaces it),
// feature_probes.cc (probes that touch the system), feature_rules.cc (the pure verdicts),
// kernel_text.cc (parsers of the kernel's text).
// Probing gathers raw KernelFacts; Features::Evaluate turns them into per-feature verdicts and
// per-layer attach plans (from the attach table, attach_table.h) without touching the system, so
// the decision rules are unit-testable. `iotwin check` prints the result; the loaders ask
// Features::Get().ChooseAttach how to attach each program.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "capture/attach_table.h"
#include "capture/kernel_text.h"

struct btf;

namespace iotwin::capture {

// Every probed feature, in the order of `iotwin check`'s table.
enum class Feature : int {
  kPrivileges,        // root, or CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN)
  kBtf,               // /sys/kernel/btf/vmlinux present and parseable by libbpf
  kTracefsMounted,    // tracefs mounted (classic tracepoint attach looks event ids up there)
  kTracefsMountable,  // tracefs can be mounted (tried in a private mount namespace)
  kRawSyscallsTp,     // raw_syscalls:sys_enter/sys_exit
  kSyscallTps,        // syscalls:sys_enter_<name>/sys_exit_<name> (CONFIG_FTRACE_SYSCALLS)
  kTpBtf,             // BTF-typed raw tracepoint programs load and attach
  kRawTp,             // raw tracepoint programs load and attach
  kFentry,            // fentry trampolines load and attach
  kKprobes,           // kprobes (CONFIG_KPROBES, kprobe PMU or kprobe_events)
  kUprobes,           // uprobes (CONFIG_UPROBES, uprobe PMU or uprobe_events)
  kRingbuf,           // BPF ring buffer maps
  kFindVma,           // bpf_find_vma helper (file of a faulting address, in the kernel)
  kKfuncRdonlyCast,   // bpf_rdonly_cast kfunc (6.2+): the fast syscall object
  kBlockTps,          // block:block_rq_issue/complete ...
  kNvmeTps,           // nvme:nvme_setup_cmd/nvme_complete_rq (nvme-core module)
  kIoUringTps,        // io_uring:io_uring_submit_req/complete ...
  kFilemapTps,        // filemap:mm_filemap_add_to_page_cache/delete ...
  kWritebackTps,      // writeback:writeback_dirty_folio ...
  kPageFaultTp,       // exceptions:page_fault_user (x86 only)
  kSchedTps,          // sched:sched_switch/process_fork/exec/exit
  kIrqTps,            // irq:irq_handler_entry/exit, softirq_entry/exit
  kCachestat,         // the cachestat(2) syscall (page-cache residency snapshots)
  kHardwarePmu,       // perf_event_open(PERF_COUNT_HW_INSTRUCTIONS)
  kNvmeLbaSizes,      // logical block sizes of NVMe namespaces from sysfs
};
inline constexpr int kFeatureCount = static_cast<int>(Feature::kNvmeLbaSizes) + 1;

// The outcome of one attempted operation (a program load, a mount, a syscall).
struct Attempt {
  bool ok = false;
  int error = 0;       // errno when !ok (0 when the attempt was not made)
  std::string detail;  // what was tried or found; the verifier's last words on failure
};

// Raw facts gathered from the running system. Probe() fills them; tests build them by hand.
struct KernelFacts {
  std::string release;  // uname -r
  std::string arch;     // uname -m
  uint32_t euid = 0;
  std::optional<uint64_t> cap_eff;  // CapEff of /proc/self/status

  bool btf_present = false;  // /sys/kernel/btf/vmlinux exists
  Attempt btf_parse;         // btf__load_vmlinux_btf
  // Tracepoint names X with a `btf_trace_X` typedef in vmlinux or a loaded module's BTF: the
  // tracepoints tp_btf and raw_tp can attach to, known without tracefs.
  std::set<std::string, std::less<>> btf_tracepoints;
  std::vector<std::string> btf_modules;  // module BTFs that were read (e.g. nvme_core)
  // The tracepoints above that only a module's BTF has, and that module.
  std::map<std::string, std::string, std::less<>> btf_tracepoint_modules;

  std::string tracefs_mount;  // where tracefs is mounted in our namespace, "" when it is not
  Attempt tracefs_mount_try;  // the mount attempt when it was not mounted (private or real)
  bool tracefs_listed = false;            // tracefs_events below is a real listing
  std::set<std::string, std::less<>> tracefs_events;  // "group/event" directories under events/
  bool kprobe_events_file = false;        // tracefs has kprobe_events
  bool uprobe_events_file = false;        // tracefs has uprobe_events
  bool kprobe_pmu = false;                // /sys/bus/event_source/devices/kprobe
  bool uprobe_pmu = false;                // /sys/bus/event_source/devices/uprobe

  std::string config_source;                  // "/proc/config.gz", "" when none was readable
  std::map<std::string, std::string> config;  // CONFIG_X -> "y"/"m"/"n"/value

  std::set<std::string> modules;  // names under /sys/module (loaded or built-in with params)

  Attempt tp_btf;    // load + attach of `r0 = 0; exit` as tp_btf/sys_enter
  Attempt raw_tp;    // load + attach as raw_tp/sys_enter
  Attempt fentry;    // load + attach as fentry on a kernel function
  Attempt ringbuf;   // BPF_MAP_TYPE_RINGBUF creation
  Attempt find_vma;  // libbpf_probe_bpf_helper(raw_tracepoint, BPF_FUNC_find_vma)
  Attempt rdonly_cast;         // bpf_rdonly_cast as a function in the kernel's BTF
  bool syscall_compat_forced = false;  // IOTWIN_BPF_COMPAT=1 in our environment
  Attempt cachestat;
  Attempt pmu;       // perf_event_open of hardware instructions

  std::map<std::string, uint32_t> lba_sizes;  // block device -> queue/logical_block_size
};

// One row of `iotwin check`.
struct FeatureStatus {
  Feature id{};
  std::string_view key;        // stable JSON key, e.g. "tp_btf"
  std::string_view title;      // for humans
  std::string_view needed_by;  // the iotwin layers that use it
  std::string_view fallback;   // what iotwin uses when it is missing
  bool supported = false;
  std::string detail;  // what was found, or why not
  int error = 0;       // errno of the failed probe, 0 when none
};

// One capture layer (as in the trace header's "layers"): can it run, and how.
struct LayerPlan {
  std::string name;  // "syscall", "memory", "block", "nvme", "sched"
  bool available = false;
  std::string method;  // how each program will be attached, e.g. "raw_syscalls:sys_enter (tp_btf)"
  std::string reason;  // why not, when !available; known gaps otherwise
};

struct ProbeOptions {
  // Mount tracefs at /sys/kernel/tracing when it is not mounted (`iotwin check --mount-tracefs`).
  // Without it, mountability is tried in a private mount namespace and the host is left as it is.
  bool mount_tracefs = false;
};

class Features {
 public:
  // The probe of this process, made on first use and cached (thread-safe).
  static const Features& Get();
  // A fresh probe of the running system. Fails only when the system cannot be read at all
  // (no /proc); missing features are verdicts, not errors.
  static Result<Features> Probe(const ProbeOptions& options = {});
  // The verdicts for given facts; pure.
  static Features Evaluate(KernelFacts facts);

  bool Has(Feature f) const { return status_[static_cast<int>(f)].supported; }
  const FeatureStatus& status(Feature f) const { return status_[static_cast<int>(f)]; }
  const std::vector<FeatureStatus>& all() const { return status_; }
  const std::vector<LayerPlan>& layers() const { return layers_; }
  const KernelFacts& facts() const { return facts_; }

  // True when the tracepoint exists (in BTF or tracefs).
  bool HasTracepoint(std::string_view group, std::string_view event) const;
  // Where the tracepoint's btf_trace_ typedef is: "vmlinux", a module ("nvme_core"), or "" when
  // it has none.
  std::string TracepointBtfSource(std::string_view event) const;
  // Whether the capture can attach to group:event by method `m` here: tp_btf needs the event in
  // BTF and the tp_btf probe to have worked, raw_tp the event (in BTF or tracefs) and the raw_tp
  // probe, a classic tracepoint the event listed in a mounted tracefs.
  bool CanAttach(AttachMethod m, std::string_view group, std::string_view event) const;
  // How the capture attaches `row`'s program: `forced` when the row offers it and CanAttach,
  // else the first of the row's methods that CanAttach; kNone when none can. The one fallback
  // order: the loaders plan with it (attach_plan.h PlanObject) and `iotwin check` prints it.
  AttachMethod ChooseAttach(const ProgramAttach& row,
                            AttachMethod forced = AttachMethod::kNone) const;

  nlohmann::json ToJson() const;

 private:
  void EvaluateFeatures();
  void PlanLayers();

  KernelFacts facts_;
  std::vector<FeatureStatus> status_;
  std::vector<LayerPlan> layers_;
};

// ---- the syscall object (bpf/syscall.bpf.c is built twice) ----

// Which build of the syscall BPF object `record` loads: the fast one reads struct file / inode
// fields as plain loads through the bpf_rdonly_cast kfunc (6.2+); the compat one
// (syscall_compat.bpf.o) reads each with bpf_probe_read_kernel and loads on older kernels
// (Debian 12's 6.1). libbpf 1.1 rejects a whole object whose kfunc is missing, hence two.
struct SyscallObjectChoice {
  bool compat = false;
  std::string reason;  // for the trace header (layers.syscall) and `iotwin check`
};
// Pure: the choice given whether the kernel's BTF has the kfunc and whether the compat object is
// forced (IOTWIN_BPF_COMPAT=1).
SyscallObjectChoice ChooseSyscallObject(bool kfunc_cast_in_btf, bool compat_forced);
// IOTWIN_BPF_COMPAT=1 (any value but "" and "0") in the environment.
bool SyscallCompatForced();
// Looks bpf_rdonly_cast up in the kernel's BTF (null: loads /sys/kernel/btf/vmlinux itself).
Attempt ProbeKfuncRdonlyCast(const struct btf* vmlinux = nullptr);

}  // namespace iotwin::capture
