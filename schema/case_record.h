// /cases/NNNN's attributes and its summary's step statistics (docs/schema.md, "Cases"), as plain
// records with their field tables: dlscale fills them from a finished case
// (suite/record/case_fields.cpp) and dlscale-project reads them back (project/cli/case_inputs.cpp).
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "schema/fields.h"

namespace dlscale {

/// What the case is: known before it runs.
struct CaseDescription {
  std::string workload, driver, device_type, precision, denormals, isa, scaling;
  int64_t ranks = 0;
  std::string participants, placement;
  int64_t hosts = 0, batch_per_rank = 0, global_batch = 0, threads = 0;
  int64_t warmup = 0, iterations = 0;  ///< 0 for an accuracy case, which times epochs
  int64_t seed = 0, params = 0;
  double train_flops_per_step = 0;
  int64_t grad_bytes = 0;
  bool phases = false;
  std::string data;
  double bucket_mb = 0;
  std::string grad_compression = "none";     ///< the format gradients crossed ranks in: none, fp16, bf16
  std::string allreduce_hierarchy = "flat";  ///< how the MPI all-reduce crossed hosts: flat, host
  std::string sharding = "none";             ///< what the ranks shard: none, optimizer
  std::string case_key, started_utc, mode, optimizer;
  double learning_rate = 0;
  int64_t accumulate = 1;  ///< micro-batches per optimiser step
  std::string lr_scaling;  ///< none, linear, sqrt
  int64_t lr_base_batch = 0;
  double scaled_learning_rate = 0;  ///< learning_rate scaled to global_batch (the rate after warm-up)
};

inline const Field<CaseDescription> kCaseDescriptionFields[] = {
    member<&CaseDescription::workload>("workload"),
    member<&CaseDescription::driver>("driver"),
    member<&CaseDescription::device_type>("device_type"),
    member<&CaseDescription::precision>("precision"),
    member<&CaseDescription::denormals>("denormals"),
    member<&CaseDescription::isa>("isa"),
    member<&CaseDescription::scaling>("scaling"),
    member<&CaseDescription::ranks>("ranks"),
    member<&CaseDescription::participants>("participants"),
    member<&CaseDescription::placement>("placement"),
    member<&CaseDescription::hosts>("hosts"),
    member<&CaseDescription::batch_per_rank>("batch_per_rank"),
    member<&CaseDescription::global_batch>("global_batch"),
    member<&CaseDescription::threads>("threads"),
    member<&CaseDescription::warmup>("warmup"),
    member<&CaseDescription::iterations>("iterations"),
    member<&CaseDescription::seed>("seed"),
    member<&CaseDescription::params>("params"),
    member<&CaseDescription::train_flops_per_step>("train_flops_per_step"),
    member<&CaseDescription::grad_bytes>("grad_bytes"),
    member<&CaseDescription::phases>("phases"),
    member<&CaseDescription::data>("data"),
    member<&CaseDescription::bucket_mb>("bucket_mb"),
    member<&CaseDescription::grad_compression>("grad_compression"),
    member<&CaseDescription::allreduce_hierarchy>("allreduce_hierarchy"),
    member<&CaseDescription::sharding>("sharding"),
    member<&CaseDescription::case_key>("case_key"),
    member<&CaseDescription::started_utc>("started_utc"),
    member<&CaseDescription::mode>("mode"),
    member<&CaseDescription::optimizer>("optimizer"),
    member<&CaseDescription::learning_rate>("learning_rate"),
    member<&CaseDescription::accumulate>("accumulate"),
    member<&CaseDescription::lr_scaling>("lr_scaling"),
    member<&CaseDescription::lr_base_batch>("lr_base_batch"),
    member<&CaseDescription::scaled_learning_rate>("scaled_learning_rate"),
};

/// An accuracy case's request and data (docs/running.md, "Accuracy runs"); timing cases have none.
struct CaseAccuracyRequest {
  int64_t epochs = 0;
  double validation_fraction = 0, target_accuracy = 0;
  int64_t repeats = 0, train_samples = 0, validation_samples = 0, test_samples = 0;
  std::string test_data;
  double lr_warmup_epochs = 0;
  int64_t eval_every = 0;  ///< training samples between evaluations; 0: once per epoch
};

inline const Field<CaseAccuracyRequest> kCaseAccuracyRequestFields[] = {
    member<&CaseAccuracyRequest::epochs>("epochs"),
    member<&CaseAccuracyRequest::validation_fraction>("validation_fraction"),
    member<&CaseAccuracyRequest::target_accuracy>("target_accuracy"),
    member<&CaseAccuracyRequest::repeats>("repeats"),
    member<&CaseAccuracyRequest::train_samples>("train_samples"),
    member<&CaseAccuracyRequest::validation_samples>("validation_samples"),
    member<&CaseAccuracyRequest::test_samples>("test_samples"),
    member<&CaseAccuracyRequest::test_data>("test_data"),
    member<&CaseAccuracyRequest::lr_warmup_epochs>("lr_warmup_epochs"),
    member<&CaseAccuracyRequest::eval_every>("eval_every"),
};

/// How it ended, what reduced its gradients, and the run that recorded it.
struct CaseOutcome {
  bool overlap = false, progress_thread = false;
  std::string allreduce_mechanism;
  int64_t allreduce_buckets = 0, allreduce_lanes = 1, allreduce_segment_bytes = 0;
  std::string mpi_allreduce_settings;
  std::string blas_core, blas_core_chosen, blas_core_reason;
  bool blas_core_below_cpu = false;
  std::string status, message;
  double wall_s = 0;
  std::string allocator;
  int64_t run = 0;
  /// --sparse-embedding: the share of an embedding's rows the ranks sent (last step), and the share
  /// above which it goes dense; NaN where the case summed no embedding's rows.
  double sparse_embedding_rows_share = std::numeric_limits<double>::quiet_NaN();
  double sparse_embedding_crossover_share = std::numeric_limits<double>::quiet_NaN();
};

inline const Field<CaseOutcome> kCaseOutcomeFields[] = {
    member<&CaseOutcome::overlap>("overlap"),
    member<&CaseOutcome::progress_thread>("progress_thread"),
    member<&CaseOutcome::allreduce_mechanism>("allreduce_mechanism"),
    member<&CaseOutcome::allreduce_buckets>("allreduce_buckets"),
    member<&CaseOutcome::allreduce_lanes>("allreduce_lanes"),
    member<&CaseOutcome::allreduce_segment_bytes>("allreduce_segment_bytes"),
    member<&CaseOutcome::mpi_allreduce_settings>("mpi_allreduce_settings"),
    member<&CaseOutcome::blas_core>("blas_core"),
    member<&CaseOutcome::blas_core_chosen>("blas_core_chosen"),
    member<&CaseOutcome::blas_core_reason>("blas_core_reason"),
    member<&CaseOutcome::blas_core_below_cpu>("blas_core_below_cpu"),
    member<&CaseOutcome::status>("status"),
    member<&CaseOutcome::message>("message"),
    member<&CaseOutcome::wall_s>("wall_s"),
    member<&CaseOutcome::allocator>("allocator"),
    member<&CaseOutcome::run>("run"),
    member<&CaseOutcome::sparse_embedding_rows_share>("sparse_embedding_rows_share"),
    member<&CaseOutcome::sparse_embedding_crossover_share>("sparse_embedding_crossover_share"),
};

/// /cases/NNNN/summary: a timing case's step statistics (docs/metrics.md, "Step time").
struct StepStatistics {
  double step_median_s = 0, step_p05_s = 0, step_p95_s = 0, step_mean_s = 0, step_std_s = 0, step_cv = 0;
  double ci95_low_s = 0, ci95_high_s = 0, ci_coverage = 0;
  double samples_per_s = 0, achieved_flops = 0, straggler_ratio = 0;
};

inline const Field<StepStatistics> kStepStatisticsFields[] = {
    member<&StepStatistics::step_median_s>("step_median_s"),
    member<&StepStatistics::step_p05_s>("step_p05_s"),
    member<&StepStatistics::step_p95_s>("step_p95_s"),
    member<&StepStatistics::step_mean_s>("step_mean_s"),
    member<&StepStatistics::step_std_s>("step_std_s"),
    member<&StepStatistics::step_cv>("step_cv"),
    member<&StepStatistics::ci95_low_s>("ci95_low_s"),
    member<&StepStatistics::ci95_high_s>("ci95_high_s"),
    member<&StepStatistics::ci_coverage>("ci_coverage"),
    member<&StepStatistics::samples_per_s>("samples_per_s"),
    member<&StepStatistics::achieved_flops>("achieved_flops"),
    member<&StepStatistics::straggler_ratio>("straggler_ratio"),
};

/// The summary's median exposed all-reduce, of the slowest rank and of the least: cases on more
/// than one rank.
struct ExposedAllreduce {
  double exposed_allreduce_median_s = 0, exposed_allreduce_least_median_s = 0;
};

inline const Field<ExposedAllreduce> kExposedAllreduceFields[] = {
    member<&ExposedAllreduce::exposed_allreduce_median_s>("exposed_allreduce_median_s"),
    member<&ExposedAllreduce::exposed_allreduce_least_median_s>("exposed_allreduce_least_median_s"),
};

/// The summary's median of each phase of the slowest rank: cases run with --phases.
struct PhaseMedians {
  double forward_median_s = 0, backward_median_s = 0, allreduce_median_s = 0, update_median_s = 0;
};

inline const Field<PhaseMedians> kPhaseMedianFields[] = {
    member<&PhaseMedians::forward_median_s>("forward_median_s"),
    member<&PhaseMedians::backward_median_s>("backward_median_s"),
    member<&PhaseMedians::allreduce_median_s>("allreduce_median_s"),
    member<&PhaseMedians::update_median_s>("update_median_s"),
};

}  // namespace dlscale
