#include "project/analytic_model.h"

#include <algorithm>

namespace dlscale::project {

double ring_allreduce_time_s(int ranks, double bytes, double latency_s, double bandwidth_Bps) {
  if (ranks <= 1) return 0;
  const double steps = 2.0 * (ranks - 1);
  return steps * latency_s + steps / ranks * bytes / bandwidth_Bps;
}

double ring_half_time_s(int ranks, double bytes, double latency_s, double bandwidth_Bps) {
  return ring_allreduce_time_s(ranks, bytes, latency_s, bandwidth_Bps) / 2;
}

double two_level_allreduce_time_s(int per_node, int nodes, double bytes, double node_latency_s,
                                  double node_bandwidth_Bps, double latency_s, double bandwidth_Bps) {
  int rounds = 0;
  while ((1 << rounds) < per_node) ++rounds;
  return 2 * rounds * (node_latency_s + bytes / node_bandwidth_Bps) +
         ring_allreduce_time_s(nodes, bytes, latency_s, bandwidth_Bps);
}

double binomial_allreduce_time_s(int ranks, double bytes, double latency_s, double bandwidth_Bps) {
  if (ranks <= 1) return 0;
  const double hop = latency_s + bytes / bandwidth_Bps;
  int rounds = 0;
  while ((1 << rounds) < ranks) ++rounds;
  // has[v]: when rank v has the reduced bucket, from the reduction's end; ranks in increasing
  // order, as each one's parent (itself less its highest bit) comes before it.
  std::vector<double> has(static_cast<size_t>(ranks), 0.0);
  double last = 0;
  for (int v = 0; v < ranks; ++v) {
    int first_child = 1;
    while (first_child <= v) first_child *= 2;
    int children = 0;
    for (int c = first_child; v + c < ranks; c *= 2) ++children;
    const double sent = has[v] + (children > 0 ? latency_s + children * bytes / bandwidth_Bps : 0.0);
    for (int c = first_child; v + c < ranks; c *= 2) has[v + c] = sent;
    last = std::max(last, sent);
  }
  return rounds * hop + last;
}

StepBreakdown identical_ranks_step(int ranks, const ComputeSample& compute, const std::vector<GradientBucket>& buckets,
                                   bool overlap, double latency_s, double bandwidth_Bps, bool sharded) {
  const auto ring = sharded ? ring_half_time_s : ring_allreduce_time_s;
  const double fb = compute.forward_s + compute.backward_s;
  double end = 0;
  for (const GradientBucket& b : buckets) {
    const double ready = overlap ? compute.forward_s + b.ready_fraction * compute.backward_s : fb;
    const double reduce = !b.rows                ? ring(ranks, b.bytes, latency_s, bandwidth_Bps)
                          : b.gathered_bytes > 0 ? ring_half_time_s(ranks, b.gathered_bytes, latency_s, bandwidth_Bps)
                                                 : ring_allreduce_time_s(ranks, b.bytes, latency_s, bandwidth_Bps);
    end = std::max(ready, end) + reduce;
  }
  const double allreduce_end = std::max(fb, end);
  double gather = 0;
  if (sharded) {
    for (const GradientBucket& b : buckets) {
      gather += ring_half_time_s(ranks, b.parameter_bytes > 0 ? b.parameter_bytes : b.bytes, latency_s, bandwidth_Bps);
    }
  }
  StepBreakdown s;
  s.compute_s = fb;
  s.exposed_allreduce_s = allreduce_end - fb;
  s.parameter_gather_s = gather;
  s.update_and_other_s = compute.update_s + gather;
  s.step_s = allreduce_end + s.update_and_other_s;
  return s;
}

}  // namespace dlscale::project
