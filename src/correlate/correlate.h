// Cross-layer correlation of one trace: which system call, io_uring/libaio request, page fault
// or file write-back caused each block request, which bios made it, which NVMe command served
// it, and what disturbed it (docs/block-layer.md, "Correlation").
//
// Pure: it reads nothing but the trace. Join keys: the thread and time of a call for I/O issued
// synchronously (the bio is queued by the calling thread inside the call); bio and request
// identities carried by the BLOCK records (bio_id, parent_id of a split, rq_id); the request
// identity carried by NVME records; (device, inode, page range) for write-back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/checked_math.h"
#include "base/status.h"
#include "iotwin_abi.h"

namespace iotwin::correlate {

inline constexpr size_t kNone = static_cast<size_t>(-1);

// Why a request happened.
enum class Cause : uint8_t {
  kSyscall,       // queued by the thread inside this call (synchronous, direct, fsync/msync)
  kAsync,         // an io_uring or libaio request
  kPageFault,     // a fault of the thread on a file mapping (needs the memory layer)
  kWriteback,     // another thread (the flusher) writing back pages of a file of interest
  kReadahead,     // readahead of a file of interest by another thread
  kSyncInduced,   // journal commit or cache flush done by the kernel for a traced fsync
  kUnattributed,  // none of the above: `why` says what was missing
};
const char* CauseName(Cause c);

struct Syscall {
  uint64_t ts = 0, dur = 0;
  uint32_t tgid = 0, tid = 0;
  uint16_t op = 0;
  int32_t fd = -1;
  int64_t ret = 0;
  uint64_t offset = 0, length = 0;
  uint64_t ino = 0;
  uint32_t dev = 0;  // the file's super block
  uint16_t ftype = 0;  // S_IFMT >> 12 (8 regular file, 6 block device)
  uint64_t end() const { return SaturatingAdd(ts, dur); }  // both from the trace
  std::vector<size_t> requests;  // requests it caused, in issue order
};

struct PageFault {
  uint64_t ts = 0;
  uint32_t tgid = 0, tid = 0;
  uint64_t ino = 0, pgoff = 0;
  uint32_t dev = 0;
  uint16_t flags = 0;
};

struct AsyncRequest {
  uint8_t engine = 0, opcode = 0;
  uint64_t submit_ts = 0, complete_ts = 0;  // 0: not seen
  uint32_t tgid = 0, tid = 0;
  uint64_t req_id = 0, user_data = 0, offset = 0, length = 0;
  int32_t fd = -1;
  int64_t res = 0;
  std::vector<size_t> requests;
};

struct Bio {
  uint64_t id = 0, parent_id = 0;
  uint64_t q_ts = 0, x_ts = 0, g_ts = 0, m_ts = 0, a_ts = 0;
  uint32_t dev = 0;
  uint64_t sector = 0;
  uint32_t bytes = 0, flags = 0;
  uint32_t tgid = 0, tid = 0;
  uint64_t ino = 0, pgoff = 0;
  uint32_t ino_dev = 0;
  std::string comm;
  // What is left of the bio after the pieces split off its front (X): where it joins a
  // request by position when no request record names it.
  uint64_t rest_sector = 0;
  uint32_t rest_bytes = 0;
  bool queued = false;  // has a Q record (a root bio), else a split piece (X)
  bool merged = false;  // went into an existing request (M or F)
  size_t request = kNone;
};

struct NvmeCommand {
  uint64_t setup_ts = 0, complete_ts = 0;
  uint8_t opcode = 0;
  uint16_t qid = 0, cid = 0, status = 0;
  uint32_t nsid = 0, ctrl = 0, nlb = 0, lba_size = 0, dev = 0;
  uint64_t slba = 0;
  uint32_t cdw10 = 0, cdw11 = 0, cdw12 = 0;
};

// Time a request's submitter lost while the request was in flight.
struct Interference {
  uint64_t offcpu_blocked_ns = 0;    // off CPU, waiting (usually for this very I/O)
  uint64_t offcpu_preempted_ns = 0;  // off CPU while runnable: preempted
  uint64_t hardirq_ns = 0, softirq_ns = 0;
  uint32_t intervals = 0;
  uint64_t disturbed_ns() const {
    return SaturatingAdd(SaturatingAdd(offcpu_preempted_ns, hardirq_ns), softirq_ns);
  }
};

// One request's time split by layer, along the path of the application I/O that caused it. For
// a request of a call or async request: app_to_q + q2d + d2c + c_to_app equals the call's own
// duration (`total`); `deviation` is what is left when events are out of order (a request that
// completed after its call returned, for instance).
struct RequestLayers {
  bool has_app = false;  // linked to a call or async request with a start and an end
  int64_t app_to_q = 0;  // syscall entry / async submit -> Q: syscall and file-system layer
  int64_t q2g = -1, g2i = -1, i2d = -1;  // btt phases where the events exist (-1: absent)
  int64_t q2d = -1;      // block layer: Q -> D (-1 when never issued)
  int64_t d2c = -1;      // driver + device
  int64_t q2c = -1;
  int64_t nvme = -1;     // NVMe setup -> complete (the controller), where present
  int64_t c_to_app = 0;  // C -> call exit / completion seen by the application
  int64_t total = 0;
  int64_t deviation = 0;
};

struct Request {
  uint64_t id = 0;
  uint32_t dev = 0;
  uint64_t sector = 0;
  uint64_t bytes = 0;  // at issue (or at the first completion when never issued)
  uint32_t flags = 0;  // IOT_BLKF_*
  uint64_t q_ts = 0;   // earliest Q of its bios (or of their ancestors)
  uint64_t g_ts = 0, i_ts = 0, d_ts = 0, c_ts = 0, merged_ts = 0;
  uint64_t completed_bytes = 0;
  uint32_t requeues = 0;
  int32_t error = 0;
  bool completed = false;
  bool merged_away = false;  // merged into another request (no completion of its own)
  uint32_t tgid = 0, tid = 0;  // the submitter (of its first bio)
  std::string comm;
  uint64_t ino = 0, pgoff = 0;
  uint32_t ino_dev = 0;
  std::vector<size_t> bios;
  std::vector<NvmeCommand> nvme;
  Cause cause = Cause::kUnattributed;
  std::string why;
  size_t syscall = kNone;  // the call (kSyscall, kSyncInduced; the enter call of kAsync)
  size_t async = kNone;
  size_t fault = kNone;
  // write-back: the calls and faults that dirtied its pages before it was queued
  std::vector<size_t> dirtied_by_calls;
  std::vector<size_t> dirtied_by_faults;
  RequestLayers layers;
  Interference interference;
};

struct SchedInterval {
  uint16_t kind = 0;
  uint16_t cpu = 0;
  uint64_t ts = 0, dur = 0;
  uint32_t tgid = 0, tid = 0, vec = 0;
};

// An intent marker of the traced program (docs/workloads.md "Intent markers"): the begin or end
// of a phase such as one query of a search, or an instant.
struct Intent {
  uint64_t ts = 0;
  uint32_t tgid = 0, tid = 0;
  uint16_t kind = 0;      // IOT_INTENT_*
  uint32_t label_id = 0;  // its label: Correlation::intent_labels
};

struct CorrelateOptions {
  // A page fault at most this long before a bio of its thread caused it.
  uint64_t fault_window_ns = 20'000'000;
};

struct Correlation {
  nlohmann::json meta;     // the trace header's metadata
  nlohmann::json summary;  // the footer summary (empty when truncated)
  std::string damage;      // the reader's words for a truncated trace (TraceDamage); else empty
  std::vector<Syscall> syscalls;  // sorted by ts
  std::vector<PageFault> faults;
  std::vector<AsyncRequest> asyncs;
  std::vector<Bio> bios;
  std::vector<Request> requests;  // sorted by first event
  std::vector<SchedInterval> sched;
  std::vector<Intent> intents;  // sorted by ts
  // Label of each intent's label_id, bytes as the program wrote them: one copy per label, not per
  // marker (a trace may name one long string from millions of markers).
  std::map<uint32_t, std::string> intent_labels;
  std::map<std::pair<uint32_t, uint64_t>, std::string> paths;  // (dev, ino) -> path opened
  std::set<uint32_t> traced_tgids;
  uint64_t page_cache_added_pages = 0;
  bool memory_layer = false, block_layer = false, nvme_layer = false, sched_layer = false;
  uint64_t lost_block = 0, lost_nvme = 0, lost_sched = 0;
  uint64_t nvme_unjoined = 0;  // NVMe records whose rq_id names no request

