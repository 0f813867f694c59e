#include "capture/features.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>

#include "base/fd.h"
#include "base/page_cache.h"

namespace iotwin::capture {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTracefsDir = "/sys/kernel/tracing";
constexpr const char* kVmlinuxBtf = "/sys/kernel/btf/vmlinux";
constexpr const char* kPmuDir = "/sys/bus/event_source/devices";
// Modules whose own BTF holds tracepoints iotwin uses (NVMe tracepoints live in nvme-core; ext4's
// in ext4 when it is a module).
constexpr const char* kTracepointModules[] = {"nvme_core", "nvme", "ext4"};
// A function every kernel has, for the fentry probe (first one found in BTF is used).
constexpr const char* kFentryTargets[] = {"vfs_read", "ksys_read"};

// Linux capability bits (linux/capability.h; CAP_PERFMON and CAP_BPF are newer than some headers).
constexpr int kCapSysAdmin = 21;
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;

// Static facts about each feature: its key, what needs it and what iotwin does without it.
struct FeatureInfo {
  Feature id;
  std::string_view key;
  std::string_view title;
  std::string_view needed_by;
  std::string_view fallback;
};

constexpr FeatureInfo kFeatureInfo[kFeatureCount] = {
    {Feature::kPrivileges, "privileges", "root or CAP_BPF+CAP_PERFMON", "all capture layers",
     "nothing can be recorded; import, report, replay and compare still work"},
    {Feature::kBtf, "btf", "kernel BTF (/sys/kernel/btf/vmlinux)", "all capture layers (CO-RE)",
     "none: every capture program is a CO-RE object that needs the kernel's BTF"},
    {Feature::kTracefsMounted, "tracefs_mounted", "tracefs mounted",
     "syscall (classic tracepoint fallback)",
     "tp_btf/raw_tp, which need no tracefs; or mount it: iotwin check --mount-tracefs"},
    {Feature::kTracefsMountable, "tracefs_mountable", "tracefs mountable",
     "iotwin check --mount-tracefs", "tp_btf/raw_tp only"},
    {Feature::kRawSyscallsTp, "raw_syscalls", "raw_syscalls:sys_enter/sys_exit", "syscall",
     "none: the syscall layer attaches to raw_syscalls only"},
    {Feature::kSyscallTps, "syscall_tracepoints", "per-syscall tracepoints (syscalls:*)",
     "nothing (listed for reference; the capture uses raw_syscalls)", "not needed"},
    {Feature::kTpBtf, "tp_btf", "BTF-typed raw tracepoints (tp_btf)", "all capture layers",
     "" /* from the attach table: TpBtfFallback() */},
    {Feature::kRawTp, "raw_tp", "raw tracepoints (raw_tp)", "syscall (when tp_btf cannot)",
     "classic raw_syscalls and sched tracepoints for the syscall programs (need tracefs "
     "mounted)"},
    {Feature::kFentry, "fentry", "fentry/fexit trampolines", "memory (page-cache hits), io_uring",
     "tracepoints only: io_uring offsets from the SQE, no page-cache hit events"},
    {Feature::kKprobes, "kprobes", "kprobes", "memory (page-cache hits)",
     "tracepoints only: page-cache hits are not seen"},
    {Feature::kUprobes, "uprobes", "uprobes", "intent markers (uprobe source)",
     "intent markers through the marker path only"},
    {Feature::kRingbuf, "ringbuf", "BPF ring buffer", "all capture layers",
     "nothing: capture needs a BPF ring buffer"},
    {Feature::kFindVma, "bpf_find_vma", "bpf_find_vma helper", "memory (file of a page fault)",
     "" /* from the attach table: HelperFallback() */},
    {Feature::kKfuncRdonlyCast, "kfunc_rdonly_cast", "bpf_rdonly_cast kfunc (6.2+)",
     "syscall (file identity per call, as plain loads)",
     "the compat syscall object: file fields read with bpf_probe_read_kernel"},
    {Feature::kBlockTps, "block_tracepoints", "block tracepoints", "block",
     "no block layer in the trace"},
    {Feature::kNvmeTps, "nvme_tracepoints", "NVMe tracepoints", "nvme",
     "block layer only (no NVMe command phases)"},
    {Feature::kIoUringTps, "io_uring_tracepoints", "io_uring tracepoints", "syscall (io_uring)",
     "io_uring operations unseen (only io_uring_enter calls)"},
    {Feature::kFilemapTps, "filemap_tracepoints", "page-cache tracepoints (filemap)",
     "memory (page cache)", "no page-cache add/evict records"},
    {Feature::kWritebackTps, "writeback_tracepoints", "writeback tracepoints",
     "memory (dirty/writeback)", "no dirty/writeback records"},
    {Feature::kPageFaultTp, "page_fault_tracepoint", "exceptions:page_fault_user",
     "memory (mmap I/O)", "filemap:mm_filemap_fault where present, else mmap records only"},
    {Feature::kSchedTps, "sched_tracepoints", "scheduler tracepoints", "sched, process tree",
     "process tree from /proc at start; no off-CPU time"},
    {Feature::kIrqTps, "irq_tracepoints", "IRQ/softirq tracepoints", "sched (completion context)",
     "completion context not recorded"},
    {Feature::kCachestat, "cachestat", "cachestat(2) syscall", "memory (cache snapshot at start)",
     "mincore() over a mapping of each file"},
    {Feature::kHardwarePmu, "hardware_pmu", "hardware PMU (instructions)", "report (CPU cost)",
     "time-based figures only"},
    {Feature::kNvmeLbaSizes, "nvme_lba_sizes", "NVMe LBA sizes (sysfs)", "nvme",
     "each block device's logical_block_size"},
};

constexpr bool FeatureInfoInEnumOrder() {
  for (int i = 0; i < kFeatureCount; i++) {
    if (static_cast<int>(kFeatureInfo[i].id) != i) return false;
  }
  return true;
}
static_assert(FeatureInfoInEnumOrder(), "kFeatureInfo must list every Feature in enum order");

// What the capture does without tp_btf, from the attach table: which objects' programs have a
// raw_tp (or classic tracepoint) twin and which are tp_btf only.
const std::string& TpBtfFallback() {
  static const std::string kText = [] {
    std::vector<std::string> raw, tracepoint, only;
    auto add = [](std::vector<std::string>& list, std::string_view object) {
      if (std::find(list.begin(), list.end(), object) == list.end()) list.emplace_back(object);
    };
    for (const ProgramAttach& row : AttachTable()) {
      if (row.Offers(AttachMethod::kRawTp)) add(raw, row.object);
      if (row.Offers(AttachMethod::kTracepoint)) add(tracepoint, row.object);
      if (!row.Offers(AttachMethod::kRawTp) && !row.Offers(AttachMethod::kTracepoint)) {
        add(only, row.object);
      }
    }
    auto join = [](const std::vector<std::string>& items) {
      std::string out;
      for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
      return out;
    };
    return fmt::format("raw_tp for the {} programs (a classic tracepoint for the {} ones); the {} "
                       "programs are tp_btf only",
                       join(raw), join(tracepoint), join(only));
  }();
  return kText;
}

// The memory parts of `bits` (MemoryPartBit), "faults, subpage, state" style.
std::string MemoryPartNames(uint8_t bits) {
  std::string out;
  for (auto [bit, name] : {std::pair{kMemoryFaults, "faults"}, std::pair{kMemoryCache, "cache"},
                           std::pair{kMemoryWriteback, "writeback"},
                           std::pair{kMemorySubpage, "subpage"}, std::pair{kMemoryState, "state"}}) {
    if (bits & bit) out += fmt::format("{}{}", out.empty() ? "" : ", ", name);
  }
  return out;
}

// What the capture does without a helper some programs call, from the attach table: the verifier
// refuses those programs and libbpf their whole object. A memory program loads only while a part
// it serves is on; without the memory programs the page-cache state is read in user space.
std::string HelperFallback(std::string_view helper) {
  std::vector<std::string> what;
  for (const ProgramAttach* row : RowsNeedingHelper(helper)) {
    std::string item = fmt::format("the {} object's {} program calls it: it", row->object,
                                   row->tracepoint);
    if (row->object == "memory") {
      item += fmt::format(" and the other memory programs do not load while any of {} is on (then the "
                          "page-cache state is read with cachestat or mincore in user space)",
                          MemoryPartNames(row->memory_parts));
    } else {
      item += fmt::format(" and the other {} programs do not load", row->object);
    }
    what.push_back(std::move(item));
  }
  std::string out = "none: ";
  for (const auto& item : what) out += (out.size() > 6 ? "; " : "") + item;
  return what.empty() ? "none needed: no capture program calls it" : out;
}

const std::string& FindVmaFallback() {
  static const std::string kText = HelperFallback("bpf_find_vma");
  return kText;
}

// Tracepoint groups probed for existence. "a|b" means either name (renamed across kernels).
struct TracepointGroupSpec {
  Feature feature;
  std::string_view group;
  std::vector<std::string_view> required;
  std::vector<std::string_view> optional;
};

const std::vector<TracepointGroupSpec>& TracepointGroups() {
  static const std::vector<TracepointGroupSpec> kGroups = {
      {Feature::kRawSyscallsTp, "raw_syscalls", {"sys_enter", "sys_exit"}, {}},
      {Feature::kBlockTps,
       "block",
       {"block_rq_issue", "block_rq_complete"},
       {"block_rq_insert", "block_bio_queue", "block_bio_complete", "block_rq_requeue",
        "block_io_start", "block_io_done"}},
      {Feature::kNvmeTps, "nvme", {"nvme_setup_cmd", "nvme_complete_rq"}, {"nvme_sq"}},
      {Feature::kIoUringTps,
       "io_uring",
       {"io_uring_submit_req|io_uring_submit_sqe", "io_uring_complete"},
       {"io_uring_queue_async_work", "io_uring_req_failed"}},
      {Feature::kFilemapTps,
       "filemap",
       {"mm_filemap_add_to_page_cache", "mm_filemap_delete_from_page_cache"},
       {"mm_filemap_fault", "mm_filemap_get_pages", "mm_filemap_map_pages"}},
      {Feature::kWritebackTps,
       "writeback",
       {"writeback_dirty_folio|writeback_dirty_page", "writeback_single_inode"},
       {"writeback_start", "writeback_written", "balance_dirty_pages"}},
      {Feature::kPageFaultTp, "exceptions", {"page_fault_user"}, {"page_fault_kernel"}},
      {Feature::kSchedTps,
       "sched",
       {"sched_switch", "sched_process_fork", "sched_process_exec", "sched_process_exit"},
       {"sched_wakeup"}},
      {Feature::kIrqTps,
       "irq",
       {"irq_handler_entry", "irq_handler_exit", "softirq_entry", "softirq_exit"},
       {}},
  };
  return kGroups;
}

std::vector<std::string_view> SplitAlternatives(std::string_view names) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t bar = names.find('|', start);
    out.push_back(names.substr(start, bar == std::string_view::npos ? bar : bar - start));
    if (bar == std::string_view::npos) return out;
    start = bar + 1;
  }
}

