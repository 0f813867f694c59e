#include "correlate/chains.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/checked_math.h"
#include "correlate/device_time.h"
#include "format/op_info.h"
#include "format/records.h"

namespace iotwin::correlate {
namespace {

constexpr uint64_t kOpen = std::numeric_limits<uint64_t>::max();

// [begin, end] of each marker phase of one label, per thread, in begin order; a phase the trace
// never closed runs to the end.
using Phases = std::vector<std::pair<uint64_t, uint64_t>>;

std::map<uint32_t, Phases> MarkerPhases(const Correlation& c, const std::string& label) {
  std::map<uint32_t, Phases> out;
  if (label.empty()) return out;
  std::set<uint32_t> ids;  // a label may be written under several string ids
  for (const auto& [id, text] : c.intent_labels) {
    if (text == label) ids.insert(id);
  }
  std::map<uint32_t, std::vector<uint64_t>> open;
  for (const Intent& m : c.intents) {
    if (!ids.contains(m.label_id)) continue;
    if (m.kind == IOT_INTENT_BEGIN) {
      open[m.tid].push_back(m.ts);
    } else if (m.kind == IOT_INTENT_END && !open[m.tid].empty()) {
      out[m.tid].push_back({open[m.tid].back(), m.ts});
      open[m.tid].pop_back();
    }
  }
  for (auto& [tid, begins] : open) {
    for (uint64_t b : begins) out[tid].push_back({b, kOpen});
  }
  for (auto& [tid, v] : out) std::sort(v.begin(), v.end());
  return out;
}

// Index of the phase of `tid` that holds `ts` (the latest begun), or -1.
int64_t PhaseOf(const std::map<uint32_t, Phases>& phases, uint32_t tid, uint64_t ts) {
  auto it = phases.find(tid);
  if (it == phases.end()) return -1;
  const Phases& v = it->second;
  auto pos = std::upper_bound(v.begin(), v.end(), std::make_pair(ts, kOpen));
  if (pos == v.begin()) return -1;
  --pos;
  return ts <= pos->second ? pos - v.begin() : -1;
}

// A read of a thread with what decides its batch.
struct ThreadRead {
  ChainRead read;
  std::tuple<uint64_t, uint64_t, uint64_t> block;  // file identity and offset, for re-reads
  int64_t hop = -1;                                // hop marker phase
  size_t submit_call = kNone;    // io_uring_enter / io_submit call that submitted it
  std::vector<size_t> requests;  // device read requests it caused
};

struct Batch {
  std::vector<ThreadRead> reads;
  uint64_t start = kOpen, end = 0;
  uint64_t first_done = kOpen;  // earliest completion of its reads
  int64_t query = -1;
  // A read of it reached the device. A read may have no request of its own where the block
  // layer merged it into another's.
  bool device = false;
};

// Device read requests of `cause` among `requests`.
std::vector<size_t> DeviceReads(const Correlation& c, const std::vector<size_t>& requests,
                                Cause cause) {
  std::vector<size_t> out;
  for (size_t ri : requests) {
    const Request& q = c.requests[ri];
    if (q.cause == cause && (q.flags & IOT_BLKF_READ)) out.push_back(ri);
  }
  return out;
}

// The async submitting calls of each thread, in time order.
std::map<uint32_t, std::vector<size_t>> SubmitCalls(const Correlation& c) {
  std::map<uint32_t, std::vector<size_t>> out;
  for (size_t i = 0; i < c.syscalls.size(); i++) {
    const uint16_t op = c.syscalls[i].op;
    if (OpSubmitsAsync(op)) out[c.syscalls[i].tid].push_back(i);
  }
  return out;
}

size_t CallHolding(const Correlation& c, const std::vector<size_t>* calls, uint64_t ts) {
  if (!calls) return kNone;
  auto pos = std::upper_bound(calls->begin(), calls->end(), ts,
                              [&](uint64_t t, size_t i) { return t < c.syscalls[i].ts; });
  if (pos == calls->begin()) return kNone;
  const size_t i = *(pos - 1);
  return ts <= c.syscalls[i].end() ? i : kNone;
}

// Every read of interest, per thread, in issue order: read calls and async reads that returned
// data.
std::map<uint32_t, std::vector<ThreadRead>> ReadsByThread(const Correlation& c,
                                                          const std::map<uint32_t, Phases>& hops) {
  std::map<uint32_t, std::vector<ThreadRead>> out;
  for (size_t si = 0; si < c.syscalls.size(); si++) {
    const Syscall& s = c.syscalls[si];
    if (!OpIsRead(s.op) || s.ret <= 0 || !(s.ftype == 0 || s.ftype == 8 || s.ftype == 6)) continue;
    ThreadRead r;
    r.requests = DeviceReads(c, s.requests, Cause::kSyscall);
    r.read = {s.ts, s.end(), s.offset, static_cast<uint64_t>(s.ret), si, kNone};
    r.block = s.ino ? std::make_tuple(uint64_t{s.dev}, s.ino, s.offset)
                    : std::make_tuple(kOpen, static_cast<uint64_t>(s.fd), s.offset);
    r.hop = PhaseOf(hops, s.tid, s.ts);
    out[s.tid].push_back(std::move(r));
  }
  const auto submit_calls = SubmitCalls(c);
  for (size_t ai = 0; ai < c.asyncs.size(); ai++) {
    const AsyncRequest& a = c.asyncs[ai];
    if (AsyncOp(a.engine, a.opcode).kind != AsyncKind::kRead || a.res <= 0 || !a.submit_ts ||
        a.complete_ts < a.submit_ts) {
      continue;
    }
    ThreadRead r;
    r.requests = DeviceReads(c, a.requests, Cause::kAsync);
    r.read = {a.submit_ts, a.complete_ts, a.offset, static_cast<uint64_t>(a.res), kNone, ai};
    r.block = std::make_tuple(kOpen, static_cast<uint64_t>(a.fd), a.offset);
    r.hop = PhaseOf(hops, a.tid, a.submit_ts);
    auto it = submit_calls.find(a.tid);
    r.submit_call = CallHolding(c, it == submit_calls.end() ? nullptr : &it->second, a.submit_ts);
    out[a.tid].push_back(std::move(r));
  }
  for (auto& [tid, v] : out) {
    std::stable_sort(v.begin(), v.end(), [](const ThreadRead& a, const ThreadRead& b) {
      return a.read.issue_ts < b.read.issue_ts;
    });
  }
  return out;
}

// Whether `r` belongs to the batch `b` being built: the same hop marker; else async reads of one
// submitting call, or (no call recorded) submitted before any read of the batch completed.
bool SameBatch(const Batch& b, const ThreadRead& r) {
  const ThreadRead& last = b.reads.back();
  if (r.hop >= 0 || last.hop >= 0) return r.hop == last.hop;
  if (r.read.async == kNone || last.read.async == kNone) return false;
  if (r.submit_call != kNone || last.submit_call != kNone) {
    return r.submit_call == last.submit_call;
  }
  return r.read.issue_ts < b.first_done;
}

// The thread's batches in issue order.
std::vector<Batch> Batches(std::vector<ThreadRead>& reads) {
  std::vector<Batch> out;
  for (ThreadRead& r : reads) {
    if (out.empty() || !SameBatch(out.back(), r)) out.emplace_back();
    Batch& b = out.back();
    b.start = std::min(b.start, r.read.issue_ts);
    b.end = std::max(b.end, r.read.complete_ts);
    b.first_done = std::min(b.first_done, r.read.complete_ts);
    b.device |= !r.requests.empty();
    b.reads.push_back(std::move(r));
  }
  return out;
}

using BlockSet = std::set<std::tuple<uint64_t, uint64_t, uint64_t>>;

// Why a chain ends between batches `prev` and `next` (kEnd: it goes on).
// Why a chain ends between batches `prev` and `next` (kEnd: it goes on). `read`: the blocks the
// chain read; `entry`: those of the first batch of the query it continues.
ChainCut CutBetween(const Batch& prev, const Batch& next, bool markers, const BlockSet& read,
                    const BlockSet& entry, const ChainOptions& o) {
  if (markers) {
    if (prev.query != next.query) return ChainCut::kQueryMarker;
    if (next.query >= 0) return ChainCut::kEnd;
  }
  if (next.start < prev.end) return ChainCut::kNotDependent;
  if (next.start - prev.end > o.gap_ns) return ChainCut::kGap;
  for (const ThreadRead& r : next.reads) {
    if (read.count(r.block) || entry.count(r.block)) return ChainCut::kReRead;
  }
  return ChainCut::kEnd;
}

void AddHop(const Correlation& c, const Batch& b, Chain& chain) {
  ChainHop h;
  h.first = chain.reads.size();
  h.reads = b.reads.size();
  h.start_ts = b.start;
  h.end_ts = b.end;
  std::vector<std::pair<uint64_t, uint64_t>> iv;
  for (const ThreadRead& r : b.reads) {
    chain.reads.push_back(r.read);
    for (size_t ri : r.requests) {
      auto d = DeviceIntervals(c.requests[ri]);
      iv.insert(iv.end(), d.begin(), d.end());
    }
  }
  h.device_ns = UnionWithin(std::move(iv), b.start, b.end);
  chain.hops.push_back(h);
}

// Where the block layer was recorded, a batch that did not reach the device (served from the page
// cache: nothing to resubmit) is no hop of a chain, but still decides where chains are cut.
// A chain cut by a gap or by overlap may be one query split (its thread preempted between two
// hops): the chain after it keeps the entry blocks of the one before, so that the next query's
// read of the entry node still ends it.
void ChainsOfThread(const Correlation& c, uint32_t tid, std::vector<Batch>& batches, bool markers,
                    const ChainOptions& o, ChainDetection& out) {
  Chain chain;
  BlockSet read, entry;
  auto finish = [&](ChainCut cut) {
    if (!chain.reads.empty()) {
      chain.cut = cut;
      if (chain.reads.size() >= o.min_reads) {
        out.chains.push_back(std::move(chain));
      } else {
        out.short_runs++;
      }
    }
    chain = Chain{};
    read.clear();
  };
  for (size_t i = 0; i < batches.size(); i++) {
    bool new_query = i == 0;
    if (i > 0) {
      const ChainCut cut = CutBetween(batches[i - 1], batches[i], markers, read, entry, o);
      if (cut != ChainCut::kEnd) {
        finish(cut);
        new_query = cut != ChainCut::kGap && cut != ChainCut::kNotDependent;
      }
    }
    if (new_query) entry.clear();
    chain.tid = tid;
    chain.by_marker = markers && batches[i].query >= 0;
    if (batches[i].device || !c.block_layer) AddHop(c, batches[i], chain);
    for (const ThreadRead& r : batches[i].reads) {
      read.insert(r.block);
      if (new_query) entry.insert(r.block);
    }
  }
  finish(ChainCut::kEnd);
}

}  // namespace

const char* ChainCutName(ChainCut c) {
  switch (c) {
    case ChainCut::kEnd:
      return "end";
    case ChainCut::kQueryMarker:
      return "query_marker";
    case ChainCut::kNotDependent:
      return "not_dependent";
    case ChainCut::kGap:
      return "gap";
    case ChainCut::kReRead:
      return "reread";
  }
  return "?";
}

ChainDetection DetectChains(const Correlation& c, const ChainOptions& o) {
  ChainDetection out;
  out.device_time = c.block_layer;
  const auto queries = MarkerPhases(c, o.query_marker);
  const auto hops = MarkerPhases(c, o.hop_marker);
  auto reads = ReadsByThread(c, hops);
  for (auto& [tid, v] : reads) {
    std::vector<Batch> batches = Batches(v);
    for (Batch& b : batches) b.query = PhaseOf(queries, tid, b.start);
    ChainsOfThread(c, tid, batches, queries.count(tid) > 0, o, out);
  }
  return out;
}

}  // namespace iotwin::correlate

