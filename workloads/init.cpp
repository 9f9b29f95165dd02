// Canonical initialisation. Each parameter tensor is its own random stream, so adding a layer
// never changes the values drawn for the layers before it, and any element can be drawn in
// parallel without changing the result.
#include "workloads/init.h"

#include "workloads/random.h"

namespace dlscale {

std::vector<float> canonical_parameters(const Workload& w, uint64_t seed) {
  const std::vector<ParamSpec> layout = parameter_layout(w);
  std::vector<float> params(static_cast<size_t>(parameter_count(w)));
  for (size_t t = 0; t < layout.size(); ++t) {
    const ParamSpec& p = layout[t];
    const CounterRng rng(seed, t);
    const double v = p.init_value;
    float* dst = params.data() + p.offset;
    switch (p.init) {
      case InitKind::kUniform:
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < p.count; ++i) {
          dst[i] = static_cast<float>((2.0 * rng.uniform(static_cast<uint64_t>(i)) - 1.0) * v);
        }
        break;
      case InitKind::kNormal:
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < p.count; ++i) dst[i] = static_cast<float>(rng.normal(static_cast<uint64_t>(i)) * v);
        break;
      case InitKind::kConstant:
        for (int64_t i = 0; i < p.count; ++i) dst[i] = static_cast<float>(v);
        break;
    }
  }
  return params;
}

}  // namespace dlscale
