// The gradient noise scale of a case (suite/meters/noise_scale.h) from its steps' two squared
// norms (StepTimes::small_sq and big_sq), as both run modes gather it: every case on more than
// one rank or micro-batch whose gradients the harness averages.
#pragma once

#include <mpi.h>

#include <optional>
#include <vector>

#include "suite/meters/noise_scale.h"

namespace dlscale {

/// What the results file keeps (docs/schema.md, noise_scale): per step, the mean over the ranks
/// and micro-batches of |g|² of each micro-batch's own gradient, and |g|² of the step's averaged
/// gradient; and the estimate from them.
struct CaseNoiseScale {
  std::vector<double> small_sq, big_sq;
  NoiseScale estimate;
};

/// Collects each rank's steps' norms (`small_sq`, `big_sq`: one value per step, as many on every
/// rank) on the case's rank 0 and estimates the noise scale there, the small gradients being of
/// `batch_small` samples and the averaged one of `batch_big`; collective over `comm`. Nothing
/// (std::nullopt, on every rank) where the steps measured no norms (NaN: one rank's one
/// micro-batch, a driver's own reducer) or there are no steps; on the other ranks than 0 too.
std::optional<CaseNoiseScale> gather_noise_scale(MPI_Comm comm, const std::vector<double>& small_sq,
                                                 const std::vector<double>& big_sq, double batch_small,
                                                 double batch_big);

}  // namespace dlscale
