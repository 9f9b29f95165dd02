// What dlscale-project takes from one case of a results file: the compute samples, the gradient
// buckets and the measured all-reduce figures as a platform (docs/projection.md, "dlscale-project").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "io/results_file.h"
#include "project/platform.h"
#include "project/training_simulation.h"

namespace dlscale::project {

/// An embedding whose gradient the case summed as the rows the ranks touched (--sparse-embedding).
struct SparseEmbedding {
  double block_bytes = 0;  ///< its whole gradient (float32): the buffer's first bucket
  int width = 0;           ///< floats per row
  double rows_share = 0;   ///< rows a rank touched over the vocabulary (the mean over ranks), as measured
};

/// The bytes of rows all-gathered for `e` on P ranks (GradientBucket::gathered_bytes): each rank's
/// touched rows, each of width + 1 floats (its index with it), from every rank; 0 where that is
/// at least the ring's 2(P-1)/P of the block (the share from 2 width / (P (width + 1)) on), or
/// more values than one MPI call takes, where the block goes dense round the ring, as dlscale
/// decides. A rank touches as many rows at every P
/// under weak scaling; under strong scaling its batch is measured P / P of the measured one's,
/// and its rows are taken to shrink alike (at most: repeated tokens make it fewer).
double gathered_rows_bytes(const SparseEmbedding& e, int measured_ranks, int ranks, bool strong);

/// A case that can be projected, with everything the simulation needs from it.
struct CaseInputs {
  std::string name;   ///< "0001"
  std::string label;  ///< workload, driver, scaling and ranks, for the report's heading
  int measured_ranks = 1;
  int hosts = 1;
  bool strong = false;  ///< strong scaling: the compute per rank shrinks with P
  /// The buckets are reduced while backward runs: the case's `overlap`, and a communication
  /// thread to progress them (`progressed_by_thread`).
  bool overlap = false;
  /// The run's MPI gave the thread level (MPI_THREAD_SERIALIZED or above) that the bucketed
  /// all-reduce's communication thread needs. Without it the buckets progress only inside the
  /// MPI calls of the main thread (a test as each is started, then the wait after backward):
  /// simulated as reduced after backward.
  bool progressed_by_thread = true;
  /// The all-reduce the case ran: a ring for MPI_Allreduce and NCCL (the recorded
  /// allreduce_mechanism), Open MPI 4.1's binomial tree for the MPI_Iallreduce buckets of files
  /// written before the mechanism was recorded.
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::ring;
  /// How many buckets were in flight at once (the case's allreduce_lanes; 1 in older files).
  int lanes = 1;
  /// The optimiser sharded (`sharding` optimizer): buckets reduce-scattered, parameters
  /// all-gathered after the update, and each sample's update_s that of the measured rank's
  /// share (its update phase less its recorded parameter_gather_s).
  bool sharded = false;
  /// The all-reduce went in two levels where ranks shared a host (`allreduce_hierarchy` host).
  bool host_hierarchy = false;
  /// --sparse-embedding where the case summed an embedding's rows (its
  /// `sparse_embedding_rows_share`): the embedding is `buckets.back()`, the last ready.
  std::optional<SparseEmbedding> sparse;
  double measured_step_s = 0;          ///< the case's step_median_s
  std::vector<ComputeSample> samples;  ///< one per rank and iteration, as measured
  std::vector<GradientBucket> buckets;
  bool readiness_measured = false;  ///< the ready fractions come from bucket_start_s, not estimated
};

/// Why the case cannot be projected (mode, status, phases), or "" when it can.
std::string unusable_reason(const CaseRecord& record);

/// The inputs of a usable case, given the attributes of the file's /system/software (`software`:
/// its `mpi_thread_level`, for files without the case's `allreduce_mechanism`; a file without
/// either is taken to have the level dlscale asks for). Throws std::invalid_argument naming the
/// attribute when one is missing, of another type, or out of range.
CaseInputs case_inputs(const std::string& name, const CaseRecord& record, const Attrs& software);

/// The buckets dlscale's BucketedAllreduce cuts `grad_bytes` of float32 gradients into for
/// `bucket_mb` (MB = 1e6 bytes; 0: one bucket after backward), in the order they become ready,
/// with ready fractions estimated from their place in the buffer (see the definition).
std::vector<GradientBucket> estimated_buckets(double grad_bytes, double bucket_mb);

/// The buckets of a case's `bucket_bytes` (each bucket's size, in buffer order), in the order
/// they become ready, with ready fractions estimated from their place in the buffer. Throws
/// std::invalid_argument for a size that is not positive, or too many buckets to simulate.
std::vector<GradientBucket> recorded_buckets(const std::vector<double>& bucket_bytes);

/// Replaces the estimated ready fractions of `buckets` (in readiness order, as
/// estimated_buckets gives them) by the measured ones where the case recorded `bucket_start_s`
/// for the same buckets: per bucket, the median over ranks and iterations of (start − forward) /
/// backward, between 0 and 1, and never below an earlier bucket's. Returns whether it did.
bool apply_measured_readiness(const CaseRecord& record, std::vector<GradientBucket>& buckets);

/// "This machine as measured", for up to `max_ranks` ranks.
struct MeasuredPlatform {
  std::string toml;  ///< the platform whose simulated ring reproduces the case's fitted ring
                     ///< all-reduce within and between hosts (parse_platform_toml reads it)
  /// One line on what it extrapolates from where max_ranks goes beyond the measured ranks: the
  /// ranks and hosts measured, and which fit stands in for a network not measured; else "".
  std::string extrapolation;
};
/// Throws std::invalid_argument when the case has no projection group.
MeasuredPlatform measured_platform(const ResultsFile& file, const CaseInputs& c, int max_ranks);

}  // namespace dlscale::project
