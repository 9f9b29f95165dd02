// A results file at a scale no test machine runs: RANKS ranks, RANKS_PER_HOST to a host, one
// --phases case of ITERATIONS timed steps with BUCKETS gradient buckets, written through the
// code `dlscale run` writes with (provenance, ResultsFileReporter), with made-up but consistent
// numbers: each rank's phases sum to its step, its buckets are reduced within the step, its
// host's clock is offset from rank 0's by a few milliseconds. The report tools and
// dlscale-project are then timed on it (bench/many_ranks.py) and tested on a smaller one
// (tests/scale/test_many_ranks_file.py).
//
//   dlscale_synthetic_results OUT RANKS ITERATIONS [RANKS_PER_HOST [BUCKETS]]
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "drivers/driver.h"
#include "io/results_file.h"
#include "suite/case/case_result.h"
#include "suite/case/resolved_case.h"
#include "suite/case/run_mode.h"
#include "suite/comm/mpi_context.h"
#include "suite/process/stop_signals.h"
#include "suite/record/provenance.h"
#include "suite/record/reporters.h"
#include "suite/record/results_access.h"

namespace dlscale {
namespace {

int positive(const char* text, const char* what) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v <= 0 || v > (1 << 24)) {
    fmt::print(stderr, "dlscale_synthetic_results: {} must be a positive integer, got '{}'\n", what, text);
    std::exit(2);
  }
  return static_cast<int>(v);
}

/// The rank table of `ranks` ranks, `per_host` to a host named nodeNNNNN.
std::vector<RankInfo> rank_table_of(int ranks, int per_host) {
  std::vector<RankInfo> table;
  for (int r = 0; r < ranks; ++r) {
    RankInfo info;
    info.rank = r;
    info.host = fmt::format("node{:05}", r / per_host);
    info.local_rank = r % per_host;
    info.cpu_affinity = fmt::format("{}-{}", 8 * info.local_rank, 8 * info.local_rank + 7);
    info.numa_node = info.local_rank / 4;
    info.device = "cpu";
    info.threads = 8;
    info.network = "ib0 (100000 Mbit/s)";
    info.blas = "SkylakeX";
    table.push_back(info);
  }
  return table;
}

/// Steps of about 0.21 s (forward, backward, exposed all-reduce, update), buckets handed over
/// during backward and reduced within the step, a host's clock off by up to 5 ms.
StepSamples synthetic_samples(int ranks, int iterations, int per_host, int buckets) {
  std::mt19937_64 random(42);
  std::uniform_real_distribution<double> jitter(0.95, 1.05);
  StepSamples s;
  s.iterations = iterations;
  s.buckets = buckets;
  s.bucket_bytes.assign(static_cast<size_t>(buckets), 25e6);
  CaseTimeline t;
  const auto n = static_cast<size_t>(ranks) * static_cast<size_t>(iterations);
  s.iter_time_s.resize(n);
  s.phase_time_s.resize(n * kPhaseCount);
  s.exposed_allreduce_s.resize(n);
  s.bucket_start_s.resize(n * static_cast<size_t>(buckets));
  t.step_start_s.resize(n);
  t.bucket_reduction_s.resize(n * static_cast<size_t>(buckets) * 2);
  for (int rank = 0; rank < ranks; ++rank) {
    const double host_offset = (rank / per_host) == 0 ? 0.0 : 5e-3 * jitter(random) - 5e-3;
    double clock = 1000.0 - host_offset;
    for (int i = 0; i < iterations; ++i) {
      const size_t k = static_cast<size_t>(rank) * static_cast<size_t>(iterations) + static_cast<size_t>(i);
      const double forward = 0.06 * jitter(random), backward = 0.12 * jitter(random);
      const double exposed = 0.02 * jitter(random) * jitter(random), update = 0.01 * jitter(random);
      const double phases[kPhaseCount] = {forward, backward, exposed, update};
      double step = 0;
      for (int p = 0; p < kPhaseCount; ++p) {
        s.phase_time_s[k * kPhaseCount + static_cast<size_t>(p)] = phases[p];
        step += phases[p];
      }
      s.iter_time_s[k] = step;
      s.exposed_allreduce_s[k] = exposed;
      t.step_start_s[k] = clock;
      for (int b = 0; b < buckets; ++b) {
        const double ready = forward + backward * (b + 1) / buckets;
        const size_t kb = k * static_cast<size_t>(buckets) + static_cast<size_t>(b);
        s.bucket_start_s[kb] = ready;
        t.bucket_reduction_s[2 * kb] = ready;
        t.bucket_reduction_s[2 * kb + 1] = std::min(ready + 0.03 * jitter(random), forward + backward + exposed);
      }
      clock += step + 1e-3;
    }
    for (int m = 0; m < 2; ++m) {
      t.clock_at_s.push_back(m == 0 ? 999.0 - host_offset : clock + 0.01);
      t.clock_offset_s.push_back(host_offset);
      t.clock_bound_s.push_back((rank / per_host) == 0 ? 0.0 : 20e-6);
    }
  }
  for (int i = 0; i < iterations; ++i) s.loss.push_back(2.3 - 0.001 * i);
  s.timeline = t;
  return s;
}

