#include "capture/memory_tracker.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/page_cache.h"
#include "capture/proc_snapshot.h"
#include "format/records.h"
#include "memory_wire.h"

namespace iotwin::capture {
namespace {

constexpr uint64_t kMs = 1000000ull;
// A thread entry idle this long is flushed: no fault of this kernel lasts that long in practice,
// and records then reach the trace well within a second of their time.
constexpr uint64_t kSweepIdleNs = 250 * kMs;
constexpr uint64_t kSweepEveryNs = 100 * kMs;
constexpr uint16_t kRegularFile = 8;  // S_IFREG >> 12

uint64_t Mono() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Opens a file the traced process holds, without changing its access time.
int OpenProcLink(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOATIME);
  if (fd < 0 && errno == EPERM) fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  return fd;
}

}  // namespace

MemoryTracker::MemoryTracker(const MemoryOptions& options, const MemoryLayerState& plan,
                             MemoryBpf* bpf, TraceWriter* writer, RecordSink sink)
    : options_(options), plan_(plan), bpf_(bpf), writer_(writer), sink_(std::move(sink)) {
  if (plan_.subpage.enabled && bpf_) {
    subpage_ = std::make_unique<SubpageTracker>(
        options_.subpage_max_bytes,
        [this](const iot_subpage& rec) { return sink_(&rec.hdr); });
  }
}

void MemoryTracker::Connect(RingConsumer* consumer) {
  consumer->SetSyscallObserver([this](const iot_syscall& sc) { OnSyscall(sc); });
  consumer->SetWireHandler(IOT_WIRE_PAGE_BASELINE, [this](const uint8_t* data, size_t size) {
    return OnBaseline(data, size);
  });
  consumer->SetWireHandler(IOT_WIRE_CACHE_STATE, [this](const uint8_t* data, size_t size) {
    return OnCacheState(data, size);
  });
}

void MemoryTracker::OnSyscall(const iot_syscall& sc) {
  int fd;
  uint64_t map_start = 0, map_len = 0;
  switch (sc.op) {
    case IOT_OP_OPEN:
    case IOT_OP_OPENAT:
    case IOT_OP_OPENAT2:
    case IOT_OP_CREAT:
      if (sc.ret < 0) return;
      fd = static_cast<int>(sc.ret);
      break;
    case IOT_OP_MMAP:
      if (sc.ret < 0 && sc.ret > -4096) return;  // failed
      if (sc.fd < 0) return;                     // anonymous
      fd = sc.fd;
      map_start = static_cast<uint64_t>(sc.ret);
      map_len = sc.length;
      break;
    default:
      return;
  }
  if (sc.ftype != kRegularFile || sc.ino == 0 || (sc.sflags & IOT_SCF_NO_FILE)) return;
  if (sc.path_id) path_ids_.emplace(std::make_pair(sc.dev, sc.ino), sc.path_id);
  if (!seen_files_.emplace(sc.dev, sc.ino).second) return;
  if (!error_.ok()) return;
  if (bpf_ && (plan_.cache.enabled || plan_.writeback.enabled)) {
    Status st = bpf_->MarkInode(sc.ino, sc.dev);
    if (!st.ok()) {
      error_ = st;
      return;
    }
  }
  // In the kernel, the state is taken at the file's first touch (OnCacheState).
  if (!plan_.state.enabled || plan_.state_in_kernel) return;
  Status st = MeasureOpenFile(static_cast<pid_t>(sc.tgid), fd, sc.path_id, sc.ino, sc.dev,
                              map_start, map_len);
  if (!st.ok()) error_ = st;
}

Status MemoryTracker::MeasureOpenFile(pid_t tgid, int fd, uint32_t path_id, uint64_t ino,
                                      uint32_t dev, uint64_t map_start, uint64_t map_len) {
  std::string path = fmt::format("/proc/{}/fd/{}", tgid, fd);
  // A file mapped and closed already is still reachable through its mapping.
  if (map_len > 0 && access(path.c_str(), F_OK) != 0) {
    uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    uint64_t end = map_start + (map_len + page - 1) / page * page;
    path = fmt::format("/proc/{}/map_files/{:x}-{:x}", tgid, map_start, end);
  }
  return MeasurePath(path, path_id, "", ino, dev);
}

