#include "capture/block_bpf.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "block.skel.h"
#include "block_wire.h"
#include "capture/attach_plan.h"
#include "capture/features.h"
#include "capture/libbpf_log.h"
#include "nvme.skel.h"
#include "sched.skel.h"

namespace iotwin::capture {
namespace {

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// Where this kernel's BTF has the tracepoint `event` ("vmlinux", "nvme_core"), "" when nowhere:
// from the one probe of this process (Features::Get), which reads vmlinux and module BTF.
std::string TracepointSource(std::string_view event) {
  return Features::Get().TracepointBtfSource(event);
}

std::string ReadLine(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

uint32_t ReadU32(const std::filesystem::path& p) {
  std::string s = ReadLine(p);
  return s.empty() ? 0 : static_cast<uint32_t>(strtoul(s.c_str(), nullptr, 10));
}

template <typename Skel>
void SetCommonRodata(Skel* skel, const BlockSharedMaps& m) {
  skel->rodata->iot_filter_cgroup_id = m.cgroup_id;
  skel->rodata->iot_self_tgid = m.self_tgid;
  skel->rodata->iot_wake_bytes = m.wake_bytes;
}

// The capture's ring, traced set and drop table for one object.
template <typename Skel>
Status ShareCaptureMaps(Skel* skel, const BlockSharedMaps& m) {
  struct {
    bpf_map* map;
    int fd;
  } shared[] = {
      {skel->maps.iot_events, m.events_fd},
      {skel->maps.iot_traced_tgids, m.traced_fd},
      {skel->maps.iot_drops, m.drops_fd},
  };
  for (auto& s : shared) {
    int err = bpf_map__reuse_fd(s.map, s.fd);
    if (err) return LibbpfError(err, fmt::format("sharing map {}", bpf_map__name(s.map)));
  }
  return Status::Ok();
}

// The block object's following tables for the NVMe and sched objects.
template <typename Skel>
Status ShareBlockMaps(Skel* skel, iotwin_block_bpf* owner) {
  struct {
    bpf_map* map;
    bpf_map* from;
  } shared[] = {
      {skel->maps.iot_blk_bios, owner->maps.iot_blk_bios},
      {skel->maps.iot_blk_rqs, owner->maps.iot_blk_rqs},
      {skel->maps.iot_blk_seq, owner->maps.iot_blk_seq},
      {skel->maps.iot_blk_threads, owner->maps.iot_blk_threads},
      {skel->maps.iot_blk_flush, owner->maps.iot_blk_flush},
      {skel->maps.iot_blk_lba, owner->maps.iot_blk_lba},
      {skel->maps.iot_mem_inodes, owner->maps.iot_mem_inodes},
      {skel->maps.iot_blk_stats, owner->maps.iot_blk_stats},
  };
  for (auto& s : shared) {
    int err = bpf_map__reuse_fd(s.map, bpf_map__fd(s.from));
    if (err) return LibbpfError(err, fmt::format("sharing map {}", bpf_map__name(s.map)));
  }
  return Status::Ok();
}

}  // namespace

nlohmann::json BlockDeviceInfo::ToJson() const {
  return {{"dev", fmt::format("{}:{}", dev >> 20, dev & 0xfffff)},
          {"logical_block_size", logical_block_size},
          {"physical_block_size", physical_block_size},
          {"max_sectors_kb", max_sectors_kb},
          {"max_hw_sectors_kb", max_hw_sectors_kb},
          {"max_segments", max_segments},
          {"max_segment_size", max_segment_size},
          {"scheduler", scheduler},
          {"nr_requests", nr_requests},
          {"rotational", rotational},
          {"model", model}};
}

std::vector<BlockDeviceInfo> ReadBlockDevices(const std::string& sysfs_block) {
  std::vector<BlockDeviceInfo> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(sysfs_block, ec)) {
    const std::filesystem::path dir = e.path();
    const std::filesystem::path q = dir / "queue";
    if (!std::filesystem::exists(q / "logical_block_size", ec)) continue;
    BlockDeviceInfo d;
    d.name = dir.filename().string();
    unsigned major = 0, minor = 0;
    if (sscanf(ReadLine(dir / "dev").c_str(), "%u:%u", &major, &minor) != 2) continue;
    d.dev = (major << 20) | minor;
    d.logical_block_size = ReadU32(q / "logical_block_size");
    d.physical_block_size = ReadU32(q / "physical_block_size");
    d.max_sectors_kb = ReadU32(q / "max_sectors_kb");
    d.max_hw_sectors_kb = ReadU32(q / "max_hw_sectors_kb");
    d.max_segments = ReadU32(q / "max_segments");
    d.max_segment_size = ReadU32(q / "max_segment_size");
    std::string sched = ReadLine(q / "scheduler");  // "[none] mq-deadline"
    size_t open = sched.find('['), close = sched.find(']');
    d.scheduler = open != std::string::npos && close > open
                      ? sched.substr(open + 1, close - open - 1)
                      : sched;
    d.nr_requests = ReadU32(q / "nr_requests");
    const std::string rotational = ReadLine(q / "rotational");
    if (rotational == "0" || rotational == "1") d.rotational = rotational == "1";
    d.model = ReadLine(dir / "device" / "model");
    while (!d.model.empty() && d.model.back() == ' ') d.model.pop_back();
    out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(),
            [](const BlockDeviceInfo& a, const BlockDeviceInfo& b) { return a.name < b.name; });
  return out;
}

LayerState ProbePmu() {
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_HARDWARE;
  attr.config = PERF_COUNT_HW_CPU_CYCLES;
  attr.disabled = 1;
  attr.exclude_kernel = 0;
  long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
  if (fd < 0) {
    return {false, fmt::format("unavailable: this machine has no usable hardware PMU "
                               "(perf_event_open of CPU cycles: {}); no per-request cycles, "
                               "instructions or cache misses",
                               strerror(errno))};
  }
  close(static_cast<int>(fd));
  return {false,
          "not captured: the machine has a hardware PMU, but per-request hardware counters are not "
          "implemented by this version of iotwin record"};
}

Result<std::unique_ptr<BlockBpf>> BlockBpf::Load(const BlockOptions& options,
                                                 const BlockSharedMaps& shared,
                                                 BlockLayerPlan* plan) {
  plan->pmu = ProbePmu();
  plan->block = {false, "switched off by --no-block"};
  plan->nvme = {false, "switched off by --no-nvme"};
  plan->sched = {false, "switched off by --no-sched"};

  std::string nvme_source = TracepointSource("nvme_setup_cmd");
  bool nvme = options.nvme && !nvme_source.empty();
  if (options.nvme && nvme_source.empty()) {
    plan->nvme = {false,
                  "no NVMe driver loaded: the kernel has no nvme_setup_cmd tracepoint (neither "
                  "built in nor from a loaded nvme_core module)"};
  }
  if (!options.block && !nvme && !options.sched) return std::unique_ptr<BlockBpf>();

  std::unique_ptr<BlockBpf> b(new BlockBpf());
  int ncpus = libbpf_num_possible_cpus();
  b->ncpus_ = ncpus > 0 ? ncpus : 1;
  b->emit_block_ = options.block;
  // The block object marks the files traced threads dirty itself unless the memory layer does.
  bool need_marker = shared.inodes_fd < 0 || !shared.inodes_marked_elsewhere;
  auto loaded = LoadByPlan(
      "block",
      [&](const AttachPlan& attach) {
        b->block_attach_ = attach;
        Status st = b->LoadBlock(options, shared);
        if (!st.ok() && b->block_) {
          iotwin_block_bpf__destroy(b->block_);
          b->block_ = nullptr;
        }
        return st;
      },
      [need_marker](const ProgramAttach& row) {
        return need_marker || row.program != "iot_blk_mark_dirty";
      });
  if (!loaded.ok()) {
    std::string why = "the block BPF programs failed to load: " + FirstLine(loaded.status().message());
    if (options.block) plan->block = {false, why};
    if (nvme) plan->nvme = {false, why};
    if (options.sched) plan->sched = {false, why};
    return std::unique_ptr<BlockBpf>();
  }
  if (options.block) {
    plan->block = {true,
                   DescribePlan(b->block_attach_) +
                       " block_bio_queue/split/backmerge/frontmerge/getrq/bio_remap/"
                   "bio_complete, block_rq_insert/issue/requeue/remap/merge/complete; bios of "
                   "traced processes, page-cache bios of their files (write-back, readahead), "
                   "kernel-thread bios during a traced ext4 fsync (journal) and the requests "
                   "holding them"};
    if (!need_marker) plan->block.reason += "; files of interest shared with the memory layer";
  }
  if (nvme) {
    Status ns = b->LoadNvme(shared);
    if (ns.ok()) {
      bool with_sq = b->nvme_attach_.at("iot_nvme_sq") != AttachMethod::kNone;
      plan->nvme = {true, fmt::format("{} nvme_setup_cmd/nvme_complete_rq{} ({}) for the "
                                      "requests the block layer follows",
                                      DescribePlan(b->nvme_attach_), with_sq ? "/nvme_sq" : "",
                                      nvme_source)};
    } else {
      plan->nvme = {false, "the NVMe BPF programs failed to load: " + FirstLine(ns.message())};
    }
  }
  if (options.sched) {
    Status ss = b->LoadSched(shared);
    if (ss.ok()) {
      plan->sched = {true, b->sched_attach_kind_ +
                               " sched_switch, irq_handler_entry/exit, softirq_entry/exit: "
                               "off-CPU and interrupt intervals of traced threads while their "
                               "block I/O is in flight"};
    } else {
      plan->sched = {false, "the interference BPF programs failed to load: " +
                                FirstLine(ss.message())};
    }
  }
  b->FillLbaSizes();
  return b;
}

Status BlockBpf::LoadBlock(const BlockOptions& options, const BlockSharedMaps& shared) {
  block_ = iotwin_block_bpf__open();
  if (!block_) return LibbpfError(errno, "opening the block BPF object");
  SetCommonRodata(block_, shared);
  block_->rodata->iot_blk_emit_records = options.block ? 1 : 0;
  block_->rodata->iot_blk_track_threads = options.sched ? 1 : 0;
  IOTWIN_RETURN_IF_ERROR(ShareCaptureMaps(block_, shared));
  if (shared.inodes_fd >= 0) {
    int err = bpf_map__reuse_fd(block_->maps.iot_mem_inodes, shared.inodes_fd);
    if (err) return LibbpfError(err, "sharing the memory layer's inode set");
  }
  // The plan leaves out the optional programs whose tracepoint this kernel lacks.
  SelectPlan(block_->obj, block_attach_);
  int err = iotwin_block_bpf__load(block_);
  if (err) return LibbpfError(err, "loading the block BPF programs");
  return Status::Ok();
}

Status BlockBpf::LoadNvme(const BlockSharedMaps& shared) {
  IOTWIN_ASSIGN_OR_RETURN(PlannedLoad loaded, LoadByPlan("nvme", [&](const AttachPlan& plan) {
                            return LoadNvmePlanned(shared, plan);
                          }));
  nvme_attach_ = loaded.plan;
  return Status::Ok();
}

Status BlockBpf::LoadNvmePlanned(const BlockSharedMaps& shared, const AttachPlan& plan) {
  nvme_ = iotwin_nvme_bpf__open();
  if (!nvme_) return LibbpfError(errno, "opening the NVMe BPF object");
  SetCommonRodata(nvme_, shared);
  nvme_->rodata->iot_blk_emit_records = emit_block_ ? 1 : 0;
  nvme_->rodata->iot_blk_track_threads = block_->rodata->iot_blk_track_threads;
  Status st = ShareCaptureMaps(nvme_, shared);
  if (st.ok()) st = ShareBlockMaps(nvme_, block_);
  if (st.ok()) {
    SelectPlan(nvme_->obj, plan);
    int err = iotwin_nvme_bpf__load(nvme_);
    if (err) st = LibbpfError(err, "loading the NVMe BPF programs");
  }
  if (!st.ok()) {
    iotwin_nvme_bpf__destroy(nvme_);
    nvme_ = nullptr;
  }
  return st;
}

Status BlockBpf::LoadSched(const BlockSharedMaps& shared) {
  IOTWIN_ASSIGN_OR_RETURN(PlannedLoad loaded, LoadByPlan("sched", [&](const AttachPlan& plan) {
                            Status st = LoadSchedPlanned(shared, plan);
                            if (!st.ok() && sched_) {
                              iotwin_sched_bpf__destroy(sched_);
                              sched_ = nullptr;
                            }
                            return st;
                          }));
  sched_attach_ = loaded.plan;
  sched_attach_kind_ = DescribePlan(loaded.plan);
  return Status::Ok();
}

Status BlockBpf::LoadSchedPlanned(const BlockSharedMaps& shared, const AttachPlan& plan) {
  sched_ = iotwin_sched_bpf__open();
  if (!sched_) return LibbpfError(errno, "opening the interference BPF object");
  SetCommonRodata(sched_, shared);
  sched_->rodata->iot_blk_track_threads = 1;
  SelectPlan(sched_->obj, plan);
  IOTWIN_RETURN_IF_ERROR(ShareCaptureMaps(sched_, shared));
  IOTWIN_RETURN_IF_ERROR(ShareBlockMaps(sched_, block_));
  int err = iotwin_sched_bpf__load(sched_);
  if (err) return LibbpfError(err, "loading the interference BPF programs");
  return Status::Ok();
}

// A device missing from the table (hot-plugged later) falls back to the queue limits the
// kernel keeps (the same number sysfs shows).
void BlockBpf::FillLbaSizes() {
  int fd = bpf_map__fd(block_->maps.iot_blk_lba);
  for (const BlockDeviceInfo& d : ReadBlockDevices()) {
    if (d.logical_block_size) bpf_map_update_elem(fd, &d.dev, &d.logical_block_size, BPF_ANY);
  }
}

BlockBpf::~BlockBpf() {
  Detach();
  if (sched_) iotwin_sched_bpf__destroy(sched_);
  if (nvme_) iotwin_nvme_bpf__destroy(nvme_);
  if (block_) iotwin_block_bpf__destroy(block_);
}

Status BlockBpf::Attach(std::vector<std::string>* notes, BlockLayerPlan* plan) {
  if (block_) {
    // The block tracepoints the layer needs fail the attach; the others are noted.
    AttachOutcome out = AttachPlanned(block_->obj, "block", block_attach_, &links_);
    IOTWIN_RETURN_IF_ERROR(out.required);
    for (const std::string& missed : out.missed) notes->push_back("block: not followed: " + missed);
  }
  // The NVMe and interference layers are off when a tracepoint they need does not attach.
  auto attach_layer = [&](bpf_object* obj, const char* object, const AttachPlan& attach,
                          LayerState* state, const char* what) {
    AttachOutcome out = AttachPlanned(obj, object, attach, &links_);
    if (!out.required.ok()) {
      *state = {false, fmt::format("attaching the {} tracepoints failed: {}", what,
                                   FirstLine(out.required.message()))};
      notes->push_back(fmt::format("{}: {}", object, state->reason));
    }
    for (const std::string& missed : out.missed) notes->push_back(fmt::format("{}: {}", object, missed));
  };
  if (nvme_) attach_layer(nvme_->obj, "nvme", nvme_attach_, &plan->nvme, "NVMe");
  if (sched_) attach_layer(sched_->obj, "sched", sched_attach_, &plan->sched, "interference");
  return Status::Ok();
}

void BlockBpf::Detach() {
  for (bpf_link* l : links_) bpf_link__destroy(l);
  links_.clear();
}

int BlockBpf::inodes_fd() const { return bpf_map__fd(block_->maps.iot_mem_inodes); }

nlohmann::json BlockBpf::Stats() const {
  static constexpr const char* kNames[IOT_BLK_STAT_MAX] = {
      "bios_of_traced_threads",  "bios_of_files_of_interest", "bios_split",
      "requests_holding_bios",   "requests_passthrough",      "requests_flush",
      "bios_table_full",         "requests_table_full",       "unfollowed_requests_beyond_bio_walk",
      "nvme_commands_unfollowed", "inodes_table_full",        "threads_table_full",
      "bios_of_kernel_threads_during_traced_fsync"};
  nlohmann::json j = nlohmann::json::object();
  int fd = bpf_map__fd(block_->maps.iot_blk_stats);
  std::vector<uint64_t> per_cpu(ncpus_);
  for (uint32_t k = 0; k < IOT_BLK_STAT_MAX; k++) {
    if (bpf_map_lookup_elem(fd, &k, per_cpu.data())) continue;
    uint64_t sum = 0;
    for (uint64_t v : per_cpu) sum += v;
    j[kNames[k]] = sum;
  }
  return j;
}

}  // namespace iotwin::capture
