// Synthetic training data (the default for timing, as in Shi et al.): normal(0,1) features
// and uniform labels, generated per rank from the case seed and the rank.
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/workload.h"

namespace dlscale {

/// One mini-batch in host memory. Features are [batch, input_shape...] row-major.
struct Batch {
  int64_t size = 0;
  std::vector<int64_t> sample_shape;
  std::vector<float> features;
  std::vector<int64_t> labels;  ///< class index per sample
};

/// The synthetic batch of `batch_size` samples for `rank`; identical across drivers.
Batch synthetic_batch(const Workload& w, int64_t batch_size, uint64_t seed, int rank);

}  // namespace dlscale