std::string Join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

// "CONFIG_X=y (from /proc/config.gz)", "CONFIG_X is not set (...)", or "" without a config.
std::string ConfigNote(const KernelFacts& f, const std::string& name) {
  if (f.config_source.empty()) return "";
  auto it = f.config.find(name);
  if (it == f.config.end() || it->second == "n") {
    return fmt::format("{} is not set ({})", name, f.config_source);
  }
  return fmt::format("{}={} ({})", name, it->second, f.config_source);
}

bool ConfigEnabled(const KernelFacts& f, const std::string& name) {
  auto it = f.config.find(name);
  return it != f.config.end() && (it->second == "y" || it->second == "m");
}

std::string AttemptFailure(const Attempt& a) {
  if (a.error == 0) return a.detail;
  return a.detail.empty() ? ErrnoText(a.error) : a.detail;
}

bool HasCap(const KernelFacts& f, int cap) {
  return f.cap_eff && ((*f.cap_eff >> cap) & 1u);
}

}  // namespace

std::string ErrnoText(int err) {
  const char* name = strerrorname_np(err);
  return fmt::format("{} ({})", name ? name : std::to_string(err), std::strerror(err));
}

// ---- pure helpers ----

std::map<std::string, std::string> ParseKernelConfig(std::string_view text) {
  std::map<std::string, std::string> config;
  constexpr std::string_view kNotSetPrefix = "# CONFIG_";
  constexpr std::string_view kNotSetSuffix = " is not set";
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.starts_with(kNotSetPrefix) && line.ends_with(kNotSetSuffix)) {
      std::string_view name = line.substr(2, line.size() - 2 - kNotSetSuffix.size());
      if (name.find(' ') == std::string_view::npos) config[std::string(name)] = "n";
      continue;
    }
    if (!line.starts_with("CONFIG_")) continue;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == std::string_view::npos - 1) continue;
    std::string_view value = line.substr(eq + 1);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    config[std::string(line.substr(0, eq))] = std::string(value);
  }
  return config;
}

