// A case resolved once, before anything runs: the request (CaseSpec) with everything the stages
// after it need decided — the workload built, the driver found, the threads and the ranks it runs
// on chosen, its size counted — so that no stage re-parses a name or re-applies a default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "drivers/driver.h"
#include "suite/matrix/placement.h"
#include "suite/matrix/run_matrix.h"

namespace dlscale {

struct ResolvedCase {
  CaseSpec spec;
  std::string key;  ///< spec.command(): the pasteable command and the --resume key
  const Driver* driver = nullptr;
  Workload workload;
  int threads = 1;   ///< spec.threads, or the rank's CPU set size for 0
  CaseRanks placed;  ///< the job's ranks the case runs on, and the hosts they span
  int64_t params = 0;
  double train_flops_per_step = 0;  ///< analytic, for the global batch
  /// The gradients' size: one float32 per parameter, whatever the precision the case computes in.
  int64_t grad_bytes() const { return params * 4; }
  bool gpu() const { return spec.device == DeviceType::kCuda; }
  bool accuracy() const { return spec.mode == RunMode::kAccuracy; }
};

/// Resolves cases that passed validate_request: `default_threads` stands for 0 threads, `hosts`
/// (each world rank's host) places each case's ranks. Each workload is built here, once; throws
/// UsageError for a workload that cannot be built or whose activations per rank no memory holds.
std::vector<ResolvedCase> resolve_cases(const std::vector<CaseSpec>& cases, const Registry& drivers,
                                        int default_threads, const std::vector<std::string>& hosts);

/// Checks what this machine decides: that a case's device exists here and that its data set
/// reads and fits the case's workload (which reads the data). `devices_here` false (a dry run,
/// which may describe a job for other nodes): a request whose cases all need a device this
/// machine lacks is not an error. Throws UsageError naming the first problem.
void check_devices_and_data(const std::vector<ResolvedCase>& cases, bool devices_here = true);

}  // namespace dlscale
