#include "suite/case/resolved_case.h"

#include "workloads/catalog.h"

namespace dlscale {

std::vector<ResolvedCase> resolve_cases(const std::vector<CaseSpec>& cases, const Registry& drivers,
                                        int default_threads, const std::vector<std::string>& hosts) {
  std::vector<ResolvedCase> resolved;
  resolved.reserve(cases.size());
  for (const CaseSpec& spec : cases) {
    ResolvedCase c;
    c.spec = spec;
    c.key = spec.command();
    c.driver = drivers.find(spec.driver);
    c.workload = make_workload(spec.workload);
    c.threads = spec.threads > 0 ? spec.threads : default_threads;
    c.placed = case_ranks(hosts, spec.placement, spec.ranks);
    c.params = parameter_count(c.workload);
    c.train_flops_per_step = flops_per_sample(c.workload).train() * static_cast<double>(spec.global_batch());
    resolved.push_back(std::move(c));
  }
  return resolved;
}

}  // namespace dlscale