std::optional<std::string> FindTracefsMount(std::string_view proc_mounts) {
  std::optional<std::string> tracefs, debugfs;
  std::istringstream in{std::string(proc_mounts)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string source, target, type;
    if (!(fields >> source >> target >> type)) continue;
    if (type == "tracefs") {
      if (!tracefs || target == kTracefsDir) tracefs = target;
    } else if (type == "debugfs" && !debugfs) {
      debugfs = target + "/tracing";
    }
  }
  return tracefs ? tracefs : debugfs;
}

std::optional<uint64_t> ParseCapEff(std::string_view proc_status) {
  constexpr std::string_view kKey = "CapEff:";
  size_t pos = 0;
  while (pos < proc_status.size()) {
    size_t eol = proc_status.find('\n', pos);
    std::string_view line = proc_status.substr(pos, eol == std::string_view::npos ? eol : eol - pos);
    pos = eol == std::string_view::npos ? proc_status.size() : eol + 1;
    if (!line.starts_with(kKey)) continue;
    line.remove_prefix(kKey.size());
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    // The kernel prints exactly 16 hex digits; accept no more than that (64 bits).
    if (line.empty() || line.size() > 16) return std::nullopt;
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), value, 16);
    if (ec != std::errc() || end != line.data() + line.size()) return std::nullopt;
    return value;
  }
  return std::nullopt;
}

