// The all-reduce microbenchmark (nccl-tests conventions: every size warmed up, time = the
// slowest rank's, algbw = S/t, busbw = algbw * 2(P-1)/P, GB = 1e9 B, every result checked) and
// the alpha-beta fit of a ring all-reduce to its times (suite/meters/projection.h builds on it).
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
  int64_t segment_bytes = 0;  ///< the MPI ring's segment (ring_segment_bytes); 0 on one rank or another transport
};

/// Runs the microbenchmark on `comm` with the same in-place reduction the training step uses
/// (`transport`, drivers/driver.h: a driver's own reducer's, e.g. NCCL on GPU memory; nullptr:
/// MPI on host memory, the CPU step's). Each iteration is timed on the host clock from
/// its start to the completed result. Inputs are small integers, so every sum is exact in
/// float32 and checked element by element.
AllreduceResult run_allreduce_benchmark(MPI_Comm comm, const AllreduceOptions& options,
                                        AllreduceTransport* transport = nullptr);

/// The /allreduce/NNNN group of a result (rank 0 only); `for_case` names the case it belongs to,
/// `hosts` how many hosts its ranks spanned (network "within one host" or "between hosts"),
/// `run` the /runs record of the run that measured it.
GroupRecord allreduce_group(const AllreduceResult& r, const std::string& backend, const std::string& for_case,
                            int hosts, int64_t run);

/// Time of a ring all-reduce of `bytes` on `ranks` ranks: 2(P-1) alpha + 2(P-1)/P bytes beta.
double ring_allreduce_s(double alpha_s, double beta_s_per_byte, int ranks, double bytes);

/// Least-squares fit of alpha and beta to median times measured on `ranks` ranks, weighting
/// each size by 1/t^2 so that small (latency-bound) and large (bandwidth-bound) sizes count alike.
void fit_ring(const std::vector<int64_t>& bytes, const std::vector<double>& median_s, int ranks, double* alpha_s,
              double* beta_s_per_byte);

}  // namespace dlscale
