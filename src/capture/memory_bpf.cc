#include "capture/memory_bpf.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unordered_set>

#include "base/page_cache.h"
#include "capture/attach_plan.h"
#include "capture/attach_table.h"
#include "capture/features.h"
#include "capture/proc_snapshot.h"
#include "format/records.h"
#include "memory.skel.h"
#include "capture_wire.h"
#include "memory_wire.h"

namespace iotwin::capture {
namespace {

std::string Missing(const MemoryKernelSupport& k, std::initializer_list<const char*> tps) {
  std::string out;
  for (const char* tp : tps) {
    if (!k.Has(tp)) out += fmt::format("{}{}", out.empty() ? "" : ", ", tp);
  }
  return out;
}

Status LibbpfStatus(int err, std::string_view what) {
  if (err < 0) err = -err;
  return Status::Error(err == EPERM || err == EACCES ? Status::Code::kPermission
                                                     : Status::Code::kUnsupported,
                       fmt::format("{}: {}", what, strerror(err)));
}

}  // namespace

bool MemoryKernelSupport::Has(std::string_view tracepoint) const {
  for (const auto& [name, present] : tracepoints) {
    if (name == tracepoint) return present;
  }
  return false;
}

MemoryKernelSupport ProbeMemorySupport() {
  // The one probe of this process (Features::Get) and the memory rows of the attach table.
  const Features& features = Features::Get();
  MemoryKernelSupport k;
  k.page_size = sysconf(_SC_PAGESIZE);
  k.btf = features.Has(Feature::kBtf);
  for (const ProgramAttach& row : AttachTable()) {
    if (row.object != "memory") continue;
    k.tracepoints.emplace_back(std::string(row.event()),
                               !features.TracepointBtfSource(row.event()).empty());
  }
  return k;
}

MemoryLayerState PlanMemoryLayer(const MemoryOptions& o, const MemoryKernelSupport& k) {
  MemoryLayerState s;
  const std::string off = o.off_reason.empty() ? "switched off" : o.off_reason;
  auto plan = [&](MemoryPart* part, bool wanted, std::initializer_list<const char*> required,
                  std::string how) {
    if (!wanted) {
      part->reason = off;
      return;
    }
    if (!k.btf) {
      part->reason = "the kernel exposes no BTF (tp_btf programs need it)";
      return;
    }
    std::string missing = Missing(k, required);
    if (!missing.empty()) {
      part->reason = "this kernel lacks the tracepoint(s) " + missing;
      return;
    }
    part->enabled = true;
    part->reason = std::move(how);
  };
  auto partial = [&](std::initializer_list<const char*> optional) {
    std::string missing = Missing(k, optional);
    return missing.empty() ? std::string() : "; this kernel lacks " + missing;
  };
  plan(&s.faults, o.faults, {"page_fault_user", "mm_filemap_add_to_page_cache"},
       "tp_btf page_fault_user with bpf_find_vma: faults on mappings of regular files by traced "
       "threads (anonymous memory dropped in the kernel); major = the faulting page was not in the "
       "page cache as the fault began, or its thread inserted it during the fault; fault-around "
       "window from mm_filemap_map_pages" +
           partial({"mm_filemap_map_pages"}));
  plan(&s.cache, o.cache, {"mm_filemap_add_to_page_cache", "mm_filemap_delete_from_page_cache"},
       "mm_filemap_add/delete_from_page_cache and page_cache_ra_unbounded/ra_order, in traced "
       "threads and for files the workload touched (coalesced into runs of contiguous pages)" +
           partial({"page_cache_ra_unbounded", "page_cache_ra_order"}));
  plan(&s.writeback, o.writeback,
       {"writeback_dirty_folio", "writeback_single_inode_start", "writeback_single_inode"},
       "writeback_dirty_folio (in the dirtier's context), writeback_mark_inode_dirty, "
       "writeback_single_inode[_start] and writeback_start/written (flusher, with reason), "
       "folio_wait_writeback, ext4_writepages[_result] (fsync/msync write-back in the caller's "
       "context), for files the workload touched" +
           partial({"writeback_mark_inode_dirty", "writeback_start", "writeback_written",
                    "folio_wait_writeback", "ext4_writepages", "ext4_writepages_result"}));
  if (!o.state) {
    s.state.reason = off;
  } else if (k.btf && k.Has("mm_filemap_add_to_page_cache")) {
    s.state.enabled = true;
    s.state_in_kernel = true;
    s.state.reason =
        "the file's page count in the page cache (mapping->nrpages) at the first event of a "
        "traced thread on it (fault, insertion, removal, readahead, read, dirtying), before the "
        "workload changes it; at attach, cachestat/mincore of the files a --pid target holds" +
        partial({"page_fault_user", "mm_filemap_get_pages", "writeback_dirty_folio"});
  } else {
    s.StateFallBackToUserSpace("this kernel lacks mm_filemap_add_to_page_cache");
  }
  if (!o.subpage) {
    s.subpage.reason = "off (opt-in: --subpage)";
  } else if (k.page_size != 4096) {
    s.subpage.reason = fmt::format("needs 4 KiB pages, this system has {}-byte pages", k.page_size);
  } else {
    plan(&s.subpage, true, {"page_fault_user", "writeback_dirty_folio"},
         fmt::format("pages copied in the kernel when a store through a shared mapping dirties "
                     "them, compared word by word every {} ms",
                     o.subpage_interval_ms));
  }
  return s;
}

uint8_t MemoryPartsOn(const MemoryLayerState& s) {
  uint8_t on = 0;
  if (s.faults.enabled) on |= kMemoryFaults;
  if (s.cache.enabled) on |= kMemoryCache;
  if (s.writeback.enabled) on |= kMemoryWriteback;
  if (s.subpage.enabled) on |= kMemorySubpage;
  if (s.state.enabled && s.state_in_kernel) on |= kMemoryState;
  return on;
}

void MemoryLayerState::StateFallBackToUserSpace(const std::string& why) {
  if (!state.enabled) return;
  state_in_kernel = false;
  state.reason = fmt::format(
      "{} of each regular file when the consumer sees the workload open or map it (taken after "
      "the open returned: the workload's first accesses may already be counted; {})",
      CachestatAvailable() ? "cachestat(2)" : "mmap + mincore(2)", why);
}

nlohmann::json MemoryLayerState::ToJson() const {
  nlohmann::json parts;
  auto put = [&parts](const char* name, const MemoryPart& p) {
    parts[name] = {{"enabled", p.enabled}, {"reason", p.reason}};
  };
  put("faults", faults);
  put("cache", cache);
  put("writeback", writeback);
  put("state", state);
  put("subpage", subpage);
  std::string on;
  for (const auto& [name, p] : parts.items()) {
    if (p["enabled"].get<bool>()) on += (on.empty() ? "" : ", ") + name;
  }
  bool any = AnyKernelPart() || state.enabled;
  return {{"enabled", any},
          {"reason", any ? "parts on: " + on : "all parts off (see parts)"},
          {"parts", parts}};
}

Result<std::unique_ptr<MemoryBpf>> MemoryBpf::Load(const MemoryLayerState& plan,
                                                   const MemorySharedMaps& shared) {
  std::unique_ptr<MemoryBpf> loaded;
  // A program loads when a part it serves is on (and, by the plan, the kernel has its
  // tracepoint). A failed try's MemoryBpf is destroyed with its result: nothing stays loaded.
  const uint8_t parts_on = MemoryPartsOn(plan);
  auto done = LoadByPlan(
      "memory",
      [&](const AttachPlan& attach) {
        auto m = LoadPlanned(plan, shared, attach);
        if (!m.ok()) return m.status();
        loaded = std::move(m).value();
        return Status::Ok();
      },
      [parts_on](const ProgramAttach& row) { return (row.memory_parts & parts_on) != 0; });
  if (!done.ok()) return done.status();
  return loaded;
}

Result<std::unique_ptr<MemoryBpf>> MemoryBpf::LoadPlanned(const MemoryLayerState& plan,
                                                          const MemorySharedMaps& shared,
                                                          const AttachPlan& attach) {
  std::unique_ptr<MemoryBpf> m(new MemoryBpf());
  int ncpus = libbpf_num_possible_cpus();
  m->ncpus_ = ncpus > 0 ? ncpus : 1;
  m->skel_ = iotwin_memory_bpf__open();
  if (!m->skel_) return LibbpfStatus(errno, "opening the memory BPF object");
  auto* ro = m->skel_->rodata;
  ro->iot_filter_cgroup_id = shared.cgroup_id;
  ro->iot_self_tgid = shared.self_tgid;
  ro->iot_wake_bytes = shared.wake_bytes;
  ro->iot_mem_emit_faults = plan.faults.enabled;
  ro->iot_mem_emit_cache = plan.cache.enabled;
  ro->iot_mem_emit_writeback = plan.writeback.enabled;
  ro->iot_mem_subpage = plan.subpage.enabled;
  ro->iot_mem_emit_state = plan.state.enabled && plan.state_in_kernel;

  struct {
    bpf_map* map;
    int fd;
  } share[] = {{m->skel_->maps.iot_events, shared.events_fd},
               {m->skel_->maps.iot_traced_tgids, shared.traced_fd},
               {m->skel_->maps.iot_drops, shared.drops_fd}};
  for (auto& s : share) {
    int err = bpf_map__reuse_fd(s.map, s.fd);
    if (err) return LibbpfStatus(err, fmt::format("sharing map {}", bpf_map__name(s.map)));
  }
  if (shared.inodes_fd >= 0) {
    int err = bpf_map__reuse_fd(m->skel_->maps.iot_mem_inodes, shared.inodes_fd);
    if (err) return LibbpfStatus(err, "sharing map iot_mem_inodes");
  }

  SelectPlan(m->skel_->obj, attach);
  m->attach_plan_ = attach;
  m->attach_kind_ = DescribePlan(attach);
  int err = iotwin_memory_bpf__load(m->skel_);
  if (err) return LibbpfStatus(err, "loading the memory BPF programs");
  return m;
}

MemoryBpf::~MemoryBpf() {
  Detach();
  if (skel_) iotwin_memory_bpf__destroy(skel_);
}

Status MemoryBpf::Attach(std::vector<std::string>* notes) {
  AttachOutcome out = AttachPlanned(skel_->obj, "memory", attach_plan_, &links_);
  if (!out.required.ok()) {
    const std::string& why = out.required.message();
    notes->push_back("memory: " + why.substr(0, why.find('\n')));
  }
  for (const std::string& missed : out.missed) notes->push_back("memory: " + missed);
  return Status::Ok();
}

void MemoryBpf::Detach() {
  for (bpf_link* l : links_) bpf_link__destroy(l);
  links_.clear();
}

namespace {

Status AddInode(int map_fd, uint64_t ino, uint32_t dev, const char* what) {
  const iot_inode_key key{ino, dev, 0};
  uint8_t one = 1;
  if (bpf_map_update_elem(map_fd, &key, &one, BPF_NOEXIST) && errno != EEXIST) {
    return Status::FromErrno(errno, what);
  }
  return Status::Ok();
}

}  // namespace

Status MemoryBpf::MarkInode(uint64_t ino, uint32_t dev) {
  return AddInode(bpf_map__fd(skel_->maps.iot_mem_inodes), ino, dev,
                  "adding a file to the memory layer's inode set");
}

Status MemoryBpf::MarkStateDone(uint64_t ino, uint32_t dev) {
  return AddInode(bpf_map__fd(skel_->maps.iot_mem_state_done), ino, dev,
                  "adding a file to the memory layer's cache-state set");
}

namespace {

Status EmitRun(const iot_mem_run& r, int kind, uint32_t tgid, uint32_t tid, bool cache, bool wb,
               const RecordSink& sink) {
  if (!r.nr) return Status::Ok();
  if (kind == IOT_MEM_RUN_ADD || kind == IOT_MEM_RUN_DEL) {
    if (!cache) return Status::Ok();
    iot_page_cache c;
    memset(&c, 0, sizeof c);
    InitRecord(&c, IOT_REC_PAGE_CACHE);
    c.kind = kind == IOT_MEM_RUN_ADD ? IOT_PC_ADD : IOT_PC_DELETE;
    c.cpu = r.cpu;
    c.ts = r.ts;
    c.ino = r.ino;
    c.index = r.start;
    c.nr_pages = r.nr;
    c.dev = r.dev;
    c.tgid = tgid;
    c.tid = tid;
    return sink(&c.hdr);
  }
  if (!wb) return Status::Ok();
  iot_writeback w;
  memset(&w, 0, sizeof w);
  InitRecord(&w, IOT_REC_WRITEBACK);
  w.kind = kind == IOT_MEM_RUN_DIRTY ? IOT_WB_DIRTY_FOLIO : IOT_WB_WAIT;
  w.ts = r.ts;
  w.ino = r.ino;
  w.index = r.start;
  w.nr = r.nr;
  w.dev = r.dev;
  w.tgid = tgid;
  w.tid = tid;
  return sink(&w.hdr);
}

}  // namespace

namespace {

// A fault the kernel could not look up the VMA of, resolved from the process's current maps.
enum class Resolved { kFile, kAnonymous, kUnknown };
Resolved ResolveFromMaps(iot_mem_thread* t) {
  std::ifstream in(fmt::format("/proc/{}/maps", t->pf.tgid));
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long start = 0, end = 0;
    if (sscanf(line.c_str(), "%llx-%llx", &start, &end) != 2) continue;
    if (t->pf.addr < start || t->pf.addr >= end) continue;
    MapEntry m;
    if (!ParseMapsLine(line, &m) || m.ino == 0) return Resolved::kAnonymous;
    t->pf.ino = m.ino;
    t->pf.dev = m.dev;
    t->pf.pgoff = (t->pf.addr - m.start) / 4096 + m.pgoff / 4096;
    if (m.flags & MAP_SHARED) t->pf.flags |= IOT_PFF_SHARED;
    t->pf.around_start = t->pf.pgoff;
    t->pf.nr_pages = 0;
    if (t->ur_ino == m.ino && t->ur_dev == m.dev && t->ur_start <= t->pf.pgoff &&
        t->pf.pgoff <= t->ur_last) {
      t->pf.around_start = t->ur_start;
      t->pf.nr_pages = static_cast<uint32_t>(t->ur_last - t->ur_start + 1);
    }
    if (iot_mem_unresolved_was_major(t)) t->pf.flags |= IOT_PFF_MAJOR;
    return Resolved::kFile;
  }
  return Resolved::kUnknown;
}

// A thread entry's pending fault is held back from an idle sweep while its thread is still inside
// that fault, blocked (normally waiting for the page's read): the fault's outcome, the
// fault-around window of its retry and the major flag, arrives only when the read completes,
// into this entry. Taken before, the fault is emitted with a window of one page and the pages the
// retry maps are in no record. Bounded, so a thread stopped for good still has its fault emitted.
constexpr uint64_t kMaxFaultHoldNs = 30ull * 1000 * 1000 * 1000;

// Whether thread `tid` of `tgid` is blocked outside any system call, i.e. in a user page fault:
// /proc/TID/syscall reads "-1 SP PC" then ("running" for a runnable thread, the call's number for
// one blocked in a system call, nothing for a thread that is gone).
bool BlockedInFault(uint32_t tgid, uint32_t tid) {
  std::ifstream in(fmt::format("/proc/{}/task/{}/syscall", tgid, tid));
  std::string first;
  return static_cast<bool>(in >> first) && first == "-1";
}

}  // namespace

