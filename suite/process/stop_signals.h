// SIGTERM and SIGINT as a request to stop between steps: Slurm sends SIGTERM when a job reaches
// its time limit (KillWait seconds before SIGKILL), Ctrl-C sends SIGINT, and Open MPI's mpirun
// sends SIGTERM (and SIGKILL one second later) to the other ranks when one rank dies. dlscale
// finishes the step in progress, drops the unfinished case, leaves the results file with every
// finished case, prints the command that runs the rest, and exits with code 3 on every rank.
// A rank that cannot reach the end of its step (blocked in a collective whose peer is gone)
// is ended by its StopDeadline, with one line saying so, and the same code.
#pragma once

#include <pthread.h>

#include <condition_variable>
#include <mutex>
#include <string>

namespace dlscale {

/// Installs the handlers (once, after MPI_Init so that they replace any MPI installed).
void install_stop_signals();
/// The signal received (SIGTERM or SIGINT), or 0.
int stop_signal();
/// "SIGTERM", "SIGINT", or "signal N".
const char* stop_signal_name(int signal);

/// While it exists, a stop signal that the process has not acted on within `grace_s` seconds
/// ends the process from a thread of its own: one line on stderr naming the rank, the host,
/// what it was doing (set_doing) and how to go on (set_hint), then exit code 3. A crash's line
/// (crash_report.h) says the same of them. The grace is
/// shorter than the second mpirun leaves between SIGTERM and SIGKILL, and far longer than a
/// stop takes where the ranks can still talk (a step of a small case, the closing collectives).
class StopDeadline {
 public:
  StopDeadline(int rank, std::string host, double grace_s = 0.5);
  ~StopDeadline();
  StopDeadline(const StopDeadline&) = delete;
  StopDeadline& operator=(const StopDeadline&) = delete;

  /// "case dlscale run …": what the line names.
  void set_doing(std::string doing);
  /// Where the finished cases are and the command that runs the rest.
  void set_hint(std::string hint);
  /// Held while the results file is replaced: the deadline waits for it, so that a finished
  /// case being committed is not lost to the stop.
  std::unique_lock<std::mutex> hold_off() { return std::unique_lock<std::mutex>(writing_); }

 private:
  void watch();
  static void* run(void* self);

  const int rank_;
  const std::string host_;
  const double grace_s_;
  std::mutex mutex_, writing_;
  std::condition_variable changed_;
  bool done_ = false;
  std::string doing_ = "set-up", hint_;
  pthread_t thread_{};
};

}  // namespace dlscale
