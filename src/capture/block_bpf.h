// BlockBpf: the block, NVMe and interference layers of a capture, loaded, attached and owned
// (RAII). bpf/block.bpf.c owns the tables that follow I/O (block_common.bpf.h); nvme.bpf.c and
// sched.bpf.c get the same tables through bpf_map__reuse_fd, and all three write the capture's
// ring buffer, consult its traced-process set and count drops in its table.
//
// Every part is optional: what cannot run (no NVMe driver, a tracepoint this kernel lacks, a
// load failure) is explained in the plan, which `iotwin record` writes into the header's "layers".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "capture/attach_plan.h"
#include "capture/block_options.h"

struct bpf_link;
struct iotwin_block_bpf;
struct iotwin_nvme_bpf;
struct iotwin_sched_bpf;

namespace iotwin::capture {

// One layer's state for the header's "layers": whether it runs, and why (or why not).
struct LayerState {
  bool enabled = false;
  std::string reason;
  nlohmann::json ToJson() const { return {{"enabled", enabled}, {"reason", reason}}; }
};

// What the block side of a capture does: layers block, nvme, sched, pmu.
struct BlockLayerPlan {
  LayerState block, nvme, sched, pmu;
};

// The maps of the capture every object shares (owned by the syscall object), and the
// interesting-inode set of the memory layer when it runs (-1: the block object keeps its own
// and marks the files traced threads dirty itself).
struct BlockSharedMaps {
  int events_fd = -1;
  int traced_fd = -1;
  int drops_fd = -1;
  int inodes_fd = -1;
  bool inodes_marked_elsewhere = false;  // the memory layer marks dirtied files in inodes_fd
  uint64_t cgroup_id = 0;
  uint32_t self_tgid = 0;
  uint64_t wake_bytes = 256 << 10;
};

// A block device as sysfs describes it at capture start.
struct BlockDeviceInfo {
  std::string name;  // "nvme0n1", "loop0"
  uint32_t dev = 0;  // kernel dev_t (major << 20 | minor)
  uint32_t logical_block_size = 0;
  uint32_t physical_block_size = 0;
  uint32_t max_sectors_kb = 0;
  uint32_t max_hw_sectors_kb = 0;
  uint32_t max_segments = 0;
  uint32_t max_segment_size = 0;
  std::string scheduler;  // the selected one
  uint32_t nr_requests = 0;  // requests the queue (or scheduler) holds before submitters wait
  int rotational = -1;       // queue/rotational: 1, 0, or -1 unreadable
  std::string model;         // device/model (trimmed), empty when the driver has none
  nlohmann::json ToJson() const;
};

// Every whole-disk block device under sysfs_block (partitions are not listed: requests are
// issued to whole disks).
std::vector<BlockDeviceInfo> ReadBlockDevices(const std::string& sysfs_block = "/sys/block");

// Whether this machine has a hardware PMU (perf_event_open of CPU cycles succeeds).
LayerState ProbePmu();

class BlockBpf {
 public:
  // Loads what `options` asks for and the kernel allows; `plan` says what runs and why. Returns
  // null (and an explaining plan) when nothing of the block side runs.
  static Result<std::unique_ptr<BlockBpf>> Load(const BlockOptions& options,
                                                const BlockSharedMaps& shared,
                                                BlockLayerPlan* plan);
  ~BlockBpf();
  BlockBpf(const BlockBpf&) = delete;
  BlockBpf& operator=(const BlockBpf&) = delete;

  // Attaches every loaded program; optional ones that fail are noted (and their layer's reason
  // updated), required ones (the block tracepoints) fail the attach.
  Status Attach(std::vector<std::string>* notes, BlockLayerPlan* plan);
  void Detach();

  // Counters of how I/O was chosen and what could not be followed (footer summary "block").
  nlohmann::json Stats() const;
  // The interesting-inode set (for the memory layer to share, or to seed from user space).
  int inodes_fd() const;

 private:
  BlockBpf() = default;
  Status LoadBlock(const BlockOptions& options, const BlockSharedMaps& shared);
  Status LoadNvme(const BlockSharedMaps& shared);
  // One try of LoadNvme with the attach plan `plan` (LoadByPlan); nothing stays loaded on failure.
  Status LoadNvmePlanned(const BlockSharedMaps& shared, const AttachPlan& plan);
  Status LoadSched(const BlockSharedMaps& shared);
  // One try of LoadSched with the attach plan `plan` (LoadByPlan).
  Status LoadSchedPlanned(const BlockSharedMaps& shared, const AttachPlan& plan);
  void FillLbaSizes();

  iotwin_block_bpf* block_ = nullptr;
  iotwin_nvme_bpf* nvme_ = nullptr;
  iotwin_sched_bpf* sched_ = nullptr;
  std::vector<bpf_link*> links_;
  bool emit_block_ = true;
  std::string sched_attach_kind_ = "tp_btf";
  // How each object's programs loaded, hence attach (attach_plan.h).
  AttachPlan block_attach_;
  AttachPlan nvme_attach_;
  AttachPlan sched_attach_;
  int ncpus_ = 1;
};

}  // namespace iotwin::capture