Status MemoryBpf::Sweep(uint64_t now_ns, uint64_t min_idle_ns, const RecordSink& sink,
                        SweepCounts* counts) {
  int fd = bpf_map__fd(skel_->maps.iot_mem_threads);
  const bool faults = skel_->rodata->iot_mem_emit_faults;
  const bool cache = skel_->rodata->iot_mem_emit_cache;
  const bool wb = skel_->rodata->iot_mem_emit_writeback;
  // Keys first: deleting while walking would restart the walk. Each idle key keeps the entry's
  // last_ts as seen, to tell whether its thread woke up before the entry was taken.
  std::vector<std::pair<uint32_t, uint64_t>> idle;
  std::unordered_set<uint32_t> held;
  uint32_t key = 0, next = 0;
  const void* prev = nullptr;
  iot_mem_thread t;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    key = next;
    prev = &key;
    if (bpf_map_lookup_elem(fd, &key, &t) != 0) continue;
    if (min_idle_ns == 0) {
      idle.emplace_back(key, t.last_ts);
      continue;
    }
    // Active: used within min_idle_ns, or since `now_ns` was read (the thread faulted during this
    // walk; taken now, its fault would be emitted before its fault-around window is known).
    if (t.last_ts > now_ns || now_ns - t.last_ts < min_idle_ns) continue;
    if (t.pf.hdr.type == IOT_REC_PAGE_FAULT && now_ns - t.last_ts < kMaxFaultHoldNs) {
      // Blocked in the fault now, or at the previous sweep: a thread woken by the read's end is
      // runnable, not yet retrying, for as long as the CPUs are busy elsewhere; one more sweep
      // period lets the retry's fault-around reach the entry.
      bool blocked = BlockedInFault(t.tgid, key);
      if (blocked || held_last_sweep_.count(key)) {
        if (blocked) held.insert(key);
        counts->faults_held++;
        continue;
      }
    }
    idle.emplace_back(key, t.last_ts);
  }
  held_last_sweep_ = std::move(held);
  for (auto [tid, seen_last_ts] : idle) {
    // Taking the entry atomically: a thread that resumes now creates a new one.
    if (bpf_map_lookup_and_delete_elem(fd, &tid, &t) != 0) continue;
    if (min_idle_ns != 0 && t.last_ts != seen_last_ts &&
        bpf_map_update_elem(fd, &tid, &t, BPF_NOEXIST) == 0) {
      // The thread faulted since the walk saw its entry idle: the entry goes back, its fault still
      // in progress (unless the thread has already made a new entry: then it is emitted below).
      counts->reinstated++;
      continue;
    }
    counts->entries++;
    bool emit = t.pf.hdr.type == IOT_REC_PAGE_FAULT;
    if (emit && t.unresolved) {
      switch (ResolveFromMaps(&t)) {
        case Resolved::kFile: counts->faults_resolved++; break;
        case Resolved::kAnonymous: counts->faults_anonymous++; emit = false; break;
        case Resolved::kUnknown: counts->faults_unresolved++; emit = false; break;
      }
    }
    if (emit && faults) IOTWIN_RETURN_IF_ERROR(sink(&t.pf.hdr));
    for (int k = 0; k < IOT_MEM_RUNS; k++) {
      IOTWIN_RETURN_IF_ERROR(EmitRun(t.runs[k], k, t.tgid, tid, cache, wb, sink));
    }
  }
  return Status::Ok();
}

