// Distances between distributions and relative errors, for compare.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/histogram.h"

namespace iotwin::analysis {

// Two-sample Kolmogorov-Smirnov statistic of two binned distributions over the same bins:
// max over bins of |CDF_a - CDF_b|, in [0, 1]. 0 when both are empty, 1 when only one is.
double KsDistance(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b);
// Jensen-Shannon distance: sqrt of the JS divergence with base-2 logarithms, in [0, 1]
// (scipy.spatial.distance.jensenshannon(p, q, base=2)). Same conventions for empty inputs.
double JsDistance(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b);

double KsDistance(const LogLinearHistogram& a, const LogLinearHistogram& b);
// KS distance with every value below `floor` counted as `floor` (up to the bucket resolution):
// the distributions are compared at and above the floor only.
double KsDistanceFrom(const LogLinearHistogram& a, const LogLinearHistogram& b, uint64_t floor);
double JsDistance(const LogLinearHistogram& a, const LogLinearHistogram& b);

// |b - a| / |a| with a the reference; 0 when both are 0, 1 when only a is 0.
double RelativeError(double reference, double value);

// Normalised L1 distance of two series: sum |a_i - b_i| / sum a_i (missing entries are 0);
// 0 when both are all zero, 1 when only a is.
double SeriesError(const std::vector<uint64_t>& reference, const std::vector<uint64_t>& value);

// One piece of work on a curve: when (normalised time, clamped to [0, 1]) and how much.
struct WorkPoint {
  double t = 0;
  double weight = 0;
};

// Area between two normalised cumulative work curves over normalised time [0, 1]: the integral
// of |A(t) - B(t)| where A(t) is the share of a's work done by time t. It equals the
// Wasserstein-1 (earth mover's) distance between the two time distributions of the work: on
// average, how far (as a share of the run) the work of one lies from the same share of the
// other. In [0, 1]; 0 when both are empty, 1 when only one is. The inputs need not be sorted;
// non-positive and non-finite weights count as nothing.
double CurveDistance(std::vector<WorkPoint> a, std::vector<WorkPoint> b);

}  // namespace iotwin::analysis