Status MemoryTracker::MeasurePath(const std::string& proc_path, uint32_t path_id,
                                  const std::string& name, uint64_t ino, uint32_t dev) {
  UniqueFd fd(OpenProcLink(proc_path));
  struct stat st;
  if (!fd.valid() || fstat(fd.get(), &st) != 0 || st.st_ino != ino ||
      KernelDev(st.st_dev) != dev) {
    // Closed (or the descriptor reused) before the consumer got here: nothing to measure.
    cache_state_failed_++;
    return Status::Ok();
  }
  auto res = MeasureResidency(fd.get());
  if (!res.ok()) {
    cache_state_failed_++;
    return Status::Ok();
  }
  iot_cache_state cs;
  memset(&cs, 0, sizeof cs);
  InitRecord(&cs, IOT_REC_CACHE_STATE);
  if (path_id == 0) {
    std::string target = name;
    if (target.empty()) {
      char buf[4096];
      ssize_t n = readlink(proc_path.c_str(), buf, sizeof buf);
      if (n > 0) target.assign(buf, static_cast<size_t>(n));
    }
    if (!target.empty()) {
      IOTWIN_ASSIGN_OR_RETURN(path_id, writer_->InternString(target));
    }
  }
  cs.path_id = path_id;
  cs.ts = Mono();
  cs.ino = ino;
  cs.dev = dev;
  cs.fsize = res->fsize;
  cs.resident_pages = res->resident_pages;
  cs.total_pages = res->total_pages;
  cache_state_records_++;
  return sink_(&cs.hdr);
}

Status MemoryTracker::OnAttach(pid_t pid) {
  auto fds = SnapshotFds(pid);
  if (fds.ok()) {
    for (const FdEntry& f : fds.value()) {
      if (f.ftype != kRegularFile || !seen_files_.emplace(f.dev, f.ino).second) continue;
      if (bpf_ && (plan_.cache.enabled || plan_.writeback.enabled)) {
        IOTWIN_RETURN_IF_ERROR(bpf_->MarkInode(f.ino, f.dev));
      }
      if (plan_.state.enabled) {
        // Measured here, at attach: the kernel must not take it again at first touch.
        if (bpf_ && plan_.state_in_kernel) IOTWIN_RETURN_IF_ERROR(bpf_->MarkStateDone(f.ino, f.dev));
        IOTWIN_RETURN_IF_ERROR(
            MeasurePath(fmt::format("/proc/{}/fd/{}", pid, f.fd), 0, f.path, f.ino, f.dev));
      }
    }
  }
  auto maps = SnapshotFileMaps(pid);
  if (maps.ok()) {
    for (const MapEntry& m : maps.value()) {
      if (m.ino == 0 || !seen_files_.emplace(m.dev, m.ino).second) continue;
      if (bpf_ && (plan_.cache.enabled || plan_.writeback.enabled)) {
        IOTWIN_RETURN_IF_ERROR(bpf_->MarkInode(m.ino, m.dev));
      }
      if (plan_.state.enabled) {
        if (bpf_ && plan_.state_in_kernel) IOTWIN_RETURN_IF_ERROR(bpf_->MarkStateDone(m.ino, m.dev));
        IOTWIN_RETURN_IF_ERROR(MeasurePath(
            fmt::format("/proc/{}/map_files/{:x}-{:x}", pid, m.start, m.end), 0, m.path, m.ino,
            m.dev));
      }
    }
  }
  return Status::Ok();
}

Result<uint32_t> MemoryTracker::PathOf(uint32_t dev, uint64_t ino, pid_t tgid) {
  auto key = std::make_pair(dev, ino);
  auto it = path_ids_.find(key);
  if (it != path_ids_.end()) return it->second;
  // Opened before the capture (inherited, or a --pid target): find it among the process's
  // descriptors and mappings.
  std::string name;
  if (auto fds = SnapshotFds(tgid); fds.ok()) {
    for (const FdEntry& f : fds.value()) {
      if (f.ino == ino && f.dev == dev) name = f.path;
    }
  }
  if (name.empty()) {
    if (auto maps = SnapshotFileMaps(tgid); maps.ok()) {
      for (const MapEntry& m : maps.value()) {
        if (m.ino == ino && m.dev == dev) name = m.path;
      }
    }
  }
  uint32_t id = 0;
  if (!name.empty()) {
    IOTWIN_ASSIGN_OR_RETURN(id, writer_->InternString(name));
  }
  path_ids_.emplace(key, id);
  return id;
}

