#include "correlate/correlate.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/json_fields.h"
#include "format/op_info.h"
#include "format/records.h"
#include "format/trace_reader.h"

namespace iotwin::correlate {
namespace {

// A call that makes written data durable: a sync call or msync of a file's mapping.
bool IsSyncCall(uint16_t op) {
  const OpInfo& info = GetOpInfo(op);
  return info.sync != SyncScope::kNone || info.mapping == OpMapping::kSyncs;
}

// A call that writes a file's data or allocates its blocks: the write-back a sync call waits
// for may be its. A copy that may write to any descriptor (sendfile, splice) is left out.
bool IsWriteCall(uint16_t op) {
  const OpInfo& info = GetOpInfo(op);
  return info.direction == OpDirection::kWrite ||
         (info.direction == OpDirection::kCopy && !info.writes_any_fd) ||
         info.space == SpaceEffect::kFallocates;
}

std::string CommOf(const char (&comm)[16]) { return std::string(comm, strnlen(comm, 16)); }

// Per-thread index of time-sorted items, for "the call of thread T running at time t".
template <typename T>
class ByThread {
 public:
  void Build(const std::vector<T>& items, uint64_t (*ts)(const T&), uint32_t (*tid)(const T&)) {
    for (size_t i = 0; i < items.size(); i++) index_[tid(items[i])].push_back(i);
    for (auto& [t, v] : index_) {
      std::stable_sort(v.begin(), v.end(),
                       [&](size_t a, size_t b) { return ts(items[a]) < ts(items[b]); });
    }
    items_ = &items;
    ts_ = ts;
  }
  // The last item of `tid` starting at or before `t` (kNone if none).
  size_t LastAtOrBefore(uint32_t tid, uint64_t t) const {
    auto it = index_.find(tid);
    if (it == index_.end()) return kNone;
    const auto& v = it->second;
    auto pos = std::upper_bound(v.begin(), v.end(), t,
                                [&](uint64_t x, size_t i) { return x < ts_((*items_)[i]); });
    if (pos == v.begin()) return kNone;
    return *(pos - 1);
  }
  const std::vector<size_t>* Of(uint32_t tid) const {
    auto it = index_.find(tid);
    return it == index_.end() ? nullptr : &it->second;
  }

