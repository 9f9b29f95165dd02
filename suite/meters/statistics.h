// Step-time statistics exactly as docs/metrics.md defines them; results/ recomputes
// the same numbers from the raw samples in Python, and the tests hold the two together.
#pragma once

#include <initializer_list>
#include <vector>

#include "schema/accuracy_record.h"

namespace dlscale {

/// Median (mean of the two middle values for an even count). Requires a non-empty input.
double median(std::vector<double> x);

/// Percentile q in [0, 100] by linear interpolation between order statistics (numpy's default).
double percentile(std::vector<double> x, double q);

/// The order-statistic 95% confidence interval of the median of n samples: the largest k in
/// [1, (n+1)/2] whose interval [x_(k), x_(n-k+1)] covers the median with probability >= 0.95,
/// or k = 1 when n is too small for that. `coverage` is the interval's exact coverage.
struct MedianInterval {
  int k = 1;  ///< 1-based order statistic of the lower bound
  double coverage = 0;
};
MedianInterval median_interval(int n);

struct StepStats {
  double median = 0, p05 = 0, p95 = 0, mean = 0, std = 0, cv = 0;
  double ci95_low = 0, ci95_high = 0, ci_coverage = 0;
  double straggler_ratio = 1;
};

/// The slowest rank's value per iteration (the rank that sets the pace), from samples laid out
/// [ranks][iterations][stride]; each rank's value is the sum of the record's `fields`.
std::vector<double> slowest_rank(const std::vector<double>& samples, int ranks, int iterations, int stride = 1,
                                 std::initializer_list<int> fields = {0});

/// The least value over ranks per iteration, from samples laid out [ranks][iterations]: for the
/// exposed all-reduce, that of the rank whose backward ended last.
std::vector<double> least_over_ranks(const std::vector<double>& samples, int ranks, int iterations);

/// Statistics of a case from its raw samples, `times` being [ranks][iterations] row-major: the
/// step time of an iteration is the maximum over ranks (the slowest rank sets the pace).
StepStats step_stats(const std::vector<double>& times, int ranks, int iterations);

/// The p-quantile of Student's t distribution with `df` >= 1 degrees of freedom (p in (0, 1)).
double student_t_quantile(double p, int df);

/// A mean over repeats and its 95% confidence interval, mean -+ t_{0.975, n-1} s / sqrt(n) (s the
/// sample standard deviation). With one value no interval can be given: both bounds equal the
/// mean. With none, all three are NaN.
MeanInterval mean_ci95(const std::vector<double>& x);

}  // namespace dlscale
