// The floating-point mode of a CPU driver's threads, one mechanism for every CPU driver so that
// they all compute in the same mode (drivers/driver.h, Denormals).
#pragma once

#include <vector>

#include "drivers/driver.h"

namespace dlscale {

/// Whether this build can run CPU threads in `mode` (flushing needs x86's MXCSR); the reason
/// when it cannot.
Support cpu_supports_denormals(Denormals mode);

/// For the length of one driver call: `mode` on the calling thread and on every thread of its
/// OpenMP team of `threads`, with each thread's previous mode restored on the way out, so that
/// code outside the driver keeps its own. libgomp keeps the same pool threads from one parallel
/// region of a calling thread to the next, and every CPU library here computes on them (oneDNN,
/// LibTorch's intra-op threads, the OpenMP build of OpenBLAS that Debian selects), as long as
/// their regions use at most `threads` threads; a library with its own thread pool (OpenBLAS's
/// pthreads build) keeps its threads' mode, which docs/metrics.md states.
class DenormalScope {
 public:
  DenormalScope(Denormals mode, int threads);
  ~DenormalScope();
  DenormalScope(const DenormalScope&) = delete;
  DenormalScope& operator=(const DenormalScope&) = delete;

 private:
  int threads_;
  std::vector<unsigned> saved_;  ///< each team thread's MXCSR before; empty: nothing to restore
};

}  // namespace dlscale