// ---- evaluation (pure) ----

namespace {

bool InBtf(const KernelFacts& f, std::string_view event) {
  return f.btf_tracepoints.count(event) > 0;
}

bool InTracefs(const KernelFacts& f, std::string_view group, std::string_view event) {
  return f.tracefs_events.count(fmt::format("{}/{}", group, event)) > 0;
}

}  // namespace

bool Features::HasTracepoint(std::string_view group, std::string_view event) const {
  return InBtf(facts_, event) || InTracefs(facts_, group, event);
}

std::string Features::TracepointBtfSource(std::string_view event) const {
  if (!InBtf(facts_, event)) return "";
  auto it = facts_.btf_tracepoint_modules.find(event);
  return it == facts_.btf_tracepoint_modules.end() ? "vmlinux" : it->second;
}

AttachMethod Features::BestAttach(std::string_view group, std::string_view event) const {
  // tp_btf and raw_tp attach by tracepoint name; the btf_trace_ typedef proves the name is a real
  // tracepoint (ftrace-only events such as syscalls:sys_enter_openat have none).
  bool in_btf = InBtf(facts_, event);
  if (in_btf && facts_.tp_btf.ok) return AttachMethod::kTpBtf;
  if (in_btf && facts_.raw_tp.ok) return AttachMethod::kRawTp;
  if (InTracefs(facts_, group, event) && (Has(Feature::kTracefsMounted) || Has(Feature::kTracefsMountable))) {
    return AttachMethod::kTracepoint;
  }
  return AttachMethod::kNone;
}

bool Features::CanAttach(AttachMethod m, std::string_view group, std::string_view event) const {
  switch (m) {
    case AttachMethod::kTpBtf:
      return InBtf(facts_, event) && facts_.tp_btf.ok;
    case AttachMethod::kRawTp:
      // Attached by name: the event must exist, typed or not.
      return (InBtf(facts_, event) || InTracefs(facts_, group, event)) && facts_.raw_tp.ok;
    case AttachMethod::kTracepoint:
      // libbpf looks the event id up in tracefs; the capture does not mount it.
      return InTracefs(facts_, group, event) && Has(Feature::kTracefsMounted);
    case AttachMethod::kNone:
      break;
  }
  return false;
}

AttachMethod Features::ChooseAttach(const ProgramAttach& row, AttachMethod forced) const {
  if (row.Offers(forced) && CanAttach(forced, row.group(), row.event())) return forced;
  for (AttachMethod m : row.methods) {
    if (m != AttachMethod::kNone && CanAttach(m, row.group(), row.event())) return m;
  }
  return AttachMethod::kNone;
}

