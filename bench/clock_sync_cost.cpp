// What the timeline's clock synchronisation costs a case at P ranks (docs/timelines.md), on the
// ranks of this job: the median wall time of measure_clock_offset as dlscale calls it (ranks of
// one host take their first rank's offset), and of the tree alone with every rank taken as a
// host of its own (what P single-rank hosts would cost: ceil(log2 P) rounds of pairs).
//
//   mpirun --oversubscribe -np P build/current/bench/bench_clock_sync_cost [--calls 5]
//
// No figure here is asserted by a test: docs/timelines.md quotes them with this command.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "suite/comm/clock_sync.h"

namespace {

/// The median over `calls` of the slowest rank's wall time of `measure` (collective).
template <class F>
double median_seconds(int calls, const F& measure) {
  std::vector<double> times;
  for (int c = 0; c < calls; ++c) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    measure();
    double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    times.push_back(slowest);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The clock synchronisation's cost at this job's ranks"};
  int calls = 5;
  app.add_option("--calls", calls, "calls per measurement (their median)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const double per_host = median_seconds(calls, [] { dlscale::measure_clock_offset(MPI_COMM_WORLD); });
  const double tree = median_seconds(calls, [] { dlscale::measure_clock_offset_tree(MPI_COMM_WORLD); });
  if (rank == 0) {
    fmt::print("ranks {}: measure_clock_offset {:.3f} s, every rank a host (tree) {:.3f} s, median of {} calls\n", size,
               per_host, tree, calls);
  }
  MPI_Finalize();
  return 0;
}
