// `dlscale list`: what can be run (the catalog, the drivers, the built-in suites), and one
// workload's layers as JSON.
#include <algorithm>

#include <fmt/format.h>

#include "suite/cli/commands.h"
#include "suite/exit_code.h"
#include "suite/matrix/builtin_suites.h"
#include "workloads/catalog.h"

namespace dlscale {

namespace {

const char* kind_name(LayerKind k) {
  switch (k) {
    case LayerKind::kLinear:
      return "linear";
    case LayerKind::kConv2d:
      return "conv2d";
    case LayerKind::kMaxPool2d:
      return "maxpool2d";
    case LayerKind::kGlobalAvgPool:
      return "global_avg_pool";
    case LayerKind::kReLU:
      return "relu";
    case LayerKind::kSigmoid:
      return "sigmoid";
    case LayerKind::kTanh:
      return "tanh";
    case LayerKind::kDropout:
      return "dropout";
    case LayerKind::kBatchNorm2d:
      return "batchnorm2d";
    case LayerKind::kBottleneck:
      return "bottleneck";
    case LayerKind::kFlatten:
      return "flatten";
    case LayerKind::kEmbedding:
      return "embedding";
    case LayerKind::kLstm:
      return "lstm";
  }
  return "unknown";
}

/// The workload as JSON, for tools outside dlscale that must build the very same network
/// (bench/pytorch_eager.py). Field meanings: workloads/workload.h.
std::string workload_json(const Workload& w) {
  std::string layers;
  for (const Layer& l : w.layers) {
    layers += fmt::format(
        "{}\n    {{\"kind\": \"{}\", \"in\": {}, \"out\": {}, \"mid\": {}, \"kernel\": {}, \"stride\": {}, "
        "\"padding\": {}, \"bias\": {}, \"num_layers\": {}, \"all_steps\": {}, \"p\": {}}}",
        layers.empty() ? "" : ",", kind_name(l.kind), l.in, l.out, l.mid, l.kernel, l.stride, l.padding,
        l.bias ? "true" : "false", l.num_layers, l.all_steps ? "true" : "false", l.p);
  }
  std::string shape;
  for (int64_t d : w.input_shape) shape += fmt::format("{}{}", shape.empty() ? "" : ", ", d);
  return fmt::format(
      "{{\n  \"name\": \"{}\",\n  \"input_kind\": \"{}\",\n  \"input_shape\": [{}],\n  \"vocab\": {},\n"
      "  \"num_classes\": {},\n  \"label_per_step\": {},\n  \"loss\": \"{}\",\n  \"params\": {},\n"
      "  \"train_flops_per_sample\": {},\n  \"layers\": [{}\n  ]\n}}\n",
      w.name, w.input_kind == InputKind::kTokens ? "tokens" : "dense", shape, w.vocab, w.num_classes,
      w.label_per_step ? "true" : "false",
      w.loss == LossKind::kSigmoidBinaryCrossEntropy ? "sigmoid_bce" : "softmax_cross_entropy", parameter_count(w),
      flops_per_sample(w).train(), layers);
}

}  // namespace

int list_command(const MpiContext& mpi, const std::string& json_workload) {
  if (mpi.rank() != 0) return 0;
  if (!json_workload.empty()) {
    try {
      fmt::print("{}", workload_json(make_workload(json_workload)));
    } catch (const std::invalid_argument& e) {
      fmt::print(stderr, "dlscale: error: {}\n", e.what());
      return exit_code(ExitCode::kUsage);
    }
    return 0;
  }
  Registry drivers;
  register_drivers(drivers);
  fmt::print("Workloads\n  {:<16} {:>11} {:>16}  {:<21} {}\n", "name", "params", "train GFLOP/smp", "source",
             "overrides");
  for (const CatalogEntry& e : catalog()) {
    const Workload w = make_workload(e.name);
    fmt::print("  {:<16} {:>11} {:>16.3f}  {:<21} {}\n", e.name, parameter_count(w), flops_per_sample(w).train() / 1e9,
               e.source, e.overrides);
  }
  // The devices each driver can use on this machine (scripts/gpu-check.sh picks its GPU drivers
  // from this column), and why not where one is missing.
  fmt::print("\nDrivers\n  {:<10} {:<9} {}\n", "name", "devices", "unavailable here");
  for (const auto& d : drivers.all()) {
    std::string usable, why;
    for (const auto& [device, name] : {std::pair{DeviceType::kCpu, "cpu"}, std::pair{DeviceType::kCuda, "cuda"}}) {
      const Support s = d->device_available(device);
      if (s.ok) {
        usable += fmt::format("{}{}", usable.empty() ? "" : ",", name);
      } else {
        why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", name, s.reason);
      }
    }
    fmt::print("  {:<10} {:<9} {}\n", d->name(), usable.empty() ? "-" : usable, why);
  }
  // Their cases are recorded unsupported (the default study names every CPU driver).
  if (!drivers.missing().empty()) fmt::print("\nDrivers not in this build\n");
  for (const auto& d : drivers.missing()) {
    fmt::print("  {:<10} {}\n", d->name(), d->device_available(d->default_device()).reason);
  }
  fmt::print("\nSuites\n");
  size_t width = 0;  // the longest name sets the column, so descriptions line up
  for (const BuiltinSuite& s : builtin_suites()) width = std::max(width, s.name.size());
  for (const BuiltinSuite& s : builtin_suites()) fmt::print("  {:<{}} {}\n", s.name, width, s.description);
  return 0;
}

}  // namespace dlscale
