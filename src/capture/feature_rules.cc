// The pure half of Features: verdicts, attach choices and layer plans from KernelFacts, with no
// system access (unit-tested over hand-made facts).
#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "capture/feature_table.h"
#include "capture/features.h"

namespace iotwin::capture {
namespace {

// Linux capability bits (linux/capability.h; CAP_PERFMON and CAP_BPF are newer than some headers).
constexpr int kCapSysAdmin = 21;
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;

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
  for (int i = 0; i < kFeatureCount; i++) {
    FeatureInfo info = FeatureInfoOf(static_cast<Feature>(i));
    FeatureStatus& st = At(out.status_, info.id);
    st.id = info.id;
    st.key = info.key;
    st.title = info.title;
    st.needed_by = info.needed_by;
    st.fallback = info.fallback;
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

}  // namespace iotwin::capture
