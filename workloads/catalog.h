// The catalog of named networks from the seed papers (docs/workloads.md) and the parser for size
// overrides such as "fcn5:width=256", which give tests small variants of the same structure.
#pragma once

#include <string>
#include <vector>

#include "workloads/workload.h"

namespace dlscale {

/// A catalog entry as `dlscale list` shows it.
struct CatalogEntry {
  std::string name;
  std::string source;
  std::string summary;
  std::string overrides;  ///< accepted override keys with their defaults, e.g. "width=2048"
};

/// Every workload of the catalog, in a stable order.
const std::vector<CatalogEntry>& catalog();

/// Builds a workload from "name" or "name:key=value,key=value". Throws std::invalid_argument
/// naming the problem for an unknown name, an unknown key or a bad value.
Workload make_workload(const std::string& spec);

}  // namespace dlscale
