// Closed forms of what training_simulation.h simulates, for the cases where one exists: every
// rank identical, and a network where every ring edge has the same latency and bandwidth and
// no two flows share a link (a crossbar). The tests hold the simulation to them.
#pragma once

#include <vector>

#include "project/training_simulation.h"

namespace dlscale::project {

/// A ring all-reduce of `bytes` on `ranks` ranks whose every edge has latency a and bandwidth
/// B: 2(P-1) a + 2(P-1)/P n / B (the formula of ring_allreduce_s in
/// suite/meters/allreduce_microbenchmark.h, with beta = 1/B); 0 on one rank.
double ring_allreduce_time_s(int ranks, double bytes, double latency_s, double bandwidth_Bps);

/// Half of that ring, a reduce-scatter or an all-gather of `bytes`: (P-1) a + (P-1)/P n / B.
double ring_half_time_s(int ranks, double bytes, double latency_s, double bandwidth_Bps);

/// The two-level all-reduce (TrainingInputs::host_hierarchy) of `bytes` on `nodes` nodes of
/// `per_node` ranks each, where a message within a node takes latency a_n and bandwidth B_n
/// and the leaders' ring edges a and B: ceil(log2 k) rounds of a_n + n/B_n up the tree, the
/// leaders' ring (ring_allreduce_time_s of `nodes`), the same rounds down.
double two_level_allreduce_time_s(int per_node, int nodes, double bytes, double node_latency_s,
                                  double node_bandwidth_Bps, double latency_s, double bandwidth_Bps);

/// Open MPI's binomial all-reduce (AllreduceAlgorithm::binomial) of one bucket of `bytes` on
/// such a crossbar, every rank starting at once: the reduction takes ceil(log2 P) rounds of
/// a + n/B (no rank receives twice at once); in the broadcast a rank that has the bucket sends
/// it to its k children at once, sharing its NIC, so that they have it a + k n/B later. The
/// time until the last rank is done (its sends ended, or its bucket received); 0 on one rank.
double binomial_allreduce_time_s(int ranks, double bytes, double latency_s, double bandwidth_Bps);

/// The step of identical ranks (one compute sample) with buckets reduced one after another on
/// such a ring: bucket j starts at max(its ready time, the end of bucket j-1), its ready time
/// being forward + fraction x backward with overlap and forward + backward without; the
/// all-reduce ends at max(forward + backward, the last bucket's end); the update follows.
/// `sharded` (ZeRO stage 1): each bucket reduce-scattered instead (ring_half_time_s), and after
/// the update every bucket all-gathered, one after another. An embedding's rows
/// (GradientBucket::rows) take ring_half_time_s of their gathered bytes, or where they go dense
/// ring_allreduce_time_s of the block, sharded or not. Parts as StepBreakdown defines them
/// (no straggler wait).
StepBreakdown identical_ranks_step(int ranks, const ComputeSample& compute, const std::vector<GradientBucket>& buckets,
                                   bool overlap, double latency_s, double bandwidth_Bps, bool sharded = false);

}  // namespace dlscale::project
