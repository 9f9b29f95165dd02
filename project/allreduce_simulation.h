// The SimGrid run behind training_simulation.h: the gradient buckets' all-reduces (ring or
// binomial tree) on the platform, started when the ranks' compute makes each bucket ready. Compute itself is not
// simulated: it takes fixed times (the samples) and contends for nothing the platform models,
// so when each rank has each bucket ready is known beforehand and only the network is
// simulated, which keeps P = 8192 to a few seconds.
#pragma once

#include <vector>

#include "project/platform.h"
#include "project/training_simulation.h"

namespace dlscale::project {

struct AllreduceSchedule {
  int ranks = 2, steps = 1;
  std::vector<double> bucket_bytes;
  /// [bucket]: whether its gradient is an embedding's rows, and their bytes gathered from all
  /// ranks together, 0 where they go dense (GradientBucket::rows, gathered_bytes).
  std::vector<char> rows;
  std::vector<double> gathered_bytes;
  /// [bucket] with sharded: the bytes of its parameters' all-gather.
  std::vector<double> parameter_bytes;
  /// When rank r has bucket b in step s, from the step's start: [(s * ranks + r) * buckets + b].
  std::vector<double> ready_s;
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::ring;
  AllreduceModel model = AllreduceModel::flow;
  int lanes = 1;  ///< rings in flight at once: bucket b on lane b % lanes, each lane's in order
  /// ZeRO stage 1 (TrainingInputs::sharded): the buckets reduce-scattered, then all-gathered
  /// after each rank's update, which starts when its backward and its reduce-scatters have ended.
  bool sharded = false;
  /// Sharded only, [s * ranks + r]: when rank r's backward ends, and its update's length.
  std::vector<double> backward_end_s, update_s;
  /// Two levels (TrainingInputs::host_hierarchy; ring, flow model): each bucket reduced to its
  /// node's first rank, a ring of those leaders, broadcast back within the node.
  bool host_hierarchy = false;
  /// [rank]: the node each rank is on (ranks with the same number share a node); with
  /// host_hierarchy.
  std::vector<int> node_of;
};

/// When each rank's buckets are done, from its step's start, [s * ranks + r] (0 with no buckets):
/// `reduced` when its last bucket is reduced (all-reduced, or reduce-scattered when sharded);
/// sharded, `gathered` when its parameters' all-gather has ended (empty otherwise).
struct AllreduceTimes {
  std::vector<double> reduced, gathered;
};

/// Steps follow one another as the ranks' barrier would have them: each starts once every rank's
/// reductions (and all-gathers) of the step before are done. Creates and runs a SimGrid Engine:
/// call it where no other Engine exists (simulate_training runs it in a child process).
AllreduceTimes simulate_allreduces(const ClusterDescription& cluster, const AllreduceSchedule& schedule);

}  // namespace dlscale::project
