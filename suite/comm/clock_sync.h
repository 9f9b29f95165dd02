// One clock for the ranks of a case: each host's monotonic clock, and each rank's offset to that
// of the case's rank 0, measured by ping-pong as Score-P and MPI_Wtime synchronisation do, so that
// the events of ranks on different hosts can be placed on one timeline (docs/timelines.md).
#pragma once

#include <mpi.h>

#include <chrono>
#include <string>

namespace dlscale {

/// Seconds on this host's monotonic clock (std::chrono::steady_clock, CLOCK_MONOTONIC on Linux):
/// what every event of a timeline is stamped with.
double monotonic_seconds();
/// `t` in the same seconds as monotonic_seconds().
double monotonic_seconds(std::chrono::steady_clock::time_point t);

/// One rank's clock against rank 0's, measured at `at_s` on its own clock: rank 0's clock read
/// `at_s + offset_s`, within `bound_s` either way.
struct ClockOffset {
  double at_s = 0, offset_s = 0, bound_s = 0;
};

/// How long a rank's clock synchronisation goes on: at least `min_rounds` round trips, then
/// until one gave a bound of at most `good_bound_s`, or `max_rounds` or `max_seconds` are spent.
struct ClockSyncLimits {
  int min_rounds = 20, max_rounds = 2000;
  double good_bound_s = 50e-6, max_seconds = 0.5;
};

/// Every rank of `comm` (collective): its clock's offset to rank 0's. Ranks on one host share its
/// clock, so only each host's first rank measures, and its host-mates take its result (rank 0's
/// host-mates: offset 0, bound 0). Those first ranks ping-pong in pairs, all pairs of a round at
/// once, up a binomial tree of the hosts rooted at rank 0: ceil(log2 hosts) rounds, whatever the
/// number of ranks. Of a pair's round trips the shortest is kept; the offset assumes its two
/// legs took equally long, so it is off by at most half that round trip; a host's offset and
/// bound are the sums along its path to rank 0's host. On an idle node 20 round trips give a
/// bound of microseconds to tens of them; on a node whose cores are all busy most round trips
/// wait for a core, so a pair goes on (within `limits`) until one did not.
ClockOffset measure_clock_offset(MPI_Comm comm, const ClockSyncLimits& limits = {});

/// The tree of measure_clock_offset with every rank of `comm` taken as a host of its own
/// (collective): its hosts' first ranks call it on a communicator of their own.
ClockOffset measure_clock_offset_tree(MPI_Comm comm, const ClockSyncLimits& limits = {});

/// How measure_clock_offset measures with `limits`, in words, for the record.
std::string describe_clock_sync(const ClockSyncLimits& limits = {});

}  // namespace dlscale
