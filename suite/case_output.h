// What `dlscale run` prints about cases besides the progress: a finished case as one JSON object
// (--format json), and the dry run's list of cases with their estimated duration (--dry-run).
#pragma once

#include <string>
#include <vector>

#include "drivers/driver.h"
#include "io/results_file.h"
#include "suite/run_matrix.h"

namespace dlscale {

/// How `dlscale run` reports finished cases on stdout.
enum class OutputFormat { kText, kJson };
/// "text" or "json"; throws UsageError naming anything else.
OutputFormat parse_output_format(const std::string& name);

/// A finished case as one line of JSON: "case" (its group name), every case attribute and every
/// summary attribute (an accuracy case's accuracy_summary), as the results file holds them (non-finite numbers as
/// null).
std::string case_json(const std::string& name, const CaseRecord& r);

/// The analytic training FLOP one rank of `c` computes over its warm-up and timed steps: the
/// work the dry run's estimate and the progress line's time left are made of. 0 for accuracy
/// cases, which the dry run leaves without an estimate.
double training_flops_per_rank(const CaseSpec& c);

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
                                         int default_threads, double given_gflops, std::vector<std::string>* notes);

}  // namespace dlscale
