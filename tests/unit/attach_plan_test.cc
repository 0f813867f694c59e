// The one plan and attach step of the loaders (attach_plan.h): which programs an object loads on
// a given kernel (the attach table's rows, Features::ChooseAttach's order, the loader's own
// filter), how a loaded program finds its row again from its ELF section, and `iotwin check`'s
// fallback texts for the attach methods, which name only what the loaders do.
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <set>
#include <string>

#include "capture/attach_plan.h"
#include "capture/attach_table.h"
#include "capture/features.h"

namespace iotwin::capture {
namespace {

namespace fs = std::filesystem;

// A privileged process on a kernel whose BTF has every tracepoint of the attach table but
// `missing`, where tp_btf and raw_tp programs load.
KernelFacts FactsWithout(std::initializer_list<std::string_view> missing) {
  KernelFacts f;
  f.release = "6.18.0-test";
  f.arch = "x86_64";
  f.euid = 0;
  f.cap_eff = ~0ull;
  f.btf_present = true;
  f.btf_parse = {true, 0, "parsed"};
  for (const ProgramAttach& row : AttachTable()) f.btf_tracepoints.emplace(row.event());
  for (std::string_view event : missing) f.btf_tracepoints.erase(std::string(event));
  f.tp_btf = {true, 0, "loaded and attached"};
  f.raw_tp = {true, 0, "loaded and attached"};
  f.ringbuf = {true, 0, "created"};
  f.find_vma = {true, 0, "accepted"};
  return f;
}

const LayerPlan& Layer(const Features& features, std::string_view name) {
  for (const LayerPlan& plan : features.layers()) {
    if (plan.name == name) return plan;
  }
  static const LayerPlan kNone;
  ADD_FAILURE() << "no layer " << name;
  return kNone;
}

// An optional program whose tracepoint the kernel lacks stays unloaded, as check says ("without
// ..."); a required one is tried by its first method (its load error then explains). The block
// loader once kept its own list of such programs, the sched loader none (its irq programs then
// failed the whole object).
TEST(AttachPlan, OptionalProgramsTheKernelLacksStayOut) {
  Features features = Features::Evaluate(
      FactsWithout({"block_rq_merge", "irq_handler_entry", "block_rq_issue"}));
  AttachPlan block = PlanObjectFor(features, "block", AttachMethod::kNone);
  EXPECT_EQ(block.at("iot_blk_rq_merge"), AttachMethod::kNone);
  EXPECT_EQ(block.at("iot_blk_rq_issue"), AttachMethod::kTpBtf);  // required: tried anyway
  EXPECT_EQ(block.at("iot_blk_rq_complete"), AttachMethod::kTpBtf);
  AttachPlan sched = PlanObjectFor(features, "sched", AttachMethod::kNone);
  EXPECT_EQ(sched.at("iot_irq_entry"), AttachMethod::kNone);
  EXPECT_EQ(sched.at("iot_sched_switch"), AttachMethod::kTpBtf);
  EXPECT_EQ(DescribePlan(sched), "tp_btf");
  EXPECT_NE(Layer(features, "sched").reason.find("without irq:irq_handler_entry"),
            std::string::npos);
}

// The loader's filter (a memory part that is off, a job another object does) leaves rows out;
// a demotion moves only the programs that load.
TEST(AttachPlan, FilteredRowsStayOutThroughDemotion) {
  Features features = Features::Evaluate(FactsWithout({}));
  AttachPlan plan = PlanObjectFor(features, "block", AttachMethod::kNone,
                                  [](const ProgramAttach& row) {
                                    return row.program != "iot_blk_mark_dirty";
                                  });
  EXPECT_EQ(plan.at("iot_blk_mark_dirty"), AttachMethod::kNone);
  ASSERT_TRUE(DemotePlan("block", &plan));
  EXPECT_EQ(plan.at("iot_blk_mark_dirty"), AttachMethod::kNone);
  EXPECT_EQ(plan.at("iot_blk_rq_issue"), AttachMethod::kRawTp);
  EXPECT_FALSE(DemotePlan("block", &plan));  // no block program has a method past raw_tp
}

// IOTWIN_ATTACH's method where a row offers it, the table's order elsewhere.
TEST(AttachPlan, ForcedMethodWhereOffered) {
  KernelFacts f = FactsWithout({});
  f.tracefs_mount = "/sys/kernel/tracing";
  f.tracefs_listed = true;
  f.tracefs_events = {"raw_syscalls/sys_enter", "raw_syscalls/sys_exit",
                      "sched/sched_process_exit"};
  Features features = Features::Evaluate(f);
  AttachPlan syscall = PlanObjectFor(features, "syscall", AttachMethod::kTracepoint);
  EXPECT_EQ(syscall.at("iot_sys_enter"), AttachMethod::kTracepoint);
  EXPECT_EQ(DescribePlan(syscall), "tracepoint");
  AttachPlan proc = PlanObjectFor(features, "proc", AttachMethod::kTracepoint);
  EXPECT_EQ(proc.at("iot_proc_fork"), AttachMethod::kTpBtf);
}

TEST(AttachTable, RowOfSectionFindsTheRowAndMethod) {
  AttachMethod m = AttachMethod::kNone;
  const ProgramAttach* row = RowOfSection("syscall", "tp/raw_syscalls/sys_enter", &m);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->program, "iot_sys_enter");
  EXPECT_EQ(m, AttachMethod::kTracepoint);
  row = RowOfSection("proc", "raw_tp/sched_process_exit", &m);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->program, "iot_proc_exit");
  EXPECT_EQ(m, AttachMethod::kRawTp);
  // The same tracepoint in two objects: each object's own row.
  EXPECT_EQ(RowOfSection("memory", "tp_btf/writeback_mark_inode_dirty", &m)->program,
            "iot_mem_dirty_inode");
  EXPECT_EQ(RowOfSection("block", "tp_btf/writeback_mark_inode_dirty", &m)->program,
            "iot_blk_mark_dirty");
  EXPECT_EQ(RowOfSection("block", "tp_btf/sys_enter", &m), nullptr);
  EXPECT_EQ(RowOfSection("block", "uprobe", &m), nullptr);
  // The ELF section names one row per object.
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (const ProgramAttach& r : AttachTable()) {
    EXPECT_TRUE(seen.emplace(r.object, r.event()).second) << r.object << " " << r.tracepoint;
  }
}

