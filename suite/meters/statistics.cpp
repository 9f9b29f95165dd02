#include "suite/meters/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

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

namespace {

/// Per iteration, `pick` (max or min) over ranks of each rank's sum of `fields`, from samples laid
/// out [ranks][iterations][stride]; `what` names the caller in the error.
template <typename Pick>
std::vector<double> over_ranks(const char* what, const std::vector<double>& samples, int ranks, int iterations,
                               int stride, std::initializer_list<int> fields, Pick pick) {
  const size_t records = static_cast<size_t>(ranks) * static_cast<size_t>(iterations);
  if (ranks <= 0 || iterations < 0 || stride <= 0 || samples.size() != records * static_cast<size_t>(stride)) {
    throw std::invalid_argument(std::string(what) + ": samples must be [ranks][iterations][stride]");
  }
  std::vector<double> picked(static_cast<size_t>(iterations));
  for (int i = 0; i < iterations; ++i) {
    for (int r = 0; r < ranks; ++r) {
      const size_t record = (static_cast<size_t>(r) * static_cast<size_t>(iterations) + static_cast<size_t>(i)) *
                            static_cast<size_t>(stride);
      double value = 0;
      for (int f : fields) value += samples[record + static_cast<size_t>(f)];
      picked[static_cast<size_t>(i)] = r == 0 ? value : pick(picked[static_cast<size_t>(i)], value);
    }
  }
  return picked;
}

}  // namespace

std::vector<double> slowest_rank(const std::vector<double>& samples, int ranks, int iterations, int stride,
                                 std::initializer_list<int> fields) {
  return over_ranks("slowest_rank", samples, ranks, iterations, stride, fields,
                    [](double a, double b) { return std::max(a, b); });
}

std::vector<double> least_over_ranks(const std::vector<double>& samples, int ranks, int iterations) {
  return over_ranks("least_over_ranks", samples, ranks, iterations, 1, {0},
                    [](double a, double b) { return std::min(a, b); });
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

namespace {

constexpr double kPi = 3.14159265358979323846;

/// Student's t density with `df` degrees of freedom.
double t_density(double x, double df) {
  const double log_c = std::lgamma((df + 1) / 2) - std::lgamma(df / 2) - 0.5 * std::log(df * kPi);
  return std::exp(log_c - (df + 1) / 2 * std::log1p(x * x / df));
}

/// P(0 <= T <= x) for x >= 0, by composite Simpson over [0, x]: the density is smooth, and 4096
/// panels keep the error far below what a confidence bound needs.
double t_mass_from_zero(double x, double df) {
  constexpr int kPanels = 4096;
  const double h = x / kPanels;
  double sum = t_density(0, df) + t_density(x, df);
  for (int i = 1; i < kPanels; ++i) sum += (i % 2 == 1 ? 4 : 2) * t_density(i * h, df);
  return sum * h / 3;
}

}  // namespace

double student_t_quantile(double p, int df) {
  if (!(p > 0 && p < 1) || df < 1) return std::numeric_limits<double>::quiet_NaN();
  if (p == 0.5) return 0;
  if (p < 0.5) return -student_t_quantile(1 - p, df);
  // Bisection on the mass between 0 and x, which rises monotonically towards 1/2.
  const double want = p - 0.5;
  double lo = 0, hi = 1;
  while (t_mass_from_zero(hi, df) < want) hi *= 2;
  for (int i = 0; i < 100 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (t_mass_from_zero(mid, df) < want ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

MeanInterval mean_ci95(const std::vector<double>& x) {
  const auto n = static_cast<double>(x.size());
  if (x.empty()) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    return {nan, nan, nan};
  }
  double mean = 0;
  for (double v : x) mean += v;
  mean /= n;
  if (x.size() == 1) return {mean, mean, mean};
  double ss = 0;
  for (double v : x) ss += (v - mean) * (v - mean);
  const double half = student_t_quantile(0.975, static_cast<int>(x.size()) - 1) * std::sqrt(ss / (n - 1) / n);
  return {mean, mean - half, mean + half};
}

}  // namespace dlscale
