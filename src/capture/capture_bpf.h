// CaptureBpf: the BPF side of one capture, loaded, attached and owned (RAII).
//
// Loads bpf/syscall.bpf.c first (the fast build, or on kernels without the bpf_rdonly_cast kfunc
// the compat build of the same source; features.h ChooseSyscallObject); its ring buffer, traced-process set and drop counters are then
// shared with the other objects (proc, async, intent) through bpf_map__reuse_fd, so every
// program feeds the same ring. Optional parts (io_uring tracepoints, uprobes) that fail to load
// or attach are reported in notes() instead of failing the capture. The syscall and process
// programs attach as the attach table (attach_table.h) and Features::Get() choose: tp_btf where
// it works, else raw_tp, else (syscall programs) the classic tracepoint; IOTWIN_ATTACH forces one.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "capture/attach_table.h"
#include "capture/block_bpf.h"
#include "capture/memory_bpf.h"
#include "capture/memory_options.h"

struct bpf_link;
struct bpf_program;
struct iotwin_proc_bpf;
struct iotwin_async_bpf;
struct iotwin_intent_bpf;

namespace iotwin::capture {

// The syscall object's maps, programs and globals, from whichever skeleton loaded (capture_bpf.cc).
struct SyscallObject;
struct SyscallObjectChoice;

struct CaptureBpfConfig {
  uint64_t ring_bytes = 64ull << 20;   // power of two, multiple of the page size
  uint64_t wake_bytes = 256ull << 10;  // wake the consumer once this much data waits
  uint64_t cgroup_id = 0;              // non-zero: trace this cgroup instead of a process set
  uint32_t self_tgid = 0;              // never traced
  bool async = true;                   // io_uring request tracepoints
  bool uprobes = false;                // load the uprobe programs
  MemoryOptions memory;                // memory layer parts (memory_bpf.h)
  BlockOptions block;                  // block, NVMe and interference layers (block_bpf.h)
};

// Per-source loss counters, summed over CPUs and per CPU.
struct DropCounts {
  // [source][cpu], source = IOT_SRC_* (index 0 unused).
  std::vector<std::vector<uint64_t>> per_cpu;
  uint64_t Total(uint16_t source) const;
  uint64_t Total() const;
};

class CaptureBpf {
 public:
  static Result<std::unique_ptr<CaptureBpf>> Load(const CaptureBpfConfig& config);
  ~CaptureBpf();
  CaptureBpf(const CaptureBpf&) = delete;
  CaptureBpf& operator=(const CaptureBpf&) = delete;

  // Attaches every loaded program. The syscall and process programs are required.
  Status Attach();
  // Detaches everything: no new events after this returns (events already in the ring stay).
  void Detach();

  // Adds a process to the traced set (its threads, and its future children, follow).
  Status TraceProcess(pid_t tgid);
  Status UntraceProcess(pid_t tgid);
  // Empties the sets of files the workload touched and of files whose page-cache state was
  // recorded: what a process traced before the workload (the capture-cost calibration) put
  // there would otherwise keep the workload's own first touch of those files (its libraries)
  // from recording their state.
  Status ForgetFilesTouched();

  // Attaches entry (BEGIN) and return (END) probes on FUNCTION in BINARY, tagged with
  // `label_id` (an interned string id).
  Status AttachUprobe(const std::string& binary, const std::string& function, uint32_t label_id);

  // Makes writes to the marker file at `path` intent markers: writes to it once (with the
  // programs attached) so the kernel reports the file's identity as it sees it. Returns it.
  Status IdentifyMarker(const std::string& path, uint64_t* ino, uint32_t* dev);

  int ring_fd() const;
  Result<DropCounts> ReadDrops() const;

  bool async_attached() const { return async_attached_; }
  // The memory layer: null when none of its kernel parts runs; memory_plan() says why.
  MemoryBpf* memory() const { return memory_.get(); }
  const MemoryLayerState& memory_plan() const { return memory_plan_; }
  // The block side: null when none of block/nvme/sched runs; block_plan() says why.
  BlockBpf* block() const { return block_.get(); }
  const BlockLayerPlan& block_plan() const { return block_plan_; }
  // How the syscall programs attach: "tp_btf", "raw_tp" or "tracepoint" (attach_table.h).
  const std::string& attach_kind() const { return attach_kind_; }
  // How the process programs attach ("tp_btf", "raw_tp").
  const std::string& proc_attach_kind() const { return proc_attach_kind_; }
  // Which syscall object loaded: true for the compat build (syscall_compat.bpf.o).
  bool syscall_compat() const { return syscall_compat_; }
  // For the trace header's layers.syscall: how it is attached and which object reads the files.
  const std::string& syscall_reason() const { return syscall_reason_; }
  // Human-readable notes on optional parts that are off and why.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  CaptureBpf() = default;
  Status LoadSyscall(const CaptureBpfConfig& config);
  Status LoadSyscallBuild(const CaptureBpfConfig& config, const AttachPlan& plan,
                          SyscallObjectChoice* choice);
  Status LoadProc(const CaptureBpfConfig& config);
  // One try of LoadProc / LoadAsync with the attach plan `plan` (LoadByPlan).
  Status LoadProcPlanned(const CaptureBpfConfig& config, const AttachPlan& plan, bool group_dead);
  Status LoadAsync(const CaptureBpfConfig& config);
  Status LoadAsyncPlanned(const CaptureBpfConfig& config, const AttachPlan& plan);
  Status LoadIntent(const CaptureBpfConfig& config);
  void LoadMemory(const CaptureBpfConfig& config);
  void LoadBlockLayers(const CaptureBpfConfig& config);

  std::unique_ptr<SyscallObject> syscall_;
  bool syscall_compat_ = false;
  std::string syscall_reason_;
  iotwin_proc_bpf* proc_ = nullptr;
  iotwin_async_bpf* async_ = nullptr;
  // How each object's programs loaded, hence attach (attach_plan.h).
  AttachPlan syscall_plan_;
  AttachPlan proc_plan_;
  AttachPlan async_plan_;
  iotwin_intent_bpf* intent_ = nullptr;
  std::vector<bpf_link*> links_;
  std::unique_ptr<MemoryBpf> memory_;
  MemoryLayerState memory_plan_;
  std::unique_ptr<BlockBpf> block_;
  BlockLayerPlan block_plan_;
  bool async_attached_ = false;
  std::string attach_kind_ = "tp_btf";
  std::string proc_attach_kind_ = "tp_btf";
  std::vector<std::string> notes_;
  int ncpus_ = 1;
};

}  // namespace iotwin::capture