namespace {

// The verdict on one tracepoint group: present when every required tracepoint (or one of its
// alternatives) is in BTF or in tracefs.
void EvaluateTracepointGroup(const TracepointGroupSpec& spec, const KernelFacts& f,
                             FeatureStatus& st) {
  std::vector<std::string> found, missing, optional_missing;
  bool all_in_btf = true, all_in_tracefs = true;
  auto lookup = [&](std::string_view names) -> std::optional<std::string> {
    for (std::string_view name : SplitAlternatives(names)) {
      bool in_btf = InBtf(f, name);
      bool in_tracefs = InTracefs(f, spec.group, name);
      if (!in_btf && !in_tracefs) continue;
      all_in_btf &= in_btf;
      all_in_tracefs &= in_tracefs;
      return std::string(name);
    }
    return std::nullopt;
  };
  for (std::string_view names : spec.required) {
    if (auto name = lookup(names)) {
      found.push_back(*name);
    } else {
      missing.push_back(std::string(names));
    }
  }
  for (std::string_view name : spec.optional) {
    if (!lookup(name)) optional_missing.push_back(std::string(name));
  }
  st.supported = missing.empty();

  std::vector<std::string> sources;
  if (f.btf_parse.ok) sources.push_back("vmlinux/module BTF");
  if (f.tracefs_listed) sources.push_back("tracefs");
  std::string searched = sources.empty() ? "no BTF and no tracefs to look in"
                                         : "looked in " + Join(sources, " and ");
  if (st.supported) {
    std::string where = all_in_btf && all_in_tracefs ? "BTF and tracefs"
                        : all_in_btf                 ? "BTF"
                                                     : "tracefs";
    st.detail = fmt::format("{}:{} in {}", spec.group, Join(found, ", "), where);
    if (!optional_missing.empty()) {
      st.detail += fmt::format("; absent (optional): {}", Join(optional_missing, ", "));
    }
    return;
  }
  if (spec.feature == Feature::kNvmeTps && f.modules.count("nvme_core") == 0 &&
      f.modules.count("nvme") == 0) {
    st.detail = "no NVMe driver loaded (no nvme_core in /sys/module)";
    std::string config = ConfigNote(f, "CONFIG_BLK_DEV_NVME");
    if (!config.empty()) st.detail += "; " + config;
    return;
  }
  if (spec.feature == Feature::kPageFaultTp && f.arch != "x86_64" && f.arch != "i686") {
    st.detail = fmt::format("x86-only tracepoint; this is {} ({})", f.arch, searched);
    return;
  }
  st.detail = fmt::format("missing {}:{} ({})", spec.group, Join(missing, ", "), searched);
}

void EvaluateSyscallTracepoints(const KernelFacts& f, FeatureStatus& st) {
  std::string config = ConfigNote(f, "CONFIG_FTRACE_SYSCALLS");
  std::string suffix = config.empty() ? "" : "; " + config;
  if (!f.tracefs_listed) {
    // They are ftrace events without btf_trace_ typedefs: only tracefs lists and attaches them.
    st.detail = f.tracefs_mount.empty()
                    ? "tracefs unavailable, so they can be neither listed nor attached" + suffix
                    : fmt::format("cannot list {}/events (not root?)", f.tracefs_mount) + suffix;
    return;
  }
  size_t enters = 0;
  for (const auto& ev : f.tracefs_events) {
    if (ev.starts_with("syscalls/sys_enter_")) enters++;
  }
  const char* kNeeded[] = {"sys_enter_openat", "sys_exit_openat", "sys_enter_read",
                           "sys_exit_read"};
  std::vector<std::string> missing;
  for (const char* name : kNeeded) {
    if (!f.tracefs_events.count(fmt::format("syscalls/{}", name))) missing.push_back(name);
  }
  st.supported = enters > 0 && missing.empty();
  if (st.supported) {
    st.detail = fmt::format("{} sys_enter_* events in tracefs{}", enters,
                            f.tracefs_mount.empty() ? " (seen in a private mount)" : "");
  } else if (enters == 0) {
    st.detail = "no events/syscalls in tracefs" + suffix;
  } else {
    st.detail = fmt::format("{} sys_enter_* events, but missing {}", enters, Join(missing, ", "));
  }
}

void EvaluateProbe(const Attempt& a, FeatureStatus& st) {
  st.supported = a.ok;
  st.error = a.ok ? 0 : a.error;
  st.detail = a.ok ? a.detail : AttemptFailure(a);
}

}  // namespace