namespace iotwin::correlate {
namespace {

using nlohmann::json;

struct ChainSums {
  uint64_t hops = 0, reads = 0, hop_ns = 0, device_ns = 0, gaps_ns = 0, span_ns = 0;
  uint64_t with_resubmit_ns = 0;
};

std::string ChainFile(const Correlation& c, const Chain& chain) {
  const ChainRead& r = chain.reads.front();
  if (r.syscall != kNone) {
    const Syscall& s = c.syscalls[r.syscall];
    if (s.ino) return c.FileName(s.dev, s.ino);
    return "fd " + std::to_string(s.fd);
  }
  return "fd " + std::to_string(c.asyncs[r.async].fd);
}

// One chain's entry; adds its totals to `sums`. The estimate: an in-kernel resubmission (XRP's
// NVMe-driver hook) issues each later hop from the completion of the one before, so what is
// left of every hop after the first is its device time.
json ChainJson(const Correlation& c, const Chain& chain, bool device_time, ChainSums& sums) {
  json per_hop_reads = json::array(), hop_ns = json::array(), device = json::array(),
       software = json::array();
  uint64_t gaps = 0, with_resubmit = 0, hop_total = 0, device_total = 0;
  for (size_t h = 0; h < chain.hops.size(); h++) {
    const ChainHop& hop = chain.hops[h];
    const uint64_t span = hop.end_ts - hop.start_ts;
    per_hop_reads.push_back(hop.reads);
    hop_ns.push_back(span);
    hop_total = SaturatingAdd(hop_total, span);
    device_total = SaturatingAdd(device_total, hop.device_ns);
    if (device_time) {
      device.push_back(hop.device_ns);
      software.push_back(span - std::min(span, hop.device_ns));
    }
    with_resubmit = SaturatingAdd(with_resubmit, h == 0 ? span : hop.device_ns);
    // Hops of one query marker may overlap (the markers, not the timing, made the chain).
    if (h > 0 && hop.start_ts > chain.hops[h - 1].end_ts) {
      gaps = SaturatingAdd(gaps, hop.start_ts - chain.hops[h - 1].end_ts);
    }
  }
  const uint64_t span = chain.span_ns();
  json j = {{"tid", chain.tid},
            {"by", chain.by_marker ? "query_marker" : "dependence"},
            {"cut", ChainCutName(chain.cut)},
            {"file", ChainFile(c, chain)},
            {"start_ts", chain.hops.front().start_ts},
            {"reads", chain.reads.size()},
            {"hops", chain.hops.size()},
            {"reads_per_hop", per_hop_reads},
            {"hop_ns", hop_ns},
            {"user_gaps_ns", gaps},
            {"span_ns", span}};
  if (device_time) {
    j["hop_device_ns"] = device;
    j["hop_software_ns"] = software;
    j["estimated_with_driver_resubmission_ns"] = with_resubmit;
    j["estimated_saving_ns"] = span - std::min(span, with_resubmit);
  }
  json members = json::array();
  for (const ChainRead& r : chain.reads) members.push_back({r.issue_ts, r.offset});
  j["members"] = members;
  sums.hops += chain.hops.size();
  sums.reads += chain.reads.size();
  sums.hop_ns = SaturatingAdd(sums.hop_ns, hop_total);
  sums.device_ns = SaturatingAdd(sums.device_ns, device_total);
  sums.gaps_ns = SaturatingAdd(sums.gaps_ns, gaps);
  sums.span_ns = SaturatingAdd(sums.span_ns, span);
  sums.with_resubmit_ns = SaturatingAdd(sums.with_resubmit_ns, with_resubmit);
  return j;
}

json MeanPerChain(const ChainSums& s, uint64_t chains, bool device_time) {
  auto per = [](uint64_t total, uint64_t n) {
    return static_cast<double>(total) / static_cast<double>(n);
  };
  json j = {{"hops", per(s.hops, chains)},
            {"reads_per_hop", per(s.reads, s.hops)},
            {"hop_ns", per(s.hop_ns, s.hops)},
            {"user_gap_ns", s.hops > chains ? per(s.gaps_ns, s.hops - chains) : 0.0},
            {"span_ns", per(s.span_ns, chains)}};
  if (device_time) {
    j["hop_device_ns"] = per(s.device_ns, s.hops);
    j["hop_software_ns"] = per(s.hop_ns - std::min(s.hop_ns, s.device_ns), s.hops);
    j["estimated_saving_ns"] = per(s.span_ns - std::min(s.span_ns, s.with_resubmit_ns), chains);
  }
  return j;
}

}  // namespace

json DependentChainsJson(const Correlation& c, const ChainOptions& o, size_t top) {
  const ChainDetection d = DetectChains(c, o);
  json list = json::array(), top_list = json::array(), cuts = json::object();
  ChainSums sums;
  uint64_t by_marker = 0;
  for (const Chain& chain : d.chains) {
    json cj = ChainJson(c, chain, d.device_time, sums);
    by_marker += chain.by_marker;
    const std::string cut = ChainCutName(chain.cut);
    cuts[cut] = cuts.value(cut, uint64_t{0}) + 1;
    if (top_list.size() < top) {
      json brief = cj;
      brief.erase("members");
      top_list.push_back(std::move(brief));
    }
    list.push_back(std::move(cj));
  }
  const uint64_t n = d.chains.size();
  json j;
  j["gap_threshold_ns"] = o.gap_ns;
  j["min_reads"] = o.min_reads;
  j["query_marker"] = o.query_marker;
  j["hop_marker"] = o.hop_marker;
  j["chains"] = n;
  j["chains_by_query_marker"] = by_marker;
  j["chains_by_dependence"] = n - by_marker;
  j["reads_in_chains"] = sums.reads;
  j["runs_too_short"] = d.short_runs;
  j["cuts"] = cuts;
  j["device_time"] = d.device_time;
  if (n) {
    j["span_ns"] = sums.span_ns;
    j["per_chain_mean"] = MeanPerChain(sums, n, d.device_time);
    if (d.device_time) {
      j["estimated_with_driver_resubmission_ns"] = sums.with_resubmit_ns;
      j["estimated_speedup"] =
          sums.with_resubmit_ns
              ? static_cast<double>(sums.span_ns) / static_cast<double>(sums.with_resubmit_ns)
              : 0.0;
    }
  }
  j["top"] = top_list;
  j["list"] = list;
  j["method"] =
      "an ESTIMATE: each hop after the first of a chain keeps only its device time (NVMe "
      "setup->complete, or D->C), as if the kernel resubmitted it from the previous hop's "
      "completion; the user-space gap and the syscall, file-system and block software of those "
      "hops are saved (an upper bound; docs/block-layer.md \"Dependent read chains\")";
  return j;
}

}  // namespace iotwin::correlate
