// Feature probing: the text parsers and the decision rules (Features::Evaluate over hand-made
// facts), with no kernel involved.
#include "capture/features.h"

#include <cerrno>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace iotwin::capture {
namespace {

TEST(ParseKernelConfig, ReadsValuesAndNotSetLines) {
  auto config = ParseKernelConfig(
      "#\n# Automatically generated file; DO NOT EDIT.\n#\n"
      "CONFIG_BPF_SYSCALL=y\n"
      "CONFIG_BLK_DEV_NVME=m\n"
      "# CONFIG_KPROBES is not set\n"
      "CONFIG_LOCALVERSION=\"-fc\"\n"
      "CONFIG_HZ=250\r\n"
      "garbage line\n"
      "# a comment that is not a config line\n"
      "CONFIG_NO_VALUE\n"
      "CONFIG_LAST=y");
  EXPECT_EQ(config["CONFIG_BPF_SYSCALL"], "y");
  EXPECT_EQ(config["CONFIG_BLK_DEV_NVME"], "m");
  EXPECT_EQ(config["CONFIG_KPROBES"], "n");
  EXPECT_EQ(config["CONFIG_LOCALVERSION"], "-fc");
  EXPECT_EQ(config["CONFIG_HZ"], "250");
  EXPECT_EQ(config["CONFIG_LAST"], "y");
  EXPECT_EQ(config.count("CONFIG_NO_VALUE"), 0u);
  EXPECT_EQ(config.size(), 6u);
}

TEST(ParseKernelConfig, EmptyText) { EXPECT_TRUE(ParseKernelConfig("").empty()); }

TEST(FindTracefsMount, PrefersTracefsAtTheStandardPlace) {
  EXPECT_EQ(FindTracefsMount("sysfs /sys sysfs rw 0 0\n"
                             "tracefs /mnt/t tracefs rw 0 0\n"
                             "tracefs /sys/kernel/tracing tracefs rw,nosuid 0 0\n"),
            "/sys/kernel/tracing");
  EXPECT_EQ(FindTracefsMount("tracefs /mnt/t tracefs rw 0 0\n"), "/mnt/t");
}

TEST(FindTracefsMount, FallsBackToDebugfsTracing) {
  EXPECT_EQ(FindTracefsMount("debugfs /sys/kernel/debug debugfs rw 0 0\n"),
            "/sys/kernel/debug/tracing");
  // A tracefs mount wins over debugfs whatever the order.
  EXPECT_EQ(FindTracefsMount("debugfs /sys/kernel/debug debugfs rw 0 0\n"
                             "nodev /sys/kernel/tracing tracefs rw 0 0\n"),
            "/sys/kernel/tracing");
}

TEST(FindTracefsMount, NoneMounted) {
  EXPECT_FALSE(FindTracefsMount("proc /proc proc rw 0 0\nsysfs /sys sysfs rw 0 0\n"));
  EXPECT_FALSE(FindTracefsMount(""));
  EXPECT_FALSE(FindTracefsMount("short line\n"));
}

TEST(ParseCapEff, ReadsTheEffectiveSet) {
  EXPECT_EQ(ParseCapEff("Name:\tiotwin\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\n"
                        "CapEff:\t000001fffeffffff\nCapBnd:\t000001ffffffffff\n"),
            0x000001fffeffffffull);
  EXPECT_EQ(ParseCapEff("CapEff: 0000000000000000"), 0u);
}

TEST(ParseCapEff, RejectsMissingOrMalformed) {
  EXPECT_FALSE(ParseCapEff("CapPrm:\t000001ffffffffff\n"));
  EXPECT_FALSE(ParseCapEff("CapEff:\t00000zz\n"));
  EXPECT_FALSE(ParseCapEff("CapEff:\t\n"));
  EXPECT_FALSE(ParseCapEff("CapEff:\t00000000000000000001\n"));  // more than 64 bits
}

TEST(ErrnoText, NamesTheErrno) {
  EXPECT_EQ(ErrnoText(EPERM), "EPERM (Operation not permitted)");
  EXPECT_EQ(ErrnoText(ENOENT).substr(0, 7), "ENOENT ");
}

// Facts shaped like our VM: BTF with the usual tracepoints, tp_btf/raw_tp/ringbuf work, fentry
// gets EPERM, no kprobes, no NVMe driver, no PMU, tracefs not mounted but mountable.
KernelFacts VmLikeFacts() {
  KernelFacts f;
  f.release = "6.18.0";
  f.arch = "x86_64";
  f.euid = 0;
  f.cap_eff = 0x000001fffeffffffull;
  f.btf_present = true;
  f.btf_parse = {true, 0, "parsed"};
  for (const char* tp :
       {"sys_enter", "sys_exit", "block_rq_issue", "block_rq_complete", "block_rq_insert",
        "io_uring_submit_req", "io_uring_complete", "mm_filemap_add_to_page_cache",
        "mm_filemap_delete_from_page_cache", "writeback_dirty_folio", "writeback_single_inode",
        "page_fault_user", "sched_switch", "sched_process_fork", "sched_process_exec",
        "sched_process_exit", "irq_handler_entry", "irq_handler_exit", "softirq_entry",
        "softirq_exit"}) {
    f.btf_tracepoints.insert(tp);
  }
  f.tracefs_mount_try = {true, 0, "mounting works"};
  f.tracefs_listed = true;
  f.tracefs_events = {"syscalls/sys_enter_openat", "syscalls/sys_exit_openat",
                      "syscalls/sys_enter_read", "syscalls/sys_exit_read", "block/block_rq_issue"};
  f.uprobe_pmu = true;
  f.config_source = "/proc/config.gz";
  f.config = {{"CONFIG_KPROBES", "n"}, {"CONFIG_UPROBES", "y"}, {"CONFIG_UPROBE_EVENTS", "y"}};
  f.modules = {"loop", "virtio_blk"};
  f.tp_btf = {true, 0, "loaded and attached"};
  f.raw_tp = {true, 0, "loaded and attached"};
  f.fentry = {false, EPERM, "load as fentry/vfs_read failed: EPERM (Operation not permitted)"};
  f.ringbuf = {true, 0, "created"};
  f.find_vma = {true, 0, "accepted"};
  f.rdonly_cast = {true, 0, "in the kernel's BTF (FUNC id 1234)"};
  f.cachestat = {true, 0, "works"};
  f.pmu = {false, ENOENT, "unavailable"};
  f.lba_sizes = {{"vda", 512}, {"loop0", 512}};
  return f;
}

const LayerPlan& Layer(const Features& features, const std::string& name) {
  for (const auto& plan : features.layers()) {
    if (plan.name == name) return plan;
  }
  static const LayerPlan kMissing;
  ADD_FAILURE() << "no layer " << name;
  return kMissing;
}

TEST(FeaturesEvaluate, VmLikeMachine) {
  Features features = Features::Evaluate(VmLikeFacts());
  EXPECT_TRUE(features.Has(Feature::kPrivileges));
  EXPECT_TRUE(features.Has(Feature::kBtf));
  EXPECT_FALSE(features.Has(Feature::kTracefsMounted));
  EXPECT_TRUE(features.Has(Feature::kTracefsMountable));
  EXPECT_TRUE(features.Has(Feature::kTpBtf));
  EXPECT_TRUE(features.Has(Feature::kRawSyscallsTp));
  EXPECT_TRUE(features.Has(Feature::kSyscallTps));
  EXPECT_TRUE(features.Has(Feature::kBlockTps));
  EXPECT_TRUE(features.Has(Feature::kPageFaultTp));
  EXPECT_TRUE(features.Has(Feature::kUprobes));

  EXPECT_FALSE(features.Has(Feature::kFentry));
  EXPECT_EQ(features.status(Feature::kFentry).error, EPERM);
  EXPECT_NE(features.status(Feature::kFentry).detail.find("EPERM"), std::string::npos);
  EXPECT_FALSE(features.Has(Feature::kKprobes));
  EXPECT_NE(features.status(Feature::kKprobes).detail.find("CONFIG_KPROBES is not set"),
            std::string::npos);
  EXPECT_FALSE(features.Has(Feature::kNvmeTps));
  EXPECT_NE(features.status(Feature::kNvmeTps).detail.find("no NVMe driver loaded"),
            std::string::npos);
  EXPECT_FALSE(features.Has(Feature::kHardwarePmu));
  EXPECT_EQ(features.status(Feature::kHardwarePmu).error, ENOENT);
  EXPECT_FALSE(features.Has(Feature::kNvmeLbaSizes));
  // Loop devices are not worth listing; real disks are.
  EXPECT_NE(features.status(Feature::kNvmeLbaSizes).detail.find("vda 512 B"), std::string::npos);
  EXPECT_EQ(features.status(Feature::kNvmeLbaSizes).detail.find("loop0"), std::string::npos);

  EXPECT_EQ(features.ChooseAttach(*FindAttach("syscall", "iot_sys_enter")), AttachMethod::kTpBtf);
  EXPECT_EQ(features.ChooseAttach(*FindAttach("nvme", "iot_nvme_setup")), AttachMethod::kNone);

  const LayerPlan& syscall = Layer(features, "syscall");
  EXPECT_TRUE(syscall.available);
  EXPECT_NE(syscall.method.find("raw_syscalls:sys_enter (tp_btf)"), std::string::npos);
  const LayerPlan& nvme = Layer(features, "nvme");
  EXPECT_FALSE(nvme.available);
  EXPECT_NE(nvme.reason.find("no NVMe driver loaded"), std::string::npos);
  EXPECT_TRUE(Layer(features, "memory").available);
  EXPECT_TRUE(Layer(features, "block").available);
  EXPECT_TRUE(Layer(features, "sched").available);
}

// The fallback order is the attach table's, less what the kernel does not allow: the block
// programs fall back to raw_tp and have nothing past it, whatever tracefs lists (a per-tracepoint
// answer once offered them a classic tracepoint they have no variant for).
TEST(FeaturesEvaluate, FallsBackToRawTpThenOnlyToTheTablesClassicVariants) {
  KernelFacts f = VmLikeFacts();
  f.tracefs_mount = "/sys/kernel/tracing";
  f.tracefs_events.insert({"block/block_rq_issue", "raw_syscalls/sys_enter"});
  const ProgramAttach* issue = FindAttach("block", "iot_blk_rq_issue");
  const ProgramAttach* enter = FindAttach("syscall", "iot_sys_enter");
  ASSERT_TRUE(issue && enter);
  f.tp_btf = {false, EINVAL, "load failed"};
  EXPECT_EQ(Features::Evaluate(f).ChooseAttach(*issue), AttachMethod::kRawTp);

  f.raw_tp = {false, EINVAL, "load failed"};
  Features classic = Features::Evaluate(f);
  EXPECT_EQ(classic.ChooseAttach(*issue), AttachMethod::kNone);
  EXPECT_EQ(classic.ChooseAttach(*enter), AttachMethod::kTracepoint);
  const LayerPlan& block = Layer(classic, "block");
  EXPECT_FALSE(block.available);
  EXPECT_NE(block.reason.find("block:block_rq_issue (tp_btf, raw_tp)"), std::string::npos)
      << block.reason;
}

// The capture attaches to raw_syscalls only: per-syscall tracepoints are no fallback it has, so
// check does not offer them (it once printed "syscalls:sys_enter_* (tracepoint)").
TEST(FeaturesEvaluate, SyscallLayerOffersOnlyWhatTheCaptureCanAttach) {
  KernelFacts f = VmLikeFacts();
  f.btf_tracepoints.erase("sys_enter");
  f.btf_tracepoints.erase("sys_exit");
  Features features = Features::Evaluate(f);
  EXPECT_FALSE(features.Has(Feature::kRawSyscallsTp));
  EXPECT_TRUE(features.Has(Feature::kSyscallTps));
  const LayerPlan& syscall = Layer(features, "syscall");
  EXPECT_FALSE(syscall.available);
  EXPECT_EQ(syscall.method.find("syscalls:sys_enter_*"), std::string::npos) << syscall.method;
  EXPECT_NE(syscall.reason.find("raw_syscalls:sys_enter (tp_btf, raw_tp, tracepoint)"),
            std::string::npos)
      << syscall.reason;
}

// Without tp_btf the programs with raw_tp twins (all but NVMe's) attach as raw_tp; the layers
// whose programs are tp_btf only say so instead of offering a fallback.
TEST(FeaturesEvaluate, WithoutTpBtfTheProgramsWithRawTpTwinsUseThem) {
  KernelFacts f = VmLikeFacts();
  f.tp_btf = {false, EINVAL, "load failed"};
  Features features = Features::Evaluate(f);
  const LayerPlan& syscall = Layer(features, "syscall");
  EXPECT_TRUE(syscall.available) << syscall.reason;
  EXPECT_NE(syscall.method.find("raw_syscalls:sys_enter (raw_tp)"), std::string::npos)
      << syscall.method;
  EXPECT_NE(syscall.method.find("sched:sched_process_fork (raw_tp)"), std::string::npos)
      << syscall.method;
  EXPECT_EQ(syscall.method.find("tp_btf"), std::string::npos) << syscall.method;
  EXPECT_NE(syscall.method.find("io_uring:io_uring_submit_req (raw_tp)"), std::string::npos)
      << syscall.method;
  EXPECT_TRUE(Layer(features, "sched").available);
  EXPECT_TRUE(Layer(features, "block").available);
  EXPECT_TRUE(Layer(features, "memory").available);
  // The NVMe programs have no raw_tp twin: with the driver there, the layer says so.
  f.btf_tracepoints.insert({"nvme_setup_cmd", "nvme_complete_rq"});
  f.modules.insert("nvme_core");
  Features with_nvme = Features::Evaluate(f);
  const LayerPlan& nvme = Layer(with_nvme, "nvme");
  EXPECT_FALSE(nvme.available);
  EXPECT_NE(nvme.reason.find("nvme:nvme_setup_cmd (tp_btf only)"), std::string::npos)
      << nvme.reason;
}

// The classic tracepoint needs a mounted tracefs (the capture does not mount it), and only the
// syscall programs have that variant.
TEST(FeaturesEvaluate, ClassicTracepointOnlyForTheSyscallProgramsWithTracefsMounted) {
  KernelFacts f = VmLikeFacts();
  f.tracefs_events.insert("raw_syscalls/sys_enter");
  const ProgramAttach* enter = FindAttach("syscall", "iot_sys_enter");
  const ProgramAttach* fork = FindAttach("proc", "iot_proc_fork");
  ASSERT_NE(enter, nullptr);
  ASSERT_NE(fork, nullptr);
  f.tp_btf = {false, EINVAL, "load failed"};
  f.raw_tp = {false, EINVAL, "load failed"};
  EXPECT_EQ(Features::Evaluate(f).ChooseAttach(*enter), AttachMethod::kNone);  // not mounted
  f.tracefs_mount = "/sys/kernel/tracing";
  Features mounted = Features::Evaluate(f);
  EXPECT_EQ(mounted.ChooseAttach(*enter), AttachMethod::kTracepoint);
  EXPECT_EQ(mounted.ChooseAttach(*fork), AttachMethod::kNone);
  EXPECT_FALSE(Layer(mounted, "syscall").available);
}

// IOTWIN_ATTACH's method is used where the row offers it and the kernel allows it.
TEST(FeaturesEvaluate, ForcedMethodOnlyWhereTheRowOffersIt) {
  KernelFacts f = VmLikeFacts();
  f.tracefs_mount = "/sys/kernel/tracing";
  f.tracefs_events.insert("raw_syscalls/sys_enter");
  Features features = Features::Evaluate(f);
  const ProgramAttach* enter = FindAttach("syscall", "iot_sys_enter");
  const ProgramAttach* fork = FindAttach("proc", "iot_proc_fork");
  const ProgramAttach* nvme_setup = FindAttach("nvme", "iot_nvme_setup");
  ASSERT_TRUE(enter && fork && nvme_setup);
  EXPECT_EQ(features.ChooseAttach(*enter), AttachMethod::kTpBtf);
  EXPECT_EQ(features.ChooseAttach(*enter, AttachMethod::kRawTp), AttachMethod::kRawTp);
  EXPECT_EQ(features.ChooseAttach(*enter, AttachMethod::kTracepoint), AttachMethod::kTracepoint);
  EXPECT_EQ(features.ChooseAttach(*fork, AttachMethod::kTracepoint), AttachMethod::kTpBtf);
  f.btf_tracepoints.insert("nvme_setup_cmd");
  EXPECT_EQ(Features::Evaluate(f).ChooseAttach(*nvme_setup, AttachMethod::kRawTp),
            AttachMethod::kTpBtf);
}

// The loaders learn from the one probe where a tracepoint's BTF is (the NVMe layer names it).
TEST(FeaturesEvaluate, TracepointBtfSourceNamesTheModule) {
  KernelFacts f = VmLikeFacts();
  f.btf_tracepoints.insert("nvme_setup_cmd");
  f.btf_tracepoint_modules["nvme_setup_cmd"] = "nvme_core";
  Features features = Features::Evaluate(f);
  EXPECT_EQ(features.TracepointBtfSource("nvme_setup_cmd"), "nvme_core");
  EXPECT_EQ(features.TracepointBtfSource("sys_enter"), "vmlinux");
  EXPECT_EQ(features.TracepointBtfSource("nvme_sq"), "");
}

// check's "instead" for a missing tp_btf is the attach table's verdict, not a text of its own.
TEST(FeaturesEvaluate, TpBtfFallbackComesFromTheAttachTable) {
  KernelFacts f = VmLikeFacts();
  f.tp_btf = {false, EINVAL, "load failed"};
  std::string fallback(Features::Evaluate(f).status(Feature::kTpBtf).fallback);
  EXPECT_EQ(fallback,
            "raw_tp for the syscall, proc, async, memory, block, sched programs (a classic "
            "tracepoint for the syscall ones); the nvme programs are tp_btf only");
}

TEST(AttachTable, RowsAreWellFormedAndGroupedByLayer) {
  std::vector<std::string_view> layers = AttachLayers();
  EXPECT_EQ(layers, (std::vector<std::string_view>{"syscall", "memory", "block", "nvme", "sched"}));
  for (const ProgramAttach& row : AttachTable()) {
    EXPECT_NE(row.tracepoint.find(':'), std::string_view::npos) << row.program;
    EXPECT_FALSE(row.group().empty()) << row.program;
    EXPECT_FALSE(row.event().empty()) << row.program;
    EXPECT_EQ(row.methods[0], AttachMethod::kTpBtf) << row.program;
    EXPECT_EQ(FindAttach(row.object, row.program), &row) << row.program;
  }
  EXPECT_EQ(ProgramVariant("iot_sys_enter", AttachMethod::kTpBtf), "iot_sys_enter");
  EXPECT_EQ(ProgramVariant("iot_sys_enter", AttachMethod::kRawTp), "iot_sys_enter_raw");
  EXPECT_EQ(ProgramVariant("iot_sys_enter", AttachMethod::kTracepoint), "iot_sys_enter_tp");
  EXPECT_EQ(ParseAttachMethod("raw_tp"), AttachMethod::kRawTp);
  EXPECT_EQ(ParseAttachMethod("kprobe"), AttachMethod::kNone);
}

// The memory loader picks its programs from the attach table's memory rows (MemoryPartBit):
// no list of its own.
TEST(AttachTable, MemoryProgramsComeFromTheTable) {
  std::vector<std::string_view> memory_rows;
  for (const ProgramAttach& row : AttachTable()) {
    if (row.object == "memory") {
      memory_rows.push_back(row.program);
      EXPECT_NE(row.memory_parts, 0) << row.program << " serves no part: it never loads";
    } else {
      EXPECT_EQ(row.memory_parts, 0) << row.program;
    }
  }
  EXPECT_EQ(memory_rows.size(), 16u);
  constexpr uint8_t kAll =
      kMemoryFaults | kMemoryCache | kMemoryWriteback | kMemorySubpage | kMemoryState;
  EXPECT_EQ(MemoryProgramsFor(kAll), memory_rows);
  EXPECT_TRUE(MemoryProgramsFor(0).empty());
  EXPECT_EQ(MemoryProgramsFor(kMemoryFaults),
            (std::vector<std::string_view>{"iot_mem_pc_add", "iot_mem_fault", "iot_mem_map_pages"}));
  EXPECT_EQ(MemoryProgramsFor(kMemoryState),
            (std::vector<std::string_view>{"iot_mem_pc_add", "iot_mem_pc_delete", "iot_mem_fault",
                                           "iot_mem_get_pages", "iot_mem_ra_unbounded",
                                           "iot_mem_ra_order", "iot_mem_dirty_folio"}));
  EXPECT_EQ(MemoryProgramsFor(kMemorySubpage),
            (std::vector<std::string_view>{"iot_mem_fault", "iot_mem_dirty_folio"}));
  EXPECT_EQ(MemoryProgramsFor(kMemoryWriteback).size(), 9u);
}

// Without bpf_find_vma the verifier refuses the page-fault program and libbpf the whole memory
// object with it: check says so (from the table's helper column) instead of offering a fallback
// the loader does not have.
TEST(FeaturesEvaluate, MissingFindVmaTakesTheMemoryObjectDown) {
  std::vector<const ProgramAttach*> rows = RowsNeedingHelper("bpf_find_vma");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]->program, "iot_mem_fault");

  KernelFacts f = VmLikeFacts();
  EXPECT_TRUE(Layer(Features::Evaluate(f), "memory").available);
  f.find_vma = {false, EINVAL, "the verifier rejects bpf_find_vma (helper unknown)"};
  Features features = Features::Evaluate(f);
  const LayerPlan& memory = Layer(features, "memory");
  EXPECT_FALSE(memory.available);
  EXPECT_EQ(memory.reason,
            "the exceptions:page_fault_user program calls bpf_find_vma, which this kernel lacks: "
            "the memory BPF programs do not load");
  std::string fallback(features.status(Feature::kFindVma).fallback);
  EXPECT_EQ(fallback,
            "none: the memory object's exceptions:page_fault_user program calls it: it and the "
            "other memory programs do not load while any of faults, subpage, state is on (then "
            "the page-cache state is read with cachestat or mincore in user space)");
  EXPECT_EQ(fallback.find("mmap records"), std::string::npos);
  for (const char* other : {"syscall", "block", "sched"}) {
    EXPECT_TRUE(Layer(features, other).available) << other;
  }
}

