// How gradients cross ranks: one in-place MPI_Allreduce (sum) of the flat gradient buffer,
// then a scale by 1/P. Shared by the training step and the all-reduce microbenchmark, so that the
// microbenchmark measures exactly what training does.
#pragma once

#include <mpi.h>

#include <cstddef>

#include "drivers/driver.h"

namespace dlscale {

/// Sums `count` floats in place over `comm` (in chunks of at most INT_MAX elements, MPI's limit).
void allreduce_sum_in_place(float* data, size_t count, MPI_Comm comm);

/// Sums the gradient buffer over `comm` in place, then scales it by 1/P. No-op on one rank.
void allreduce_gradients(const GradBuffer& grads, MPI_Comm comm);

}  // namespace dlscale
