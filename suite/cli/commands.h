// The five subcommands of `dlscale`. Each runs on every rank and returns the process exit
// code, which is the same on every rank (suite/exit_code.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "suite/case/progress.h"
#include "suite/comm/mpi_context.h"
#include "suite/matrix/run_matrix.h"
#include "suite/process/allocator.h"
#include "suite/record/reporters.h"

namespace dlscale {

struct RunArgs {
  MatrixOverrides overrides;
  std::optional<std::string> config, suite, out;
  bool overwrite = false, resume = false;
  OutputFormat format = OutputFormat::kText;    ///< how finished cases are printed
  bool dry_run = false;                         ///< list the cases and their estimate, run nothing
  double assume_gflops = 0;                     ///< dry run: this rate per rank instead of a probe
  ProgressMode progress = ProgressMode::kNone;  ///< the progress line (main() picks the default)
  std::string command_line;                     ///< argv as typed, for provenance
  std::string peak = "measure";                 ///< measure, skip, or a file holding /peak
  double peak_seconds = 0.2;                    ///< per measured peak
  MallocPolicy malloc = MallocPolicy::kKeep;    ///< what glibc's malloc does with freed memory
  std::optional<std::string> mllog_dir;         ///< accuracy cases' MLPerf logs go here
};

struct PeakArgs {
  std::vector<std::string> drivers, devices, precisions, threads;  ///< empty: the defaults
  double seconds = 0.5;
  std::optional<std::string> out;
  bool overwrite = false;
  std::string command_line;
};

struct AllreduceArgs {
  std::string backend = "mpi";
  int64_t min_bytes = 4, max_bytes = int64_t{64} << 20;
  bool min_max_given = false;  ///< --min-bytes/--max-bytes given (else --sizes alone picks the sizes)
  std::vector<int64_t> sizes;  ///< extra sizes in bytes
  int iterations = 20, warmup = 5;
  std::optional<std::string> out;
  bool overwrite = false, resume = false;
  std::string command_line;
};

int run_command(const MpiContext& mpi, const RunArgs& args);
/// The cases `args` asks for on `world_size` ranks, defaults assigned and checked as `run` checks
/// them before anything runs (throws UsageError); `suite_name`: the built-in suite they come
/// from, else empty.
std::vector<CaseSpec> requested_cases(const RunArgs& args, const Registry& drivers, int world_size,
                                      std::string& suite_name);
int allreduce_command(const MpiContext& mpi, const AllreduceArgs& args);
int peak_command(const MpiContext& mpi, const PeakArgs& args);
/// The catalog, drivers and suites; with `json_workload`, that workload's full definition as JSON.
int list_command(const MpiContext& mpi, const std::string& json_workload);
int info_command(const MpiContext& mpi);

}  // namespace dlscale