TEST(FeaturesEvaluate, RenamedTracepointsCount) {
  KernelFacts f = VmLikeFacts();
  f.btf_tracepoints.erase("io_uring_submit_req");
  f.btf_tracepoints.insert("io_uring_submit_sqe");  // the name before 2022
  Features features = Features::Evaluate(f);
  EXPECT_TRUE(features.Has(Feature::kIoUringTps));
  EXPECT_NE(features.status(Feature::kIoUringTps).detail.find("io_uring_submit_sqe"),
            std::string::npos);

  f.btf_tracepoints.erase("io_uring_submit_sqe");
  Features without = Features::Evaluate(f);
  EXPECT_FALSE(without.Has(Feature::kIoUringTps));
  EXPECT_NE(without.status(Feature::kIoUringTps).detail.find("io_uring_submit_req|"),
            std::string::npos);
}

TEST(FeaturesEvaluate, UnprivilegedProcessCannotCapture) {
  KernelFacts f = VmLikeFacts();
  f.euid = 1000;
  f.cap_eff = 0;
  Features features = Features::Evaluate(f);
  EXPECT_FALSE(features.Has(Feature::kPrivileges));
  EXPECT_NE(features.status(Feature::kPrivileges).detail.find("run as root"), std::string::npos);
  for (const auto& plan : features.layers()) {
    EXPECT_FALSE(plan.available) << plan.name;
    EXPECT_NE(plan.reason.find("needs root"), std::string::npos) << plan.name;
  }
  // CAP_BPF + CAP_PERFMON alone suffice.
  f.cap_eff = (1ull << 38) | (1ull << 39);
  EXPECT_TRUE(Features::Evaluate(f).Has(Feature::kPrivileges));
}

