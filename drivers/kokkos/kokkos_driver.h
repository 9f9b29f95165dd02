// The Kokkos backend (Kokkos Core kernels, Kokkos Kernels GEMM). Only drivers/kokkos/ includes
// Kokkos' headers, so that the rest of the build stays backend-free.
#pragma once

#include "drivers/driver.h"

namespace dlscale {

/// Registers the "kokkos" driver.
void register_kokkos(Registry& registry);

}  // namespace dlscale
