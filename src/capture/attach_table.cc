#include "capture/attach_table.h"

#include <cstdlib>

#include <fmt/format.h>

namespace iotwin::capture {
namespace {

constexpr AttachMethod kBtf = AttachMethod::kTpBtf;
constexpr AttachMethod kRaw = AttachMethod::kRawTp;
constexpr AttachMethod kTp = AttachMethod::kTracepoint;
constexpr std::array<AttachMethod, 3> kAllThree = {kBtf, kRaw, kTp};
constexpr std::array<AttachMethod, 3> kBtfOrRaw = {kBtf, kRaw, AttachMethod::kNone};
// Written for typed BTF arguments only (direct loads through tracepoint arguments).
constexpr std::array<AttachMethod, 3> kBtfOnly = {kBtf, AttachMethod::kNone, AttachMethod::kNone};
// The memory parts a program serves.
constexpr uint8_t kFaults = kMemoryFaults;
constexpr uint8_t kCache = kMemoryCache;
constexpr uint8_t kWriteback = kMemoryWriteback;
constexpr uint8_t kSubpage = kMemorySubpage;
constexpr uint8_t kState = kMemoryState;

}  // namespace

std::string_view AttachMethodName(AttachMethod m) {
  switch (m) {
    case AttachMethod::kTpBtf:
      return "tp_btf";
    case AttachMethod::kRawTp:
      return "raw_tp";
    case AttachMethod::kTracepoint:
      return "tracepoint";
    case AttachMethod::kNone:
      break;
  }
  return "none";
}

AttachMethod ParseAttachMethod(std::string_view name) {
  for (AttachMethod m : kAllThree) {
    if (name == AttachMethodName(m)) return m;
  }
  return AttachMethod::kNone;
}

bool ProgramAttach::Offers(AttachMethod m) const {
  if (m == AttachMethod::kNone) return false;
  for (AttachMethod have : methods) {
    if (have == m) return true;
  }
  return false;
}

std::string ProgramAttach::MethodList() const {
  std::string out;
  for (AttachMethod m : methods) {
    if (m == AttachMethod::kNone) break;
    if (!out.empty()) out += ", ";
    out += AttachMethodName(m);
  }
  return out;
}

const std::vector<ProgramAttach>& AttachTable() {
  // The syscall, process, io_uring, memory, block and sched programs have raw_tp variants (and
  // the syscall ones classic raw_syscalls / sched tracepoint variants). The NVMe programs read
  // typed tracepoint arguments throughout and are tp_btf only.
  static const std::vector<ProgramAttach> kTable = {
      {"syscall", "syscall", "iot_sys_enter", "raw_syscalls:sys_enter", true, kAllThree},
      {"syscall", "syscall", "iot_sys_exit", "raw_syscalls:sys_exit", true, kAllThree},
      {"syscall", "syscall", "iot_sys_thread_exit", "sched:sched_process_exit", true, kAllThree},
      {"syscall", "proc", "iot_proc_fork", "sched:sched_process_fork", true, kBtfOrRaw},
      {"syscall", "proc", "iot_proc_exec", "sched:sched_process_exec", true, kBtfOrRaw},
      {"syscall", "proc", "iot_proc_exit", "sched:sched_process_exit", true, kBtfOrRaw},
      {"syscall", "async", "iot_uring_submit", "io_uring:io_uring_submit_req", false, kBtfOrRaw},
      {"syscall", "async", "iot_uring_complete", "io_uring:io_uring_complete", false, kBtfOrRaw},

      {"memory", "memory", "iot_mem_pc_add", "filemap:mm_filemap_add_to_page_cache", true,
       kBtfOrRaw, kFaults | kCache | kState},
      {"memory", "memory", "iot_mem_pc_delete", "filemap:mm_filemap_delete_from_page_cache", true,
       kBtfOrRaw, kCache | kState},
      // The VMA of a fault comes from the maple tree, else bpf_find_vma (5.17+).
      {"memory", "memory", "iot_mem_fault", "exceptions:page_fault_user", false, kBtfOrRaw,
       kFaults | kSubpage | kState, "bpf_find_vma"},
      {"memory", "memory", "iot_mem_map_pages", "filemap:mm_filemap_map_pages", false, kBtfOrRaw,
       kFaults},
      {"memory", "memory", "iot_mem_get_pages", "filemap:mm_filemap_get_pages", false, kBtfOrRaw,
       kState},
      {"memory", "memory", "iot_mem_ra_unbounded", "readahead:page_cache_ra_unbounded", false,
       kBtfOrRaw, kCache | kState},
      {"memory", "memory", "iot_mem_ra_order", "readahead:page_cache_ra_order", false, kBtfOrRaw,
       kCache | kState},
      {"memory", "memory", "iot_mem_dirty_folio", "writeback:writeback_dirty_folio", false,
       kBtfOrRaw, kWriteback | kSubpage | kState},
      {"memory", "memory", "iot_mem_dirty_inode", "writeback:writeback_mark_inode_dirty", false,
       kBtfOrRaw, kWriteback},
      {"memory", "memory", "iot_mem_wb_inode_start", "writeback:writeback_single_inode_start",
       false, kBtfOrRaw, kWriteback},
      {"memory", "memory", "iot_mem_wb_inode_done", "writeback:writeback_single_inode", false,
       kBtfOrRaw, kWriteback},
      {"memory", "memory", "iot_mem_wb_work_start", "writeback:writeback_start", false, kBtfOrRaw,
       kWriteback},
      {"memory", "memory", "iot_mem_wb_work_done", "writeback:writeback_written", false, kBtfOrRaw,
       kWriteback},
      {"memory", "memory", "iot_mem_wb_wait", "writeback:folio_wait_writeback", false, kBtfOrRaw,
       kWriteback},
      {"memory", "memory", "iot_mem_ext4_writepages", "ext4:ext4_writepages", false, kBtfOrRaw,
       kWriteback},
      {"memory", "memory", "iot_mem_ext4_writepages_result", "ext4:ext4_writepages_result", false,
       kBtfOrRaw, kWriteback},

      {"block", "block", "iot_blk_rq_issue", "block:block_rq_issue", true, kBtfOrRaw},
      {"block", "block", "iot_blk_rq_complete", "block:block_rq_complete", true, kBtfOrRaw},
      {"block", "block", "iot_blk_rq_insert", "block:block_rq_insert", false, kBtfOrRaw},
      {"block", "block", "iot_blk_bio_queue", "block:block_bio_queue", false, kBtfOrRaw},
      {"block", "block", "iot_blk_backmerge", "block:block_bio_backmerge", false, kBtfOrRaw},
      {"block", "block", "iot_blk_frontmerge", "block:block_bio_frontmerge", false, kBtfOrRaw},
      {"block", "block", "iot_blk_getrq", "block:block_getrq", false, kBtfOrRaw},
      {"block", "block", "iot_blk_split", "block:block_split", false, kBtfOrRaw},
      {"block", "block", "iot_blk_bio_remap", "block:block_bio_remap", false, kBtfOrRaw},
      {"block", "block", "iot_blk_bio_complete", "block:block_bio_complete", false, kBtfOrRaw},
      {"block", "block", "iot_blk_rq_requeue", "block:block_rq_requeue", false, kBtfOrRaw},
      {"block", "block", "iot_blk_rq_remap", "block:block_rq_remap", false, kBtfOrRaw},
      {"block", "block", "iot_blk_rq_merge", "block:block_rq_merge", false, kBtfOrRaw},
      {"block", "block", "iot_blk_mark_dirty", "writeback:writeback_mark_inode_dirty", false,
       kBtfOrRaw},
      {"block", "block", "iot_blk_fsync_enter", "ext4:ext4_sync_file_enter", false, kBtfOrRaw},
      {"block", "block", "iot_blk_fsync_exit", "ext4:ext4_sync_file_exit", false, kBtfOrRaw},

      {"nvme", "nvme", "iot_nvme_setup", "nvme:nvme_setup_cmd", true, kBtfOnly},
      {"nvme", "nvme", "iot_nvme_complete", "nvme:nvme_complete_rq", true, kBtfOnly},
      {"nvme", "nvme", "iot_nvme_sq", "nvme:nvme_sq", false, kBtfOnly},

      {"sched", "sched", "iot_sched_switch", "sched:sched_switch", true, kBtfOrRaw},
      {"sched", "sched", "iot_irq_entry", "irq:irq_handler_entry", false, kBtfOrRaw},
      {"sched", "sched", "iot_irq_exit_prog", "irq:irq_handler_exit", false, kBtfOrRaw},
      {"sched", "sched", "iot_softirq_entry", "irq:softirq_entry", false, kBtfOrRaw},
      {"sched", "sched", "iot_softirq_exit", "irq:softirq_exit", false, kBtfOrRaw},
  };
  return kTable;
}

std::vector<std::string_view> AttachLayers() {
  std::vector<std::string_view> layers;
  for (const ProgramAttach& row : AttachTable()) {
    if (layers.empty() || layers.back() != row.layer) layers.push_back(row.layer);
  }
  return layers;
}

std::vector<std::string_view> MemoryProgramsFor(uint8_t parts_on) {
  std::vector<std::string_view> programs;
  for (const ProgramAttach& row : AttachTable()) {
    if (row.object == "memory" && (row.memory_parts & parts_on) != 0) {
      programs.push_back(row.program);
    }
  }
  return programs;
}

std::vector<const ProgramAttach*> RowsNeedingHelper(std::string_view helper) {
  std::vector<const ProgramAttach*> rows;
  for (const ProgramAttach& row : AttachTable()) {
    if (!helper.empty() && row.helper == helper) rows.push_back(&row);
  }
  return rows;
}

const ProgramAttach* FindAttach(std::string_view object, std::string_view program) {
  for (const ProgramAttach& row : AttachTable()) {
    if (row.object == object && row.program == program) return &row;
  }
  return nullptr;
}

const ProgramAttach* RowOfSection(std::string_view object, std::string_view section,
                                  AttachMethod* method) {
  // The section names the event alone (tp_btf/, raw_tp/) or group and event (tp/).
  struct Prefix {
    std::string_view text;
    AttachMethod method;
    bool with_group;
  };
  for (const Prefix& p : {Prefix{"tp_btf/", kBtf, false}, Prefix{"raw_tp/", kRaw, false},
                          Prefix{"tp/", kTp, true}, Prefix{"tracepoint/", kTp, true}}) {
    if (!section.starts_with(p.text)) continue;
    std::string_view target = section.substr(p.text.size());
    for (const ProgramAttach& row : AttachTable()) {
      if (row.object != object) continue;
      if (p.with_group ? target == fmt::format("{}/{}", row.group(), row.event())
                       : target == row.event()) {
        *method = p.method;
        return &row;
      }
    }
    return nullptr;
  }
  return nullptr;
}

std::string ProgramVariant(std::string_view tp_btf_name, AttachMethod m) {
  std::string name(tp_btf_name);
  if (m == AttachMethod::kRawTp) name += "_raw";
  if (m == AttachMethod::kTracepoint) name += "_tp";
  return name;
}

Result<AttachMethod> ForcedAttachMethod() {
  const char* e = getenv("IOTWIN_ATTACH");
  if (!e || !*e) return AttachMethod::kNone;
  AttachMethod m = ParseAttachMethod(e);
  if (m == AttachMethod::kNone) {
    return Status::Invalid("IOTWIN_ATTACH={}: expected tp_btf, raw_tp or tracepoint", e);
  }
  return m == AttachMethod::kTpBtf ? AttachMethod::kNone : m;
}

}  // namespace iotwin::capture
