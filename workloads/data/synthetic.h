// Training batches in host memory, and synthetic data (the default for timing, as in Shi et al.):
// normal(0,1) features or uniform token ids, uniform labels, generated per rank from the case
// seed and the rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workloads/workload.h"

namespace dlscale {

/// One mini-batch in host memory.
struct Batch {
  int64_t size = 0;
  std::vector<float> features;  ///< dense inputs: [size, input_shape...] row-major
  std::vector<int64_t> tokens;  ///< token inputs: [size, T]
  /// [size, labels_per_sample]: class ids, or 0/1 for binary cross-entropy.
  std::vector<int64_t> labels;
};

/// Checks that `batch` fits `w`: at least one sample, as many features or tokens and labels as
/// its size needs, token ids in the vocabulary, labels among the classes (0/1 for binary
/// cross-entropy). Throws std::invalid_argument "WHO: workload NAME: problem". Every driver calls
/// it in set_batch(), before copying anything.
void check_batch(const Workload& w, const Batch& batch, const std::string& who);

/// The synthetic batch of `batch_size` samples for `rank`; identical across drivers.
Batch synthetic_batch(const Workload& w, int64_t batch_size, uint64_t seed, int rank);

}  // namespace dlscale