int MemoryBpf::inodes_fd() const { return bpf_map__fd(skel_->maps.iot_mem_inodes); }
int MemoryBpf::state_done_fd() const { return bpf_map__fd(skel_->maps.iot_mem_state_done); }

Result<std::array<uint64_t, 16>> MemoryBpf::ReadStats() const {
  static_assert(IOT_MEM_STAT_MAX <= 16);
  std::array<uint64_t, 16> out{};
  std::vector<uint64_t> per_cpu(ncpus_);
  int fd = bpf_map__fd(skel_->maps.iot_mem_stats);
  for (uint32_t i = 0; i < IOT_MEM_STAT_MAX; i++) {
    if (bpf_map_lookup_elem(fd, &i, per_cpu.data())) {
      return Status::FromErrno(errno, "reading the memory layer's counters");
    }
    for (uint64_t v : per_cpu) out[i] += v;
  }
  return out;
}

const char* MemoryBpf::StatName(size_t i) {
  static const char* kNames[IOT_MEM_STAT_MAX] = {
      "vma_lookups_busy",     "vma_not_found",        "anonymous_faults_dropped",
      "special_file_faults",  "inode_set_full",       "thread_map_full",
      "baselines_copied",     "baselines_without_data", "baseline_pages_over_cap",
      "address_calibrations", "cache_state_set_full", "vma_lookups_cached",
      "vma_lookups_retried_ok", "vma_lookups_lost", "vma_lookups_by_helper",
      "untouched_removed_pages",
  };
  return i < IOT_MEM_STAT_MAX ? kNames[i] : "unknown";
}

}  // namespace iotwin::capture