 private:
  std::unordered_map<uint32_t, std::vector<size_t>> index_;
  const std::vector<T>* items_ = nullptr;
  uint64_t (*ts_)(const T&) = nullptr;
};

uint64_t SyscallTs(const Syscall& s) { return s.ts; }
uint32_t SyscallTid(const Syscall& s) { return s.tid; }
uint64_t FaultTs(const PageFault& f) { return f.ts; }
uint32_t FaultTid(const PageFault& f) { return f.tid; }

// Overlap of [a0, a1) and [b0, b1).
uint64_t Overlap(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1) {
  uint64_t lo = std::max(a0, b0), hi = std::min(a1, b1);
  return hi > lo ? hi - lo : 0;
}

// Why the trace has no system calls when its header says so (imports of block traces); empty
// when the syscall layer was recorded.
std::string MissingSyscallLayer(const nlohmann::json& meta) {
  const nlohmann::json* sys = json_fields::Object(meta, "layers/syscall");
  if (!sys || json_fields::GetBool(*sys, "enabled", true)) return {};
  std::string reason = json_fields::GetString(*sys, "reason");
  return reason.empty() ? "disabled" : reason;
}

}  // namespace

const char* CauseName(Cause c) {
  switch (c) {
    case Cause::kSyscall: return "syscall";
    case Cause::kAsync: return "async";
    case Cause::kPageFault: return "page_fault";
    case Cause::kWriteback: return "writeback";
    case Cause::kReadahead: return "readahead";
    case Cause::kSyncInduced: return "sync_induced";
    case Cause::kUnattributed: return "unattributed";
  }
  return "?";
}

std::string Correlation::FileName(uint32_t dev, uint64_t ino) const {
  auto it = paths.find({dev, ino});
  if (it != paths.end()) return it->second;
  return fmt::format("ino {} ({}:{})", ino, dev >> 20, dev & 0xfffff);
}

void Correlator::SetMeta(nlohmann::json meta, nlohmann::json summary) {
  c_.meta = std::move(meta);
  c_.summary = std::move(summary);
}

void Correlator::Add(const iot_rec_hdr* rec) {
  switch (rec->type) {
    case IOT_REC_STRING: {
      const auto& s = As<iot_string>(rec);
      if (sizeof(iot_string) + s.len <= rec->size) {
        strings_[s.id] =
            std::string(reinterpret_cast<const char*>(rec) + sizeof(iot_string), s.len);
      }
      break;
    }
    case IOT_REC_SYSCALL: {
      const auto& r = As<iot_syscall>(rec);
      Syscall s;
      s.ts = r.ts;
      s.dur = r.dur;
      s.tgid = r.tgid;
      s.tid = r.tid;
      s.op = r.op;
      s.fd = r.fd;
      s.ret = r.ret;
      s.offset = r.offset;
      s.length = r.length;
      s.ino = r.ino;
      s.dev = r.dev;
      s.ftype = r.ftype;
      c_.syscalls.push_back(std::move(s));
      c_.traced_tgids.insert(r.tgid);
      if (OpOpensFd(r.op) && r.ret >= 0 && r.ino && r.path_id) {
        path_recs_.push_back({r.dev, r.ino, r.path_id});
      }
      break;
    }
    case IOT_REC_PROC: {
      const auto& p = As<iot_proc>(rec);
      c_.traced_tgids.insert(p.tgid);
      if (p.child_tgid) c_.traced_tgids.insert(p.child_tgid);
      break;
    }
    case IOT_REC_FD_SNAPSHOT: {
      const auto& f = As<iot_fd_snapshot>(rec);
      if (f.ino && f.path_id) path_recs_.push_back({f.dev, f.ino, f.path_id});
      break;
    }
    case IOT_REC_MAP_SNAPSHOT: {
      const auto& m = As<iot_map_snapshot>(rec);
      if (m.ino && m.path_id) path_recs_.push_back({m.dev, m.ino, m.path_id});
      break;
    }
    case IOT_REC_PAGE_FAULT: {
      const auto& r = As<iot_page_fault>(rec);
      c_.memory_layer = true;
      c_.faults.push_back({r.ts, r.tgid, r.tid, r.ino, r.pgoff, r.dev, r.flags});
      break;
    }
    case IOT_REC_PAGE_CACHE: {
      const auto& r = As<iot_page_cache>(rec);
      c_.memory_layer = true;
      if (r.kind == IOT_PC_ADD) c_.page_cache_added_pages += r.nr_pages;
      break;
    }
    case IOT_REC_WRITEBACK: {
      const auto& r = As<iot_writeback>(rec);
      c_.memory_layer = true;
      if (r.kind == IOT_WB_DIRTY_FOLIO) dirty_.push_back(r);
      break;
    }
    case IOT_REC_BLOCK:
      blocks_.push_back(As<iot_block>(rec));
      c_.block_layer = true;
      break;
    case IOT_REC_NVME:
      nvmes_.push_back(As<iot_nvme>(rec));
      c_.nvme_layer = true;
      break;
    case IOT_REC_ASYNC_IO:
      async_recs_.push_back(As<iot_async_io>(rec));
      break;
    case IOT_REC_INTENT:
      intent_recs_.push_back(As<iot_intent>(rec));
      break;
    case IOT_REC_SCHED: {
      const auto& r = As<iot_sched>(rec);
      c_.sched_layer = true;
      c_.sched.push_back({r.kind, r.cpu, r.ts, r.dur, r.tgid, r.tid, r.vec});
      break;
    }
    default:
      break;
  }
}

namespace {

// Bios by id, for walking from a split piece up to the bio that was queued.
class BioTree {
 public:
  explicit BioTree(const std::vector<Bio>& bios) : bios_(bios) {
    for (size_t i = 0; i < bios.size(); i++) by_id_[bios[i].id] = i;
  }
  // The queued bio that bio `bi` was split from (itself when queued or its parent is unknown);
  // at most 64 hops, as a damaged trace may link parents in a cycle.
  size_t RootOf(size_t bi) const {
    for (int hops = 0; hops < 64; hops++) {
      const Bio& b = bios_[bi];
      if (b.queued || !b.parent_id) return bi;
      auto it = by_id_.find(b.parent_id);
      if (it == by_id_.end()) return bi;
      bi = it->second;
    }
    return bi;
  }

