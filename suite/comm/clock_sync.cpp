#include "suite/comm/clock_sync.h"

#include <unistd.h>

#include <chrono>
#include <limits>

#include <fmt/format.h>

#include "suite/errors.h"

namespace dlscale {

namespace {

constexpr int kTag = 4711;  // apart from the ring's and the microbenchmark's tags
/// A ping's value that ends a rank's turn: the monotonic clock is never negative.
constexpr double kDone = -1.0;

/// One message, waited for asleep in steps of a few microseconds: a rank that spins in MPI's
/// progress loop uses up its share of a busy node's cores, and the scheduler then lets it run
/// only every few milliseconds, which would be the round trip; one that sleeps is woken at once.
void exchange(bool send, double* value, int peer, MPI_Comm comm) {
  MPI_Request request = MPI_REQUEST_NULL;
  if (send) {
    DLSCALE_CHECK_MPI(MPI_Isend(value, 1, MPI_DOUBLE, peer, kTag, comm, &request));
  } else {
    DLSCALE_CHECK_MPI(MPI_Irecv(value, 1, MPI_DOUBLE, peer, kTag, comm, &request));
  }
  for (int done = 0; !done;) {
    DLSCALE_CHECK_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (!done) usleep(5);
  }
}

}  // namespace

double monotonic_seconds(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

double monotonic_seconds() { return monotonic_seconds(std::chrono::steady_clock::now()); }

std::string describe_clock_sync(const ClockSyncLimits& limits) {
  return fmt::format(
      "ping-pong with the case's rank 0, the shortest of at least {} round trips (more, for up to {:g} s, until one "
      "gives a bound of {:g} us), before and after the timed steps",
      limits.min_rounds, limits.max_seconds, limits.good_bound_s * 1e6);
}

ClockOffset measure_clock_offset(MPI_Comm comm, const ClockSyncLimits& limits) {
  int rank = 0, size = 1;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &size));
  ClockOffset out;
  out.at_s = monotonic_seconds();
  if (rank == 0) {
    // Each rank in turn: answer every ping with the time it arrived, until the rank is done.
    for (int peer = 1; peer < size; ++peer) {
      for (double ping = 0;;) {
        exchange(false, &ping, peer, comm);
        if (ping == kDone) break;
        double now = monotonic_seconds();
        exchange(true, &now, peer, comm);
      }
    }
    return out;
  }
  double best_rtt = std::numeric_limits<double>::infinity();
  const double give_up = monotonic_seconds() + limits.max_seconds;
  for (int i = 0; i < limits.max_rounds; ++i) {
    double sent = monotonic_seconds();
    double remote = 0;
    exchange(true, &sent, 0, comm);
    exchange(false, &remote, 0, comm);
    const double received = monotonic_seconds();
    // The shortest round trip waited least in queues and for a core: its midpoint is the best
    // estimate of when rank 0 read its clock.
    if (received - sent < best_rtt) {
      best_rtt = received - sent;
      out.at_s = 0.5 * (sent + received);
      out.offset_s = remote - out.at_s;
      out.bound_s = 0.5 * best_rtt;
    }
    // On a busy node most round trips wait for a core: go on until one did not, or time is up.
    if (i + 1 >= limits.min_rounds && (out.bound_s <= limits.good_bound_s || received >= give_up)) break;
  }
  double done = kDone;
  exchange(true, &done, 0, comm);
  return out;
}

}  // namespace dlscale
