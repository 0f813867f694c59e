// MemoryTracker: the user-space half of the memory layer during `iotwin record`.
//
// - Initial cache state: when the ring consumer hands over the first open or mmap of a regular
//   file, the file is opened through /proc/PID/fd (or /proc/PID/map_files) and its page-cache
//   residency measured into a CACHE_STATE record; the file also joins the kernel's set of
//   interesting inodes. For --pid targets the same happens at attach for every file they have
//   open or mapped.
// - Per-thread entries the kernel keeps (pending faults, page runs) are flushed when idle.
// - The sub-page tracker (--subpage) receives page baselines from the ring and samples.
// docs/memory-layer.md explains the choices and their limits.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "capture/memory_bpf.h"
#include "capture/memory_options.h"
#include "capture/memory_subpage.h"
#include "capture/ring_consumer.h"
#include "format/trace_writer.h"
#include "iotwin_abi.h"

namespace iotwin::capture {

class MemoryTracker {
 public:
  // `bpf` may be null (kernel parts off). `sink` appends a record to the trace (and counts it);
  // `writer` interns path strings. Both must outlive the tracker.
  MemoryTracker(const MemoryOptions& options, const MemoryLayerState& plan, MemoryBpf* bpf,
                TraceWriter* writer, RecordSink sink);

  // Registers with the ring consumer: syscall records and the memory layer's wire records.
  void Connect(RingConsumer* consumer);

  // A SYSCALL record the consumer appended. Errors are kept and returned by Poll/Finish.
  void OnSyscall(const iot_syscall& sc);
  // Ring records of the memory layer's wire types (memory_wire.h).
  Status OnBaseline(const uint8_t* data, size_t size);
  Status OnCacheState(const uint8_t* data, size_t size);
  // A --pid target: cache state of the files it already has open or mapped.
  Status OnAttach(pid_t pid);
  // From the capture loop: flushes idle kernel entries, samples sub-page changes when due.
  Status Poll(uint64_t now_ns);
  // After the programs are detached and the ring drained: flushes everything.
  Status Finish(uint64_t now_ns);

  // The footer summary's "memory" object.
  nlohmann::json Summary() const;

 private:
  Status MeasureOpenFile(pid_t tgid, int fd, uint32_t path_id, uint64_t ino, uint32_t dev,
                         uint64_t map_start, uint64_t map_len);
  Status MeasurePath(const std::string& proc_path, uint32_t path_id, const std::string& name,
                     uint64_t ino, uint32_t dev);
  // The string id naming file (dev, ino): from the workload's open, else found through
  // /proc/TGID (0 when nothing names it).
  Result<uint32_t> PathOf(uint32_t dev, uint64_t ino, pid_t tgid);

  MemoryOptions options_;
  MemoryLayerState plan_;
  MemoryBpf* bpf_;
  TraceWriter* writer_;
  RecordSink sink_;
  std::unique_ptr<SubpageTracker> subpage_;
  std::set<std::pair<uint32_t, uint64_t>> seen_files_;  // (dev, ino)
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> path_ids_;  // (dev, ino) -> string id
  Status error_;
  uint64_t next_sweep_ns_ = 0;
  uint64_t next_sample_ns_ = 0;
  // counts for the summary
  uint64_t cache_state_records_ = 0;
  uint64_t cache_state_failed_ = 0;  // file closed or gone before it could be measured
  uint64_t entries_swept_ = 0;
  uint64_t bad_wire_records_ = 0;
  nlohmann::json kernel_stats_ = nlohmann::json::object();
};

}  // namespace iotwin::capture