Status MemoryTracker::OnCacheState(const uint8_t* data, size_t size) {
  iot_wire_cache_state w;
  if (size < sizeof(w)) {
    bad_wire_records_++;
    return Status::Ok();
  }
  memcpy(&w, data, sizeof(w));
  iot_cache_state cs = w.cs;
  InitRecord(&cs, IOT_REC_CACHE_STATE);
  IOTWIN_ASSIGN_OR_RETURN(cs.path_id, PathOf(cs.dev, cs.ino, static_cast<pid_t>(w.tgid)));
  cache_state_records_++;
  return sink_(&cs.hdr);
}

Status MemoryTracker::OnBaseline(const uint8_t* data, size_t size) {
  iot_wire_page_baseline b;
  if (size < sizeof(b) || !subpage_) {
    bad_wire_records_++;
    return Status::Ok();
  }
  memcpy(&b, data, sizeof(b));
  PageBaseline pb;
  pb.ts = b.ts;
  pb.ino = b.ino;
  pb.dev = b.dev;
  pb.pgoff = b.pgoff;
  pb.tgid = b.tgid;
  pb.vm_start = b.vm_start;
  pb.vm_end = b.vm_end;
  pb.data = (b.flags & IOT_MEM_BASELINE_HAS_DATA)
                ? data + offsetof(iot_wire_page_baseline, data)
                : nullptr;
  return subpage_->OnBaseline(pb);
}

Status MemoryTracker::Poll(uint64_t now_ns) {
  if (!error_.ok()) return error_;
  if (bpf_ && now_ns >= next_sweep_ns_) {
    next_sweep_ns_ = now_ns + kSweepEveryNs;
    IOTWIN_RETURN_IF_ERROR(bpf_->Sweep(now_ns, kSweepIdleNs, sink_, &swept_));
  }
  if (subpage_ && now_ns >= next_sample_ns_) {
    next_sample_ns_ = now_ns + static_cast<uint64_t>(options_.subpage_interval_ms) * kMs;
    IOTWIN_RETURN_IF_ERROR(subpage_->Sample(now_ns));
  }
  return Status::Ok();
}

Status MemoryTracker::Finish(uint64_t now_ns) {
  if (!error_.ok()) return error_;
  if (bpf_) {
    IOTWIN_RETURN_IF_ERROR(bpf_->Sweep(now_ns, 0, sink_, &swept_));
    auto stats = bpf_->ReadStats();
    if (stats.ok()) {
      for (size_t i = 0; i < IOT_MEM_STAT_MAX; i++) {
        kernel_stats_[MemoryBpf::StatName(i)] = stats.value()[i];
      }
    }
  }
  if (subpage_) IOTWIN_RETURN_IF_ERROR(subpage_->Sample(now_ns));
  return Status::Ok();
}

nlohmann::json MemoryTracker::Summary() const {
  nlohmann::json s;
  s["cache_state_records"] = cache_state_records_;
  s["cache_state_unmeasured"] = cache_state_failed_;
  s["thread_entries_flushed_idle"] = swept_.entries;
  s["late_faults_resolved_from_maps"] = swept_.faults_resolved;
  s["late_faults_anonymous"] = swept_.faults_anonymous;
  s["late_faults_lost"] = swept_.faults_unresolved;
  s["faults_held_in_progress"] = swept_.faults_held;
  s["thread_entries_reinstated"] = swept_.reinstated;
  s["kernel"] = kernel_stats_;
  if (bad_wire_records_) s["bad_wire_records"] = bad_wire_records_;
  if (subpage_) {
    const SubpageStats& st = subpage_->stats();
    s["subpage"] = {{"baselines", st.baselines},
                    {"baselines_without_data", st.baselines_without_data},
                    {"samples", st.samples},
                    {"records", st.records},
                    {"changed_words", st.changed_words},
                    {"pages_max", st.pages_max},
                    {"pages_cleaned", st.pages_cleaned},
                    {"pages_evicted", st.pages_evicted},
                    {"files_unopenable", st.files_unopenable},
                    {"over_budget", st.over_budget}};
  }
  return s;
}

}  // namespace iotwin::capture
