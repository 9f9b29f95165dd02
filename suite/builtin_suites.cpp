#include "suite/builtin_suites.h"

#include "suite/errors.h"

namespace dlscale {

const std::vector<BuiltinSuite>& builtin_suites() {
  static const std::vector<BuiltinSuite> kSuites = {
      {"quick", "a smoke run of the fully connected workloads, well under a minute on 2 cores",
       R"(# Small batches so that the sweep stays short on a laptop or CI machine.
driver = "libtorch"
device = "cpu"
warmup = 2
iterations = 10

[[matrix]]
workload = ["fcn5", "fcn8"]
batch = 16

[[matrix]]
workload = "mnist_fnn"
batch = 80
)"},
  };
  return kSuites;
}

const BuiltinSuite& find_suite(const std::string& name) {
  std::string known;
  for (const BuiltinSuite& s : builtin_suites()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw UsageError("unknown suite '" + name + "' (known: " + known + ")");
}

}  // namespace dlscale
