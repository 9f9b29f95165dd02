// The gradient noise scale of McCandlish, Kaplan, Amodei et al. (2018), "An Empirical Model of
// Large-Batch Training": the simple noise scale B_simple = tr(Σ) / |G|², where G is the true
// gradient and Σ the covariance of one sample's gradient. A training that takes S_min steps at an
// unbounded batch needs about S(B) = S_min (1 + B_simple / B) steps at batch B: past B_simple, a
// larger batch stops cutting the steps to a target. docs/metrics.md ("The gradient noise scale").
//
// Estimated at no extra computation from two gradients every data-parallel step already has: each
// rank's own (or each micro-batch's) of B_small samples, before the reduction, and the reduced one
// of B_big samples. With E|g_B|² = |G|² + tr(Σ)/B for a batch of B samples, the unbiased estimates
// of one step are (their Appendix A.1)
//   |G|²  = (B_big |g_big|² - B_small |g_small|²) / (B_big - B_small)
//   tr(Σ) = (|g_small|² - |g_big|²) / (1/B_small - 1/B_big)
// (|g_small|² the mean over the step's small gradients). Each is averaged over the steps before
// their ratio is taken, which keeps the ratio's bias small; the interval is the jackknife's over
// steps.
#pragma once

#include <vector>

#include "schema/noise_record.h"

namespace dlscale {

/// B_simple from `small_sq[i]`, the mean squared norm of step i's gradients of `batch_small`
/// samples, and `big_sq[i]`, the squared norm of its gradient of `batch_big` samples (their
/// average). Needs batch_big > batch_small > 0 and as many values in both; NaN bounds with fewer
/// than 2 steps.
NoiseScale estimate_noise_scale(const std::vector<double>& small_sq, const std::vector<double>& big_sq,
                                double batch_small, double batch_big);

/// The factor by which the noise scale multiplies the steps to a target at global batch B,
/// 1 + B_simple / B, relative to the baseline batch B0: S(B) / S(B0).
double predicted_steps_ratio(double simple, double batch, double baseline_batch);

}  // namespace dlscale
