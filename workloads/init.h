// Canonical, seeded parameter initialisation: identical on every rank, every driver and
// every run with the same seed, independent of thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/workload.h"

namespace dlscale {

/// The initial parameters of `w` in the canonical flat layout, drawn from `seed`.
std::vector<float> canonical_parameters(const Workload& w, uint64_t seed);

}  // namespace dlscale
