// Analyzer: the block layer (requests per device, their sizes, patterns and latency terms) and
// NVMe commands, and their parts of the report model ("block", "nvme").
#include "analysis/analyzer.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/analyzer_internal.h"
#include "base/checked_math.h"
#include "format/records.h"

namespace iotwin::analysis {
using namespace analyzer_detail;  // NOLINT(google-build-using-namespace): this class's own helpers

using nlohmann::json;

namespace {

uint64_t BlockKey(const iot_block& r) {
  if (r.rq_id != 0) return r.rq_id;
  return (static_cast<uint64_t>(r.dev) << 44) ^ r.sector;
}

json BlockDeviceJson(uint32_t dev, const auto& d) {
  json dj = {{"dev", dev},
             {"name", fmt::format("{}:{}", dev >> 20, dev & 0xfffff)},
             {"queued", d.queued},
             {"requests", d.issued},
             {"completed", d.completed},
             {"merges", d.merges},
             {"splits", d.splits},
             {"requeues", d.requeues},
             {"errors", d.errors},
             {"flushes", d.flushes},
             {"discards", d.discards},
             {"readahead", d.readahead},
             {"sync", d.sync},
             {"fua", d.fua}};
  for (int dir = 0; dir < 2; dir++) {
    json z = SizesJson(d.sizes[dir], d.top[dir], 10);
    z["pattern"] = AccessJson(d.access[dir]);
    dj[dir == 0 ? "read" : "write"] = z;
  }
  dj["seek_histogram"] = SeekJson(d.seek);
  if (d.q2q.total()) dj["q2q_ns"] = LatencyJson(d.q2q);
  return dj;
}

json QueueDepthJson(const model::QueueDepth& q) {
  return {{"average", Round4(q.average)}, {"p99", q.p99}, {"max", q.max},
          {"in_flight_ns", q.in_flight_ns}};
}

// From the first request on the device that was not on the device from its start to its
// completion, its device times are kept apart from its queue times (until then the same).
void SeparateDeviceTimes(auto& d) {
  if (d.device_apart) return;
  d.device_times = d.queue_times;
  d.device_apart = true;
}

// The intervals of requests still in flight at the end of the window, from `starts` (each
// clipped to the window; those starting at its end hold no time) to the window's end.
struct OpenIntervals {
  std::vector<uint64_t> starts, ends;
  OpenIntervals(std::vector<uint64_t> from, uint64_t first, uint64_t last) {
    for (uint64_t t : from)
      if (std::max(t, first) < last) starts.push_back(std::max(t, first));
    std::sort(starts.begin(), starts.end());
    ends.assign(starts.size(), last);
  }
  model::SortedTimes Times() const { return {starts, ends}; }
};

// Requests in flight on each device over the report's window [first, last], time-weighted
// (iostat's aqu-sz): from start to completion, and on the device (issued, not given back).
// Requests still in flight at the end count up to it. Completed requests' times lie within the
// window: first and last are the earliest and latest times of the records counted.
void AddQueueDepths(json* devs, const auto& devices, const auto& in_flight, uint64_t first,
                    uint64_t last) {
  size_t i = 0;
  std::vector<uint64_t> scratch_starts, scratch_ends;
  for (const auto& [dev, d] : devices) {
    std::vector<uint64_t> queue, device;  // starts of the requests still in flight
    const uint32_t this_dev = dev;  // a lambda cannot capture a structured binding (C++20, clang 14)
    in_flight.ForEach([&](const auto&, const auto& f) {
      if (f.dev != this_dev) return;
      queue.push_back(f.start);
      if (f.issue != 0) device.push_back(f.issue);
    });
    const OpenIntervals open_queue(std::move(queue), first, last);
    const OpenIntervals open_device(std::move(device), first, last);
    const model::QueueDepth queue_depth =
        d.queue_times.WithSorted(&scratch_starts, &scratch_ends, [&](const auto& times) {
          return model::QueueDepthOfSorted(times, open_queue.Times(), first, last);
        });
    // The device's times are the queue's while no request was apart (and none open is).
    const model::QueueDepth device_depth =
        !d.device_apart && open_queue.starts == open_device.starts
            ? queue_depth
            : (d.device_apart ? d.device_times : d.queue_times)
                  .WithSorted(&scratch_starts, &scratch_ends, [&](const auto& times) {
                    return model::QueueDepthOfSorted(times, open_device.Times(), first, last);
                  });
    json qd = QueueDepthJson(queue_depth);
    qd["device"] = QueueDepthJson(device_depth);
    qd["window_ns"] = last > first ? last - first : 0;
    (*devs)[i]["queue_depth"] = std::move(qd);
    (*devs)[i]["reissues"] = d.reissues;
    i++;
  }
}

// Block requests per device and over all devices; the bytes per direction go to `bytes`.
json BlockJson(const auto& devices, uint64_t queued_dropped, std::array<uint64_t, 2>* bytes) {
  json devs = json::array();
  SizeHistogram all_sizes[2];
  TopValues all_top[2];
  uint64_t requests = 0, blk_ops[2] = {0, 0};
  std::array<std::array<uint64_t, kAccessKinds>, 2> access{};
  for (const auto& [dev, d] : devices) {
    requests += d.issued;
    for (int dir = 0; dir < 2; dir++) {
      (*bytes)[dir] += d.bytes[dir];
      blk_ops[dir] += d.ops[dir];
      all_sizes[dir].Merge(d.sizes[dir]);
      all_top[dir].Merge(d.top[dir]);
      for (int a = 0; a < kAccessKinds; a++) access[dir][a] += d.access[dir][a];
    }
    devs.push_back(BlockDeviceJson(dev, d));
  }
  const std::array<uint64_t, 2>& blk_bytes = *bytes;
  json b = {{"requests", requests},
            {"devices", devs},
            {"read", SizesJson(all_sizes[0], all_top[0], 10)},
            {"write", SizesJson(all_sizes[1], all_top[1], 10)},
            {"mix", {{"read_ops_share", Round4(Share(blk_ops[0], blk_ops[0] + blk_ops[1]))},
                     {"read_bytes_share",
                      Round4(Share(blk_bytes[0], blk_bytes[0] + blk_bytes[1]))}}},
            {"queued_dropped", queued_dropped}};
  b["read"]["pattern"] = AccessJson(access[0]);
  b["write"]["pattern"] = AccessJson(access[1]);
  return b;
}

// Latency terms of block requests (btt's Q2C, Q2D, I2D, D2C), those measured.
json BlockLatencyJson(const LogLinearHistogram& q2c, const LogLinearHistogram& q2d,
                      const LogLinearHistogram& i2d, const LogLinearHistogram& d2c) {
  json lat = json::object();
  if (q2c.total()) lat["Q2C"] = LatencyJson(q2c);
  if (q2d.total()) lat["Q2D"] = LatencyJson(q2d);
  if (i2d.total()) lat["I2D"] = LatencyJson(i2d);
  if (d2c.total()) lat["D2C"] = LatencyJson(d2c);
  return lat;
}

json BlockPhasesJson(const std::array<uint64_t, 16>& counts) {
  json phases = json::object();
  for (uint16_t p = 1; p < counts.size(); p++)
    if (counts[p]) phases[std::string(BlockPhaseName(p))] = counts[p];
  return phases;
}

}  // namespace

// ---- block and NVMe --------------------------------------------------------------------------

void Analyzer::OnBlock(const iot_block& r) {
  have_block_ = true;
  if (r.phase < blk_phase_counts_.size()) ++blk_phase_counts_[r.phase];
  if (!TimeAllowed(r.ts)) {
    ++filtered_out_;
    return;
  }
  first_ts_ = std::min(first_ts_, r.ts);
  last_ts_ = std::max(last_ts_, r.ts);
  if (!last_block_stats_ || r.dev != last_block_dev_) {
    last_block_stats_ = &block_devs_[r.dev];
    last_block_dev_ = r.dev;
  }
  BlockDevStats& d = *last_block_stats_;
  switch (r.phase) {
    case IOT_BLK_QUEUE: {
      ++d.queued;
      if (d.last_queue_ts != 0 && r.ts >= d.last_queue_ts) d.q2q.Add(r.ts - d.last_queue_ts);
      d.last_queue_ts = r.ts;
      if (blk_queue_pending_.size() >= kMaxQueuedBios) {
        blk_queue_dropped_ += blk_queue_pending_.size();
        blk_queue_pending_.clear();
      }
      // The newest bio queued at a sector is the one its next request starts with: an older
      // entry is stale (its completion reached the trace before its queue record, as records
      // from two CPUs can) and would start a later request long before its time.
      blk_queue_pending_.insert_or_assign(std::make_pair(r.dev, r.sector), r.ts);
      break;
    }
    case IOT_BLK_BACKMERGE:
    case IOT_BLK_FRONTMERGE:
    case IOT_BLK_RQ_MERGE: ++d.merges; break;
    case IOT_BLK_SPLIT: ++d.splits; break;
    case IOT_BLK_REQUEUE: {
      ++d.requeues;
      // Off the device until issued again; still in flight (model/block_requests.h).
      BlockInFlight* f = blk_in_flight_.Find(model::KeyOfBlockRecord(r));
      if (!f) break;
      model::StepOfRequest(r, &f->state);
      if (f->issue != 0) {
        SeparateDeviceTimes(d);
        d.device_times.Add(f->issue, r.ts);
        f->issue = 0;
      }
      break;
    }
    case IOT_BLK_INSERT:
      if (blk_insert_pending_.size() < kMaxPending)
        blk_insert_pending_.FindOrInsert(BlockKey(r)) = r.ts;
      break;
    case IOT_BLK_ISSUE: OnBlockIssue(r, d); break;
    case IOT_BLK_COMPLETE: OnBlockComplete(r, d); break;
    default: break;
  }
}

void Analyzer::OnBlockIssue(const iot_block& r, BlockDevStats& d) {
  // One lookup finds the request or makes its entry (a new request is the rule's first issue).
  const model::BlockRequestKey request = model::KeyOfBlockRecord(r);
  bool inserted = false;
  BlockInFlight* f = blk_in_flight_.size() < kMaxPending
                         ? &blk_in_flight_.FindOrInsert(request, &inserted)
                         : blk_in_flight_.Find(request);
  if (model::StepOfRequest(r, f && !inserted ? &f->state : nullptr) ==
      model::BlockStep::kReissue) {
    // The same request again: counted at its first issue; its D2C starts over.
    ++d.reissues;
    f->issue = r.ts;
    if (f->d2c_open) f->d2c_issue = r.ts;
    return;
  }
  ++d.issued;
  uint64_t bytes = r.bytes ? r.bytes : static_cast<uint64_t>(r.nr_sector) * 512;
  if (r.flags & (IOT_BLKF_FLUSH | IOT_BLKF_PREFLUSH)) ++d.flushes;  // each flushes the cache
  if (r.flags & (IOT_BLKF_DISCARD | IOT_BLKF_SECURE_ERASE | IOT_BLKF_WRITE_ZEROES)) ++d.discards;
  if (r.flags & IOT_BLKF_READAHEAD) ++d.readahead;
  if (r.flags & IOT_BLKF_SYNC) ++d.sync;
  if (r.flags & IOT_BLKF_FUA) ++d.fua;
  int dir = (r.flags & IOT_BLKF_READ) ? 0 : (r.flags & IOT_BLKF_WRITE) ? 1 : -1;
  if (dir >= 0 && bytes > 0) {
    ++d.ops[dir];
    d.bytes[dir] += bytes;
    d.sizes[dir].Add(bytes);
    d.top[dir].Add(bytes);
    block_size_ll_[dir].Add(bytes);
    int64_t gap = 0;
    const uint64_t at = SectorToByteSaturated(r.sector);
    Access a = ClassifyAccess(d.stream[dir], at, ClampedLength(at, bytes), &gap);
    ++d.access[dir][static_cast<int>(a)];
    if (a != Access::kFirst) d.seek.Add(gap);
    series_.AddOpAndBytes(kBlockReadOps + static_cast<size_t>(dir),
                          kBlockReadBytes + static_cast<size_t>(dir), r.ts, bytes);
  }
  uint64_t start = r.ts;
  if (!blk_insert_pending_.empty()) {
    const uint64_t key = BlockKey(r);
    if (uint64_t* ins = blk_insert_pending_.Find(key)) {
      if (r.ts >= *ins) i2d_.Add(r.ts - *ins);
      start = std::min(start, *ins);
      blk_insert_pending_.Erase(key);
    }
  }
  if (!blk_queue_pending_.empty()) {
    auto q = blk_queue_pending_.find({r.dev, r.sector});
    if (q != blk_queue_pending_.end() && r.ts >= q->second) {
      q2d_.Add(r.ts - q->second);
      start = std::min(start, q->second);
    }
  }
  if (f) {
    *f = {.start = start, .issue = r.ts, .d2c_issue = r.ts, .dev = r.dev, .d2c_open = true,
          .state = model::BlockRequestState::kIssued};
  }
}

void Analyzer::OnBlockComplete(const iot_block& r, BlockDevStats& d) {
  ++d.completed;
  if (r.error != 0) ++d.errors;
  const size_t slot = blk_in_flight_.FindSlot(model::KeyOfBlockRecord(r));
  if (slot != blk_in_flight_.kNone) {
    BlockInFlight& f = blk_in_flight_.At(slot);
    // D2C of the issue the completion follows; a later (partial) completion has none.
    if (f.d2c_open) {
      if (r.ts >= f.d2c_issue) d2c_.Add(r.ts - f.d2c_issue);
      f.d2c_open = false;
    }
    if (model::StepOfRequest(r, &f.state) == model::BlockStep::kComplete) {
      // On the device from its start to now, unless issued after it started or given back.
      if (f.issue == 0 || f.issue != f.start) SeparateDeviceTimes(d);
      if (r.ts >= f.start) d.queue_times.Add(f.start, r.ts);
      if (d.device_apart && f.issue != 0 && r.ts >= f.issue) d.device_times.Add(f.issue, r.ts);
      blk_in_flight_.EraseSlot(slot);
    }
  }
  if (blk_queue_pending_.empty()) return;
  // Q2C for the bio that started the request; forget the bios merged into it: those queued
  // at its sectors [sector, last]. `last` saturates (a flush completes at sector 2^64 - 1),
  // so the range is never reversed.
  auto lo = blk_queue_pending_.lower_bound({r.dev, r.sector});
  if (lo != blk_queue_pending_.end() && lo->first == std::make_pair(r.dev, r.sector) &&
      r.ts >= lo->second)
    q2c_.Add(r.ts - lo->second);
  const uint64_t last = LastOfRun(r.sector, r.nr_sector);
  auto hi = blk_queue_pending_.upper_bound({r.dev, last});
  blk_queue_pending_.erase(lo, hi);
}

void Analyzer::OnNvme(const iot_nvme& r) {
  have_nvme_ = true;
  if (!TimeAllowed(r.ts)) {
    ++filtered_out_;
    return;
  }
  uint64_t key = (static_cast<uint64_t>(r.ctrl_id) << 32) | (static_cast<uint64_t>(r.qid) << 16) |
                 r.cid;
  if (r.phase == IOT_NVME_SETUP) {
    ++nvme_cmds_;
    if (r.nlb && r.lba_size) {
      nvme_bytes_ = SaturatingAdd(nvme_bytes_, static_cast<uint64_t>(r.nlb) * r.lba_size);
    }
    if (nvme_pending_.size() < kMaxPending) nvme_pending_.FindOrInsert(key) = r.ts;
  } else if (r.phase == IOT_NVME_COMPLETE) {
    if (r.status != 0) ++nvme_errors_;
    if (uint64_t* s = nvme_pending_.Find(key)) {
      if (r.ts >= *s) nvme_latency_.Add(r.ts - *s);
      nvme_pending_.Erase(key);
    }
  }
}
json Analyzer::BlockModel(std::array<uint64_t, 2>* blk_bytes) const {
  if (!have_block_) return nullptr;
  json b = BlockJson(block_devs_, blk_queue_dropped_, blk_bytes);
  AddQueueDepths(&b["devices"], block_devs_, blk_in_flight_, first_ts_, last_ts_);
  b["latency_ns"] = BlockLatencyJson(q2c_, q2d_, i2d_, d2c_);
  b["phases"] = BlockPhasesJson(blk_phase_counts_);
  return b;
}

json Analyzer::NvmeModel() const {
  if (!have_nvme_) return nullptr;
  return {{"commands", nvme_cmds_}, {"bytes", nvme_bytes_}, {"errors", nvme_errors_},
          {"latency_ns", LatencyJson(nvme_latency_)}};
}

}  // namespace iotwin::analysis