namespace {

FeatureStatus& At(std::vector<FeatureStatus>& status, Feature id) {
  return status[static_cast<int>(id)];
}

// Capabilities decide (root in a user namespace may lack them).
void EvaluatePrivileges(const KernelFacts& f, FeatureStatus& st) {
  std::vector<std::string> have, lack;
  for (auto [cap, name] : {std::pair{kCapBpf, "CAP_BPF"}, std::pair{kCapPerfmon, "CAP_PERFMON"},
                           std::pair{kCapSysAdmin, "CAP_SYS_ADMIN"}}) {
    (HasCap(f, cap) ? have : lack).push_back(name);
  }
  if (f.cap_eff) {
    st.supported = (HasCap(f, kCapBpf) && HasCap(f, kCapPerfmon)) || HasCap(f, kCapSysAdmin);
    st.detail = fmt::format("euid {}; effective: {}", f.euid, have.empty() ? "none" : Join(have, " "));
    if (!st.supported) st.detail += "; run as root (needs CAP_BPF+CAP_PERFMON or CAP_SYS_ADMIN)";
  } else {
    st.supported = f.euid == 0;
    st.detail = fmt::format("euid {}; capabilities unknown (no CapEff in /proc/self/status)",
                            f.euid);
  }
}

void EvaluateBtf(const KernelFacts& f, FeatureStatus& st) {
  st.supported = f.btf_parse.ok;
  if (f.btf_parse.ok) {
    st.detail = fmt::format("{} parsed: {} tracepoints have btf_trace_ typedefs",
                            f.btf_present ? kVmlinuxBtf : "kernel BTF", f.btf_tracepoints.size());
    if (!f.btf_modules.empty()) st.detail += "; module BTF read: " + Join(f.btf_modules, ", ");
  } else if (!f.btf_present) {
    st.detail = fmt::format("no {}", kVmlinuxBtf);
    std::string config = ConfigNote(f, "CONFIG_DEBUG_INFO_BTF");
    if (!config.empty()) st.detail += "; " + config;
  } else {
    st.error = f.btf_parse.error;
    st.detail = "present but libbpf cannot parse it: " + AttemptFailure(f.btf_parse);
  }
}

void EvaluateTracefs(const KernelFacts& f, FeatureStatus& mounted, FeatureStatus& mountable) {
  mounted.supported = !f.tracefs_mount.empty();
  if (mounted.supported) {
    mounted.detail = fmt::format("at {}{}", f.tracefs_mount,
                                 f.tracefs_mount_try.ok ? " (mounted now by --mount-tracefs)" : "");
  } else {
    mounted.detail = fmt::format("not mounted (nothing at {} in /proc/mounts)", kTracefsDir);
  }
  if (!f.tracefs_mount.empty() && !f.tracefs_mount_try.ok) {
    mountable.supported = true;
    mountable.detail = "already mounted";
  } else {
    EvaluateProbe(f.tracefs_mount_try, mountable);
  }
}

// kprobes and uprobes: a PMU, a tracefs events file, or both config options say yes.
void EvaluateProbeEvents(const KernelFacts& f, bool is_kprobe, FeatureStatus& st) {
  const char* kind = is_kprobe ? "KPROBE" : "UPROBE";
  bool pmu = is_kprobe ? f.kprobe_pmu : f.uprobe_pmu;
  bool events = is_kprobe ? f.kprobe_events_file : f.uprobe_events_file;
  std::string lower = is_kprobe ? "kprobe" : "uprobe";
  std::string config = fmt::format("CONFIG_{}S", kind);
  std::string config_events = fmt::format("CONFIG_{}_EVENTS", kind);
  st.supported = pmu || events || (ConfigEnabled(f, config) && ConfigEnabled(f, config_events));
  std::vector<std::string> evidence;
  std::string note = ConfigNote(f, config);
  if (!note.empty()) evidence.push_back(note);
  evidence.push_back(pmu ? fmt::format("{} PMU present", lower)
                         : fmt::format("no {} PMU in {}", lower, kPmuDir));
  if (f.tracefs_listed) {
    evidence.push_back(events ? fmt::format("{}_events in tracefs", lower)
                              : fmt::format("no {}_events in tracefs", lower));
  }
  st.detail = Join(evidence, "; ");
}

void EvaluateLbaSizes(const KernelFacts& f, FeatureStatus& st) {
  std::vector<std::string> nvme, other;
  for (const auto& [dev, size] : f.lba_sizes) {
    if (dev.starts_with("nvme")) {
      nvme.push_back(fmt::format("{} {} B", dev, size));
    } else if (!dev.starts_with("loop") && !dev.starts_with("ram")) {
      other.push_back(fmt::format("{} {} B", dev, size));
    }
  }
  st.supported = !nvme.empty();
  st.detail = st.supported ? Join(nvme, ", ")
                           : "no NVMe namespaces in /sys/block" +
                                 (other.empty() ? std::string() : "; others: " + Join(other, ", "));
}

}  // namespace

Features Features::Evaluate(KernelFacts facts) {
  Features out;
  out.facts_ = std::move(facts);
  out.status_.resize(kFeatureCount);
  for (const FeatureInfo& info : kFeatureInfo) {
    FeatureStatus& st = At(out.status_, info.id);
    st.id = info.id;
    st.key = info.key;
    st.title = info.title;
    st.needed_by = info.needed_by;
    st.fallback = info.fallback;
    if (info.id == Feature::kTpBtf) st.fallback = TpBtfFallback();
    if (info.id == Feature::kFindVma) st.fallback = FindVmaFallback();
  }
  out.EvaluateFeatures();
  out.PlanLayers();
  return out;
}

