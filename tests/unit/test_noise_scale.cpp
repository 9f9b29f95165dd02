// The gradient noise scale's estimator (suite/meters/noise_scale.h) on a model whose tr(Σ) and
// |G|² are known in closed form: linear regression y = x·w* + ε with x ~ N(0, I_d), ε ~ N(0, σ²),
// and the loss ½(x·w - y)² at a fixed w = w* + δ. One sample's gradient is g = x (x·δ - ε), so
// G = E[g] = δ and E|g|² = (d + 2)|δ|² + dσ² (Gaussian fourth moments): |G|² = |δ|² and
// tr(Σ) = E|g|² - |G|² = (d + 1)|δ|² + dσ².
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "suite/meters/noise_scale.h"

namespace dlscale {
namespace {

struct Regression {
  int d = 16;
  double sigma = 0.7;
  std::vector<double> delta;
  std::mt19937_64 rng{20180614};
  std::normal_distribution<double> normal;

  explicit Regression(double delta_norm) : delta(static_cast<size_t>(d)) {
    double sq = 0;
    for (double& v : delta) {
      v = normal(rng);
      sq += v * v;
    }
    for (double& v : delta) v *= delta_norm / std::sqrt(sq);
  }
  double true_grad_sq() const {
    double sq = 0;
    for (double v : delta) sq += v * v;
    return sq;
  }
  double true_trace() const { return (d + 1) * true_grad_sq() + d * sigma * sigma; }

  /// The summed gradient of `n` fresh samples.
  std::vector<double> gradient_sum(int n) {
    std::vector<double> sum(static_cast<size_t>(d), 0.0), x(static_cast<size_t>(d));
    for (int s = 0; s < n; ++s) {
      double dot = 0;
      for (int i = 0; i < d; ++i) {
        x[static_cast<size_t>(i)] = normal(rng);
        dot += x[static_cast<size_t>(i)] * delta[static_cast<size_t>(i)];
      }
      const double residual = dot - sigma * normal(rng);
      for (int i = 0; i < d; ++i) sum[static_cast<size_t>(i)] += x[static_cast<size_t>(i)] * residual;
    }
    return sum;
  }
};

double squared_norm(const std::vector<double>& v, double scale) {
  double sq = 0;
  for (double x : v) sq += x * scale * x * scale;
  return sq;
}

/// `steps` data-parallel steps of `groups` gradients of `small` samples each (ranks x
/// micro-batches): each step's mean squared small-gradient norm and its averaged gradient's.
void simulate(Regression& model, int steps, int groups, int small, std::vector<double>& small_sq,
              std::vector<double>& big_sq) {
  for (int step = 0; step < steps; ++step) {
    std::vector<double> total(static_cast<size_t>(model.d), 0.0);
    double mean_small = 0;
    for (int g = 0; g < groups; ++g) {
      const std::vector<double> sum = model.gradient_sum(small);
      mean_small += squared_norm(sum, 1.0 / small) / groups;
      for (size_t i = 0; i < total.size(); ++i) total[i] += sum[i];
    }
    small_sq.push_back(mean_small);
    big_sq.push_back(squared_norm(total, 1.0 / (groups * small)));
  }
}

TEST(NoiseScale, MatchesTheClosedFormOfLinearRegression) {
  // Two regimes: a noise scale below the big batch (a well-fit model, small δ) and above it.
  for (double delta_norm : {0.6, 2.0}) {
    Regression model(delta_norm);
    std::vector<double> small_sq, big_sq;
    simulate(model, 4000, 8, 8, small_sq, big_sq);
    const NoiseScale n = estimate_noise_scale(small_sq, big_sq, 8, 64);
    const double truth = model.true_trace() / model.true_grad_sq();
    SCOPED_TRACE(testing::Message() << "|delta| " << delta_norm << ": B_simple " << n.simple << " [" << n.ci95_low
                                    << ", " << n.ci95_high << "], truth " << truth);
    EXPECT_NEAR(n.simple, truth, 0.05 * truth);
    EXPECT_NEAR(n.grad_sq, model.true_grad_sq(), 0.05 * model.true_grad_sq());
    EXPECT_NEAR(n.trace, model.true_trace(), 0.05 * model.true_trace());
    EXPECT_LT(n.ci95_low, truth);
    EXPECT_GT(n.ci95_high, truth);
    EXPECT_LT(n.ci95_high - n.ci95_low, 0.2 * truth);  // the interval says how well it is known
    EXPECT_EQ(n.steps, 4000);
  }
}

TEST(NoiseScale, MicroBatchesAndRanksAreTheSameTwoBatchSizes) {
  // The estimator sees only the two batch sizes: 2 ranks x 4 micro-batches of 4 and 8 ranks of 4
  // estimate the same quantity.
  Regression model(1.0);
  const double truth = model.true_trace() / model.true_grad_sq();
  std::vector<double> small_sq, big_sq;
  simulate(model, 6000, 8, 4, small_sq, big_sq);
  EXPECT_NEAR(estimate_noise_scale(small_sq, big_sq, 4, 32).simple, truth, 0.05 * truth);
}

TEST(NoiseScale, WithoutASignalThereIsNoScale) {
  // |G|² estimated at or below zero (pure noise): no noise scale, no interval; one step: no interval.
  const NoiseScale none = estimate_noise_scale({1.0, 1.0}, {0.1, 0.1}, 1, 10);
  EXPECT_TRUE(std::isnan(none.simple));
  EXPECT_TRUE(std::isnan(none.ci95_low));
  const NoiseScale one = estimate_noise_scale({2.0}, {1.5}, 4, 8);
  EXPECT_NEAR(one.simple, ((2.0 - 1.5) / (1.0 / 4 - 1.0 / 8)) / ((8 * 1.5 - 4 * 2.0) / 4), 1e-12);
  EXPECT_TRUE(std::isnan(one.ci95_high));
  EXPECT_THROW(estimate_noise_scale({1.0}, {1.0}, 8, 8), std::invalid_argument);
  EXPECT_THROW(estimate_noise_scale({1.0, 2.0}, {1.0}, 4, 8), std::invalid_argument);
}

TEST(NoiseScale, PredictedStepsFollowTheEmpiricalModel) {
  // S(B) / S(B0) = (1 + B_simple / B) / (1 + B_simple / B0): far below the noise scale doubling
  // the batch halves the steps; far above it, it changes almost nothing.
  EXPECT_NEAR(predicted_steps_ratio(1e6, 64, 32), 0.5, 1e-4);
  EXPECT_NEAR(predicted_steps_ratio(1.0, 2048, 1024), 1.0, 1e-3);
  EXPECT_NEAR(predicted_steps_ratio(100, 100, 50), 2.0 / 3.0, 1e-12);
}

}  // namespace
}  // namespace dlscale