TEST(FeaturesEvaluate, NoBtfAndNoTracefs) {
  KernelFacts f = VmLikeFacts();
  f.btf_present = false;
  f.btf_parse = {false, ENOENT, "btf__load_vmlinux_btf failed"};
  f.btf_tracepoints.clear();
  f.tracefs_listed = false;
  f.tracefs_events.clear();
  f.tp_btf = {false, 0, "not tried: no parseable kernel BTF"};
  f.config["CONFIG_DEBUG_INFO_BTF"] = "n";
  Features features = Features::Evaluate(f);
  EXPECT_FALSE(features.Has(Feature::kBtf));
  EXPECT_NE(features.status(Feature::kBtf).detail.find("CONFIG_DEBUG_INFO_BTF is not set"),
            std::string::npos);
  EXPECT_FALSE(features.Has(Feature::kBlockTps));
  EXPECT_NE(features.status(Feature::kBlockTps).detail.find("no BTF and no tracefs"),
            std::string::npos);
  EXPECT_FALSE(features.Has(Feature::kSyscallTps));
  EXPECT_FALSE(features.Has(Feature::kTpBtf));
  EXPECT_EQ(features.status(Feature::kTpBtf).error, 0);  // not tried is not an errno
}

TEST(FeaturesEvaluate, PageFaultTracepointIsX86Only) {
  KernelFacts f = VmLikeFacts();
  f.arch = "aarch64";
  f.btf_tracepoints.erase("page_fault_user");
  Features features = Features::Evaluate(f);
  EXPECT_FALSE(features.Has(Feature::kPageFaultTp));
  EXPECT_NE(features.status(Feature::kPageFaultTp).detail.find("x86-only"), std::string::npos);
  // The memory layer still works from the filemap events.
  EXPECT_TRUE(Layer(features, "memory").available);
  EXPECT_NE(Layer(features, "memory").reason.find("page_fault_user"), std::string::npos);
}

