// Preparing a case on its ranks, the stage every run mode starts from: the driver's answer to
// "can you run this here?", the gradient reduction, the model with its canonical parameters and
// first batch, and the timer. The ranks agree on the outcome after each part, so that a rank
// refused early never skips a collective the others enter.
#pragma once

#include <mpi.h>

#include <map>
#include <memory>
#include <string>

#include "drivers/driver.h"
#include "suite/case/accuracy_mode.h"
#include "suite/case/case_result.h"
#include "suite/case/progress.h"
#include "suite/case/resolved_case.h"
#include "suite/comm/gradient_allreduce.h"
#include "suite/comm/mpi_context.h"
#include "workloads/data/dataset.h"

namespace dlscale {

/// A case on its ranks: what every stage of it is given.
struct CaseContext {
  const ResolvedCase& c;
  MPI_Comm comm;  ///< the case's ranks, in case-rank order
  int case_rank = 0;
  const MpiContext& mpi;
  Progress& progress;
};

/// The data sets of a sweep, each read once, by spec.
class DatasetCache {
 public:
  std::shared_ptr<const Dataset> get(const std::string& spec);

 private:
  std::map<std::string, std::shared_ptr<const Dataset>> sets_;
};

/// What prepare_case() built: its agreed outcome and, when ok, the model and the parts that
/// feed, reduce and time it.
struct PreparedCase {
  Outcome outcome;
  int gpu = 0;  ///< the GPU of this rank, for GPU cases
  // The model before the reducer, so that the reducer goes first: a reduction still in flight
  // (its communicator flushed or aborted) then never outlives the gradients it writes.
  std::unique_ptr<Model> model;
  std::unique_ptr<GradientReducer> reducer;  ///< a driver's own (NCCL), else MPI on host memory
  std::unique_ptr<StepTimer> timer;          ///< the model's own (CUDA events), else the host clock's
  std::shared_ptr<const Dataset> dataset;
  std::shared_ptr<const Dataset> test;         ///< accuracy cases: the test set that goes with `dataset`
  std::unique_ptr<BucketedAllreduce> buckets;  ///< with --bucket-mb on more than one rank
  MpiReduction mpi;  ///< how the harness's MPI all-reduce sends: --grad-compression, the resolved hierarchy
  /// With --accumulate: the micro-batches before a step's last, their gradients summed here.
  std::vector<float> earlier_gradients;
  bool overlap = false;
  bool progress_thread() const { return buckets && buckets->progress_thread(); }
  /// What reduces the gradients (docs/schema.md, allreduce_mechanism), and in how many buckets.
  std::string allreduce_mechanism(int ranks) const;
  int64_t allreduce_buckets(int ranks) const;
  int64_t allreduce_lanes() const { return buckets ? buckets->lanes() : 1; }  ///< in flight at once
  /// This rank's memory now (RankMemory): its peaks so far, and what its model holds.
  RankMemory memory() const;
};

/// Prepares the case on every rank of ctx.comm (collective); the outcome is agreed.
PreparedCase prepare_case(const CaseContext& ctx, DatasetCache& data);

/// Starts the peak-RSS mark afresh before a case trains, so that its memory peak is the case's
/// own: first the memory earlier cases freed goes back to the kernel (under --malloc keep it
/// would otherwise stay resident, and count in this case's peak). Local.
void reset_memory_mark(Progress& progress);

}  // namespace dlscale
