// What compare --layer block knows of each side's device (the header's `block_devices`, read
// from /sys/block/DEV/queue at record time) and how one stream of issued I/Os is matched to
// another: in order, missing, extra, split or merged, and how late each was against the
// schedule. A device replay onto another device is judged on the stream the replayer controls
// (its bios, Q records) and reports what the target device made of it (its requests, queue
// depth and D2C latency) as the device's answer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/histogram.h"

namespace iotwin::analysis {

// One device's queue limits as the trace's header recorded them (unknown: an older trace, a
// hand-built one, or a device missing from the header).
struct DeviceFacts {
  bool known = false;
  std::string name, model, scheduler;
  uint32_t max_sectors_kb = 0, max_segments = 0, max_segment_size = 0;
  uint32_t logical_block_size = 0, physical_block_size = 0, nr_requests = 0;
  nlohmann::json ToJson() const;  // null when unknown
};

// The header entry of `dev` ("block_devices": {"loop0": {"dev": "7:0", ...}}); entries whose
// numbers are not counts read as 0.
DeviceFacts DeviceFactsOf(const nlohmann::json& meta, uint32_t dev);

// "max_sectors_kb 64 vs 512, scheduler mq-deadline vs none" (target first); empty when the two
// are the same or either is unknown. Only what decides splits and merges is compared: the
// size and segment limits, block sizes, scheduler and nr_requests.
std::string QueueLimitDifferences(const DeviceFacts& original, const DeviceFacts& target);

// "max_sectors_kb 512, max_segments 128, block 512/4096, scheduler none, nr_requests 128", or
// "queue limits not recorded".
std::string QueueLimitsText(const DeviceFacts& d);

// One I/O as issued: a request (ISSUE record) or a bio (QUEUE record). `offset` is in bytes,
// less the replay's --device-offset.
struct IssuedIo {
  uint64_t ts = 0;
  uint64_t offset = 0;
  uint32_t bytes = 0;
  uint32_t flags = 0;  // IOT_BLKF_*
};

// `reference` against `other`: each I/O of `other` is paired with the earliest unpaired one of
// `reference` of the same offset, size and kind (read, write, flush, discard). What is left is
// explained where it can be: several I/Os of one side that exactly tile one of the other side
// (same kind, contiguous, covering its bytes) are a split (the other side has the pieces) or a
// merge (the other side has the whole).
struct IssueMatch {
  uint64_t reference = 0, other = 0;  // I/Os on each side
  uint64_t paired = 0;
  uint64_t out_of_order = 0;  // paired I/Os outside the longest run in the reference's order
  uint64_t split = 0;         // reference I/Os that `other` holds as pieces
  uint64_t split_pieces = 0;  // the pieces
  uint64_t merged = 0;        // `other` I/Os that hold several reference I/Os
  uint64_t merged_parts = 0;  // the reference I/Os they hold
  uint64_t missing = 0;       // reference I/Os with no counterpart
  uint64_t extra = 0;         // `other` I/Os with no counterpart
  // How late each paired I/O of `other` was issued against the reference's timeline: its
  // (issue - reference issue) less the smallest such difference (the schedule's origin: the
  // least late I/O), in ns.
  LogLinearHistogram late_ns;

  // Share of the I/Os that are missing, extra or out of order, of the larger side.
  double OrderError() const;
};

IssueMatch MatchIssues(const std::vector<IssuedIo>& reference, const std::vector<IssuedIo>& other);

}  // namespace iotwin::analysis