 private:
  const std::vector<Bio>& bios_;
  std::unordered_map<uint64_t, size_t> by_id_;
};

// A bio queued (Q) or split off (X) by record `r`. A split piece shortens its parent's rest: the
// parent goes on at the split point (aux).
void AddBio(const iot_block& r, std::vector<Bio>& bios,
            std::unordered_map<uint64_t, size_t>& bio_at) {
  Bio b;
  b.id = r.bio_id;
  b.parent_id = r.parent_id;
  b.queued = r.phase == IOT_BLK_QUEUE;
  (b.queued ? b.q_ts : b.x_ts) = r.ts;
  b.dev = r.dev;
  b.sector = r.sector;
  b.bytes = r.bytes;
  b.flags = r.flags;
  b.tgid = r.tgid;
  b.tid = r.tid;
  b.ino = r.ino;
  b.pgoff = r.pgoff;
  b.ino_dev = r.ino_dev;
  b.comm = CommOf(r.comm);
  b.rest_sector = b.sector;
  b.rest_bytes = b.bytes;
  if (!b.queued && b.parent_id) {
    if (auto p = bio_at.find(b.parent_id); p != bio_at.end()) {
      Bio& parent = bios[p->second];
      const uint64_t rest_end = SaturatingAdd(parent.rest_sector, parent.rest_bytes / kSectorBytes);
      if (r.aux > parent.rest_sector && r.aux < rest_end) {
        parent.rest_bytes = static_cast<uint32_t>((rest_end - r.aux) * kSectorBytes);
        parent.rest_sector = r.aux;
      }
    }
  }
  bio_at[b.id] = bios.size();
  bios.push_back(std::move(b));
}

Request NewRequest(const iot_block& r) {
  Request q;
  q.id = r.rq_id;
  q.dev = r.dev;
  q.sector = r.sector;
  q.bytes = r.bytes;
  q.flags = r.flags;
  q.ino = r.ino;
  q.pgoff = r.pgoff;
  q.ino_dev = r.ino_dev;
  return q;
}

// What an insert, issue, requeue, merge or completion record says about its request.
void ApplyRequestPhase(const iot_block& r, Request& q) {
  if (r.phase == IOT_BLK_INSERT) {
    if (!q.i_ts) q.i_ts = r.ts;
    q.sector = r.sector;
    q.bytes = r.bytes;
  } else if (r.phase == IOT_BLK_ISSUE) {
    q.d_ts = r.ts;  // the last issue counts (after a requeue)
    q.sector = r.sector;
    q.bytes = r.bytes;
    q.flags = r.flags;
  } else if (r.phase == IOT_BLK_REQUEUE) {
    q.requeues++;
  } else if (r.phase == IOT_BLK_RQ_MERGE) {
    q.merged_away = true;
    q.merged_ts = r.ts;
  } else {
    if (!q.d_ts && !q.completed_bytes) q.bytes = r.aux;  // never issued: its size
    q.completed_bytes += r.bytes;
    if (r.error && !q.error) q.error = r.error;
    if (r.bytes >= r.aux) {
      q.completed = true;
      q.c_ts = r.ts;
    }
  }
}

// Bios and requests from the block records (sorted by time); returns request id -> index.
std::unordered_map<uint64_t, size_t> ReadBlockRecords(const std::vector<iot_block>& blocks,
                                                      Correlation& c) {
  std::unordered_map<uint64_t, size_t> bio_at, rq_at;
  auto bio = [&](const iot_block& r) -> Bio* {
    auto it = bio_at.find(r.bio_id);
    return it == bio_at.end() ? nullptr : &c.bios[it->second];
  };
  for (const iot_block& r : blocks) {
    switch (r.phase) {
      case IOT_BLK_QUEUE:
      case IOT_BLK_SPLIT:
        if (r.bio_id) AddBio(r, c.bios, bio_at);
        break;
      case IOT_BLK_BACKMERGE:
      case IOT_BLK_FRONTMERGE:
        if (Bio* b = bio(r)) {
          b->merged = true;
          b->m_ts = r.ts;
        }
        break;
      case IOT_BLK_GETRQ:
        if (Bio* b = bio(r)) b->g_ts = r.ts;
        break;
      case IOT_BLK_REMAP:
        if (!r.rq_id) {
          if (Bio* b = bio(r)) b->a_ts = r.ts;
        }
        break;
      case IOT_BLK_INSERT:
      case IOT_BLK_ISSUE:
      case IOT_BLK_COMPLETE:
      case IOT_BLK_REQUEUE:
      case IOT_BLK_RQ_MERGE: {
        if (!r.rq_id) break;
        auto [at, fresh] = rq_at.try_emplace(r.rq_id, c.requests.size());
        if (fresh) c.requests.push_back(NewRequest(r));
        const size_t qi = at->second;
        Request& q = c.requests[qi];
        if (r.tid && !q.tid) {
          q.tgid = r.tgid;
          q.tid = r.tid;
          q.comm = CommOf(r.comm);
        }
        if (r.bio_id) {
          if (Bio* b = bio(r); b && b->request == kNone) {
            b->request = qi;
            q.bios.push_back(static_cast<size_t>(b - c.bios.data()));
          }
        }
        ApplyRequestPhase(r, q);
        break;
      }
      default:
        break;
    }
  }
  return rq_at;
}

// Merged bios (and any bio no request record named) join their request by position: the
// request on the same device, issued after the merge, whose sectors contain the bio's.
void JoinBiosByPosition(Correlation& c) {
  std::unordered_map<uint32_t, std::vector<size_t>> by_dev;
  auto issue_ts = [&](const Request& q) { return q.d_ts ? q.d_ts : q.c_ts; };
  for (size_t i = 0; i < c.requests.size(); i++) by_dev[c.requests[i].dev].push_back(i);
  for (auto& [dev, v] : by_dev) {
    std::sort(v.begin(), v.end(), [&](size_t a, size_t b) {
      return issue_ts(c.requests[a]) < issue_ts(c.requests[b]);
    });
  }
  for (size_t bi = 0; bi < c.bios.size(); bi++) {
    Bio& b = c.bios[bi];
    if (b.request != kNone || !b.rest_bytes) continue;
    auto it = by_dev.find(b.dev);
    if (it == by_dev.end()) continue;
    uint64_t since = std::max({b.q_ts, b.x_ts, b.m_ts});
    const auto& v = it->second;
    auto pos = std::lower_bound(v.begin(), v.end(), since, [&](size_t i, uint64_t t) {
      return issue_ts(c.requests[i]) < t;
    });
    for (int n = 0; pos != v.end() && n < 256; ++pos, ++n) {
      Request& q = c.requests[*pos];
      // Sector ends saturate: a range reaching past 2^64 sectors ends at the last one.
      const uint64_t end = SaturatingAdd(q.sector, q.bytes / kSectorBytes);
      if (b.rest_sector >= q.sector &&
          SaturatingAdd(b.rest_sector, b.rest_bytes / kSectorBytes) <= end) {
        b.request = *pos;
        q.bios.push_back(bi);
        break;
      }
    }
  }
}

// NVMe commands (sorted by time) join their request by its identity; a completion closes the
// last open command of its id.
void JoinNvmeCommands(const std::vector<iot_nvme>& nvmes,
                      const std::unordered_map<uint64_t, size_t>& rq_at, Correlation& c) {
  for (const iot_nvme& n : nvmes) {
    auto it = rq_at.find(n.rq_id);
    if (it == rq_at.end()) {
      c.nvme_unjoined++;
      continue;
    }
    Request& q = c.requests[it->second];
    if (n.phase == IOT_NVME_SETUP) {
      NvmeCommand cmd;
      cmd.setup_ts = n.ts;
      cmd.opcode = n.opcode;
      cmd.qid = n.qid;
      cmd.cid = n.cid;
      cmd.nsid = n.nsid;
      cmd.ctrl = n.ctrl_id;
      cmd.nlb = n.nlb;
      cmd.lba_size = n.lba_size;
      cmd.dev = n.dev;
      cmd.slba = n.slba;
      cmd.cdw10 = n.cdw10;
      cmd.cdw11 = n.cdw11;
      cmd.cdw12 = n.cdw12;
      q.nvme.push_back(cmd);
    } else if (n.phase == IOT_NVME_COMPLETE) {
      bool done = false;
      for (auto cmd = q.nvme.rbegin(); cmd != q.nvme.rend(); ++cmd) {
        if (!cmd->complete_ts && (cmd->cid == n.cid || !n.cid)) {
          cmd->complete_ts = n.ts;
          cmd->status = n.status;
          done = true;
          break;
        }
      }
      if (!done) c.nvme_unjoined++;
    }
  }
}

// Orders requests by their first event and fixes the bios' indexes of them.
void SortRequestsByFirstEvent(Correlation& c) {
  std::vector<size_t> order(c.requests.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  auto first = [&](const Request& q) {
    uint64_t t = UINT64_MAX;
    for (uint64_t x : {q.i_ts, q.d_ts, q.c_ts, q.merged_ts}) {
      if (x) t = std::min(t, x);
    }
    return t;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return first(c.requests[a]) < first(c.requests[b]);
  });
  std::vector<size_t> new_index(order.size());
  std::vector<Request> sorted;
  sorted.reserve(order.size());
  for (size_t i = 0; i < order.size(); i++) {
    new_index[order[i]] = i;
    sorted.push_back(std::move(c.requests[order[i]]));
  }
  c.requests = std::move(sorted);
  for (Bio& b : c.bios) {
    if (b.request != kNone) b.request = new_index[b.request];
  }
}

// Each request's Q time, submitter and first page: those of the queued bio its earliest bio
// came from.
void SetRequestOrigins(Correlation& c) {
  const BioTree tree(c.bios);
  for (Request& q : c.requests) {
    std::sort(q.bios.begin(), q.bios.end());
    for (size_t bi : q.bios) {
      const Bio& r = c.bios[tree.RootOf(bi)];
      uint64_t t = r.q_ts ? r.q_ts : std::max(r.x_ts, c.bios[bi].x_ts);
      if (t && (!q.q_ts || t < q.q_ts)) {
        q.q_ts = t;
        if (r.tid) {
          q.tgid = r.tgid;
          q.tid = r.tid;
          q.comm = r.comm;
        }
        if (r.ino) {
          // the request's first page: as far into the queued bio as its first sector is
          q.ino = r.ino;
          q.ino_dev = r.ino_dev;
          const uint64_t r_end = SaturatingAdd(r.sector, r.bytes / kSectorBytes);
          uint64_t into = q.sector >= r.sector && q.sector < r_end
                              ? q.sector - r.sector
                              : (c.bios[bi].sector >= r.sector ? c.bios[bi].sector - r.sector
                                                                 : 0);
          q.pgoff = SaturatingAdd(r.pgoff, into / (4096 / kSectorBytes));
        }
      }
      if (!q.g_ts && c.bios[bi].g_ts) q.g_ts = c.bios[bi].g_ts;
    }
  }
}

}  // namespace

void Correlator::BuildBiosAndRequests() {
  std::stable_sort(blocks_.begin(), blocks_.end(),
                   [](const iot_block& a, const iot_block& b) { return a.ts < b.ts; });
  const std::unordered_map<uint64_t, size_t> rq_at = ReadBlockRecords(blocks_, c_);
  JoinBiosByPosition(c_);
  std::stable_sort(nvmes_.begin(), nvmes_.end(),
                   [](const iot_nvme& a, const iot_nvme& b) { return a.ts < b.ts; });
  JoinNvmeCommands(nvmes_, rq_at, c_);
  SortRequestsByFirstEvent(c_);
  SetRequestOrigins(c_);
}

namespace {

// Async requests from their records (sorted by time here): submissions paired with completions
// by (engine, context, identity).
void PairAsyncRequests(std::vector<iot_async_io>& recs, Correlation& c) {
  std::stable_sort(recs.begin(), recs.end(),
                   [](const iot_async_io& a, const iot_async_io& b) { return a.ts < b.ts; });
  std::map<std::tuple<uint8_t, uint64_t, uint64_t>, size_t> open;
  for (const iot_async_io& a : recs) {
    auto key = std::make_tuple(a.engine, a.ctx, a.req_id);
    if (a.phase == IOT_AIO_SUBMIT) {
      AsyncRequest r;
      r.engine = a.engine;
      r.opcode = a.opcode;
      r.submit_ts = a.ts;
      r.tgid = a.tgid;
      r.tid = a.tid;
      r.req_id = a.req_id;
      r.user_data = a.user_data;
      r.offset = a.offset;
      r.length = AsyncLengthKnown(a) ? a.length : 0;  // unknown: the result, below
      r.fd = a.fd;
      open[key] = c.asyncs.size();
      c.asyncs.push_back(r);
    } else {
      auto it = open.find(key);
      if (it == open.end()) continue;
      AsyncRequest& done = c.asyncs[it->second];
      done.complete_ts = a.ts;
      done.res = a.res;
      if (done.length == 0 && a.res > 0) done.length = static_cast<uint64_t>(a.res);
      open.erase(it);
    }
  }
}

// The cause of a request, from the evidence around its first queued bio: the call of its thread
// running then, an async request, a page fault, a sync call, or the calls and faults that
// dirtied its pages. Holds the indexes it looks these up in.
class Attribution {
 public:
  Attribution(const Correlation& c, const CorrelateOptions& options)
      : c_(c), options_(options), no_syscall_layer_(MissingSyscallLayer(c.meta)), tree_(c.bios) {
    calls_.Build(c.syscalls, SyscallTs, SyscallTid);
    faults_.Build(c.faults, FaultTs, FaultTid);
    for (size_t i = 0; i < c.syscalls.size(); i++) {
      if (IsSyncCall(c.syscalls[i].op)) sync_calls_.push_back(i);
    }
    MapAsyncBios();
    for (size_t i = 0; i < c.syscalls.size(); i++) {
      const Syscall& s = c.syscalls[i];
      if (IsWriteCall(s.op) && s.ino && s.ret > 0) writes_of_file_[{s.dev, s.ino}].push_back(i);
    }
    for (size_t i = 0; i < c.faults.size(); i++) {
      const PageFault& f = c.faults[i];
      if ((f.flags & IOT_PFF_WRITE) && f.ino) faults_of_file_[{f.dev, f.ino}].push_back(i);
    }
  }

