// The three subcommands of `dlscale`. Each runs on every rank and returns the process exit
// code, which is the same on every rank: 0 success, 1 a case failed, 2 bad input.
#pragma once

#include <optional>
#include <string>

#include "suite/mpi_context.h"
#include "suite/run_matrix.h"

namespace dlscale {

struct RunArgs {
  MatrixOverrides overrides;
  std::optional<std::string> config, suite, out;
  bool overwrite = false, resume = false;
  std::string command_line;  ///< argv as typed, for provenance
};

int run_command(const MpiContext& mpi, const RunArgs& args);
int list_command(const MpiContext& mpi);
int info_command(const MpiContext& mpi);

/// Prints `message` as one "dlscale: error: …" line from the first rank that has one and returns
/// true on every rank when any rank has one.
bool report_usage_error(MPI_Comm comm, const std::string& message);

}  // namespace dlscale
