// What one case gave, typed from the moment it is measured until a reporter writes or prints it
// (suite/record/reporters.h): the results file, the text and JSON lines and the progress display
// all read this, never strings read back.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "drivers/cpu/blas_core.h"
#include "drivers/driver.h"
#include "suite/case/accuracy_mode.h"
#include "suite/case/case_utilisation.h"
#include "suite/case/gradient_noise.h"
#include "suite/case/resolved_case.h"
#include "suite/meters/allreduce_microbenchmark.h"
#include "suite/meters/projection.h"
#include "suite/meters/statistics.h"

namespace dlscale {

/// Phase indices of a step's phase times.
enum Phase { kForward = 0, kBackward = 1, kAllreduce = 2, kUpdate = 3, kPhaseCount = 4 };

/// One rank's memory peaks over the case, and what its model held at the case's end: its
/// parameters, its gradient buffer and its optimiser's state (a share of it, sharded).
struct RankMemory {
  int64_t host_peak_rss_bytes = -1, device_peak_bytes = 0;
  int64_t parameter_bytes = 0, gradient_bytes = 0, optimizer_state_bytes = 0;
};

/// With --phases: what places every rank's timed steps on one clock (docs/timelines.md), on the
/// case's rank 0. Every vector rank-major.
struct CaseTimeline {
  std::vector<double> step_start_s;  ///< [ranks][iterations]: each rank's own monotonic clock
  /// [ranks][iterations][buckets][2] with the harness's MPI buckets: each bucket's reduction,
  /// start and end, in seconds from its step's start (BucketedAllreduce::reduction_times)
  std::vector<double> bucket_reduction_s;
  /// [ranks][2]: each rank's clock against rank 0's, measured before the timed steps and after
  /// them: when (its own clock), the offset to add, and its bound either way
  std::vector<double> clock_at_s, clock_offset_s, clock_bound_s;
};

/// A timing case's samples, every rank's, on the case's rank 0.
struct StepSamples {
  int64_t iterations = 0;                   ///< timed iterations recorded (0 unless the case succeeded)
  std::vector<double> iter_time_s;          ///< [ranks][iterations]
  std::vector<double> phase_time_s;         ///< [ranks][iterations][kPhaseCount], with --phases
  std::vector<double> exposed_allreduce_s;  ///< [ranks][iterations], on more than one rank
  std::vector<double> parameter_gather_s;   ///< [ranks][iterations], a sharded optimiser on more than one rank
  std::vector<double> loss;                 ///< [iterations]: the mean over ranks
  /// With --bucket-mb on more than one rank (the harness's MPI buckets): [ranks][iterations]
  /// [buckets], seconds from the step's start to the start of each bucket's reduction.
  std::vector<double> bucket_start_s;
  int64_t buckets = 0;
  std::vector<double> bucket_bytes;      ///< [buckets] with bucket_start_s: each bucket's size, in buffer order
  std::optional<CaseTimeline> timeline;  ///< with --phases
};

/// The summary of a timing case that succeeded (docs/metrics.md).
struct StepSummary {
  StepStats stats;
  double samples_per_s = 0, achieved_flops = 0;
  std::optional<double> exposed_allreduce_median_s;               ///< on more than one rank
  double exposed_allreduce_least_median_s = 0;                    ///< with it: the least rank's
  std::optional<std::array<double, kPhaseCount>> phase_median_s;  ///< with --phases
};

/// The all-reduce microbenchmark a case ran at its gradient size (--phases, more than one rank).
struct CaseAllreduce {
  AllreduceResult result;
  std::string backend;  ///< "nccl" or "mpi"
  int hosts = 1;
};

/// The projection built on it (suite/meters/allreduce_microbenchmark.h).
struct CaseProjection {
  Projection projection;
  RingFit fit;
  ProjectionNetwork network;
  double compute_s = 0, grad_bytes = 0;
  double sharded_update_s = 0;  ///< a sharded optimiser's update of its share, apart from compute_s
};

struct CaseResult {
  const ResolvedCase* c = nullptr;
  std::string started_utc;
  std::string isa;  ///< the instruction set the driver computes with ("avx512_core_bf16"), "" where unknown
  Outcome outcome;  ///< agreed by every rank of the case
  /// A stop signal reached a rank of the case: it ended after the step in progress, and the
  /// result must not be written (a resume runs the case again).
  bool interrupted = false;
  bool overlap = false, progress_thread = false;
  /// What reduced the gradients (docs/schema.md): the mechanism, its buckets, and the MPI
  /// library's MPI_Allreduce settings where an MPI mechanism did.
  std::string allreduce_mechanism = "none";
  int64_t allreduce_buckets = 0;
  int64_t allreduce_lanes = 1;          ///< all-reduces in flight at once (BucketedAllreduce::lanes)
  int64_t allreduce_segment_bytes = 0;  ///< the MPI ring's (ring_segment_bytes); 0 without MPI's sum
  std::string mpi_allreduce_settings;
  /// --sparse-embedding where the buckets summed an embedding's rows: the share of rows the ranks
  /// sent in the last step and the share above which the block goes dense (NaN: not sparse).
  double sparse_embedding_rows_share = std::numeric_limits<double>::quiet_NaN();
  double sparse_embedding_crossover_share = std::numeric_limits<double>::quiet_NaN();
  BlasCore blas;  ///< the BLAS kernels the process computed with (drivers/cpu/blas_core.h)
  double wall_s = 0;
  std::vector<RankMemory> memory;  ///< [ranks], on the case's rank 0
  StepSamples steps;               ///< timing cases
  std::optional<StepSummary> summary;
  std::optional<CaseUtilisation> utilisation;
  std::optional<CaseAllreduce> allreduce;
  std::optional<CaseProjection> projection;
  std::optional<AccuracyResult> accuracy;  ///< accuracy cases
  /// With more than one rank or micro-batch and the harness's reduction, on the case's rank 0.
  std::optional<CaseNoiseScale> noise;
  // Given by the run that writes it:
  int64_t run = 0;        ///< the /runs record of the run
  std::string allocator;  ///< --malloc as in effect
  std::string group;      ///< the case's group in the results file ("0003")
};

}  // namespace dlscale
