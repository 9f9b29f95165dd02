// Canonical initialisation. Each parameter tensor is its own random stream, so adding a layer
// never changes the values drawn for the layers before it.
#include "workloads/init.h"

#include "workloads/random.h"

namespace dlscale {

std::vector<float> canonical_parameters(const Workload& w, uint64_t seed) {
  const std::vector<ParamSpec> layout = parameter_layout(w);
  std::vector<float> params(static_cast<size_t>(parameter_count(w)));
  for (size_t t = 0; t < layout.size(); ++t) {
    const ParamSpec& p = layout[t];
    const CounterRng rng(seed, t);
    const double bound = p.init_bound;
    float* dst = params.data() + p.offset;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < p.count; ++i) {
      dst[i] = static_cast<float>((2.0 * rng.uniform(static_cast<uint64_t>(i)) - 1.0) * bound);
    }
  }
  return params;
}

}  // namespace dlscale