  // Sets the cause of request `q` (not merged away) and what it links to, or why it has none.
  void FindCause(Request& q) const {
    size_t root = kNone;
    for (size_t bi : q.bios) {
      size_t r = tree_.RootOf(bi);
      if (root == kNone || c_.bios[r].q_ts < c_.bios[root].q_ts) root = r;
    }
    if (root == kNone) {
      WithoutBios(q);
    } else {
      const Bio& r = c_.bios[root];
      if (r.tid && c_.traced_tgids.count(r.tgid)) {
        OfTracedThread(q, r);
      } else if (r.ino) {
        OfFile(q, r);
      } else {
        OfKernel(q, r);
      }
    }
    if (q.cause == Cause::kUnattributed && !no_syscall_layer_.empty()) {
      // An imported block trace: what the reasons above blame (no call found) is a given.
      q.why = fmt::format("the trace has no system-call layer ({}): no call to attribute it to",
                          no_syscall_layer_);
    }
  }

 private:
  using FileKey = std::pair<uint32_t, uint64_t>;

  // The call of `tid` running at `t`.
  size_t CallAt(uint32_t tid, uint64_t t) const {
    size_t i = calls_.LastAtOrBefore(tid, t);
    if (i == kNone) return kNone;
    return t <= c_.syscalls[i].end() ? i : kNone;
  }

