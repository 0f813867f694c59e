// Analyzer: asynchronous I/O (io_uring and libaio requests, paired from submission to
// completion) and its part of the report model ("async").
#include "analysis/analyzer.h"

#include <string>
#include <string_view>

#include <fmt/format.h>

#include "analysis/analyzer_internal.h"
#include "base/checked_math.h"
#include "format/records.h"

namespace iotwin::analysis {
using namespace analyzer_detail;  // NOLINT(google-build-using-namespace): this class's own helpers

using nlohmann::json;

namespace {

json AsyncJson(const auto& stats, uint64_t unpaired) {
  json rows = json::array();
  uint64_t total = 0;
  for (const auto& [key, s] : stats) {
    total += s.count;
    json r = SizesJson(s.sizes, s.top, 5);
    r["engine"] = std::string(AsyncEngineName(s.engine));
    r["opcode"] = s.opcode;
    r["name"] = AsyncOpName(s.engine, s.opcode);
    r["count"] = s.count;
    r["errors"] = s.errors;
    r["bytes_done"] = s.bytes;
    r["latency_ns"] = LatencyJson(s.latency);
    rows.push_back(r);
  }
  return {{"requests", total}, {"unpaired_completions", unpaired}, {"rows", rows}};
}

}  // namespace

int AsyncDirection(uint8_t engine, uint8_t opcode) {
  switch (AsyncOp(engine, opcode).kind) {
    case AsyncKind::kRead: return 0;
    case AsyncKind::kWrite: return 1;
    default: return -1;
  }
}

std::string AsyncOpName(uint8_t engine, uint8_t opcode) {
  const std::string_view name = AsyncOp(engine, opcode).name;
  if (!name.empty()) return std::string(name);
  return fmt::format("op{}", opcode);
}
// ---- async I/O -------------------------------------------------------------------------------

void Analyzer::OnAsyncSubmit(const iot_async_io& r, uint64_t key) {
  if (async_pending_.size() >= kMaxPending) return;
  AsyncPending& p = async_pending_.FindOrInsert(key);
  p.ts = r.ts;
  p.offset = r.offset;
  p.length_known = AsyncLengthKnown(r);
  p.length = p.length_known ? r.length : 0;
  p.ctx = r.ctx;
  p.tgid = r.tgid;
  p.tid = r.tid;
  p.engine = r.engine;
  p.opcode = r.opcode;
  // io_uring's IOSQE_FIXED_FILE (1): fd indexes the ring's registered files, no descriptor.
  const bool fixed_file = r.engine == IOT_AIO_ENGINE_URING && (r.flags & 1);
  const model::OpenFileDescription* d =
      fixed_file ? nullptr : fd_state_.Description(fd_state_.DescriptionOf(r.tgid, r.fd));
  p.file = d && d->user != 0 ? static_cast<int32_t>(d->user - 1) : -1;
  p.direct = d && d->direct;
  // Access pattern at submission, where the application chose the offset.
  int dir = AsyncDirection(r.engine, r.opcode);
  if (dir >= 0 && p.file >= 0 && IsStorageFile(p.file) && TimeAllowed(r.ts) &&
      TaskAllowed(r.tgid, r.tid) && FileAllowed(p.file)) {
    ThreadStats& t = Thread(r.tgid, r.tid, r.ts);
    if (StreamState* st = Stream(t, p.file, dir, true)) {
      int64_t gap = 0;
      Access a = ClassifyAccess(*st, r.offset, ClampedLength(r.offset, p.length), &gap);
      ++access_[dir][static_cast<int>(a)];
      ++files_[static_cast<size_t>(p.file)].access[dir][static_cast<int>(a)];
      if (a != Access::kFirst) seek_[dir].Add(gap);
    }
  }
}

void Analyzer::OnAsync(const iot_async_io& r) {
  ensure_start(r.ts);
  const uint64_t key = r.req_id ^ MixBits(r.ctx);
  if (r.phase == IOT_AIO_SUBMIT) {
    OnAsyncSubmit(r, key);
    return;
  }
  if (r.phase != IOT_AIO_COMPLETE) return;
  AsyncPending p;
  bool paired = false;
  if (AsyncPending* found = async_pending_.Find(key); found && found->ctx == r.ctx) {
    p = *found;
    paired = true;
    async_pending_.Erase(key);
  } else {
    ++async_unpaired_;
    p.ts = r.ts;
    p.offset = r.offset;
    p.length = r.length;
    p.tgid = r.tgid;
    p.tid = r.tid;
    p.engine = r.engine;
    p.opcode = r.opcode;
  }
  if (!TimeAllowed(p.ts) || !TaskAllowed(p.tgid, p.tid)) {
    ++filtered_out_;
    return;
  }
  if (!FileAllowed(p.file)) {
    ++filtered_out_;
    NoteScopedOut(p.file, &scoped_out_async_, &scoped_out_async_bytes_,
                  r.res > 0 ? static_cast<uint64_t>(r.res) : 0);
    return;
  }
  first_ts_ = std::min(first_ts_, p.ts);
  last_ts_ = std::max(last_ts_, r.ts);
  AsyncStats& s = async_stats_[(static_cast<uint32_t>(p.engine) << 8) | p.opcode];
  s.engine = p.engine;
  s.opcode = p.opcode;
  ++s.count;
  uint64_t bytes = r.res > 0 ? static_cast<uint64_t>(r.res) : 0;
  if (!p.length_known) p.length = bytes;
  if (r.res < 0) ++s.errors;
  s.bytes = SaturatingAdd(s.bytes, bytes);
  s.requested = SaturatingAdd(s.requested, p.length);
  s.sizes.Add(p.length);
  s.top.Add(p.length);
  if (paired && r.ts >= p.ts) {
    s.latency.Add(r.ts - p.ts);
    async_ctx_in_flight_[{p.engine, p.ctx}].emplace_back(p.ts, r.ts);
  }
  int dir = AsyncDirection(p.engine, p.opcode);
  if (dir >= 0 && r.res >= 0 && !IsStorageFile(p.file)) {
    NonStorageOp(files_[static_cast<size_t>(p.file)], dir, bytes, p.length, true);
  } else if (dir >= 0 && r.res >= 0) {
    ++async_dir_ops_[dir];
    async_dir_bytes_[dir] = SaturatingAdd(async_dir_bytes_[dir], bytes);
    if (p.direct) direct_bytes_ = SaturatingAdd(direct_bytes_, bytes);
    series_.AddOpAndBytes(kAppReadOps + static_cast<size_t>(dir),
                          kAppReadBytes + static_cast<size_t>(dir), r.ts, bytes);
    data_first_ts_ = std::min(data_first_ts_, r.ts);
    data_last_ts_ = std::max(data_last_ts_, r.ts);
    if (p.file >= 0) {
      FileStats& f = files_[static_cast<size_t>(p.file)];
      ++f.async_ops[dir];
      f.async_bytes[dir] = SaturatingAdd(f.async_bytes[dir], bytes);
      f.max_end = std::max(f.max_end, SaturatingAdd(p.offset, std::max(p.length, bytes)));
      if (!heatmaps_.empty()) Heat(p.file, p.ts, p.offset, bytes, dir);
    }
  }
}
json Analyzer::AsyncModel() const {
  if (async_stats_.empty() && !async_unpaired_) return nullptr;
  json a = AsyncJson(async_stats_, async_unpaired_);
  // Queue depth of each ring or context, time-weighted over the report's window as the block
  // layer's (model/block_requests.h): requests submitted and not completed; those still in
  // flight at the end count up to it.
  auto intervals = async_ctx_in_flight_;
  async_pending_.ForEach([&](uint64_t, const AsyncPending& p) {
    if (p.ts >= first_ts_ && p.ts <= last_ts_) intervals[{p.engine, p.ctx}].emplace_back(p.ts, last_ts_);
  });
  json contexts = json::array();
  for (auto& [key, v] : intervals) {
    const uint64_t requests = v.size();
    const model::QueueDepth q = model::QueueDepthOf(v, first_ts_, last_ts_);
    contexts.push_back({{"engine", std::string(AsyncEngineName(key.first))},
                        {"ctx", fmt::format("{:#x}", key.second)},
                        {"requests", requests},
                        {"queue_depth", {{"average", Round4(q.average)}, {"p99", q.p99},
                                         {"max", q.max}, {"in_flight_ns", q.in_flight_ns}}}});
  }
  a["contexts"] = std::move(contexts);
  return a;
}

}  // namespace iotwin::analysis