TEST(FeaturesEvaluate, NvmePresent) {
  KernelFacts f = VmLikeFacts();
  f.modules.insert("nvme_core");
  f.btf_tracepoints.insert("nvme_setup_cmd");
  f.btf_tracepoints.insert("nvme_complete_rq");
  f.lba_sizes["nvme0n1"] = 4096;
  Features features = Features::Evaluate(f);
  EXPECT_TRUE(features.Has(Feature::kNvmeTps));
  EXPECT_TRUE(features.Has(Feature::kNvmeLbaSizes));
  EXPECT_EQ(features.status(Feature::kNvmeLbaSizes).detail, "nvme0n1 4096 B");
  EXPECT_TRUE(Layer(features, "nvme").available);
}

TEST(ChooseSyscallObject, FastWithTheKfuncCompatWithoutOrWhenForced) {
  SyscallObjectChoice fast = ChooseSyscallObject(/*kfunc_cast_in_btf=*/true, /*forced=*/false);
  EXPECT_FALSE(fast.compat);
  EXPECT_NE(fast.reason.find("fast syscall object"), std::string::npos) << fast.reason;
  SyscallObjectChoice old = ChooseSyscallObject(false, false);
  EXPECT_TRUE(old.compat);
  EXPECT_NE(old.reason.find("no bpf_rdonly_cast"), std::string::npos) << old.reason;
  SyscallObjectChoice forced = ChooseSyscallObject(true, true);
  EXPECT_TRUE(forced.compat);
  EXPECT_NE(forced.reason.find("IOTWIN_BPF_COMPAT"), std::string::npos) << forced.reason;
}

