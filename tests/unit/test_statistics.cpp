// Statistics against values worked out by hand (and matching numpy / the Python report).
#include <gtest/gtest.h>

#include <cmath>

#include "suite/meters/statistics.h"

namespace dlscale {
namespace {

TEST(Statistics, MedianOddAndEven) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({7}), 7);
}

TEST(Statistics, PercentileInterpolatesLikeNumpy) {
  const std::vector<double> x{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  // numpy.percentile(range(1, 11), 5) == 1.45, (…, 95) == 9.55
  EXPECT_NEAR(percentile(x, 5), 1.45, 1e-12);
  EXPECT_NEAR(percentile(x, 95), 9.55, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(x, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(x, 100), 10);
}

TEST(Statistics, MedianIntervalOrderStatistics) {
  // Coverage 1 - 2 P(B <= k-1), B ~ Bin(n, 1/2): n = 10 -> k = 2, 1 - 2*11/1024.
  EXPECT_EQ(median_interval(10).k, 2);
  EXPECT_DOUBLE_EQ(median_interval(10).coverage, 0.978515625);
  // n = 5 is too small for 95%: [min, max] with coverage 1 - 2/32.
  EXPECT_EQ(median_interval(5).k, 1);
  EXPECT_DOUBLE_EQ(median_interval(5).coverage, 0.9375);
  EXPECT_EQ(median_interval(6).k, 1);
  EXPECT_NEAR(median_interval(6).coverage, 0.96875, 1e-15);
  EXPECT_EQ(median_interval(1).k, 1);
  EXPECT_DOUBLE_EQ(median_interval(1).coverage, 0);
  // Large n, where 0.5^n underflows without log-space sums (values from exact integer sums).
  EXPECT_EQ(median_interval(100).k, 40);
  EXPECT_EQ(median_interval(1000).k, 469);
  EXPECT_GE(median_interval(1000).coverage, 0.95);
}

TEST(Statistics, StepTimeIsMaxOverRanks) {
  // Two ranks, four iterations: rank 1 is slower on iterations 0 and 2.
  const std::vector<double> t{1.0, 2.0, 3.0, 4.0,   // rank 0
                              1.5, 1.0, 3.5, 2.0};  // rank 1
  const StepStats s = step_stats(t, 2, 4);
  // Steps: 1.5, 2.0, 3.5, 4.0
  EXPECT_DOUBLE_EQ(s.median, 2.75);
  EXPECT_DOUBLE_EQ(s.mean, 2.75);
  EXPECT_NEAR(s.std, std::sqrt((1.5625 + 0.5625 + 0.5625 + 1.5625) / 3.0), 1e-12);
  EXPECT_NEAR(s.cv, s.std / 2.75, 1e-12);
  EXPECT_NEAR(s.p05, 1.5 + 0.15 * 0.5, 1e-12);
  EXPECT_NEAR(s.p95, 3.5 + 0.85 * 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(s.ci95_low, 1.5);
  EXPECT_DOUBLE_EQ(s.ci95_high, 4.0);
  // Rank medians 2.5 and 1.75: the slowest over the median of the two (2.125).
  EXPECT_NEAR(s.straggler_ratio, 2.5 / 2.125, 1e-12);
}

TEST(Statistics, SingleSampleHasZeroSpread) {
  const StepStats s = step_stats({0.25}, 1, 1);
  EXPECT_DOUBLE_EQ(s.median, 0.25);
  EXPECT_DOUBLE_EQ(s.std, 0);
  EXPECT_DOUBLE_EQ(s.ci95_low, 0.25);
  EXPECT_DOUBLE_EQ(s.ci95_high, 0.25);
  EXPECT_DOUBLE_EQ(s.straggler_ratio, 1);
}

TEST(Statistics, RejectsMismatchedShape) { EXPECT_THROW(step_stats({1, 2, 3}, 2, 2), std::invalid_argument); }

TEST(Statistics, LeastOverRanksPerIteration) {
  const std::vector<double> t{1.0, 2.0, 3.0, 4.0,   // rank 0
                              1.5, 1.0, 3.5, 2.0,   // rank 1
                              0.5, 3.0, 3.0, 5.0};  // rank 2
  EXPECT_EQ(least_over_ranks(t, 3, 4), (std::vector<double>{0.5, 1.0, 3.0, 2.0}));
  EXPECT_EQ(least_over_ranks(t, 1, 12), t);
  EXPECT_THROW(least_over_ranks(t, 5, 2), std::invalid_argument);
}

}  // namespace
TEST(Statistics, StudentTQuantileMatchesTables) {
  // scipy.stats.t.ppf(0.975, df)
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.706204736174698, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.302652729749464, 1e-8);
  EXPECT_NEAR(student_t_quantile(0.975, 9), 2.2621571628540993, 1e-8);
  EXPECT_NEAR(student_t_quantile(0.975, 29), 2.045229642132703, 1e-8);
  EXPECT_NEAR(student_t_quantile(0.025, 9), -2.2621571628540993, 1e-8);
  EXPECT_TRUE(std::isnan(student_t_quantile(0.975, 0)));
}

TEST(Statistics, MeanIntervalIsStudentT) {
  // Ten repeats, as Kabakus ran: mean -+ t(0.975, 9) s / sqrt(10).
  const std::vector<double> x = {0.95, 0.96, 0.97, 0.955, 0.965, 0.96, 0.962, 0.958, 0.961, 0.959};
  double mean = 0, ss = 0;
  for (double v : x) mean += v / 10;
  for (double v : x) ss += (v - mean) * (v - mean);
  const double half = 2.2621571628540993 * std::sqrt(ss / 9) / std::sqrt(10.0);
  const MeanInterval m = mean_ci95(x);
  EXPECT_NEAR(m.mean, mean, 1e-15);
  EXPECT_NEAR(m.low, mean - half, 1e-9);
  EXPECT_NEAR(m.high, mean + half, 1e-9);
  // One repeat gives no interval: both bounds are the value; none gives NaN.
  const MeanInterval one = mean_ci95({0.9});
  EXPECT_EQ(one.low, 0.9);
  EXPECT_EQ(one.high, 0.9);
  EXPECT_TRUE(std::isnan(mean_ci95({}).mean));
}

}  // namespace dlscale