  // The latest-started sync call running at t (of that file, when one is given).
  size_t SyncCallAt(uint64_t t, uint32_t dev, uint64_t ino) const {
    auto pos = std::upper_bound(sync_calls_.begin(), sync_calls_.end(), t,
                                [&](uint64_t x, size_t i) { return x < c_.syscalls[i].ts; });
    for (int n = 0; pos != sync_calls_.begin() && n < 4096; n++) {
      const Syscall& s = c_.syscalls[*--pos];
      if (t > s.end()) continue;
      if (ino && s.ino && (s.ino != ino || s.dev != dev)) continue;
      return *pos;
    }
    return kNone;
  }

  // io-wq workers of the process: the request of that process in flight when the bio came.
  // (asyncs are in submission order; look back from t over a bounded number of requests)
  size_t PendingAsync(uint32_t tgid, uint64_t t) const {
    auto pos = std::upper_bound(c_.asyncs.begin(), c_.asyncs.end(), t,
                                [](uint64_t x, const AsyncRequest& a) { return x < a.submit_ts; });
    for (int n = 0; pos != c_.asyncs.begin() && n < 4096; n++) {
      const AsyncRequest& a = *--pos;
      if (a.tgid != tgid || (a.complete_ts && a.complete_ts < t)) continue;
      return static_cast<size_t>(pos - c_.asyncs.begin());
    }
    return kNone;
  }

