#include "analysis/compare_device.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "base/json_fields.h"
#include "format/dev_number.h"
#include "format/records.h"

namespace iotwin::analysis {

using nlohmann::json;

json DeviceFacts::ToJson() const {
  if (!known) return nullptr;
  return {{"name", name},
          {"model", model},
          {"scheduler", scheduler},
          {"max_sectors_kb", max_sectors_kb},
          {"max_segments", max_segments},
          {"max_segment_size", max_segment_size},
          {"logical_block_size", logical_block_size},
          {"physical_block_size", physical_block_size},
          {"nr_requests", nr_requests}};
}

DeviceFacts DeviceFactsOf(const json& meta, uint32_t dev) {
  DeviceFacts f;
  const json* devices = json_fields::Object(meta, "block_devices");
  if (!devices) return f;
  for (const auto& [name, d] : devices->items()) {
    if (!d.is_object() || ParseDev(json_fields::GetString(d, "dev")) != dev) continue;
    f.known = true;
    f.name = name;
    f.model = json_fields::GetString(d, "model");
    f.scheduler = json_fields::GetString(d, "scheduler");
    f.max_sectors_kb = json_fields::GetUint32(d, "max_sectors_kb", 0);
    f.max_segments = json_fields::GetUint32(d, "max_segments", 0);
    f.max_segment_size = json_fields::GetUint32(d, "max_segment_size", 0);
    f.logical_block_size = json_fields::GetUint32(d, "logical_block_size", 0);
    f.physical_block_size = json_fields::GetUint32(d, "physical_block_size", 0);
    f.nr_requests = json_fields::GetUint32(d, "nr_requests", 0);
    break;
  }
  return f;
}

std::string QueueLimitDifferences(const DeviceFacts& a, const DeviceFacts& b) {
  if (!a.known || !b.known) return "";
  std::string out;
  auto add = [&](const char* what, const auto& target, const auto& original) {
    if (target == original) return;
    out += fmt::format("{}{} {} vs {}", out.empty() ? "" : ", ", what, target, original);
  };
  add("max_sectors_kb", b.max_sectors_kb, a.max_sectors_kb);
  add("max_segments", b.max_segments, a.max_segments);
  add("max_segment_size", b.max_segment_size, a.max_segment_size);
  add("logical_block_size", b.logical_block_size, a.logical_block_size);
  add("physical_block_size", b.physical_block_size, a.physical_block_size);
  add("scheduler", b.scheduler.empty() ? std::string("-") : b.scheduler,
      a.scheduler.empty() ? std::string("-") : a.scheduler);
  // Older traces did not record nr_requests (0): not a difference.
  if (a.nr_requests && b.nr_requests) add("nr_requests", b.nr_requests, a.nr_requests);
  return out;
}

std::string QueueLimitsText(const DeviceFacts& d) {
  if (!d.known) return "queue limits not recorded";
  return fmt::format("max_sectors_kb {}, max_segments {}, block {}/{}, scheduler {}, nr_requests {}",
                     d.max_sectors_kb, d.max_segments, d.logical_block_size,
                     d.physical_block_size, d.scheduler.empty() ? "-" : d.scheduler,
                     d.nr_requests ? fmt::format("{}", d.nr_requests) : std::string("-"));
}

double IssueMatch::OrderError() const {
  const uint64_t n = std::max(reference, other);
  if (n == 0) return 0;
  return static_cast<double>(out_of_order + missing + extra) / static_cast<double>(n);
}

namespace {

constexpr uint32_t kFlushKind = IOT_BLKF_FLUSH;

// What must agree for two I/Os to be the same: a data I/O's direction (read, write, discard,
// write-zeroes, secure erase), a data-less one's flush. Sync, FUA and meta hints are judged by
// the flag counts, not here.
uint32_t Kind(const IssuedIo& io) {
  const uint32_t dir = io.flags & (IOT_BLKF_READ | IOT_BLKF_WRITE | IOT_BLKF_DISCARD |
                                   IOT_BLKF_SECURE_ERASE | IOT_BLKF_WRITE_ZEROES);
  if (io.bytes == 0 && (io.flags & (IOT_BLKF_FLUSH | IOT_BLKF_PREFLUSH))) return kFlushKind;
  return dir;
}

using Key = std::tuple<uint32_t, uint64_t, uint32_t>;  // kind, offset, bytes
Key KeyOf(const IssuedIo& io) {
  return {Kind(io), io.bytes == 0 ? 0 : io.offset, io.bytes};
}

// Length of the longest increasing subsequence (patience sorting, O(n log n)).
size_t LongestIncreasing(const std::vector<size_t>& v) {
  std::vector<size_t> tails;
  for (size_t x : v) {
    auto it = std::lower_bound(tails.begin(), tails.end(), x);
    if (it == tails.end()) tails.push_back(x);
    else *it = x;
  }
  return tails.size();
}

// Unpaired I/Os of one side by kind and start offset, to find the pieces that tile a range.
using Loose = std::multimap<std::pair<uint32_t, uint64_t>, size_t>;

Loose LooseOf(const std::vector<IssuedIo>& ios, const std::vector<bool>& paired) {
  Loose out;
  for (size_t i = 0; i < ios.size(); i++) {
    if (!paired[i] && ios[i].bytes > 0) out.emplace(std::make_pair(Kind(ios[i]), ios[i].offset), i);
  }
  return out;
}

// Takes from `loose` the I/Os of `ios` that tile `whole` contiguously from its start (two or
// more) and marks them paired; returns how many, 0 (taking nothing) when they do not cover it
// exactly.
size_t TakeTiling(const IssuedIo& whole, const std::vector<IssuedIo>& ios, Loose* loose,
                  std::vector<bool>* paired) {
  const uint32_t kind = Kind(whole);
  const uint64_t end = whole.offset + whole.bytes;
  if (end < whole.offset) return 0;
  std::vector<Loose::iterator> taken;
  uint64_t pos = whole.offset;
  while (pos < end) {
    // The earliest unpaired one starting here (multimap keeps insertion order within a key).
    const std::pair<uint32_t, uint64_t> at{kind, pos};
    auto it = loose->lower_bound(at);
    if (it == loose->end() || it->first != at) break;
    const uint32_t bytes = ios[it->second].bytes;
    if (bytes == 0 || pos + bytes > end) break;
    taken.push_back(it);
    pos += bytes;
  }
  if (pos != end || taken.size() < 2) return 0;
  for (auto it : taken) {
    (*paired)[it->second] = true;
    loose->erase(it);
  }
  return taken.size();
}

// Pairs what can be paired one for one; fills paired flags, out_of_order and late_ns.
void PairOneForOne(const std::vector<IssuedIo>& ref, const std::vector<IssuedIo>& other,
                   std::vector<bool>* ref_paired, std::vector<bool>* other_paired,
                   IssueMatch* m) {
  std::map<Key, std::deque<size_t>> waiting;
  for (size_t i = 0; i < ref.size(); i++) waiting[KeyOf(ref[i])].push_back(i);
  std::vector<size_t> ref_order;            // the paired reference I/O of each, in other's order
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t j = 0; j < other.size(); j++) {
    auto it = waiting.find(KeyOf(other[j]));
    if (it == waiting.end() || it->second.empty()) continue;
    const size_t i = it->second.front();
    it->second.pop_front();
    (*ref_paired)[i] = true;
    (*other_paired)[j] = true;
    ref_order.push_back(i);
    pairs.emplace_back(i, j);
  }
  m->paired = pairs.size();
  m->out_of_order = pairs.size() - LongestIncreasing(ref_order);
  // Lateness against the schedule: each pair's issue difference less the smallest one.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto diff = [&](const std::pair<size_t, size_t>& p) -> int64_t {
    const uint64_t a = ref[p.first].ts, b = other[p.second].ts;
    const uint64_t d = b >= a ? b - a : a - b;
    const int64_t mag = d > static_cast<uint64_t>(kMax) ? kMax : static_cast<int64_t>(d);
    return b >= a ? mag : -mag;
  };
  int64_t origin = kMax;
  for (const auto& p : pairs) origin = std::min(origin, diff(p));
  for (const auto& p : pairs) {
    const int64_t d = diff(p);
    m->late_ns.Add(d >= origin ? static_cast<uint64_t>(d) - static_cast<uint64_t>(origin)
                               : 0);
  }
}

}  // namespace