TEST(FeaturesEvaluate, SyscallLayerSaysWhichObjectRecordLoads) {
  KernelFacts f = VmLikeFacts();
  Features fast = Features::Evaluate(f);
  EXPECT_TRUE(fast.Has(Feature::kKfuncRdonlyCast));
  EXPECT_NE(Layer(fast, "syscall").reason.find("fast syscall object"), std::string::npos)
      << Layer(fast, "syscall").reason;

  // Debian 12's 6.1: no kfunc, the layer still runs, from the compat object.
  f.release = "6.1.0-28-amd64";
  f.rdonly_cast = {false, ENOENT, "no bpf_rdonly_cast FUNC in the kernel's BTF (kernel before 6.2)"};
  Features old = Features::Evaluate(f);
  EXPECT_FALSE(old.Has(Feature::kKfuncRdonlyCast));
  EXPECT_EQ(old.status(Feature::kKfuncRdonlyCast).error, ENOENT);
  EXPECT_TRUE(Layer(old, "syscall").available);
  EXPECT_NE(Layer(old, "syscall").reason.find("compat syscall object"), std::string::npos)
      << Layer(old, "syscall").reason;

  f = VmLikeFacts();
  f.syscall_compat_forced = true;
  Features forced = Features::Evaluate(f);
  EXPECT_TRUE(forced.Has(Feature::kKfuncRdonlyCast));
  EXPECT_NE(Layer(forced, "syscall").reason.find("forced by IOTWIN_BPF_COMPAT"), std::string::npos)
      << Layer(forced, "syscall").reason;
}

TEST(FeaturesJson, HasEveryFeatureAndLayer) {
  Features features = Features::Evaluate(VmLikeFacts());
  nlohmann::json j = features.ToJson();
  ASSERT_TRUE(j.contains("features"));
  EXPECT_EQ(j["features"].size(), static_cast<size_t>(kFeatureCount));
  for (const auto& st : features.all()) {
    const auto& entry = j["features"][std::string(st.key)];
    EXPECT_EQ(entry["supported"], st.supported) << st.key;
    EXPECT_EQ(entry["detail"], st.detail) << st.key;
  }
  EXPECT_EQ(j["features"]["fentry"]["errno_name"], "EPERM");
  EXPECT_FALSE(j["features"]["tp_btf"].contains("errno"));
  EXPECT_EQ(j["layers"].size(), 5u);
  EXPECT_EQ(j["lba_sizes"]["vda"], 512);
  EXPECT_TRUE(j["tracefs"].is_null());
}

}  // namespace
}  // namespace iotwin::capture
