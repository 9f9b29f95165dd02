#include "suite/comm/clock_sync.h"

#include <chrono>
#include <limits>

#include "suite/errors.h"

namespace dlscale {

double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

ClockOffset measure_clock_offset(MPI_Comm comm, int rounds) {
  constexpr int kTag = 4711;  // apart from the ring's and the microbenchmark's tags
  int rank = 0, size = 1;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &size));
  ClockOffset out;
  out.at_s = monotonic_seconds();
  if (rank == 0) {
    // Each rank in turn: answer every ping with the time it arrived.
    for (int peer = 1; peer < size; ++peer) {
      for (int i = 0; i < rounds; ++i) {
        double ping = 0;
        DLSCALE_CHECK_MPI(MPI_Recv(&ping, 1, MPI_DOUBLE, peer, kTag, comm, MPI_STATUS_IGNORE));
        const double now = monotonic_seconds();
        DLSCALE_CHECK_MPI(MPI_Send(&now, 1, MPI_DOUBLE, peer, kTag, comm));
      }
    }
    return out;
  }
  double best_rtt = std::numeric_limits<double>::infinity();
  for (int i = 0; i < rounds; ++i) {
    const double sent = monotonic_seconds();
    double remote = 0;
    DLSCALE_CHECK_MPI(MPI_Send(&sent, 1, MPI_DOUBLE, 0, kTag, comm));
    DLSCALE_CHECK_MPI(MPI_Recv(&remote, 1, MPI_DOUBLE, 0, kTag, comm, MPI_STATUS_IGNORE));
    const double received = monotonic_seconds();
    // The shortest round trip waited least in queues: its midpoint is the best estimate of when
    // rank 0 read its clock.
    if (received - sent < best_rtt) {
      best_rtt = received - sent;
      out.at_s = 0.5 * (sent + received);
      out.offset_s = remote - out.at_s;
      out.bound_s = 0.5 * best_rtt;
    }
  }
  return out;
}

}  // namespace dlscale
