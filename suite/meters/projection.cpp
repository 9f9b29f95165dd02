#include "suite/meters/projection.h"

#include <algorithm>

#include <fmt/format.h>

#include "schema/projection_record.h"
#include "suite/meters/allreduce_microbenchmark.h"

namespace dlscale {

const RingFit& ProjectionNetwork::fit_for(int64_t p, bool* between_hosts) const {
  const bool crosses = p > ranks_per_host;
  const bool use_between = crosses ? between.measured() || !within.measured() : !within.measured();
  *between_hosts = use_between;
  return use_between ? between : within;
}

std::string ProjectionNetwork::note() const {
  const auto fit = [](const char* name, const RingFit& f) {
    return fmt::format("{} fit ({} ranks on {} host{})", name, f.ranks, f.hosts, f.hosts == 1 ? "" : "s");
  };
  const std::string w = within.measured() ? fit("within-host", within) : "";
  const std::string b = between.measured() ? fit("between-host", between) : "";
  if (!between.measured()) {
    return fmt::format("P <= {}: {}; P > {}: {} too, no between-host figures measured", ranks_per_host, w,
                       ranks_per_host, w);
  }
  if (!within.measured()) {
    return fmt::format("every P: {}, no within-host figures measured", b);
  }
  return fmt::format("P <= {}: {}; P > {}: {}", ranks_per_host, w, ranks_per_host, b);
}

GroupRecord projection_group(const Projection& p, const RingFit& fit, const ProjectionNetwork& network,
                             double compute_s, double sharded_update_s, double grad_bytes, const std::string& scaling) {
  ProjectionRecord rec;
  rec.alpha_s = fit.alpha_s;
  rec.beta_s_per_byte = fit.beta_s_per_byte;
  rec.fit_ranks = fit.ranks;
  rec.hosts = fit.hosts;
  rec.ranks_per_host = network.ranks_per_host;
  rec.within_alpha_s = network.within.alpha_s;
  rec.within_beta_s_per_byte = network.within.beta_s_per_byte;
  rec.between_alpha_s = network.between.alpha_s;
  rec.between_beta_s_per_byte = network.between.beta_s_per_byte;
  rec.network_note = network.note();
  rec.compute_s = compute_s;
  rec.sharded_update_s = sharded_update_s;
  rec.grad_bytes = grad_bytes;
  rec.scaling = scaling;
  rec.ranks = p.ranks;
  rec.step_s = p.step_s;
  rec.efficiency = p.efficiency;
  rec.between_hosts = p.between_hosts;
  return group_of(rec, kProjectionFields, kProjectionDatasets);
}

Projection project_steps(double compute_s, int measured_ranks, bool strong, double grad_bytes,
                         const ProjectionNetwork& network, int threads_per_rank, int cpus_per_node, int ranks_per_node,
                         const std::vector<int64_t>& targets, double sharded_update_s) {
  // Ranks beyond the cores of a node time-share them. The step waits for the slowest rank, which
  // shares its core with the most others: ceil(threads on the node / cores) of them.
  const auto crowding = [&](int64_t p) {
    const int64_t busy = std::min<int64_t>(p, ranks_per_node) * threads_per_rank;
    const int64_t cpus = std::max(1, cpus_per_node);
    return static_cast<double>(std::max<int64_t>(1, (busy + cpus - 1) / cpus));
  };
  const auto compute_at = [&](int64_t p) {
    const double share = static_cast<double>(measured_ranks) / static_cast<double>(p);
    const double work = strong ? share : 1.0;
    return (compute_s * work + sharded_update_s * share) * crowding(p) / crowding(measured_ranks);
  };
  const double t1 = compute_at(1);
  Projection out;
  for (int64_t p : targets) {
    bool between = false;
    const RingFit& fit = network.fit_for(p, &between);
    const double step =
        compute_at(p) + ring_allreduce_s(fit.alpha_s, fit.beta_s_per_byte, static_cast<int>(p), grad_bytes);
    out.ranks.push_back(p);
    out.between_hosts.push_back(between ? 1 : 0);
    out.step_s.push_back(step);
    out.efficiency.push_back(strong ? t1 / (static_cast<double>(p) * step) : t1 / step);
  }
  return out;
}

}  // namespace dlscale