void Features::EvaluateFeatures() {
  const KernelFacts& f = facts_;
  EvaluatePrivileges(f, At(status_, Feature::kPrivileges));
  EvaluateBtf(f, At(status_, Feature::kBtf));
  EvaluateTracefs(f, At(status_, Feature::kTracefsMounted),
                  At(status_, Feature::kTracefsMountable));
  for (const auto& spec : TracepointGroups()) {
    EvaluateTracepointGroup(spec, f, At(status_, spec.feature));
  }
  EvaluateSyscallTracepoints(f, At(status_, Feature::kSyscallTps));
  EvaluateProbe(f.tp_btf, At(status_, Feature::kTpBtf));
  EvaluateProbe(f.raw_tp, At(status_, Feature::kRawTp));
  EvaluateProbe(f.fentry, At(status_, Feature::kFentry));
  EvaluateProbeEvents(f, true, At(status_, Feature::kKprobes));
  EvaluateProbeEvents(f, false, At(status_, Feature::kUprobes));
  EvaluateProbe(f.ringbuf, At(status_, Feature::kRingbuf));
  EvaluateProbe(f.find_vma, At(status_, Feature::kFindVma));
  EvaluateProbe(f.rdonly_cast, At(status_, Feature::kKfuncRdonlyCast));
  EvaluateProbe(f.cachestat, At(status_, Feature::kCachestat));
  EvaluateProbe(f.pmu, At(status_, Feature::kHardwarePmu));
  EvaluateLbaSizes(f, At(status_, Feature::kNvmeLbaSizes));
}

// Layers: what the capture can attach here, and how, program by program from the attach table.
void Features::PlanLayers() {
  for (std::string_view layer : AttachLayers()) {
    LayerPlan plan;
    plan.name = std::string(layer);
    std::vector<std::string> attached, missing, optional_missing;
    for (const ProgramAttach& row : AttachTable()) {
      if (row.layer != layer) continue;
      AttachMethod m = ChooseAttach(row);
      std::string entry(row.tracepoint);
      if (m != AttachMethod::kNone) {
        std::string item = fmt::format("{} ({})", entry, AttachMethodName(m));
        if (std::find(attached.begin(), attached.end(), item) == attached.end()) {
          attached.push_back(std::move(item));
        }
        continue;
      }
      // Say which methods were possible, so a missing fallback is not mistaken for a gap.
      bool single = row.methods[1] == AttachMethod::kNone;
      entry += fmt::format(" ({}{})", row.MethodList(), single ? " only" : "");
      if (std::find(missing.begin(), missing.end(), entry) == missing.end() &&
          std::find(optional_missing.begin(), optional_missing.end(), entry) ==
              optional_missing.end()) {
        (row.required ? missing : optional_missing).push_back(std::move(entry));
      }
    }
    std::vector<std::string> gaps;
    if (!Has(Feature::kFindVma)) {
      // The verifier refuses the program, and libbpf its whole object with it.
      for (const ProgramAttach* row : RowsNeedingHelper("bpf_find_vma")) {
        if (row->layer != layer) continue;
        gaps.push_back(fmt::format("the {} program calls bpf_find_vma, which this kernel lacks: "
                                   "the {} BPF programs do not load",
                                   row->tracepoint, row->object));
      }
    }
    if (!Has(Feature::kPrivileges)) gaps.push_back("needs root (CAP_BPF+CAP_PERFMON)");
    if (!Has(Feature::kRingbuf)) gaps.push_back("no BPF ring buffer");
    if (!missing.empty()) {
      if (layer == "nvme" && !Has(Feature::kNvmeTps)) {
        gaps.push_back(status(Feature::kNvmeTps).detail);
      } else {
        gaps.push_back("cannot attach " + Join(missing, ", "));
      }
    }
    plan.available = gaps.empty();
    if (plan.available) {
      if (!optional_missing.empty()) gaps.push_back("without " + Join(optional_missing, ", "));
      if (layer == "syscall") {
        gaps.push_back(
            ChooseSyscallObject(Has(Feature::kKfuncRdonlyCast), facts_.syscall_compat_forced)
                .reason);
      }
      plan.method = Join(attached, ", ");
    }
    plan.reason = Join(gaps, "; ");
    layers_.push_back(std::move(plan));
  }
}

