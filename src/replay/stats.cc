#include "replay/stats.h"

namespace iotwin::replay {

const char* MismatchName(Mismatch m) {
  switch (m) {
    case Mismatch::kShort: return "short";
    case Mismatch::kLong: return "long";
    case Mismatch::kErrorVsSuccess: return "error_vs_success";
    case Mismatch::kSuccessVsError: return "success_vs_error";
    case Mismatch::kErrno: return "errno";
    case Mismatch::kFault: return "fault";
    case Mismatch::kWaitTimedOut: return "wait_timed_out";
    case Mismatch::kCount: break;
  }
  return "?";
}

OpStats& ReplayStats::Op(const std::string& name) { return ops_[name]; }

void ReplayStats::AddMismatch(Mismatch kind, const std::string& op, MismatchExample example,
                              int max_examples) {
  const char* k = MismatchName(kind);
  mismatch_counts_[k][op]++;
  auto& ex = examples_[k];
  if (static_cast<int>(ex.size()) < max_examples) ex.push_back(std::move(example));
}

void ReplayStats::Merge(const ReplayStats& o, int max_examples) {
  for (const auto& [name, s] : o.ops_) {
    OpStats& d = ops_[name];
    d.count += s.count;
    d.errors += s.errors;
    d.bytes += s.bytes;
    d.latency.Merge(s.latency);
  }
  schedule_.Merge(o.schedule_);
  for (const auto& [r, m] : o.skipped_) {
    for (const auto& [op, n] : m) skipped_[r][op] += n;
  }
  for (auto it = skipped_.begin(); it != skipped_.end();) {
    it = it->second.empty() ? skipped_.erase(it) : std::next(it);
  }
  for (const auto& [k, m] : o.mismatch_counts_) {
    for (const auto& [op, n] : m) mismatch_counts_[k][op] += n;
  }
  for (const auto& [k, v] : o.examples_) {
    auto& d = examples_[k];
    for (const auto& e : v) {
      if (static_cast<int>(d.size()) < max_examples) d.push_back(e);
    }
  }
}

uint64_t ReplayStats::ops() const {
  uint64_t n = 0;
  for (const auto& [k, s] : ops_) n += s.count;
  return n;
}
uint64_t ReplayStats::bytes() const {
  uint64_t n = 0;
  for (const auto& [k, s] : ops_) n += s.bytes;
  return n;
}
uint64_t ReplayStats::mismatches() const {
  uint64_t n = 0;
  for (const auto& [k, m] : mismatch_counts_) {
    for (const auto& [op, c] : m) n += c;
  }
  return n;
}
uint64_t ReplayStats::skipped() const {
  uint64_t n = 0;
  for (const auto& [k, m] : skipped_) {
    for (const auto& [op, c] : m) n += c;
  }
  return n;
}

const std::vector<MismatchExample>& ReplayStats::examples(const std::string& kind) const {
  static const std::vector<MismatchExample> kEmpty;
  auto it = examples_.find(kind);
  return it == examples_.end() ? kEmpty : it->second;
}

double ElapsedSeconds(uint64_t start_ns, uint64_t end_ns) {
  return end_ns > start_ns ? static_cast<double>(end_ns - start_ns) / 1e9 : 0.0;
}

double PerSecond(uint64_t count, double secs) {
  return secs > 0 ? static_cast<double>(count) / secs : 0.0;
}

bool CompareResult(int64_t recorded, int64_t live, bool count_result, Mismatch* kind) {
  if (recorded >= 0 && live >= 0) {
    if (!count_result || recorded == live) return false;
    *kind = live < recorded ? Mismatch::kShort : Mismatch::kLong;
    return true;
  }
  if (recorded >= 0) {
    *kind = Mismatch::kErrorVsSuccess;
    return true;
  }
  if (live >= 0) {
    *kind = Mismatch::kSuccessVsError;
    return true;
  }
  if (recorded == live) return false;
  *kind = Mismatch::kErrno;
  return true;
}

}  // namespace iotwin::replay
