// MemoryBpf: the kernel side of the memory layer (bpf/memory.bpf.c), loaded, attached, owned.
//
// Loaded after the syscall object, whose ring buffer, traced-process set and drop counters it
// shares (like every capture object). Parts the user switched off, or that this kernel cannot
// trace, are not loaded; PlanMemoryLayer says which and why, for the trace header and for
// `iotwin check`.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "capture/attach_plan.h"
#include "capture/attach_table.h"
#include "capture/memory_options.h"
#include "iotwin_abi.h"

struct bpf_link;
struct iotwin_memory_bpf;

namespace iotwin::capture {

struct MemoryPart {
  bool enabled = false;
  std::string reason;  // how it is captured, or why it is off
};

struct MemoryLayerState {
  MemoryPart faults, cache, writeback, state, subpage;
  // The cache state is taken in the kernel at each file's first touch; when the kernel programs
  // cannot run, user space measures each file when it sees the open (racy, see the docs).
  bool state_in_kernel = false;
  bool AnyKernelPart() const {
    return faults.enabled || cache.enabled || writeback.enabled || subpage.enabled ||
           (state.enabled && state_in_kernel);
  }
  // The state part measured by user space instead (the kernel programs did not load).
  void StateFallBackToUserSpace(const std::string& why);
  // {"enabled", "reason", "parts": {name: {enabled, reason}}} for the header's layers.memory.
  nlohmann::json ToJson() const;
};

// What this kernel offers the memory layer.
struct MemoryKernelSupport {
  bool btf = false;
  std::vector<std::pair<std::string, bool>> tracepoints;  // tp_btf targets: present?
  long page_size = 0;
  bool Has(std::string_view tracepoint) const;
};
MemoryKernelSupport ProbeMemorySupport();

// The parts of `s` whose programs run in the kernel, as MemoryPartBit bits (attach_table.h).
uint8_t MemoryPartsOn(const MemoryLayerState& s);

// Which of the parts `o` asks for can run on this kernel, each with its reason.
MemoryLayerState PlanMemoryLayer(const MemoryOptions& o, const MemoryKernelSupport& k);

// The maps and settings every capture object shares (from the syscall object).
struct MemorySharedMaps {
  int events_fd = -1;
  int traced_fd = -1;
  int drops_fd = -1;
  // The files traced threads open, marked by the syscall object: the interesting-inode set
  // (-1: the memory object keeps its own, filled by faults, insertions and MarkInode).
  int inodes_fd = -1;
  uint64_t cgroup_id = 0;
  uint32_t self_tgid = 0;
  uint64_t wake_bytes = 0;
};

using RecordSink = std::function<Status(const iot_rec_hdr*)>;

class MemoryBpf {
 public:
  // Loads the programs of the parts `plan` enables.
  static Result<std::unique_ptr<MemoryBpf>> Load(const MemoryLayerState& plan,
                                                 const MemorySharedMaps& shared);
  ~MemoryBpf();
  MemoryBpf(const MemoryBpf&) = delete;
  MemoryBpf& operator=(const MemoryBpf&) = delete;

  // Attaches every loaded program (AttachPlanned); a program that fails is reported in `notes`.
  Status Attach(std::vector<std::string>* notes);
  void Detach();

  // Adds a file to the set whose page-cache and write-back events are recorded wherever they
  // happen (files the workload opens or maps).
  Status MarkInode(uint64_t ino, uint32_t dev);
  // Tells the kernel a file's cache state is recorded already (--pid attach snapshots).
  Status MarkStateDone(uint64_t ino, uint32_t dev);

  // Emits and removes per-thread entries idle for at least `min_idle_ns` (all of them with 0):
  // the last fault of a thread that stopped faulting, runs nobody ended. A last fault whose VMA
  // the kernel could not look up is resolved from /proc/PID/maps. With `min_idle_ns` set, an
  // entry whose thread is still blocked in its pending fault (a slow read) is left for later.
  struct SweepCounts {
    uint64_t entries = 0;
    uint64_t faults_resolved = 0;    // from /proc/PID/maps
    uint64_t faults_unresolved = 0;  // process gone or address unmapped: lost
    uint64_t faults_anonymous = 0;   // resolved to anonymous memory: dropped
    uint64_t faults_held = 0;        // sweeps that left a fault alone: its thread was still in it
    uint64_t reinstated = 0;         // entries put back: their thread woke up during the sweep
  };
  Status Sweep(uint64_t now_ns, uint64_t min_idle_ns, const RecordSink& sink, SweepCounts* counts);

  Result<std::array<uint64_t, 16>> ReadStats() const;  // IOT_MEM_STAT_*, summed over CPUs
  // The interesting-inode set (iot_mem_inodes), shared with the block layer (block_bpf.h).
  int inodes_fd() const;
  // The set of files whose page-cache state was recorded (iot_mem_state_done).
  int state_done_fd() const;
  static const char* StatName(size_t i);
  // How the programs attach ("tp_btf", "raw_tp"; attach_table.h).
  const std::string& attach_kind() const { return attach_kind_; }

 private:
  MemoryBpf() = default;
  // Load with the attach methods of `attach` (attach_plan.h).
  static Result<std::unique_ptr<MemoryBpf>> LoadPlanned(const MemoryLayerState& plan,
                                                        const MemorySharedMaps& shared,
                                                        const AttachPlan& attach);
  iotwin_memory_bpf* skel_ = nullptr;
  AttachPlan attach_plan_;  // how the programs loaded, hence attach
  std::string attach_kind_ = "tp_btf";
  std::unordered_set<uint32_t> held_last_sweep_;  // threads blocked in their fault at the last sweep
  std::vector<bpf_link*> links_;
  int ncpus_ = 1;
};

}  // namespace iotwin::capture