  // Inside one submitting call, requests are issued in submission order: hand the call's bios
  // to its submissions in order, each taking bios until its length is covered.
  void MapAsyncBios() {
    std::map<size_t, std::vector<size_t>> bios_in_call, subs_in_call;
    for (size_t i = 0; i < c_.asyncs.size(); i++) {
      size_t s = CallAt(c_.asyncs[i].tid, c_.asyncs[i].submit_ts);
      if (s != kNone && OpSubmitsAsync(c_.syscalls[s].op)) subs_in_call[s].push_back(i);
    }
    for (size_t bi = 0; bi < c_.bios.size(); bi++) {
      const Bio& b = c_.bios[bi];
      if (!b.queued || !b.tid) continue;
      size_t s = CallAt(b.tid, b.q_ts);
      if (s != kNone && subs_in_call.count(s)) bios_in_call[s].push_back(bi);
    }
    for (auto& [s, bios] : bios_in_call) {
      const auto& subs = subs_in_call[s];
      size_t k = 0;
      uint64_t acc = 0;
      for (size_t bi : bios) {
        if (k >= subs.size()) break;
        async_of_bio_[c_.bios[bi].id] = subs[k];
        acc += c_.bios[bi].bytes;
        if (acc >= c_.asyncs[subs[k]].length) {
          k++;
          acc = 0;
        }
      }
    }
  }

  // No bio seen: a flush during a sync call, or a passthrough request inside a call.
  void WithoutBios(Request& q) const {
    const uint64_t t_event = q.d_ts ? q.d_ts : q.c_ts;
    if (q.flags & IOT_BLKF_FLUSH) {
      size_t s = SyncCallAt(t_event, 0, 0);
      if (s != kNone) {
        q.cause = Cause::kSyncInduced;
        q.syscall = s;
        q.why = "cache flush during the call";
      } else {
        q.why = "flush request with no traced fsync or sync call in progress";
      }
    } else if (q.tid) {
      size_t s = CallAt(q.tid, t_event);
      if (s != kNone) {
        q.cause = Cause::kSyscall;
        q.syscall = s;
        q.why = "request without bios (passthrough) issued inside the call";
      } else {
        q.why = "request without bios issued by a traced thread outside any recorded call";
      }
    } else {
      q.why = "none of its bios was seen (queued before the capture started?)";
    }
  }

  // Queued by a traced thread: its call, an async request, or a page fault just before.
  void OfTracedThread(Request& q, const Bio& r) const {
    size_t s = CallAt(r.tid, r.q_ts);
    auto a = async_of_bio_.find(r.id);
    if (s != kNone && a != async_of_bio_.end()) {
      q.cause = Cause::kAsync;
      q.async = a->second;
      q.syscall = s;
    } else if (s != kNone && !OpSubmitsAsync(c_.syscalls[s].op)) {
      q.cause = Cause::kSyscall;
      q.syscall = s;
    } else if (size_t pa = PendingAsync(r.tgid, r.q_ts); pa != kNone) {
      q.cause = Cause::kAsync;
      q.async = pa;
      q.why = s == kNone ? "issued by an io-wq worker of the process" : "";
    } else if (s != kNone) {
      q.cause = Cause::kSyscall;
      q.syscall = s;
    } else {
      size_t f = faults_.LastAtOrBefore(r.tid, r.q_ts);
      if (f != kNone && r.q_ts - c_.faults[f].ts <= options_.fault_window_ns) {
        q.cause = Cause::kPageFault;
        q.fault = f;
      } else {
        q.why = fmt::format("queued by traced thread {} outside any recorded system call{}",
                            r.tid,
                            c_.memory_layer ? ""
                                            : " (page faults are not recorded without the "
                                              "memory layer)");
      }
    }
  }

  // File pages queued by another thread: readahead, or write-back of pages that the calls and
  // faults before it dirtied.
  void OfFile(Request& q, const Bio& r) const {
    q.cause = (q.flags & IOT_BLKF_READAHEAD) ? Cause::kReadahead : Cause::kWriteback;
    q.syscall = SyncCallAt(r.q_ts, r.ino_dev, r.ino);
    if (q.cause != Cause::kWriteback) return;
    const uint64_t first = q.pgoff;
    const uint64_t last = SaturatingAdd(q.pgoff, DivCeil(q.bytes, 4096));
    if (auto it = writes_of_file_.find({r.ino_dev, r.ino}); it != writes_of_file_.end()) {
      for (size_t si : it->second) {
        const Syscall& s = c_.syscalls[si];
        if (s.ts > r.q_ts) break;
        const uint64_t p0 = s.offset / 4096;
        const uint64_t p1 = DivCeil(SaturatingAdd(s.offset, static_cast<uint64_t>(s.ret)), 4096);
        if (p0 < last && p1 > first) q.dirtied_by_calls.push_back(si);
      }
    }
    if (auto it = faults_of_file_.find({r.ino_dev, r.ino}); it != faults_of_file_.end()) {
      for (size_t fi : it->second) {
        const PageFault& f = c_.faults[fi];
        if (f.ts > r.q_ts) continue;
        if (f.pgoff >= first && f.pgoff < last) q.dirtied_by_faults.push_back(fi);
      }
    }
    if (q.dirtied_by_calls.empty() && q.dirtied_by_faults.empty()) {
      q.why = c_.memory_layer ? "no recorded call or fault dirtied these pages"
                              : "dirtier unknown: write calls on other pages, stores "
                                "through mappings need the memory layer";
    }
  }

