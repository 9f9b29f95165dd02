// Accuracy mode (docs/running.md, "Accuracy runs"; docs/metrics.md): per repeat, epochs over the
// training set in global batches with the same training_step() as timing mode (micro-batches,
// the learning rate's scaling and warm-up), validation on the held-out part after each epoch (or
// every --eval-every samples), testing after the last, every accuracy global over the ranks.
// The runner builds the model and the reduction (prepare_case) and AccuracyMode calls this for accuracy
// cases; what comes back is the same on every rank of the case.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "drivers/driver.h"
#include "io/results_file.h"
#include "schema/accuracy_record.h"
#include "suite/case/mlperf_log.h"
#include "suite/case/progress.h"
#include "suite/comm/gradient_allreduce.h"
#include "suite/matrix/run_matrix.h"
#include "workloads/data/dataset.h"

namespace dlscale {

/// What trains: the prepared model and what reduces and times its steps (as in timing mode).
struct TrainingParts {
  Model& model;
  StepTimer* timer = nullptr;
  GradientReducer* reducer = nullptr;
  BucketedAllreduce* buckets = nullptr;
  std::vector<float>* earlier = nullptr;  ///< room for the micro-batches' gradients (--accumulate)
  MpiReduction mpi;                       ///< how the blocking MPI all-reduce sends
};

/// The result of an accuracy case, identical on every rank of it.
struct AccuracyResult {
  Outcome outcome;           ///< a failure in any repeat, agreed by every rank
  bool interrupted = false;  ///< a stop signal reached a rank: the case ended early on every rank
  int64_t train_samples = 0, validation_samples = 0, test_samples = 0;
  std::vector<RepeatResult> repeats;
  AccuracySummary summary;  ///< means and 95% CIs over the repeats
  /// The gradient noise scale's two norms of every training step of every repeat (StepTimes).
  std::vector<double> small_sq, big_sq;
  /// Each finished repeat's events in MLPerf's logging format.
  std::vector<std::vector<MllogEvent>> mllog;
};

/// Runs `spec`'s repeats on the ranks of `comm` (collective: every rank calls the same collectives
/// in the same order whatever fails on it). `train` is the training set given by --data, `test`
/// its test set. A failure (an exception, a non-finite loss, --case-timeout) ends the case with
/// its agreed outcome; a stop signal ends it at the next step, `interrupted`.
AccuracyResult run_accuracy(const CaseSpec& spec, const Workload& workload, MPI_Comm comm, TrainingParts parts,
                            const Dataset& train, const Dataset& test, Progress& progress, const std::string& host);

/// The summary over repeats.
AccuracySummary accuracy_summary(const std::vector<RepeatResult>& repeats);

}  // namespace dlscale