int write(const std::string& out, int ranks, int iterations, int per_host, int buckets) {
  const std::vector<RankInfo> table = rank_table_of(ranks, per_host);
  std::vector<std::string> hosts;
  for (const RankInfo& info : table) hosts.push_back(info.host);
  Registry drivers;
  register_drivers(drivers);
  CaseSpec spec;
  spec.workload = "resnet50";
  spec.driver = "reference";
  spec.batch = 32;
  spec.warmup = 1;
  spec.iterations = iterations;
  spec.seed = 42;
  spec.phases = true;
  spec.ranks = ranks;
  spec.bucket_mb = 25;
  spec.bucket_mb_defaulted = false;
  const std::vector<ResolvedCase> cases = resolve_cases({spec}, drivers, 8, hosts);

  ResultsFile file = ResultsFile::create(out, true);
  {
    ResultsFile::Update update = file.update();
    write_provenance(update, table, drivers, ranks,
                     fmt::format("dlscale_synthetic_results {} {} {}", out, ranks, iterations), "", false);
    update.commit();
  }
  CaseResult r;
  r.c = &cases.front();
  r.started_utc = "2026-01-01T00:00:00Z";
  r.outcome = {Status::kOk, ""};
  r.overlap = true;
  r.progress_thread = true;
  r.allreduce_mechanism = "mpi_buckets_thread";
  r.allreduce_buckets = buckets;
  r.memory.assign(static_cast<size_t>(ranks), RankMemory{8LL << 30, 0});
  r.steps = synthetic_samples(ranks, iterations, per_host, buckets);
  r.summary = step_summary(r.steps, cases.front());  // as dlscale summarises; `check` recomputes it
  r.allocator = "glibc";
  r.group = "0000";
  r.wall_s = 0.3 * iterations;
  StopDeadline deadline(0, "synthetic");
  ResultsFileReporter reporter(file, deadline);
  reporter.case_finished(r);
  return 0;
}

}  // namespace
}  // namespace dlscale

int main(int argc, char** argv) {
  if (argc < 4 || argc > 6) {
    std::fprintf(stderr, "usage: dlscale_synthetic_results OUT RANKS ITERATIONS [RANKS_PER_HOST [BUCKETS]]\n");
    return 2;
  }
  const int ranks = dlscale::positive(argv[2], "RANKS"), iterations = dlscale::positive(argv[3], "ITERATIONS");
  const int per_host = argc > 4 ? dlscale::positive(argv[4], "RANKS_PER_HOST") : 8;
  const int buckets = argc > 5 ? dlscale::positive(argv[5], "BUCKETS") : 4;
  // The provenance asks the MPI library for its version and settings: one process, no launcher.
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
  const int status = dlscale::write(argv[1], ranks, iterations, per_host, buckets);
  MPI_Finalize();
  return status;
}
