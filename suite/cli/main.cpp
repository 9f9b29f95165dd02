// dlscale's entry point: MPI start-up, the command line (suite/cli/command_line.h), dispatch to a
// subcommand.
#include <cstdio>

#include <fmt/format.h>

#include "drivers/cpu/blas_core.h"
#include "suite/cli/command_line.h"
#include "suite/cli/commands.h"
#include "suite/cli/lifecycle.h"
#include "suite/exit_code.h"
#include "suite/process/crash_report.h"
#include "suite/process/stop_signals.h"

namespace {

/// What the command line asks for, on every rank: a refusal in one line (exit 2), --help's or
/// --version's text, or the subcommand it names.
int dispatch(const dlscale::MpiContext& mpi, int argc, char** argv) {
  const dlscale::ParsedCommandLine parsed = dlscale::parse_command_line(argc, argv);
  if (dlscale::report_usage_error(mpi.world(), parsed.error)) return dlscale::exit_code(dlscale::ExitCode::kUsage);
  if (!parsed.command) {
    if (mpi.rank() == 0) std::fputs(parsed.print.c_str(), stdout);
    return 0;
  }
  const dlscale::CommandLine& line = *parsed.command;
  switch (line.subcommand) {
    case dlscale::Subcommand::kList:
      return dlscale::list_command(mpi, line.list_json);
    case dlscale::Subcommand::kInfo:
      return dlscale::info_command(mpi);
    case dlscale::Subcommand::kAllreduce:
      return dlscale::allreduce_command(mpi, line.allreduce);
    case dlscale::Subcommand::kPeak:
      return dlscale::peak_command(mpi, line.peak);
    case dlscale::Subcommand::kRun:
      break;
  }
  return dlscale::run_command(mpi, line.run);
}

}  // namespace

int main(int argc, char** argv) {
  // Before MPI and before any thread: it may start the process again with other BLAS kernels.
  dlscale::select_blas_core(argv);
  dlscale::MpiSession session(&argc, &argv);
  dlscale::install_stop_signals();
  dlscale::install_crash_report();
  try {
    dlscale::MpiContext mpi(MPI_COMM_WORLD);
    dlscale::set_crash_context(mpi.rank(), mpi.host(), "set-up", "");
    const int status = dispatch(mpi, argc, argv);
    // The results file could not be written (a full disk) and every rank has said so: HDF5 may
    // crash closing that file in MPI_Finalize, which must not replace the line and the status.
    if (status == dlscale::exit_code(dlscale::ExitCode::kWriteFailed)) dlscale::end_crashes_with(status);
    return status;
  } catch (const std::exception& e) {
    // Unexpected failures outside a case: say what happened, then take the whole job down so
    // that no rank waits forever in a collective.
    fmt::print(stderr, "dlscale: fatal: {}\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, dlscale::exit_code(dlscale::ExitCode::kFatal));
    return dlscale::exit_code(dlscale::ExitCode::kFatal);
  }
}
