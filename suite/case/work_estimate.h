// The work of a case before it runs: its analytic FLOP per rank (the progress line's time left)
// and the dry run's estimate of its duration (--dry-run).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "drivers/driver.h"
#include "io/results_file.h"
#include "suite/case/resolved_case.h"

namespace dlscale {

/// The number of samples of the data set a spec names (suite/data/datasets.h).
using DatasetSize = std::function<int64_t(const std::string& spec)>;

/// The analytic FLOP one rank of `c` computes: the work the dry run's estimate and the progress
/// line's time left are made of. A timing case: its warm-up and timed steps. An accuracy case:
/// every repeat's training steps up to the epoch limit (an upper bound where a target ends a
/// repeat earlier) and the forward passes of its validation after each epoch and of its testing,
/// from the sizes `set_size` gives of its training and test set.
double training_flops_per_rank(const ResolvedCase& c, const DatasetSize& set_size);

/// The dry run's estimate of one case: the training steps' FLOPs over a rate measured on this
/// machine (or given); `seconds` < 0 when no rate is known for the case's driver and device.
struct CaseEstimate {
  double seconds = -1;
  double rate_flops = 0;  ///< per rank
};

/// Estimates every case from the analytic FLOPs of its steps (warm-up included) per rank and a
/// training rate per (driver, device, precision, denormals, threads): `given_gflops` when > 0,
/// else measured by a few steps of a GEMM-bound probe network on this rank, which convolution and
/// LSTM cases may not reach. `notes` receives one line per measured rate.
std::vector<CaseEstimate> estimate_cases(const std::vector<ResolvedCase>& cases, double given_gflops,
                                         const DatasetSize& set_size, std::vector<std::string>* notes);

}  // namespace dlscale
