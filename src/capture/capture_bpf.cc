#include "capture/capture_bpf.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string_view>

#include "async.skel.h"
#include "capture/attach_plan.h"
#include "capture/attach_table.h"
#include "capture/features.h"
#include "capture/libbpf_log.h"
#include "capture/syscall_table.h"
#include "capture_wire.h"
#include "intent.skel.h"
#include "iotwin_abi.h"
#include "proc.skel.h"
#include "syscall.skel.h"
#include "syscall_compat.skel.h"

namespace iotwin::capture {

// bpf/syscall.bpf.c is built twice (fast: bpf_rdonly_cast; compat: bpf_probe_read_kernel), into
// two skeletons with the same maps, programs and globals. This holds what the capture uses of
// whichever loaded, so nothing else needs to know which.
struct SyscallObject {
  std::function<void()> destroy;
  bpf_object* obj = nullptr;
  bpf_map* events = nullptr;
  bpf_map* traced_tgids = nullptr;
  bpf_map* drops = nullptr;
  bpf_map* opened_inodes = nullptr;  // files traced threads open (memory_bpf.h: inodes_fd)
  // .bss globals of the marker-file calibration (written by the kernel, hence volatile).
  volatile uint32_t* calib_tgid = nullptr;
  volatile uint64_t* marker_ino = nullptr;
  volatile uint32_t* marker_dev = nullptr;

