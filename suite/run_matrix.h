// The run matrix: what a user asks for (CLI flags, a TOML file or a built-in suite) and its
// expansion into cases, the cartesian product of the list-valued fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "drivers/driver.h"

namespace dlscale {

/// One run matrix. List fields expand as a cartesian product; 0 threads means "the size of the
/// rank's CPU set".
struct MatrixSpec {
  std::vector<std::string> workloads;
  std::vector<std::string> drivers{"libtorch"};
  std::vector<std::string> devices;  ///< empty: each driver's own device (cuda for cuda, else cpu)
  std::vector<std::string> precisions{"fp32"};
  std::vector<std::string> scalings{"weak"};
  std::vector<int64_t> batches{64};
  std::vector<int> threads{0};
  std::vector<std::string> data{"synthetic"};  ///< "synthetic" or a dataset spec (suite/datasets.h)
  std::vector<int> ranks;                      ///< ranks per case; empty: every rank of the job
  std::vector<double> bucket_mb{0};            ///< gradient bucket size; 0: one all-reduce after backward
  int warmup = 2;
  int iterations = 10;
  uint64_t seed = 42;
  bool phases = false;
};

/// Fields given explicitly on the command line; they override every matrix of a config file or
/// suite.
struct MatrixOverrides {
  std::optional<std::vector<std::string>> workloads, drivers, devices, precisions, scalings;
  std::optional<std::vector<int64_t>> batches;
  std::optional<std::vector<int>> threads;
  std::optional<std::vector<std::string>> data;
  std::optional<std::vector<int>> ranks;
  std::optional<std::vector<double>> bucket_mb;
  std::optional<int> warmup, iterations;
  std::optional<uint64_t> seed;
  std::optional<bool> phases;
  void apply(MatrixSpec& m) const;
};

/// One benchmark case: everything needed to run it and to rerun it.
struct CaseSpec {
  std::string workload, driver, device, precision = "fp32", scaling;
  std::string data = "synthetic";  ///< or a dataset spec such as "mnist:data/mnist"
  int64_t batch = 0;               ///< per rank (weak) or global (strong), as the user gave it
  int threads = 0;                 ///< 0: the rank's CPU set size
  int warmup = 0, iterations = 0;
  uint64_t seed = 0;
  bool phases = false;
  int ranks = 1;         ///< ranks this case runs on: world ranks 0..ranks-1
  double bucket_mb = 0;  ///< > 0: bucketed all-reduce, overlapped with backward where the driver allows

  int64_t batch_per_rank() const { return scaling == "strong" ? batch / ranks : batch; }
  int64_t global_batch() const { return scaling == "strong" ? batch : batch * ranks; }
  /// A `dlscale run …` command line that reruns exactly this case.
  std::string command() const;
};

/// Splits a comma-separated workload list where a workload may carry several overrides:
/// "fcn5:features=64,width=32,mnist_fnn" -> {"fcn5:features=64,width=32", "mnist_fnn"} (an
/// item with '=' but no ':' continues the previous workload's overrides).
std::vector<std::string> split_workload_list(const std::string& text);

/// Parses a TOML run matrix: top-level keys form one matrix, or the defaults of each
/// [[matrix]] table when there are some. Throws UsageError "SOURCE:LINE: problem".
std::vector<MatrixSpec> parse_matrix_toml(const std::string& text, const std::string& source);

/// Expands matrices into cases for a job of `world_size` ranks, in matrix order, then field order.
std::vector<CaseSpec> expand(const std::vector<MatrixSpec>& matrices, int world_size);

/// Gives every case without a device its driver's default device (cases of unknown drivers are
/// left for validate() to report).
void assign_default_devices(std::vector<CaseSpec>& cases, const Registry& drivers);

/// Checks every case before any benchmark work, including that its device exists on this
/// machine; throws UsageError naming the first problem.
void validate(const std::vector<CaseSpec>& cases, const Registry& drivers, int world_size);

/// The expanded cases as TOML (one [[case]] table each), stored in the results file.
std::string cases_to_toml(const std::vector<CaseSpec>& cases);

}  // namespace dlscale
