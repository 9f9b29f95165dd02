// A rank that crashes (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) says so in one line before it
// dies: its rank and host, the signal (where in memory, which instruction and, for a call
// through a null pointer, where it was called from, each with the file and offset that
// addr2line takes), what it was doing, where the finished cases are and how to run the rest.
// Then the handler that was there runs (Open MPI's prints a backtrace), or the default action,
// so that the exit status still names the signal. Everything the handler prints was formatted
// before the crash: a signal handler may not allocate or take a lock.
#pragma once

#include <string>

namespace dlscale {

/// Installs the handlers (once, after MPI_Init, so that the handlers MPI installed are the ones
/// that run after the line).
void install_crash_report();

/// What the line says: who crashed (rank and host), what it was doing ("case dlscale run …") and
/// how to go on (where the finished cases are, the command that runs the rest). Any thread may
/// call it; a crash in the middle of a call prints the context before it.
void set_crash_context(int rank, const std::string& host, const std::string& doing, const std::string& hint);

/// From now on a crash ends the process at once with `exit_status`, without a line: for the
/// libraries' clean-up after dlscale has reported a failure of its own, whose line and exit
/// status must stay what the user reads (HDF5 crashes in MPI_Finalize when it closes a file whose
/// close failed on a full disk, docs/running.md#exit-codes).
void end_crashes_with(int exit_status);

}  // namespace dlscale