  SyscallObject() = default;
  SyscallObject(const SyscallObject&) = delete;
  SyscallObject& operator=(const SyscallObject&) = delete;
  ~SyscallObject() {
    if (destroy) destroy();
  }
};

namespace {

// The sched_process_exit tracepoint gained a group_dead argument in 6.16; pick the program that
// matches this kernel's prototype (reading an argument the kernel does not pass fails to load).
bool ExitTracepointHasGroupDead() {
  struct btf* vmlinux = btf__load_vmlinux_btf();
  if (!vmlinux) return false;
  bool has = false;
  int id = btf__find_by_name_kind(vmlinux, "btf_trace_sched_process_exit", BTF_KIND_TYPEDEF);
  if (id > 0) {
    const struct btf_type* t = btf__type_by_id(vmlinux, id);
    t = btf__type_by_id(vmlinux, t->type);  // pointer
    if (t && btf_is_ptr(t)) t = btf__type_by_id(vmlinux, t->type);
    if (t && btf_is_func_proto(t)) has = btf_vlen(t) >= 3;  // (void *, task, bool)
  }
  btf__free(vmlinux);
  return has;
}

template <typename Rodata>
void SetCommonRodata(Rodata* ro, const CaptureBpfConfig& c) {
  ro->iot_filter_cgroup_id = c.cgroup_id;
  ro->iot_self_tgid = c.self_tgid;
  ro->iot_wake_bytes = c.wake_bytes;
}

// Points an object's copies of the shared maps at the syscall object's maps.
template <typename Skel>
Status ShareMaps(Skel* skel, const SyscallObject& owner) {
  struct {
    bpf_map* map;
    bpf_map* from;
  } shared[] = {
      {skel->maps.iot_events, owner.events},
      {skel->maps.iot_traced_tgids, owner.traced_tgids},
      {skel->maps.iot_drops, owner.drops},
  };
  for (auto& s : shared) {
    int err = bpf_map__reuse_fd(s.map, bpf_map__fd(s.from));
    if (err) return LibbpfError(err, fmt::format("sharing map {}", bpf_map__name(s.map)));
  }
  return Status::Ok();
}

// Opens, configures and loads one build of the syscall object (Skel: iotwin_syscall_bpf or
// iotwin_syscall_compat_bpf) and takes its maps, programs and globals.
template <typename Skel>
Result<std::unique_ptr<SyscallObject>> LoadSyscallSkeleton(Skel* (*open_skel)(),
                                                           int (*load_skel)(Skel*),
                                                           void (*destroy_skel)(Skel*),
                                                           const CaptureBpfConfig& config,
                                                           const AttachPlan& plan,
                                                           std::string_view what) {
  Skel* skel = open_skel();
  if (!skel) return LibbpfError(errno, fmt::format("opening the {} BPF object", what));
  auto obj = std::make_unique<SyscallObject>();
  obj->destroy = [skel, destroy_skel] { destroy_skel(skel); };
  obj->obj = skel->obj;
  SelectPlan(skel->obj, plan);
  SetCommonRodata(skel->rodata, config);
  std::vector<uint8_t> table = SyscallNrToOp(IOT_NR_MAX);
  static_assert(sizeof(skel->rodata->iot_nr_to_op) == IOT_NR_MAX);
  memcpy(skel->rodata->iot_nr_to_op, table.data(), IOT_NR_MAX);
  int err = bpf_map__set_max_entries(skel->maps.iot_events, static_cast<uint32_t>(config.ring_bytes));
  if (err) return LibbpfError(err, "sizing the ring buffer");
  err = load_skel(skel);
  if (err) return LibbpfError(err, fmt::format("loading the {} BPF programs", what));
  obj->events = skel->maps.iot_events;
  obj->traced_tgids = skel->maps.iot_traced_tgids;
  obj->drops = skel->maps.iot_drops;
  obj->opened_inodes = skel->maps.iot_mem_inodes;
  static_assert(sizeof(skel->bss->iot_calib_tgid) == sizeof(uint32_t));
  static_assert(sizeof(skel->bss->iot_marker_ino) == sizeof(uint64_t));
  static_assert(sizeof(skel->bss->iot_marker_dev) == sizeof(uint32_t));
  obj->calib_tgid = reinterpret_cast<volatile uint32_t*>(&skel->bss->iot_calib_tgid);
  obj->marker_ino = reinterpret_cast<volatile uint64_t*>(&skel->bss->iot_marker_ino);
  obj->marker_dev = reinterpret_cast<volatile uint32_t*>(&skel->bss->iot_marker_dev);
  return obj;
}

Result<std::unique_ptr<SyscallObject>> LoadFastSyscall(const CaptureBpfConfig& config,
                                                       const AttachPlan& plan) {
  return LoadSyscallSkeleton(iotwin_syscall_bpf__open, iotwin_syscall_bpf__load,
                             iotwin_syscall_bpf__destroy, config, plan, "syscall");
}

Result<std::unique_ptr<SyscallObject>> LoadCompatSyscall(const CaptureBpfConfig& config,
                                                         const AttachPlan& plan) {
  return LoadSyscallSkeleton(iotwin_syscall_compat_bpf__open, iotwin_syscall_compat_bpf__load,
                             iotwin_syscall_compat_bpf__destroy, config, plan, "compat syscall");
}

}  // namespace

uint64_t DropCounts::Total(uint16_t source) const {
  uint64_t n = 0;
  if (source < per_cpu.size()) {
    for (uint64_t v : per_cpu[source]) n += v;
  }
  return n;
}

uint64_t DropCounts::Total() const {
  uint64_t n = 0;
  for (size_t s = 0; s < per_cpu.size(); s++) n += Total(static_cast<uint16_t>(s));
  return n;
}

Result<std::unique_ptr<CaptureBpf>> CaptureBpf::Load(const CaptureBpfConfig& config) {
  InstallLibbpfLogger();
  if (config.ring_bytes < 4096 || (config.ring_bytes & (config.ring_bytes - 1)) != 0) {
    return Status::Invalid("ring buffer size {} is not a power of two of at least 4096 bytes",
                           config.ring_bytes);
  }
  std::unique_ptr<CaptureBpf> c(new CaptureBpf());
  int ncpus = libbpf_num_possible_cpus();
  c->ncpus_ = ncpus > 0 ? ncpus : 1;
  IOTWIN_RETURN_IF_ERROR(c->LoadSyscall(config));
  IOTWIN_RETURN_IF_ERROR(c->LoadProc(config));
  if (config.async) {
    Status st = c->LoadAsync(config);
    if (!st.ok()) {
      c->notes_.push_back("async: io_uring request tracing unavailable: " +
                          st.message().substr(0, st.message().find('\n')));
    }
  } else {
    c->notes_.push_back("async: io_uring request tracing disabled by option");
  }
  if (config.uprobes) IOTWIN_RETURN_IF_ERROR(c->LoadIntent(config));
  c->LoadMemory(config);
  c->LoadBlockLayers(config);
  return c;
}

Status CaptureBpf::LoadSyscall(const CaptureBpfConfig& config) {
  // The kfunc verdict of the one probe of this process (Features::Get).
  SyscallObjectChoice choice = ChooseSyscallObject(
      Features::Get().Has(Feature::kKfuncRdonlyCast), SyscallCompatForced());
  IOTWIN_ASSIGN_OR_RETURN(PlannedLoad loaded,
                          LoadByPlan("syscall", [&](const AttachPlan& plan) {
                            return LoadSyscallBuild(config, plan, &choice);
                          }));
  syscall_compat_ = choice.compat;
  syscall_plan_ = loaded.plan;
  attach_kind_ = std::string(AttachMethodName(loaded.plan.at("iot_sys_enter")));
  syscall_reason_ = fmt::format("{} raw_syscalls sys_enter/sys_exit, joined in the kernel; {}",
                                attach_kind_, choice.reason);
  if (choice.compat) notes_.push_back("syscall: " + choice.reason);
  if (!loaded.first_error.ok()) notes_.push_back(loaded.FallbackNote("syscall"));
  return Status::Ok();
}

// The fast build of the syscall object, or the compat one (see ChooseSyscallObject).
Status CaptureBpf::LoadSyscallBuild(const CaptureBpfConfig& config, const AttachPlan& plan,
                                    SyscallObjectChoice* choice) {
  if (choice->compat) {
    IOTWIN_ASSIGN_OR_RETURN(syscall_, LoadCompatSyscall(config, plan));
    return Status::Ok();
  }
  auto fast = LoadFastSyscall(config, plan);
  if (fast.ok()) {
    syscall_ = std::move(fast).value();
    return Status::Ok();
  }
  // The kfunc is in the BTF but the fast object still did not load (say, a kernel that does
  // not allow it in tracing programs): the compat object needs nothing more than 6.1 has.
  // When that fails too, the fast object's error is the one worth showing.
  auto compat = LoadCompatSyscall(config, plan);
  if (!compat.ok()) return fast.status();
  syscall_ = std::move(compat).value();
  const std::string& why = fast.status().message();
  *choice = {true, "compat syscall object: the fast one did not load (" +
                       why.substr(0, why.find('\n')) + ")"};
  return Status::Ok();
}

Status CaptureBpf::LoadProc(const CaptureBpfConfig& config) {
  bool group_dead = ExitTracepointHasGroupDead();
  IOTWIN_ASSIGN_OR_RETURN(PlannedLoad loaded, LoadByPlan("proc", [&](const AttachPlan& plan) {
                            Status st = LoadProcPlanned(config, plan, group_dead);
                            if (!st.ok() && proc_) {
                              iotwin_proc_bpf__destroy(proc_);
                              proc_ = nullptr;
                            }
                            return st;
                          }));
  proc_plan_ = loaded.plan;
  proc_attach_kind_ = DescribePlan(loaded.plan);
  if (!loaded.first_error.ok()) notes_.push_back(loaded.FallbackNote("process"));
  return Status::Ok();
}

Status CaptureBpf::LoadProcPlanned(const CaptureBpfConfig& config, const AttachPlan& plan,
                                   bool group_dead) {
  proc_ = iotwin_proc_bpf__open();
  if (!proc_) return LibbpfError(errno, "opening the process BPF object");
  SetCommonRodata(proc_->rodata, config);
  IOTWIN_RETURN_IF_ERROR(ShareMaps(proc_, *syscall_));
  SelectPlan(proc_->obj, plan);
  // The exit program that matches this kernel's prototype, by the exit row's method.
  AttachMethod exit_method = plan.at("iot_proc_exit");
  SelectVariant(proc_->obj, "iot_proc_exit", group_dead ? exit_method : AttachMethod::kNone);
  SelectVariant(proc_->obj, "iot_proc_exit_legacy", group_dead ? AttachMethod::kNone : exit_method);
  int err = iotwin_proc_bpf__load(proc_);
  if (err) return LibbpfError(err, "loading the process BPF programs");
  return Status::Ok();
}

Status CaptureBpf::LoadAsync(const CaptureBpfConfig& config) {
  IOTWIN_ASSIGN_OR_RETURN(PlannedLoad loaded, LoadByPlan("async", [&](const AttachPlan& plan) {
                            Status st = LoadAsyncPlanned(config, plan);
                            if (!st.ok() && async_) {
                              iotwin_async_bpf__destroy(async_);
                              async_ = nullptr;
                            }
                            return st;
                          }));
  async_plan_ = loaded.plan;
  // Requests are followed from submission to completion: one tracepoint alone is no use.
  for (const auto& [program, method] : async_plan_) {
    if (method != AttachMethod::kNone) continue;
    iotwin_async_bpf__destroy(async_);
    async_ = nullptr;
    return Status::Unsupported("this kernel lacks {}", FindAttach("async", program)->tracepoint);
  }
  return Status::Ok();
}

Status CaptureBpf::LoadAsyncPlanned(const CaptureBpfConfig& config, const AttachPlan& plan) {
  async_ = iotwin_async_bpf__open();
  if (!async_) return LibbpfError(errno, "opening the async BPF object");
  SetCommonRodata(async_->rodata, config);
  IOTWIN_RETURN_IF_ERROR(ShareMaps(async_, *syscall_));
  SelectPlan(async_->obj, plan);
  int err = iotwin_async_bpf__load(async_);
  if (err) return LibbpfError(err, "loading the io_uring BPF programs");
  return Status::Ok();
}

Status CaptureBpf::LoadIntent(const CaptureBpfConfig& config) {
  intent_ = iotwin_intent_bpf__open();
  if (!intent_) return LibbpfError(errno, "opening the uprobe BPF object");
  SetCommonRodata(intent_->rodata, config);
  IOTWIN_RETURN_IF_ERROR(ShareMaps(intent_, *syscall_));
  int err = iotwin_intent_bpf__load(intent_);
  if (err) return LibbpfError(err, "loading the uprobe BPF programs");
  return Status::Ok();
}

// The memory layer is optional: what cannot load is explained in memory_plan_, not fatal.
void CaptureBpf::LoadMemory(const CaptureBpfConfig& config) {
  MemoryKernelSupport support = ProbeMemorySupport();
  memory_plan_ = PlanMemoryLayer(config.memory, support);
  if (!memory_plan_.AnyKernelPart()) return;
  MemorySharedMaps shared;
  shared.events_fd = bpf_map__fd(syscall_->events);
  shared.traced_fd = bpf_map__fd(syscall_->traced_tgids);
  shared.drops_fd = bpf_map__fd(syscall_->drops);
  shared.inodes_fd = bpf_map__fd(syscall_->opened_inodes);
  shared.cgroup_id = config.cgroup_id;
  shared.self_tgid = config.self_tgid;
  shared.wake_bytes = config.wake_bytes;
  auto m = MemoryBpf::Load(memory_plan_, shared);
  if (m.ok()) {
    memory_ = std::move(m).value();
    // The parts' reasons say tp_btf; a fallback says what ran instead.
    const std::string& kind = memory_->attach_kind();
    for (MemoryPart* p : {&memory_plan_.faults, &memory_plan_.cache, &memory_plan_.writeback,
                          &memory_plan_.subpage}) {
      if (p->enabled && kind != "tp_btf" && p->reason.rfind("tp_btf ", 0) == 0) {
        p->reason = kind + p->reason.substr(6);
      }
    }
    return;
  }
  std::string why = m.status().message() + " " + LibbpfLogTail();
  why = why.substr(0, why.find('\n'));
  for (MemoryPart* p : {&memory_plan_.faults, &memory_plan_.cache, &memory_plan_.writeback,
                        &memory_plan_.subpage}) {
    if (p->enabled) *p = MemoryPart{false, "the memory BPF programs failed to load: " + why};
  }
  memory_plan_.StateFallBackToUserSpace("the memory BPF programs failed to load");
  notes_.push_back("memory: " + why);
}

// The block, NVMe and interference layers are optional: what cannot load is explained in
// block_plan_, never fatal.
void CaptureBpf::LoadBlockLayers(const CaptureBpfConfig& config) {
  BlockSharedMaps shared;
  shared.events_fd = bpf_map__fd(syscall_->events);
  shared.traced_fd = bpf_map__fd(syscall_->traced_tgids);
  shared.drops_fd = bpf_map__fd(syscall_->drops);
  // One interesting-inode set with the memory layer: the files it marks (dirtied, faulted,
  // opened) are the ones whose write-back the block layer follows. Without it, the block object
  // keeps its own and marks the files traced threads dirty itself.
  if (memory_) {
    shared.inodes_fd = memory_->inodes_fd();
    shared.inodes_marked_elsewhere = memory_plan_.writeback.enabled;
  }
  shared.cgroup_id = config.cgroup_id;
  shared.self_tgid = config.self_tgid;
  shared.wake_bytes = config.wake_bytes;
  auto b = BlockBpf::Load(config.block, shared, &block_plan_);
  if (!b.ok()) {
    notes_.push_back("block: " + b.status().message().substr(0, b.status().message().find('\n')));
    return;
  }
  block_ = std::move(b).value();
}

CaptureBpf::~CaptureBpf() {
  Detach();
  memory_.reset();
  block_.reset();
  if (intent_) iotwin_intent_bpf__destroy(intent_);
  if (async_) iotwin_async_bpf__destroy(async_);
  if (proc_) iotwin_proc_bpf__destroy(proc_);
  syscall_.reset();
}

Status CaptureBpf::Attach() {
  // Process tracking first, so a fork racing with the attach is not missed by the syscall
  // programs' filter. Every program of these two objects is required.
  IOTWIN_RETURN_IF_ERROR(AttachPlanned(proc_->obj, "proc", proc_plan_, &links_).required);
  IOTWIN_RETURN_IF_ERROR(AttachPlanned(syscall_->obj, "syscall", syscall_plan_, &links_).required);
  if (async_) {
    AttachOutcome async = AttachPlanned(async_->obj, "async", async_plan_, &links_);
    async_attached_ = async.complete();
    if (!async_attached_) {
      const std::string& why =
          async.required.ok() ? async.missed.front() : async.required.message();
      notes_.push_back("async: io_uring request tracing unavailable: " +
                       why.substr(0, why.find('\n')));
    }
  }
  if (memory_) IOTWIN_RETURN_IF_ERROR(memory_->Attach(&notes_));
  if (block_) IOTWIN_RETURN_IF_ERROR(block_->Attach(&notes_, &block_plan_));
  return Status::Ok();
}

void CaptureBpf::Detach() {
  if (memory_) memory_->Detach();
  if (block_) block_->Detach();
  for (bpf_link* l : links_) bpf_link__destroy(l);
  links_.clear();
}

Status CaptureBpf::TraceProcess(pid_t tgid) {
  uint32_t key = static_cast<uint32_t>(tgid);
  uint8_t one = 1;
  if (bpf_map_update_elem(bpf_map__fd(syscall_->traced_tgids), &key, &one, BPF_ANY)) {
    return Status::FromErrno(errno, fmt::format("adding process {} to the traced set", tgid));
  }
  return Status::Ok();
}

Status CaptureBpf::UntraceProcess(pid_t tgid) {
  uint32_t key = static_cast<uint32_t>(tgid);
  if (bpf_map_delete_elem(bpf_map__fd(syscall_->traced_tgids), &key) && errno != ENOENT) {
    return Status::FromErrno(errno, fmt::format("removing process {} from the traced set", tgid));
  }
  return Status::Ok();
}

namespace {

// Deletes every entry of hash map `fd` (keys of `key_size` bytes); the first key is taken
// again after each delete, so the walk never follows a deleted entry. Bounded by `max` entries.
Status ClearHashMap(int fd, size_t key_size, uint32_t max, const char* what) {
  std::vector<uint8_t> key(key_size);
  for (uint32_t n = 0; n <= max; n++) {
    if (bpf_map_get_next_key(fd, nullptr, key.data())) {
      if (errno == ENOENT) return Status::Ok();
      return Status::FromErrno(errno, fmt::format("walking {}", what));
    }
    if (bpf_map_delete_elem(fd, key.data()) && errno != ENOENT) {
      return Status::FromErrno(errno, fmt::format("emptying {}", what));
    }
  }
  return Status::Internal("{} did not empty after {} deletes", what, max);
}

}  // namespace

Status CaptureBpf::ForgetFilesTouched() {
  const uint32_t max = bpf_map__max_entries(syscall_->opened_inodes);
  IOTWIN_RETURN_IF_ERROR(ClearHashMap(bpf_map__fd(syscall_->opened_inodes),
                                      sizeof(iot_inode_key), max, "the touched-file set"));
  if (!memory_) return Status::Ok();
  return ClearHashMap(memory_->state_done_fd(), sizeof(iot_inode_key), max,
                      "the recorded cache-state set");
}

Status CaptureBpf::AttachUprobe(const std::string& binary, const std::string& function,
                                uint32_t label_id) {
  if (!intent_) return Status::Internal("uprobe programs not loaded");
  for (int ret = 0; ret < 2; ret++) {
    LIBBPF_OPTS(bpf_uprobe_opts, opts);
    opts.func_name = function.c_str();
    opts.retprobe = ret == 1;
    opts.bpf_cookie = IOT_UPROBE_COOKIE(label_id, ret ? IOT_INTENT_END : IOT_INTENT_BEGIN);
    bpf_program* prog = ret ? intent_->progs.iot_uprobe_return : intent_->progs.iot_uprobe_entry;
    bpf_link* link = bpf_program__attach_uprobe_opts(prog, -1, binary.c_str(), 0, &opts);
    if (!link) {
      return LibbpfError(errno, fmt::format("attaching a {} to {} in {}",
                                            ret ? "uretprobe" : "uprobe", function, binary));
    }
    links_.push_back(link);
  }
  return Status::Ok();
}

Status CaptureBpf::IdentifyMarker(const std::string& path, uint64_t* ino, uint32_t* dev) {
  // The programs must be attached: sys_enter sees our own write and stores what it wrote to.
  *syscall_->calib_tgid = static_cast<uint32_t>(getpid());
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, "opening the marker file " + path);
  ssize_t n = write(fd, "\n", 1);
  int err = errno;
  if (ftruncate(fd, 0) != 0) err = errno;
  close(fd);
  *syscall_->calib_tgid = 0;
  if (n != 1) return Status::FromErrno(err, "writing the marker file " + path);
  *ino = *syscall_->marker_ino;
  *dev = *syscall_->marker_dev;
  if (*ino == 0) return Status::Internal("the kernel did not see the write to {}", path);
  return Status::Ok();
}

int CaptureBpf::ring_fd() const { return bpf_map__fd(syscall_->events); }

Result<DropCounts> CaptureBpf::ReadDrops() const {
  DropCounts d;
  d.per_cpu.assign(IOT_SRC_MAX + 1, std::vector<uint64_t>(ncpus_, 0));
  int fd = bpf_map__fd(syscall_->drops);
  for (uint32_t src = 0; src <= IOT_SRC_MAX; src++) {
    if (bpf_map_lookup_elem(fd, &src, d.per_cpu[src].data())) {
      return Status::FromErrno(errno, "reading the drop counters");
    }
  }
  return d;
}

}  // namespace iotwin::capture