  // Kernel I/O without a file: journal or metadata during a sync call.
  void OfKernel(Request& q, const Bio& r) const {
    size_t s = SyncCallAt(r.q_ts, 0, 0);
    if (s != kNone) {
      q.cause = Cause::kSyncInduced;
      q.syscall = s;
      q.why = fmt::format("journal or metadata I/O by {} during the call", r.comm);
    } else {
      q.why = fmt::format("kernel I/O by {} with no file and no traced fsync in progress",
                          r.comm.empty() ? "a kernel thread" : r.comm);
    }
  }

  const Correlation& c_;
  const CorrelateOptions& options_;
  const std::string no_syscall_layer_;
  const BioTree tree_;
  ByThread<Syscall> calls_;
  ByThread<PageFault> faults_;
  std::vector<size_t> sync_calls_;  // sync calls of traced threads, by start
  std::unordered_map<uint64_t, size_t> async_of_bio_;  // root bio id -> async request
  // Write-back attribution: calls and dirtying faults of each file, by start.
  std::map<FileKey, std::vector<size_t>> writes_of_file_;
  std::map<FileKey, std::vector<size_t>> faults_of_file_;
};

}  // namespace

void Correlator::Attribute() {
  PairAsyncRequests(async_recs_, c_);
  const Attribution attribution(c_, options_);
  for (size_t ri = 0; ri < c_.requests.size(); ri++) {
    Request& q = c_.requests[ri];
    if (q.merged_away && !q.completed) {
      q.cause = Cause::kUnattributed;
      q.why = "merged into another request (its bios are counted there)";
      continue;
    }
    attribution.FindCause(q);
    if (q.syscall != kNone && q.cause != Cause::kWriteback && q.cause != Cause::kReadahead) {
      c_.syscalls[q.syscall].requests.push_back(ri);
    }
    if (q.async != kNone) c_.asyncs[q.async].requests.push_back(ri);
  }
}

void Correlator::ComputeLayers() {
  for (Request& q : c_.requests) {
    RequestLayers& l = q.layers;
    // Times are the trace's: every difference and sum is clamped to int64_t (SignedDelta,
    // Saturating*), as a plain cast of a difference past 2^63 would flip its sign.
    if (q.q_ts && q.g_ts >= q.q_ts) l.q2g = SignedDelta(q.q_ts, q.g_ts);
    if (q.g_ts && q.i_ts >= q.g_ts) l.g2i = SignedDelta(q.g_ts, q.i_ts);
    if (q.i_ts && q.d_ts >= q.i_ts) l.i2d = SignedDelta(q.i_ts, q.d_ts);
    if (q.q_ts && q.d_ts) l.q2d = SignedDelta(q.q_ts, q.d_ts);
    if (q.d_ts && q.c_ts) l.d2c = SignedDelta(q.d_ts, q.c_ts);
    if (q.q_ts && q.c_ts) l.q2c = SignedDelta(q.q_ts, q.c_ts);
    int64_t nvme = 0;
    bool has_nvme = false;
    for (const NvmeCommand& n : q.nvme) {
      if (n.setup_ts && n.complete_ts >= n.setup_ts) {
        nvme = SaturatingAdd(nvme, SignedDelta(n.setup_ts, n.complete_ts));
        has_nvme = true;
      }
    }
    if (has_nvme) l.nvme = nvme;

    uint64_t start = 0, end = 0;
    if (q.cause == Cause::kSyscall && q.syscall != kNone) {
      start = c_.syscalls[q.syscall].ts;
      end = c_.syscalls[q.syscall].end();
    } else if (q.cause == Cause::kAsync && q.async != kNone) {
      const AsyncRequest& a = c_.asyncs[q.async];
      start = a.submit_ts;
      end = a.complete_ts;
    }
    if (!start || !end || !q.q_ts || !q.c_ts) continue;
    l.has_app = true;
    l.total = SignedDelta(start, end);
    l.app_to_q = SignedDelta(start, q.q_ts);
    l.c_to_app = SignedDelta(q.c_ts, end);
    int64_t block = l.q2d >= 0 && l.d2c >= 0 ? SaturatingAdd(l.q2d, l.d2c) : l.q2c;
    // Each part counts only when in order; what is out of order shows as deviation.
    int64_t sum = SaturatingAdd(SaturatingAdd(std::max<int64_t>(l.app_to_q, 0),
                                              std::max<int64_t>(block, 0)),
                                std::max<int64_t>(l.c_to_app, 0));
    l.deviation = SaturatingAbs(SaturatingSub(sum, l.total));
  }
}

void Correlator::ComputeInterference() {
  if (c_.sched.empty()) return;
  std::sort(c_.sched.begin(), c_.sched.end(),
            [](const SchedInterval& a, const SchedInterval& b) { return a.ts < b.ts; });
  std::unordered_map<uint32_t, std::vector<size_t>> of_tid;
  uint64_t longest = 0;
  for (size_t i = 0; i < c_.sched.size(); i++) {
    of_tid[c_.sched[i].tid].push_back(i);
    longest = std::max(longest, c_.sched[i].dur);
  }
  for (Request& q : c_.requests) {
    if (!q.tid || !q.q_ts || !q.c_ts) continue;
    auto it = of_tid.find(q.tid);
    if (it == of_tid.end()) continue;
    const auto& v = it->second;
    uint64_t from = q.q_ts > longest ? q.q_ts - longest : 0;
    auto pos = std::lower_bound(v.begin(), v.end(), from,
                                [&](size_t i, uint64_t t) { return c_.sched[i].ts < t; });
    for (; pos != v.end() && c_.sched[*pos].ts < q.c_ts; ++pos) {
      const SchedInterval& s = c_.sched[*pos];
      uint64_t o = Overlap(s.ts, SaturatingAdd(s.ts, s.dur), q.q_ts, q.c_ts);
      if (!o) continue;
      q.interference.intervals++;
      if (s.kind == IOT_SCHED_OFFCPU) {
        uint64_t& t = s.vec == 0 ? q.interference.offcpu_preempted_ns
                                 : q.interference.offcpu_blocked_ns;
        t = SaturatingAdd(t, o);
      } else if (s.kind == IOT_SCHED_HARDIRQ) {
        q.interference.hardirq_ns = SaturatingAdd(q.interference.hardirq_ns, o);
      } else if (s.kind == IOT_SCHED_SOFTIRQ) {
        q.interference.softirq_ns = SaturatingAdd(q.interference.softirq_ns, o);
      }
    }
  }
}

Correlation Correlator::Finish() {
  std::stable_sort(c_.syscalls.begin(), c_.syscalls.end(),
                   [](const Syscall& a, const Syscall& b) { return a.ts < b.ts; });
  for (const PathRec& p : path_recs_) {
    auto it = strings_.find(p.path_id);
    if (it != strings_.end()) c_.paths.emplace(std::make_pair(p.dev, p.ino), it->second);
  }
  for (const iot_intent& r : intent_recs_) {
    c_.intents.push_back({r.ts, r.tgid, r.tid, r.kind, r.label_id});
    if (!c_.intent_labels.contains(r.label_id)) {
      auto it = strings_.find(r.label_id);
      c_.intent_labels.emplace(r.label_id, it == strings_.end() ? "" : it->second);
    }
  }
  std::stable_sort(c_.intents.begin(), c_.intents.end(),
                   [](const Intent& a, const Intent& b) { return a.ts < b.ts; });
  for (const iot_writeback& w : dirty_) {
    // dirtying records stand in for faults when attributing write-back of mapped stores
    PageFault f;
    f.ts = w.ts;
    f.tgid = w.tgid;
    f.tid = w.tid;
    f.ino = w.ino;
    f.dev = w.dev;
    f.flags = IOT_PFF_WRITE;
    for (uint64_t i = 0; i < std::max<uint64_t>(w.nr, 1) && i < 4096; i++) {
      std::optional<uint64_t> pgoff = CheckedAdd(w.index, i);
      if (!pgoff) break;  // pages past 2^64: not pages of a file
      f.pgoff = *pgoff;
      c_.faults.push_back(f);
    }
  }
  std::stable_sort(c_.faults.begin(), c_.faults.end(),
                   [](const PageFault& a, const PageFault& b) { return a.ts < b.ts; });
  c_.lost_block = json_fields::GetUint(c_.summary, "lost/block", c_.lost_block);
  c_.lost_nvme = json_fields::GetUint(c_.summary, "lost/nvme", c_.lost_nvme);
  c_.lost_sched = json_fields::GetUint(c_.summary, "lost/sched", c_.lost_sched);
  c_.block_layer |= json_fields::GetBool(c_.meta, "layers/block/enabled", false);
  c_.nvme_layer |= json_fields::GetBool(c_.meta, "layers/nvme/enabled", false);
  c_.sched_layer |= json_fields::GetBool(c_.meta, "layers/sched/enabled", false);
  c_.memory_layer |= json_fields::GetBool(c_.meta, "layers/memory/enabled", false);
  BuildBiosAndRequests();
  Attribute();
  ComputeLayers();
  ComputeInterference();
  return std::move(c_);
}

Result<Correlation> CorrelateTrace(const std::string& path, const CorrelateOptions& options) {
  IOTWIN_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, TraceReader::Open(path));
  Correlator c(options);
  for (;;) {
    IOTWIN_ASSIGN_OR_RETURN(const iot_rec_hdr* rec, reader->Next());
    if (!rec) break;
    c.Add(rec);
  }
  c.SetMeta(reader->meta(), reader->summary() ? *reader->summary() : nlohmann::json::object());
  Correlation out = c.Finish();
  out.damage = reader->damage().Description();
  return out;
}

}  // namespace iotwin::correlate
