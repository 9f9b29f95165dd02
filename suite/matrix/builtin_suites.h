// Run matrices compiled into the binary (`dlscale run --suite NAME`), written in the same TOML
// a user would put in a --config file.
#pragma once

#include <string>
#include <vector>

namespace dlscale {

struct BuiltinSuite {
  std::string name;
  std::string description;
  std::string toml;
};

const std::vector<BuiltinSuite>& builtin_suites();

/// The suite of that name; throws UsageError listing the known ones.
const BuiltinSuite& find_suite(const std::string& name);

}  // namespace dlscale
