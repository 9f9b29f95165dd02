#include "project/analytic_model.h"

#include <algorithm>

namespace dlscale::project {

double ring_allreduce_time_s(int ranks, double bytes, double latency_s, double bandwidth_Bps) {
  if (ranks <= 1) return 0;
  const double steps = 2.0 * (ranks - 1);
  return steps * latency_s + steps / ranks * bytes / bandwidth_Bps;
}

StepBreakdown identical_ranks_step(int ranks, const ComputeSample& compute, const std::vector<GradientBucket>& buckets,
                                   bool overlap, double latency_s, double bandwidth_Bps) {
  const double fb = compute.forward_s + compute.backward_s;
  double end = 0;
  for (const GradientBucket& b : buckets) {
    const double ready = overlap ? compute.forward_s + b.ready_fraction * compute.backward_s : fb;
    end = std::max(ready, end) + ring_allreduce_time_s(ranks, b.bytes, latency_s, bandwidth_Bps);
  }
  const double allreduce_end = std::max(fb, end);
  StepBreakdown s;
  s.compute_s = fb;
  s.exposed_allreduce_s = allreduce_end - fb;
  s.update_and_other_s = compute.update_s;
  s.step_s = allreduce_end + compute.update_s;
  return s;
}

}  // namespace dlscale::project
