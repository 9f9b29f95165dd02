// The named networks of WORKLOADS.md. Each builder takes its size overrides from a key/value
// map so that tests can run small variants with the same structure.
#include "workloads/catalog.h"

#include <functional>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace dlscale {

namespace {

using Overrides = std::map<std::string, int64_t>;

/// Reads an override with a default, erasing it so that leftovers can be reported as unknown.
int64_t take(Overrides& o, const std::string& key, int64_t fallback) {
  auto it = o.find(key);
  if (it == o.end()) return fallback;
  const int64_t v = it->second;
  o.erase(it);
  return v;
}

/// A fully connected stack: input -> hidden widths (with `act` after each) -> classes.
Workload fcn(std::string source, int64_t input, const std::vector<int64_t>& hidden, int64_t classes, LayerKind act,
             InitRule init) {
  Workload w;
  w.source = std::move(source);
  w.input_shape = {input};
  w.num_classes = classes;
  w.init = init;
  int64_t in = input;
  for (int64_t h : hidden) {
    w.layers.push_back({LayerKind::kLinear, in, h});
    w.layers.push_back({act});
    in = h;
  }
  w.layers.push_back({LayerKind::kLinear, in, classes});
  return w;
}

struct Builder {
  CatalogEntry entry;
  std::function<Workload(Overrides&)> build;
};

const std::vector<Builder>& builders() {
  static const std::vector<Builder> kBuilders = {
      {{"fcn5", "Shi et al. 2016", "26752-2048x3-26752 sigmoid MLP", "features=26752,width=2048"},
       [](Overrides& o) {
         const int64_t features = take(o, "features", 26752), width = take(o, "width", 2048);
         return fcn("Shi et al. 2016", features, {width, width, width}, features, LayerKind::kSigmoid,
                    InitRule::kUniformHalf);
       }},
      {{"fcn8", "Shi et al. 2016", "26752-2048x6-26752 sigmoid MLP", "features=26752,width=2048"},
       [](Overrides& o) {
         const int64_t features = take(o, "features", 26752), width = take(o, "width", 2048);
         return fcn("Shi et al. 2016", features, std::vector<int64_t>(6, width), features, LayerKind::kSigmoid,
                    InitRule::kUniformHalf);
       }},
      {{"mnist_fnn", "Kabakus 2020", "784-512-512-10 ReLU MLP", "width=512"},
       [](Overrides& o) {
         const int64_t width = take(o, "width", 512);
         Workload w = fcn("Kabakus 2020", 784, {width, width}, 10, LayerKind::kReLU, InitRule::kFanInUniform);
         w.input_shape = {1, 28, 28};  // MNIST images, flattened by the first Linear
         return w;
       }},
  };
  return kBuilders;
}

Overrides parse_overrides(const std::string& name, const std::string& text) {
  Overrides o;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw std::invalid_argument(fmt::format("workload '{}': override '{}' is not key=value", name, item));
    }
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != value.size() || value.empty() || v <= 0) {
      throw std::invalid_argument(
          fmt::format("workload '{}': override {} needs a positive integer, got '{}'", name, key, value));
    }
    o[key] = v;
    pos = end + 1;
  }
  return o;
}

}  // namespace

const std::vector<CatalogEntry>& catalog() {
  static const std::vector<CatalogEntry> kEntries = [] {
    std::vector<CatalogEntry> e;
    for (const Builder& b : builders()) e.push_back(b.entry);
    return e;
  }();
  return kEntries;
}

Workload make_workload(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  for (const Builder& b : builders()) {
    if (b.entry.name != name) continue;
    Overrides o = colon == std::string::npos ? Overrides{} : parse_overrides(name, spec.substr(colon + 1));
    Workload w = b.build(o);
    if (!o.empty()) {
      throw std::invalid_argument(
          fmt::format("workload '{}' has no override '{}' (accepted: {})", name, o.begin()->first, b.entry.overrides));
    }
    w.name = spec;
    return w;
  }
  std::string known;
  for (const Builder& b : builders()) known += (known.empty() ? "" : ", ") + b.entry.name;
  throw std::invalid_argument(fmt::format("unknown workload '{}' (known: {})", name, known));
}

}  // namespace dlscale
