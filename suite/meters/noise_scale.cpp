#include "suite/meters/noise_scale.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace dlscale {

NoiseScale estimate_noise_scale(const std::vector<double>& small_sq, const std::vector<double>& big_sq,
                                double batch_small, double batch_big) {
  if (!(batch_big > batch_small && batch_small > 0)) {
    throw std::invalid_argument("the noise scale needs a larger batch than the small one");
  }
  if (small_sq.size() != big_sq.size() || small_sq.empty()) {
    throw std::invalid_argument("the noise scale needs both norms of at least one step");
  }
  const size_t n = small_sq.size();
  std::vector<double> g(n), s(n);
  for (size_t i = 0; i < n; ++i) {
    g[i] = (batch_big * big_sq[i] - batch_small * small_sq[i]) / (batch_big - batch_small);
    s[i] = (small_sq[i] - big_sq[i]) / (1 / batch_small - 1 / batch_big);
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double sum_g = std::accumulate(g.begin(), g.end(), 0.0), sum_s = std::accumulate(s.begin(), s.end(), 0.0);
  NoiseScale out;
  out.batch_small = batch_small;
  out.batch_big = batch_big;
  out.steps = static_cast<int64_t>(n);
  out.grad_sq = sum_g / static_cast<double>(n);
  out.trace = sum_s / static_cast<double>(n);
  out.simple = out.grad_sq > 0 ? out.trace / out.grad_sq : nan;
  out.ci95_low = out.ci95_high = nan;
  if (n < 2 || !std::isfinite(out.simple)) return out;
  // Jackknife: the ratio with each step left out in turn.
  std::vector<double> left_out(n);
  for (size_t i = 0; i < n; ++i) {
    const double gi = sum_g - g[i];
    if (!(gi > 0)) return out;  // a step without which |G|² is not positive: no interval
    left_out[i] = (sum_s - s[i]) / gi;
  }
  const double mean = std::accumulate(left_out.begin(), left_out.end(), 0.0) / static_cast<double>(n);
  double var = 0;
  for (double v : left_out) var += (v - mean) * (v - mean);
  var *= static_cast<double>(n - 1) / static_cast<double>(n);
  const double half = 1.959963984540054 * std::sqrt(var);
  out.ci95_low = out.simple - half;
  out.ci95_high = out.simple + half;
  return out;
}

double predicted_steps_ratio(double simple, double batch, double baseline_batch) {
  return (1 + simple / batch) / (1 + simple / baseline_batch);
}

}  // namespace dlscale
