#include "suite/meters/projection.h"

#include <algorithm>

#include <fmt/format.h>

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
                             double compute_s, double grad_bytes, const std::string& scaling) {
  GroupRecord g;
  g.attrs = {{"model", std::string("ring")},
             {"alpha_s", fit.alpha_s},
             {"beta_s_per_byte", fit.beta_s_per_byte},
             {"fit_ranks", int64_t{fit.ranks}},
             {"hosts", int64_t{fit.hosts}},
             {"ranks_per_host", int64_t{network.ranks_per_host}},
             {"within_alpha_s", network.within.alpha_s},
             {"within_beta_s_per_byte", network.within.beta_s_per_byte},
             {"between_alpha_s", network.between.alpha_s},
             {"between_beta_s_per_byte", network.between.beta_s_per_byte},
             {"network_note", network.note()},
             {"compute_s", compute_s},
             {"grad_bytes", grad_bytes},
             {"scaling", scaling}};
  const auto k = static_cast<uint64_t>(p.ranks.size());
  g.datasets = {DatasetRecord{"ranks", {k}, {}, p.ranks, true}, DatasetRecord{"step_s", {k}, p.step_s, {}, false},
                DatasetRecord{"efficiency", {k}, p.efficiency, {}, false},
                DatasetRecord{"between_hosts", {k}, {}, p.between_hosts, true}};
  return g;
}

Projection project_steps(double compute_s, int measured_ranks, bool strong, double grad_bytes,
                         const ProjectionNetwork& network, int threads_per_rank, int cpus_per_node, int ranks_per_node,
                         const std::vector<int64_t>& targets) {
  // Ranks beyond the cores of a node time-share them. The step waits for the slowest rank, which
  // shares its core with the most others: ceil(threads on the node / cores) of them.
  const auto crowding = [&](int64_t p) {
    const int64_t busy = std::min<int64_t>(p, ranks_per_node) * threads_per_rank;
    const int64_t cpus = std::max(1, cpus_per_node);
    return static_cast<double>(std::max<int64_t>(1, (busy + cpus - 1) / cpus));
  };
  const auto compute_at = [&](int64_t p) {
    const double work = strong ? static_cast<double>(measured_ranks) / static_cast<double>(p) : 1.0;
    return compute_s * work * crowding(p) / crowding(measured_ranks);
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