  // "/data/x" or "ino 12 (7:0)".
  std::string FileName(uint32_t dev, uint64_t ino) const;
};

// Reads the trace at `path` and correlates it.
Result<Correlation> CorrelateTrace(const std::string& path, const CorrelateOptions& options = {});

// Leaves out the requests `keep` refuses, with their bios, and renumbers what refers to the rest
// (keep_requests.cc). Returns how many were left out. For a data scope: `iotwin layers --include`.
size_t KeepRequests(Correlation* c, const std::function<bool(const Request&)>& keep);

// Builds a correlation from records fed one by one (any order), for tests and other readers.
class Correlator {
 public:
  explicit Correlator(CorrelateOptions options = {}) : options_(options) {}
  void SetMeta(nlohmann::json meta, nlohmann::json summary);
  void SetString(uint32_t id, std::string s) { strings_[id] = std::move(s); }
  void Add(const iot_rec_hdr* rec);
  Correlation Finish();

 private:
  void BuildBiosAndRequests();
  void Attribute();
  void ComputeLayers();
  void ComputeInterference();

  CorrelateOptions options_;
  Correlation c_;
  std::map<uint32_t, std::string> strings_;
  std::vector<iot_block> blocks_;
  std::vector<iot_nvme> nvmes_;
  std::vector<iot_async_io> async_recs_;
  std::vector<iot_writeback> dirty_;
  std::vector<iot_intent> intent_recs_;  // labels resolved in Finish (strings may come later)
  struct PathRec {
    uint32_t dev;
    uint64_t ino;
    uint32_t path_id;
  };
  std::vector<PathRec> path_recs_;
};

}  // namespace iotwin::correlate