// build/bpf/, next to the test binary's build/tests/.
fs::path BpfObjectDir() {
  char self[PATH_MAX] = "";
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return {};
  return fs::path(std::string(self, static_cast<size_t>(n))).parent_path().parent_path() / "bpf";
}

// Every tracepoint program of the built objects finds its row by its section, with the method
// its name's variant says (AttachPlanned relies on it).
TEST(AttachTable, EveryProgramOfTheObjectsFindsItsRow) {
  fs::path dir = BpfObjectDir();
  if (!fs::exists(dir / "syscall.bpf.o")) GTEST_SKIP() << "no BPF objects in " << dir;
  for (std::string_view object : {"syscall", "proc", "async", "memory", "block", "nvme", "sched"}) {
    fs::path path = dir / (std::string(object) + ".bpf.o");
    bpf_object* obj = bpf_object__open_file(path.c_str(), nullptr);
    ASSERT_TRUE(obj) << "cannot open " << path;
    bpf_program* prog = nullptr;
    bpf_object__for_each_program(prog, obj) {
      std::string_view section = bpf_program__section_name(prog);
      if (section.starts_with("uprobe") || section.starts_with("uretprobe")) continue;
      AttachMethod m = AttachMethod::kNone;
      const ProgramAttach* row = RowOfSection(object, section, &m);
      std::string_view name = bpf_program__name(prog);
      ASSERT_NE(row, nullptr) << object << ": " << name << " (" << section << ")";
      EXPECT_TRUE(name.starts_with(row->program)) << name << " vs " << row->program;
      EXPECT_EQ(name.ends_with("_raw"), m == AttachMethod::kRawTp) << name;
      EXPECT_EQ(name.ends_with("_tp"), m == AttachMethod::kTracepoint) << name;
    }
    bpf_object__close(obj);
  }
}

// check's texts for the attach methods name only fallbacks the loaders take: without raw_tp only
// the syscall programs have a classic variant; no program attaches by fentry or kprobe, and no
// loader uses mm_filemap_fault.
TEST(AttachPlan, CheckNamesOnlyFallbacksTheLoadersTake) {
  KernelFacts f = FactsWithout({});
  f.raw_tp = {false, EINVAL, "load failed"};
  f.fentry = {false, EPERM, "load failed"};
  Features features = Features::Evaluate(f);
  EXPECT_EQ(std::string(features.status(Feature::kRawTp).fallback),
            "a classic tracepoint for the syscall programs (needs tracefs mounted); the proc, "
            "async, memory, block, sched programs have no method past raw_tp");
  EXPECT_EQ(std::string(features.status(Feature::kRawTp).needed_by),
            "the syscall, proc, async, memory, block, sched programs (where tp_btf cannot)");
  EXPECT_EQ(std::string(features.status(Feature::kFentry).fallback),
            "nothing to replace (the capture attaches to tracepoints only)");
  EXPECT_EQ(features.status(Feature::kKprobes).fallback,
            features.status(Feature::kFentry).fallback);
  EXPECT_EQ(std::string(features.status(Feature::kPageFaultTp).fallback).find("mm_filemap_fault"),
            std::string::npos);
  EXPECT_EQ(std::string(features.status(Feature::kSchedTps).fallback).find("/proc"),
            std::string::npos);
}

}  // namespace
}  // namespace iotwin::capture
