#include "suite/statistics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace dlscale {

double median(std::vector<double> x) {
  if (x.empty()) throw std::invalid_argument("median of no samples");
  const size_t n = x.size(), mid = n / 2;
  std::nth_element(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(mid), x.end());
  const double upper = x[mid];
  if (n % 2 == 1) return upper;
  const double lower = *std::max_element(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

double percentile(std::vector<double> x, double q) {
  if (x.empty()) throw std::invalid_argument("percentile of no samples");
  std::sort(x.begin(), x.end());
  const double h = static_cast<double>(x.size() - 1) * q / 100.0;
  const auto lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, x.size() - 1);
  return x[lo] + (h - static_cast<double>(lo)) * (x[hi] - x[lo]);
}

MedianInterval median_interval(int n) {
  // P(B <= j) for B ~ Binomial(n, 1/2), built term by term in log space so that large n
  // neither underflows 0.5^n nor overflows the binomial coefficients.
  MedianInterval best{1, 1.0 - 2.0 * std::exp(n * std::log(0.5))};
  if (n <= 1) return {1, 0.0};
  double log_pmf = n * std::log(0.5);  // log P(B = 0)
  double cdf = 0;                      // P(B <= k-1)
  for (int k = 1; k <= (n + 1) / 2; ++k) {
    cdf += std::exp(log_pmf);  // now P(B <= k-1)
    const double coverage = 1.0 - 2.0 * cdf;
    if (coverage < 0.95) break;
    best = {k, coverage};
    log_pmf += std::log(static_cast<double>(n - (k - 1))) - std::log(static_cast<double>(k));  // P(B = k)
  }
  return best;
}

std::vector<double> slowest_rank(const std::vector<double>& samples, int ranks, int iterations, int stride,
                                 std::initializer_list<int> fields) {
  const size_t records = static_cast<size_t>(ranks) * static_cast<size_t>(iterations);
  if (ranks <= 0 || iterations < 0 || stride <= 0 || samples.size() != records * static_cast<size_t>(stride)) {
    throw std::invalid_argument("slowest_rank: samples must be [ranks][iterations][stride]");
  }
  std::vector<double> slowest(static_cast<size_t>(iterations));
  for (int i = 0; i < iterations; ++i) {
    for (int r = 0; r < ranks; ++r) {
      const size_t record = (static_cast<size_t>(r) * static_cast<size_t>(iterations) + static_cast<size_t>(i)) *
                            static_cast<size_t>(stride);
      double value = 0;
      for (int f : fields) value += samples[record + static_cast<size_t>(f)];
      slowest[static_cast<size_t>(i)] = r == 0 ? value : std::max(slowest[static_cast<size_t>(i)], value);
    }
  }
  return slowest;
}

StepStats step_stats(const std::vector<double>& times, int ranks, int iterations) {
  if (ranks <= 0 || iterations <= 0 || times.size() != static_cast<size_t>(ranks) * static_cast<size_t>(iterations)) {
    throw std::invalid_argument("step_stats: times must be [ranks][iterations] and non-empty");
  }
  const std::vector<double> step = slowest_rank(times, ranks, iterations);
  StepStats s;
  const double n = iterations;
  s.median = median(step);
  s.p05 = percentile(step, 5);
  s.p95 = percentile(step, 95);
  s.mean = std::accumulate(step.begin(), step.end(), 0.0) / n;
  double ss = 0;
  for (double t : step) ss += (t - s.mean) * (t - s.mean);
  s.std = iterations > 1 ? std::sqrt(ss / (n - 1)) : 0.0;
  s.cv = s.mean > 0 ? s.std / s.mean : 0.0;
  std::vector<double> sorted = step;
  std::sort(sorted.begin(), sorted.end());
  const MedianInterval ci = median_interval(iterations);
  s.ci95_low = sorted[static_cast<size_t>(ci.k - 1)];
  s.ci95_high = sorted[static_cast<size_t>(iterations - ci.k)];
  s.ci_coverage = ci.coverage;

  std::vector<double> rank_medians;
  for (int r = 0; r < ranks; ++r) {
    rank_medians.push_back(
        median(std::vector<double>(times.begin() + static_cast<std::ptrdiff_t>(r) * iterations,
                                   times.begin() + static_cast<std::ptrdiff_t>(r + 1) * iterations)));
  }
  const double typical = median(rank_medians);
  s.straggler_ratio = typical > 0 ? *std::max_element(rank_medians.begin(), rank_medians.end()) / typical : 1.0;
  return s;
}

}  // namespace dlscale
