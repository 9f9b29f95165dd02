// The data-parallel training step on a simulated cluster: every rank computes (forward,
// backward, update, from measured per-rank samples), its gradient buckets are all-reduced (a
// ring, or Open MPI's binomial tree) over the platform as they become ready, and the step is split into the parts
// dlscale's diagnosis names (docs/metrics.md, "Scaling diagnosis"). See docs/projection.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "project/platform.h"

namespace dlscale::project {

/// One rank's compute in one iteration, in seconds (as a `--phases` case records them).
struct ComputeSample {
  double forward_s = 0, backward_s = 0, update_s = 0;
};

/// A gradient bucket: its size, and the fraction of backward after which all its gradients are
/// computed (buckets in the order they become ready; fractions non-decreasing, in (0, 1]).
struct GradientBucket {
  double bytes = 0;
  double ready_fraction = 1;
  /// An embedding's gradient summed as the rows the ranks touched (`--sparse-embedding`; ring
  /// only): all-gathered, `gathered_bytes` from all ranks together, each rank's share going round
  /// the ring's P-1 steps; or, with `gathered_bytes` 0 (beyond the crossover), `bytes` dense round
  /// the flat ring as a whole all-reduce, also when sharded or in two levels, as dlscale sends it.
  bool rows = false;
  double gathered_bytes = 0;
  /// Sharded: the bytes of the parameters' all-gather (double the gradients' for a driver that
  /// keeps float64 parameters; never compressed); 0: `bytes`.
  double parameter_bytes = 0;
};

/// How a bucket is all-reduced.
enum class AllreduceAlgorithm {
  /// A ring: 2(P-1) steps of n/P bytes (NCCL's, and MPI's for large buffers: bandwidth-optimal).
  ring,
  /// Open MPI 4.1 coll/libnbc's choice for MPI_Iallreduce in place or on fewer than 4 ranks
  /// (dlscale's buckets: docs/projection.md): a binomial tree reduces the whole bucket to rank
  /// 0 round by round (a rank receives from its children one round after another, then sends
  /// to its parent), then rank 0's binomial broadcast sends it back down, every rank sending to
  /// all its children at once. 2(P-1) messages of n bytes per bucket, in either AllreduceModel;
  /// every bucket from when it is ready on the rank, those in flight at once sharing the links.
  binomial
};

/// How the ring is simulated (the binomial tree is simulated message by message in both).
enum class AllreduceModel {
  /// Per bucket, once every rank has it: one flow per ring edge carrying 2(P-1)/P n bytes
  /// (the bandwidth of the whole ring at once, with the links' sharing), then the ring's other
  /// 2(P-1) - 1 latencies of its slowest edge. P flows per bucket: for any P.
  flow,
  /// The ring itself: 2(P-1) steps of n/P bytes from every rank to the next, each step started
  /// when the previous one's message has arrived. 2P(P-1) messages per bucket: for validating
  /// the flow model at small P.
  message
};

struct TrainingInputs {
  int ranks = 1;
  /// Each rank in each simulated step draws one of these uniformly (seeded by `seed`):
  /// resampling measured per-rank iterations lets the slowest of P draws, and with it the
  /// straggler wait, grow with P. One sample: every rank identical, no straggler wait.
  std::vector<ComputeSample> samples;
  std::vector<GradientBucket> buckets;
  /// true: a bucket is reduced as soon as every rank has it, while backward goes on; false:
  /// all buckets are reduced after backward (dlscale's blocking all-reduce).
  bool overlap = true;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::ring;
  AllreduceModel model = AllreduceModel::flow;
  /// Ring all-reduces in flight at once: the buckets take turns on this many lanes, each lane's
  /// one after another (the CPU communication thread's kRingLanes; NCCL's one stream).
  int lanes = 1;
  /// The optimiser sharded over the ranks (ZeRO stage 1, `--sharding optimizer`; ring only): each
  /// bucket is reduce-scattered instead of all-reduced (the ring's first P-1 steps), each rank
  /// updates its share (the samples' update_s are the share's at this P), and once every rank
  /// has, the parameters are all-gathered bucket by bucket on the lanes (the ring's last P-1
  /// steps), in the buckets' readiness order. The step ends with the last all-gather.
  bool sharded = false;
  /// The all-reduce in two levels where ranks share a node (`--allreduce-hierarchy host`; ring,
  /// flow model, not sharded): each bucket reduced to the node's first rank by a binomial tree
  /// within the node (ceil(log2 k) rounds of the whole bucket for k ranks there), all-reduced
  /// by a ring of those leaders, then broadcast back down the same tree.
  bool host_hierarchy = false;
  int steps = 3;
  uint64_t seed = 1;
};

/// The parts of a step as the diagnosis defines them, with fb[r] = forward + backward of rank r
/// and ar[r] = when rank r has its last bucket reduced, counted from the step's start (the
/// barrier before it) and never before fb[r]: compute = mean fb, straggler wait = max fb -
/// compute, exposed all-reduce = max ar - max fb, update and other = step - max ar, and step =
/// max over ranks of ar[r] + update[r] (sharded: the end of the parameters' all-gather that
/// follows). The four parts add up to the step.
struct StepBreakdown {
  double step_s = 0, compute_s = 0, straggler_wait_s = 0, exposed_allreduce_s = 0, update_and_other_s = 0;
  /// Sharded: the all-gather after the last rank's update, part of update_and_other_s (as the
  /// measured update phase holds it); 0 otherwise.
  double parameter_gather_s = 0;
};

struct TrainingSimulation {
  StepBreakdown mean;                ///< each part averaged over the simulated steps
  std::vector<StepBreakdown> steps;  ///< every simulated step
  double wall_s = 0;                 ///< wall time of the simulation (platform, run, results)
  int64_t peak_rss_bytes = 0;        ///< peak resident memory of the process that simulated it
};

/// Simulates `inputs.steps` steps on `cluster`. Each call runs in a child process of its own:
/// SimGrid's state is process-wide and some of its errors end the process, and the child's
/// peak memory is the simulation's alone (isolated_run.h). Throws std::invalid_argument for bad inputs,
/// std::runtime_error when the simulation fails.
TrainingSimulation simulate_training(const ClusterDescription& cluster, const TrainingInputs& inputs);

/// The version of the SimGrid library the simulations run on ("3.32.0"), for the results they
/// are recorded with.
std::string simgrid_version();

}  // namespace dlscale::project
