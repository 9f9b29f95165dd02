#include "suite/comm/clock_sync.h"

#include <unistd.h>

#include <chrono>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "suite/comm/mpi_context.h"
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
      "each host's first rank by ping-pong in a binomial tree of the hosts rooted at the case's rank 0, offsets and "
      "bounds summed along the path, the shortest of at least {} round trips per pair (more, for up to {:g} s, until "
      "one gives a bound of {:g} us); ranks take their host's first rank's offset; before and after the timed steps",
      limits.min_rounds, limits.max_seconds, limits.good_bound_s * 1e6);
}

namespace {

/// Answers `peer`'s pings with the time each arrived, until the peer is done.
void serve_pings(int peer, MPI_Comm comm) {
  for (double ping = 0;;) {
    exchange(false, &ping, peer, comm);
    if (ping == kDone) return;
    double now = monotonic_seconds();
    exchange(true, &now, peer, comm);
  }
}

/// This rank's clock against `peer`'s (which serves the pings), by the shortest of the round trips.
ClockOffset ping(int peer, MPI_Comm comm, const ClockSyncLimits& limits) {
  ClockOffset out;
  double best_rtt = std::numeric_limits<double>::infinity();
  const double give_up = monotonic_seconds() + limits.max_seconds;
  for (int i = 0; i < limits.max_rounds; ++i) {
    double sent = monotonic_seconds();
    double remote = 0;
    exchange(true, &sent, peer, comm);
    exchange(false, &remote, peer, comm);
    const double received = monotonic_seconds();
    // The shortest round trip waited least in queues and for a core: its midpoint is the best
    // estimate of when the peer read its clock.
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
  exchange(true, &done, peer, comm);
  return out;
}

}  // namespace

// In round r, rank j whose lowest set bit is 2^r pings its parent j - 2^r, which serves it.
ClockOffset measure_clock_offset_tree(MPI_Comm leaders, const ClockSyncLimits& limits) {
  int j = 0, hosts = 1;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(leaders, &j));
  DLSCALE_CHECK_MPI(MPI_Comm_size(leaders, &hosts));
  ClockOffset to_parent;
  to_parent.at_s = monotonic_seconds();
  for (int step = 1; step < hosts; step *= 2) {
    if (j % (2 * step) == step) {
      to_parent = ping(j - step, leaders, limits);
    } else if (j % (2 * step) == 0 && j + step < hosts) {
      serve_pings(j + step, leaders);
    }
  }
  // Every leader's offset and bound to its parent, then the sums along this leader's path.
  const double mine[2] = {to_parent.offset_s, to_parent.bound_s};
  std::vector<double> all(2 * static_cast<size_t>(hosts));
  DLSCALE_CHECK_MPI(MPI_Allgather(mine, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, leaders));
  ClockOffset out{to_parent.at_s, 0, 0};
  for (int k = j; k > 0; k &= k - 1) {  // k - lowest set bit: the parent
    out.offset_s += all[2 * static_cast<size_t>(k)];
    out.bound_s += all[2 * static_cast<size_t>(k) + 1];
  }
  return out;
}

ClockOffset measure_clock_offset(MPI_Comm comm, const ClockSyncLimits& limits) {
  int rank = 0;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  // Ranks on one host read one clock: only each host's first rank measures, and the others take
  // its result, exact for them (rank 0's host-mates get offset 0, bound 0).
  MPI_Comm node_comm = MPI_COMM_NULL;
  DLSCALE_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node_comm));
  const Communicator node(node_comm);
  int node_rank = 0;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(node.get(), &node_rank));
  MPI_Comm leaders_comm = MPI_COMM_NULL;
  DLSCALE_CHECK_MPI(MPI_Comm_split(comm, node_rank == 0 ? 0 : MPI_UNDEFINED, rank, &leaders_comm));
  const Communicator leaders(leaders_comm);
  ClockOffset out;
  if (node_rank == 0) out = measure_clock_offset_tree(leaders.get(), limits);
  double shared[3] = {out.at_s, out.offset_s, out.bound_s};
  DLSCALE_CHECK_MPI(MPI_Bcast(shared, 3, MPI_DOUBLE, 0, node.get()));
  return ClockOffset{shared[0], shared[1], shared[2]};
}

}  // namespace dlscale
