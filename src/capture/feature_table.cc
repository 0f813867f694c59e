#include "capture/feature_table.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

namespace iotwin::capture {
namespace {

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
    {Feature::kRawTp, "raw_tp", "raw tracepoints (raw_tp)",
     "" /* from the attach table: RawTpUsers() */, "" /* from the attach table: RawTpFallback() */},
    // No capture program attaches by fentry or kprobe (the attach table's methods are tracepoint
    // kinds): listed for reference, with no fallback to take.
    {Feature::kFentry, "fentry", "fentry/fexit trampolines",
     "nothing (no capture program attaches by fentry; listed for reference)",
     "nothing to replace (the capture attaches to tracepoints only)"},
    {Feature::kKprobes, "kprobes", "kprobes",
     "nothing (no capture program is a kprobe; listed for reference)",
     "nothing to replace (the capture attaches to tracepoints only)"},
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
     "memory (mmap I/O)",
     "the memory layer's faults and subpage parts are off: I/O through mappings shows as the "
     "mmap calls only"},
    {Feature::kSchedTps, "sched_tracepoints", "scheduler tracepoints", "sched, process tree",
     "none: the syscall layer needs sched_process_fork/exec/exit to follow processes, the sched "
     "layer sched_switch"},
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

std::string JoinNames(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// The objects whose programs offer `m`, and those of them whose row has a method after it.
struct MethodUsers {
  std::vector<std::string> offering, with_next, without_next;
};
MethodUsers UsersOf(AttachMethod m) {
  MethodUsers users;
  auto add = [](std::vector<std::string>& list, std::string_view object) {
    if (std::find(list.begin(), list.end(), object) == list.end()) list.emplace_back(object);
  };
  for (const ProgramAttach& row : AttachTable()) {
    if (!row.Offers(m)) continue;
    add(users.offering, row.object);
    auto it = std::find(row.methods.begin(), row.methods.end(), m);
    bool next = it + 1 != row.methods.end() && *(it + 1) != AttachMethod::kNone;
    add(next ? users.with_next : users.without_next, row.object);
  }
  return users;
}

// Who uses raw_tp, and what the loaders do without it, from the attach table: the objects whose
// programs have a classic tracepoint variant, and those left with nothing past raw_tp.
const std::string& RawTpUsers() {
  static const std::string kText =
      fmt::format("the {} programs (where tp_btf cannot)",
                  JoinNames(UsersOf(AttachMethod::kRawTp).offering));
  return kText;
}
const std::string& RawTpFallback() {
  static const std::string kText = [] {
    MethodUsers users = UsersOf(AttachMethod::kRawTp);
    return fmt::format("a classic tracepoint for the {} programs (needs tracefs mounted); the {} "
                       "programs have no method past raw_tp",
                       JoinNames(users.with_next), JoinNames(users.without_next));
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

}  // namespace

FeatureInfo FeatureInfoOf(Feature id) {
  FeatureInfo info = kFeatureInfo[static_cast<int>(id)];
  if (id == Feature::kTpBtf) info.fallback = TpBtfFallback();
  if (id == Feature::kRawTp) {
    info.needed_by = RawTpUsers();
    info.fallback = RawTpFallback();
  }
  if (id == Feature::kFindVma) info.fallback = FindVmaFallback();
  return info;
}

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

}  // namespace iotwin::capture
