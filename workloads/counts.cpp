// Parameter layout and analytic counts, derived from the layer list alone so that the catalog
// can be checked against WORKLOADS.md without building any network.
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "workloads/workload.h"

namespace dlscale {

int64_t Workload::input_size() const {
  int64_t n = 1;
  for (int64_t d : input_shape) n *= d;
  return n;
}

namespace {

float init_bound(InitRule rule, int64_t fan_in) {
  switch (rule) {
    case InitRule::kUniformHalf:
      return 0.5f;
    case InitRule::kFanInUniform:
      return static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)));
  }
  throw std::logic_error("unknown init rule");
}

}  // namespace

std::vector<ParamSpec> parameter_layout(const Workload& w) {
  std::vector<ParamSpec> specs;
  int64_t offset = 0;
  auto add = [&](std::string name, std::vector<int64_t> shape, int layer, float bound) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    specs.push_back({std::move(name), std::move(shape), offset, count, layer, bound});
    offset += count;
  };
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const Layer& l = w.layers[i];
    const int idx = static_cast<int>(i);
    if (l.kind == LayerKind::kLinear) {
      const float bound = init_bound(w.init, l.in_features);
      add(fmt::format("layer{}.weight", i), {l.out_features, l.in_features}, idx, bound);
      add(fmt::format("layer{}.bias", i), {l.out_features}, idx, bound);
    }
  }
  return specs;
}

int64_t parameter_count(const Workload& w) {
  int64_t n = 0;
  for (const ParamSpec& p : parameter_layout(w)) n += p.count;
  return n;
}

FlopCounts flops_per_sample(const Workload& w) {
  FlopCounts f;
  bool first_with_params = true;
  for (const Layer& l : w.layers) {
    if (l.kind != LayerKind::kLinear) continue;
    const double mac = static_cast<double>(l.in_features) * static_cast<double>(l.out_features);
    const double bias = static_cast<double>(l.out_features);
    f.forward += 2 * mac + bias;
    f.backward += 2 * mac + bias;                   // grad-weight and grad-bias
    if (!first_with_params) f.backward += 2 * mac;  // grad-input
    first_with_params = false;
  }
  return f;
}

}  // namespace dlscale
