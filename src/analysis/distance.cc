#include "analysis/distance.h"

#include <algorithm>
#include <cmath>

namespace iotwin::analysis {
namespace {

uint64_t Sum(const std::vector<uint64_t>& v) {
  uint64_t s = 0;
  for (uint64_t x : v) s += x;
  return s;
}

}  // namespace

double KsDistance(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  uint64_t na = Sum(a), nb = Sum(b);
  if (na == 0 && nb == 0) return 0;
  if (na == 0 || nb == 0) return 1;
  size_t n = std::max(a.size(), b.size());
  uint64_t ca = 0, cb = 0;
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    ca += i < a.size() ? a[i] : 0;
    cb += i < b.size() ? b[i] : 0;
    double d = std::fabs(static_cast<double>(ca) / static_cast<double>(na) -
                         static_cast<double>(cb) / static_cast<double>(nb));
    worst = std::max(worst, d);
  }
  return worst;
}

double JsDistance(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  uint64_t na = Sum(a), nb = Sum(b);
  if (na == 0 && nb == 0) return 0;
  if (na == 0 || nb == 0) return 1;
  size_t n = std::max(a.size(), b.size());
  double div = 0;
  for (size_t i = 0; i < n; i++) {
    double p = static_cast<double>(i < a.size() ? a[i] : 0) / static_cast<double>(na);
    double q = static_cast<double>(i < b.size() ? b[i] : 0) / static_cast<double>(nb);
    double m = (p + q) / 2;
    if (p > 0) div += 0.5 * p * std::log2(p / m);
    if (q > 0) div += 0.5 * q * std::log2(q / m);
  }
  return std::sqrt(std::clamp(div, 0.0, 1.0));
}

double KsDistance(const LogLinearHistogram& a, const LogLinearHistogram& b) {
  return KsDistance(a.counts(), b.counts());
}
double KsDistanceFrom(const LogLinearHistogram& a, const LogLinearHistogram& b, uint64_t floor) {
  const size_t first = static_cast<size_t>(LogLinearHistogram::BucketOf(floor));
  auto fold = [first](const std::vector<uint64_t>& counts) {
    std::vector<uint64_t> out(counts.begin() + static_cast<std::ptrdiff_t>(std::min(first, counts.size())),
                              counts.end());
    uint64_t below = 0;
    for (size_t i = 0; i < first && i < counts.size(); i++) below += counts[i];
    if (!out.empty()) out[0] += below;
    return out;
  };
  return KsDistance(fold(a.counts()), fold(b.counts()));
}

double JsDistance(const LogLinearHistogram& a, const LogLinearHistogram& b) {
  return JsDistance(a.counts(), b.counts());
}

double RelativeError(double reference, double value) {
  if (reference == 0) return value == 0 ? 0 : 1;
  return std::fabs(value - reference) / std::fabs(reference);
}

double SeriesError(const std::vector<uint64_t>& reference, const std::vector<uint64_t>& value) {
  size_t n = std::max(reference.size(), value.size());
  double diff = 0, base = 0;
  for (size_t i = 0; i < n; i++) {
    double r = static_cast<double>(i < reference.size() ? reference[i] : 0);
    double v = static_cast<double>(i < value.size() ? value[i] : 0);
    diff += std::fabs(r - v);
    base += r;
  }
  if (base == 0) return diff == 0 ? 0 : 1;
  return diff / base;
}

double CurveDistance(std::vector<WorkPoint> a, std::vector<WorkPoint> b) {
  auto prepare = [](std::vector<WorkPoint>& v) {
    double total = 0;
    for (WorkPoint& p : v) {
      if (!std::isfinite(p.weight) || p.weight < 0) p.weight = 0;
      p.t = std::isfinite(p.t) ? std::clamp(p.t, 0.0, 1.0) : 0.0;
      total += p.weight;
    }
    std::sort(v.begin(), v.end(), [](const WorkPoint& x, const WorkPoint& y) { return x.t < y.t; });
    return total;
  };
  const double wa = prepare(a), wb = prepare(b);
  if (wa <= 0 && wb <= 0) return 0;
  if (wa <= 0 || wb <= 0) return 1;
  // Walk both step curves in time order; between two steps the gap |A - B| is constant.
  double area = 0, t = 0, ca = 0, cb = 0;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    bool from_a = j >= b.size() || (i < a.size() && a[i].t <= b[j].t);
    double next = from_a ? a[i].t : b[j].t;
    area += std::fabs(ca / wa - cb / wb) * (next - t);
    t = next;
    if (from_a) {
      ca += a[i++].weight;
    } else {
      cb += b[j++].weight;
    }
  }
  area += std::fabs(ca / wa - cb / wb) * (1.0 - t);
  return std::clamp(area, 0.0, 1.0);
}

}  // namespace iotwin::analysis
