// The all-reduce microbenchmark (nccl-tests conventions: every size warmed up, time = the
// slowest rank's, algbw = S/t, busbw = algbw * 2(P-1)/P, GB = 1e9 B, every result checked), the
// alpha-beta fit of a ring all-reduce to its times, and the step-time projection built on it.
#pragma once

#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "io/results_file.h"

#include "drivers/driver.h"

namespace dlscale {

struct AllreduceOptions {
  std::vector<int64_t> sizes_bytes;  ///< each a positive multiple of 4 (float32 elements)
  int warmup = 5;
  int iterations = 20;
};

/// Powers of two from min_bytes to max_bytes (both rounded to multiples of 4), plus `extra`.
std::vector<int64_t> allreduce_sizes(int64_t min_bytes, int64_t max_bytes, const std::vector<int64_t>& extra = {});

struct AllreduceResult {
  int ranks = 1;
  int warmup = 0, iterations = 0;
  std::vector<int64_t> bytes;
  std::vector<double> time_s;                            ///< [ranks][sizes][iterations] on rank 0, empty elsewhere
  std::vector<double> median_s, algbw_gbps, busbw_gbps;  ///< per size, from the slowest rank's times
  std::vector<int64_t> errors;                           ///< wrong elements per size, summed over ranks
  double alpha_s = 0, beta_s_per_byte = 0;               ///< ring fit (0 on one rank or one size)
};

/// Runs the microbenchmark on `comm` with the same in-place reduction the training step uses
/// (`transport`, drivers/driver.h: a driver's own reducer's, e.g. NCCL on GPU memory; nullptr:
/// MPI on host memory, the CPU step's). Each iteration is timed on the host clock from
/// its start to the completed result. Inputs are small integers, so every sum is exact in
/// float32 and checked element by element.
AllreduceResult run_allreduce_benchmark(MPI_Comm comm, const AllreduceOptions& options,
                                        AllreduceTransport* transport = nullptr);

/// The /allreduce/NNNN group of a result (rank 0 only); `for_case` names the case it belongs to,
/// `hosts` how many hosts its ranks spanned (network "within one host" or "between hosts").
GroupRecord allreduce_group(const AllreduceResult& r, const std::string& backend, const std::string& for_case,
                            int hosts);

/// Time of a ring all-reduce of `bytes` on `ranks` ranks: 2(P-1) alpha + 2(P-1)/P bytes beta.
double ring_allreduce_s(double alpha_s, double beta_s_per_byte, int ranks, double bytes);

/// Least-squares fit of alpha and beta to median times measured on `ranks` ranks, weighting
/// each size by 1/t^2 so that small (latency-bound) and large (bandwidth-bound) sizes count alike.
void fit_ring(const std::vector<int64_t>& bytes, const std::vector<double>& median_s, int ranks, double* alpha_s,
              double* beta_s_per_byte);

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
struct Projection {
  std::vector<int64_t> ranks;
  std::vector<double> step_s, efficiency;
  std::vector<int64_t> between_hosts;  ///< 1 where the point used the between-host fit
};
/// The /cases/NNNN/projection group; `fit` is the case's own microbenchmark's (alpha_s,
/// beta_s_per_byte, fit_ranks), `network` what the points used.
GroupRecord projection_group(const Projection& p, const RingFit& fit, const ProjectionNetwork& network,
                             double compute_s, double grad_bytes, const std::string& scaling);

/// `ranks_per_node` caps how many ranks share one node's `cpus_per_node` CPUs.
Projection project_steps(double compute_s, int measured_ranks, bool strong, double grad_bytes,
                         const ProjectionNetwork& network, int threads_per_rank, int cpus_per_node, int ranks_per_node,
                         const std::vector<int64_t>& targets);

}  // namespace dlscale
