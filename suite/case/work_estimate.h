// What `dlscale run` prints about cases besides the progress: a finished case as one JSON object
// (--format json), and the dry run's list of cases with their estimated duration (--dry-run).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "drivers/driver.h"
#include "io/results_file.h"
#include "suite/matrix/run_matrix.h"

namespace dlscale {

/// How `dlscale run` reports finished cases on stdout.
enum class OutputFormat { kText, kJson };
/// "text" or "json"; throws UsageError naming anything else.
OutputFormat parse_output_format(const std::string& name);

/// A finished case as one line of JSON: "case" (its group name), every case attribute and every
/// summary attribute (an accuracy case's accuracy_summary), as the results file holds them (non-finite numbers as
/// null).
std::string case_json(const std::string& name, const CaseRecord& r);

/// The number of samples of the data set a spec names (suite/data/datasets.h).
using DatasetSize = std::function<int64_t(const std::string& spec)>;

/// The analytic FLOP one rank of `c` computes: the work the dry run's estimate and the progress
/// line's time left are made of. A timing case: its warm-up and timed steps. An accuracy case:
/// every repeat's training steps up to the epoch limit (an upper bound where a target ends a
/// repeat earlier) and the forward passes of its validation after each epoch and of its testing,
/// from the sizes `set_size` gives of its training and test set.
double training_flops_per_rank(const CaseSpec& c, const DatasetSize& set_size);

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
std::vector<CaseEstimate> estimate_cases(const std::vector<CaseSpec>& cases, const Registry& drivers,
                                         int default_threads, double given_gflops, const DatasetSize& set_size,
                                         std::vector<std::string>* notes);

}  // namespace dlscale
