// SIGTERM and SIGINT as a request to stop between steps: Slurm sends SIGTERM when a job reaches
// its time limit (KillWait seconds before SIGKILL), and Ctrl-C sends SIGINT. dlscale finishes the
// step in progress, drops the unfinished case, leaves the results file with every finished case,
// prints the command that runs the rest, and exits with code 3 on every rank.
#pragma once

namespace dlscale {

/// Installs the handlers (once, after MPI_Init so that they replace any MPI installed).
void install_stop_signals();
/// The signal received (SIGTERM or SIGINT), or 0.
int stop_signal();
/// "SIGTERM", "SIGINT", or "signal N".
const char* stop_signal_name(int signal);

}  // namespace dlscale
