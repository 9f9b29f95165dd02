// The step-time projection of a measured case to other rank counts: its compute time plus the
// fitted ring all-reduce of its gradients (suite/meters/allreduce_microbenchmark.h), within a host
// and between hosts (docs/metrics.md, "Projection").
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "io/results_file.h"

namespace dlscale {

/// A ring all-reduce fitted to a microbenchmark, and where it ran. Not measured: NaN alpha.
struct RingFit {
  double alpha_s = std::numeric_limits<double>::quiet_NaN();
  double beta_s_per_byte = std::numeric_limits<double>::quiet_NaN();
  int ranks = 0, hosts = 0;
  bool measured() const { return !std::isnan(alpha_s); }
};

/// The networks a projection can use: P up to `ranks_per_host` stays on one host and takes the
/// within-host fit; a larger P crosses hosts and takes the between-host fit. Where one of them
/// was not measured, the other stands in, and the projection's note says so.
struct ProjectionNetwork {
  RingFit within, between;
  int ranks_per_host = 1;
  /// The fit for P ranks, and whether it is the between-host one.
  const RingFit& fit_for(int64_t p, bool* between_hosts) const;
  /// Which fit each range of P used, in words (the projection group's network_note).
  std::string note() const;
};

/// Projected step times at other rank counts from one measured case: compute time (forward +
/// backward + update) plus the fitted ring all-reduce of the gradients, with the compute divided
/// among the ranks for strong scaling and stretched when ranks share cores (see docs/metrics.md).
/// A sharded optimiser's update of its share, `sharded_update_s` on the measured ranks and not in
/// `compute_s`, is divided among the ranks at every scaling.
struct Projection {
  std::vector<int64_t> ranks;
  std::vector<double> step_s, efficiency;
  std::vector<int64_t> between_hosts;  ///< 1 where the point used the between-host fit
};
/// The /cases/NNNN/projection group; `fit` is the case's own microbenchmark's (alpha_s,
/// beta_s_per_byte, fit_ranks), `network` what the points used.
GroupRecord projection_group(const Projection& p, const RingFit& fit, const ProjectionNetwork& network,
                             double compute_s, double sharded_update_s, double grad_bytes, const std::string& scaling);

/// `ranks_per_node` caps how many ranks share one node's `cpus_per_node` CPUs.
Projection project_steps(double compute_s, int measured_ranks, bool strong, double grad_bytes,
                         const ProjectionNetwork& network, int threads_per_rank, int cpus_per_node, int ranks_per_node,
                         const std::vector<int64_t>& targets, double sharded_update_s = 0);

}  // namespace dlscale
