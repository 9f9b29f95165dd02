// Runs a computation in a child process and brings back its numbers and its peak memory.
// Every simulation gets a fresh process: SimGrid's state is process-wide (one Engine at a
// time, its configuration, its logging) and it ends the whole process on some errors
// (xbt_die), which must not take the caller (dlscale, under MPI) with it; and the child's peak
// resident memory is then the simulation's own, which is what the bench reports.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace dlscale::project {

struct IsolatedResult {
  std::vector<double> values;
  int64_t peak_rss_bytes = 0;  ///< the child's peak resident set (getrusage's ru_maxrss)
};

/// Forks; the child runs `work` and sends back what it returns, or the message of what it
/// throws. Throws std::runtime_error with that message, or with how the child died (a signal,
/// SimGrid's own abort after printing its error), and on any failed system call.
IsolatedResult run_isolated(const std::function<std::vector<double>()>& work);

}  // namespace dlscale::project
