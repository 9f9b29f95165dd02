// One timed training step, the same on every backend and in every run mode: forward, backward,
// the gradient average, the update, each phase timed on the model's own timer or the host clock.
#pragma once

#include <mpi.h>

#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "drivers/driver.h"
#include "suite/case/case_result.h"
#include "suite/comm/gradient_allreduce.h"

namespace dlscale {

struct StepTimes {
  /// The host's monotonic clock (monotonic_seconds()) as the step started, just after its first
  /// mark: where a timeline places the step; the buckets' times count from it.
  double start_s = 0;
  double total = 0;
  double phase[kPhaseCount] = {0, 0, 0, 0};  ///< only filled when phases are timed
  /// From the end of backward to the end of the gradient average: the all-reduce time the
  /// step did not hide (waiting for slower ranks included); 0 on one rank.
  double exposed_allreduce = 0;
  /// Sharded optimiser only: the all-gather of the parameters after this rank's update (part of
  /// the update phase), in seconds; 0 otherwise.
  double parameter_gather = 0;
  /// The gradient noise scale's two squared norms (suite/meters/noise_scale.h): the mean over
  /// this rank's micro-batches of |g|² of each one's own gradient, and |g|² of the step's
  /// gradient averaged over ranks and micro-batches. NaN where the step measured none (one rank's
  /// one micro-batch, a driver's own reducer).
  double small_sq = std::numeric_limits<double>::quiet_NaN();
  double big_sq = std::numeric_limits<double>::quiet_NaN();
};

/// Gradient accumulation: a step of `count` micro-batches, each a forward and a backward pass,
/// whose gradients are summed and averaged over the ranks once, in the last one's backward.
struct MicroBatches {
  int count = 1;
  /// Puts micro-batch j (1 to count - 1) into the model; the step starts with micro-batch 0 in.
  std::function<void(int j)> load;
  /// Room for the earlier micro-batches' summed gradients (grad_buffer().count floats; host
  /// memory): the harness's, as PyTorch keeps .grad between backward passes.
  std::vector<float>* earlier = nullptr;
};

/// One timed training step, the same on every backend: forward, backward, the gradient average,
/// the update, timed by `timer` (mark 0 at the start; with `time_phases` mark 1 after forward;
/// marks 2 and 3 around the gradient average whenever there is one to time; then the last). `timer` nullptr: the host
/// clock read after model.synchronize(), as CPU models are timed. The average is `reducer`'s (a driver's own, e.g. NCCL
/// on a GPU stream), else the MPI `buckets` (started during backward where the driver reports finished gradients), else
/// one blocking MPI all-reduce over `comm`. A reducer's queued reductions are waited for, once the whole step is
/// queued, until `deadline` (GradientReducer::wait: Timeout past it).
/// With `micro` of count K > 1 (not with a driver's reducer), the step runs K forward and backward passes, micro-batch
/// j loaded before the j-th; the earlier ones' gradients are summed on the host and added to the last one's as its
/// buckets are reduced; "forward" (with `time_phases`) then runs from the step's start to the end of the last
/// micro-batch's forward pass, the earlier micro-batches' passes included, and "backward" is the last one's.
/// `how`: the format and hierarchy of the one blocking MPI all-reduce (the buckets have their own).
/// Sharded `buckets` (BucketedAllreduce::sharded): the update applies to this rank's share, and the
/// parameters are all-gathered after it, inside the update phase.
StepTimes training_step(Model& model, MPI_Comm comm, const Optimizer& opt, bool time_phases,
                        BucketedAllreduce* buckets = nullptr, StepTimer* timer = nullptr,
                        GradientReducer* reducer = nullptr, Deadline deadline = Deadline::max(),
                        const MicroBatches& micro = {}, const MpiReduction& how = {});

/// `seconds` from now, or Deadline::max() for 0 (no limit): how long a case's set-up, and then
/// its training, may wait for its devices and peers (--case-timeout).
Deadline deadline_after(double seconds);

/// The host clock after model.synchronize(): how CPU models are timed.
std::unique_ptr<StepTimer> make_host_step_timer(Model& model);

}  // namespace dlscale
