// One clock for the ranks of a case: each host's monotonic clock, and each rank's offset to that
// of the case's rank 0, measured by ping-pong as Score-P and MPI_Wtime synchronisation do, so that
// the events of ranks on different hosts can be placed on one timeline (docs/timelines.md).
#pragma once

#include <mpi.h>

namespace dlscale {

/// Seconds on this host's monotonic clock (std::chrono::steady_clock, CLOCK_MONOTONIC on Linux):
/// what every event of a timeline is stamped with.
double monotonic_seconds();

/// One rank's clock against rank 0's, measured at `at_s` on its own clock: rank 0's clock read
/// `at_s + offset_s`, within `bound_s` either way.
struct ClockOffset {
  double at_s = 0, offset_s = 0, bound_s = 0;
};

/// Every rank of `comm` (collective in effect: point-to-point messages only, each rank in turn
/// with rank 0): its clock's offset to rank 0's. Of `rounds` round trips the shortest is kept;
/// the offset assumes the two legs took equally long, so it is off by at most half that round
/// trip, the bound. Rank 0 gets offset 0 and bound 0.
ClockOffset measure_clock_offset(MPI_Comm comm, int rounds = 20);

}  // namespace dlscale
