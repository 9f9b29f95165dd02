// dlscale's all-reduce microbenchmark against a bare MPI_Allreduce loop on the same sizes, in the
// same job, alternating size by size: does the harness (in-place chunked reduction, barriers,
// timing, checking) cost anything measurable? Goal: busbw ratio >= 0.97 from 1 MiB up.
//
//   mpirun -np 2 build/current/bench/bench_allreduce_vs_bare [--max-bytes 268435456] [--iterations 20]
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>

#include "suite/comm/mpi_context.h"
#include "suite/meters/allreduce_microbenchmark.h"
#include "suite/meters/statistics.h"

namespace {

/// The bare loop: what a user would write to time MPI_Allreduce, and nothing else.
double bare_allreduce_median_s(MPI_Comm comm, int64_t bytes, int warmup, int iterations) {
  std::vector<float> buffer(static_cast<size_t>(bytes / 4), 1.0f);
  std::vector<double> slowest;
  for (int it = 0; it < warmup + iterations; ++it) {
    MPI_Barrier(comm);
    const auto t0 = std::chrono::steady_clock::now();
    MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(buffer.size()), MPI_FLOAT, MPI_SUM, comm);
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), max_t = 0;
    MPI_Allreduce(&t, &max_t, 1, MPI_DOUBLE, MPI_MAX, comm);
    if (it >= warmup) slowest.push_back(max_t);
  }
  return dlscale::median(slowest);
}

}  // namespace

int main(int argc, char** argv) {
  dlscale::MpiSession session(&argc, &argv);
  dlscale::MpiContext mpi(MPI_COMM_WORLD);
  int64_t min_bytes = 1024, max_bytes = int64_t{256} << 20;
  int iterations = 20, warmup = 5;
  CLI::App app{"dlscale all-reduce microbenchmark vs a bare MPI_Allreduce loop"};
  app.add_option("--min-bytes", min_bytes);
  app.add_option("--max-bytes", max_bytes);
  app.add_option("--iterations", iterations);
  app.add_option("--warmup", warmup);
  CLI11_PARSE(app, argc, argv);

  const int p = mpi.size();
  const double bus = 2.0 * (p - 1) / p;
  if (mpi.rank() == 0) {
    fmt::print("{} ranks, {} warm-up + {} timed iterations per size, busbw in GB/s (1e9 B/s)\n", p, warmup, iterations);
    fmt::print("{:>12} {:>14} {:>14} {:>8}\n", "bytes", "dlscale busbw", "bare busbw", "ratio");
  }
  for (int64_t bytes : dlscale::allreduce_sizes(min_bytes, max_bytes)) {
    dlscale::AllreduceOptions options;
    options.sizes_bytes = {bytes};
    options.warmup = warmup;
    options.iterations = iterations;
    const dlscale::AllreduceResult r = dlscale::run_allreduce_benchmark(MPI_COMM_WORLD, options);
    const double bare = bare_allreduce_median_s(MPI_COMM_WORLD, bytes, warmup, iterations);
    if (mpi.rank() == 0) {
      const double bare_busbw = static_cast<double>(bytes) / bare / 1e9 * bus;
      fmt::print("{:>12} {:>14.3f} {:>14.3f} {:>8.3f}{}\n", bytes, r.busbw_gbps[0], bare_busbw,
                 r.busbw_gbps[0] / bare_busbw, r.errors[0] == 0 ? "" : "  WRONG RESULTS");
    }
  }
  return 0;
}