IssueMatch MatchIssues(const std::vector<IssuedIo>& ref, const std::vector<IssuedIo>& other) {
  IssueMatch m;
  m.reference = ref.size();
  m.other = other.size();
  std::vector<bool> ref_paired(ref.size(), false), other_paired(other.size(), false);
  PairOneForOne(ref, other, &ref_paired, &other_paired, &m);
  // A reference I/O that `other` holds as pieces: split.
  Loose other_loose = LooseOf(other, other_paired);
  for (size_t i = 0; i < ref.size(); i++) {
    if (ref_paired[i] || ref[i].bytes == 0) continue;
    const size_t pieces = TakeTiling(ref[i], other, &other_loose, &other_paired);
    if (pieces == 0) continue;
    ref_paired[i] = true;
    m.split++;
    m.split_pieces += pieces;
  }
  // An I/O of `other` that holds several reference I/Os: merged.
  Loose ref_loose = LooseOf(ref, ref_paired);
  for (size_t j = 0; j < other.size(); j++) {
    if (other_paired[j] || other[j].bytes == 0) continue;
    const size_t parts = TakeTiling(other[j], ref, &ref_loose, &ref_paired);
    if (parts == 0) continue;
    other_paired[j] = true;
    m.merged++;
    m.merged_parts += parts;
  }
  m.missing = static_cast<uint64_t>(std::count(ref_paired.begin(), ref_paired.end(), false));
  m.extra = static_cast<uint64_t>(std::count(other_paired.begin(), other_paired.end(), false));
  return m;
}

}  // namespace iotwin::analysis