nlohmann::json Features::ToJson() const {
  nlohmann::json features = nlohmann::json::object();
  for (const FeatureStatus& st : status_) {
    nlohmann::json entry = {{"supported", st.supported},   {"title", st.title},
                            {"detail", st.detail},         {"needed_by", st.needed_by},
                            {"fallback", st.fallback}};
    if (st.error != 0) {
      entry["errno"] = st.error;
      const char* name = strerrorname_np(st.error);
      if (name) entry["errno_name"] = name;
    }
    features[std::string(st.key)] = std::move(entry);
  }
  nlohmann::json layers = nlohmann::json::object();
  for (const LayerPlan& plan : layers_) {
    layers[plan.name] = {{"available", plan.available}, {"method", plan.method},
                         {"reason", plan.reason}};
  }
  nlohmann::json lba = nlohmann::json::object();
  for (const auto& [dev, size] : facts_.lba_sizes) lba[dev] = size;
  return {
      {"kernel", {{"release", facts_.release}, {"arch", facts_.arch}}},
      {"euid", facts_.euid},
      {"tracefs", facts_.tracefs_mount.empty() ? nlohmann::json(nullptr)
                                               : nlohmann::json(facts_.tracefs_mount)},
      {"kernel_config", facts_.config_source.empty() ? nlohmann::json(nullptr)
                                                     : nlohmann::json(facts_.config_source)},
      {"features", std::move(features)},
      {"layers", std::move(layers)},
      {"lba_sizes", std::move(lba)},
  };
}

// ---- probing (touches the system) ----

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

void ProbeBtfAndPrograms(KernelFacts& f) {
  std::error_code ec;
  f.btf_present = fs::exists(kVmlinuxBtf, ec);
  BtfPtr vmlinux(btf__load_vmlinux_btf());
  if (!vmlinux) {
    int err = errno;
    f.btf_parse = Failed(err, "btf__load_vmlinux_btf: " + ErrnoText(err));
  } else {
    f.btf_parse = Attempt{true, 0, "parsed"};
    CollectBtfTracepoints(vmlinux.get(), 1, nullptr, f);
    for (const char* module : kTracepointModules) {
      if (!fs::exists(fmt::format("/sys/kernel/btf/{}", module), ec)) continue;
      BtfPtr mod(btf__load_module_btf(module, vmlinux.get()));
      if (!mod) continue;
      CollectBtfTracepoints(mod.get(), btf__type_cnt(vmlinux.get()), module, f);
      f.btf_modules.push_back(module);
    }
  }

  // tp_btf: a tracing program typed by the btf_trace_sys_enter typedef.
  int sys_enter_id = vmlinux ? btf__find_by_name_kind(vmlinux.get(), "btf_trace_sys_enter",
                                                      BTF_KIND_TYPEDEF)
                             : -1;
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
  } else {
    f.fentry = Failed(ENOENT, "no target function found in BTF");
    for (const char* target : kFentryTargets) {
      int id = btf__find_by_name_kind(vmlinux.get(), target, BTF_KIND_FUNC);
      if (id < 0) continue;
      f.fentry = LoadAndAttach(BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY, static_cast<uint32_t>(id),
                               nullptr, fmt::format("fentry/{}", target));
      break;
    }
  }

  {
    long page = sysconf(_SC_PAGESIZE);
    int map = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "iotwin_probe", 0, 0,
                             static_cast<uint32_t>(page > 0 ? page : 4096), nullptr);
    if (map < 0) {
      int err = errno;
      f.ringbuf = Failed(err, "BPF_MAP_TYPE_RINGBUF creation failed: " + ErrnoText(err));
    } else {
      UniqueFd map_fd(map);
      f.ringbuf = Attempt{true, 0, "created a BPF_MAP_TYPE_RINGBUF map"};
    }
  }

  // libbpf's helper probe cannot tell "no privileges" from "helper accepted", so it only
  // counts once a program of the same family has loaded.
  if (!f.raw_tp.ok) {
    f.find_vma = Failed(0, "not tried: raw_tp programs do not load here");
  } else {
    int rc = libbpf_probe_bpf_helper(BPF_PROG_TYPE_RAW_TRACEPOINT, BPF_FUNC_find_vma, nullptr);
    if (rc == 1) {
      f.find_vma = Attempt{true, 0, "the verifier accepts bpf_find_vma in tracing programs"};
    } else if (rc == 0) {
      f.find_vma = Failed(EINVAL, "the verifier rejects bpf_find_vma (helper unknown)");
    } else {
      f.find_vma = Failed(-rc, "libbpf_probe_bpf_helper: " + ErrnoText(-rc));
    }
  }

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

SyscallObjectChoice ChooseSyscallObject(bool kfunc_cast_in_btf, bool compat_forced) {
  if (compat_forced) {
    return {true,
            "compat syscall object (forced by IOTWIN_BPF_COMPAT): file fields read with "
            "bpf_probe_read_kernel"};
  }
  if (!kfunc_cast_in_btf) {
    return {true,
            "compat syscall object: no bpf_rdonly_cast kfunc (kernel before 6.2), file fields "
            "read with bpf_probe_read_kernel"};
  }
  return {false, "fast syscall object: file fields loaded through the bpf_rdonly_cast kfunc"};
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
