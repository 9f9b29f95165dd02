// Step time of the Kokkos driver against the other CPU drivers (oneDNN and LibTorch, where this
// build has them) on Shi et al.'s CPU cases: FCN-5 at batch 64, AlexNet and ResNet-50 at 16,
// LSTM-32 at 128, at each thread count. All models live in one process, start from the same
// parameters and batch, and alternate step by step, so that drift in the machine hits them
// equally. Phases are timed separately (forward, backward, update) to show where a difference
// comes from; the last column is the Kokkos step over the fastest other driver's.
//
//   build/<preset>/bench/bench_kokkos_vs_cpu_drivers [--cases fcn5:64,alexnet:16] [--threads 1,2]
//       [--iterations 5] [--warmup 1] [--drivers onednn,libtorch] [--denormals flush|ieee]
//
// The Kokkos driver's matrix products run in the BLAS behind Kokkos Kernels (Debian: OpenBLAS
// 0.3.21), which falls back to older kernels on CPUs it does not recognise (on the KVM guest of
// docs/kokkos.md its SSE3 "Prescott" ones; dlscale info shows blas_core). OPENBLAS_CORETYPE=
// SkylakeX (or Haswell) selects better ones and must be set before the process starts. LibTorch's
// Linear layers use the same OpenBLAS; its convolutions and every oneDNN primitive do not.
// Numbers and the machine they were taken on: docs/kokkos.md#performance.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "bench/onednn_bench_util.h"
#include "drivers/cpu/blas_core.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

namespace {

namespace bench = dlscale::bench;

void run(const dlscale::Registry& registry, const std::vector<std::string>& drivers, const std::string& workload,
         int64_t batch, int threads, dlscale::Denormals denormals, int warmup, int iterations) {
  const dlscale::Workload w = dlscale::make_workload(workload);
  const std::vector<float> params = dlscale::canonical_parameters(w, 42);
  const dlscale::Batch b = dlscale::synthetic_batch(w, batch, 42, 0);
  std::vector<std::unique_ptr<dlscale::Model>> models;
  for (const std::string& d : drivers) {
    models.push_back(
        registry.find(d)->create(w, {dlscale::DeviceType::kCpu, 0, threads, 42, dlscale::Precision::kFp32, denormals}));
    models.back()->load_parameters(params);
    models.back()->set_batch(b);
  }
  const dlscale::Optimizer opt;
  std::vector<std::vector<bench::StepTime>> times(models.size());
  for (int i = 0; i < warmup + iterations; ++i) {
    for (size_t m = 0; m < models.size(); ++m) {
      const bench::StepTime t = bench::timed_step(*models[m], opt);
      if (i >= warmup) times[m].push_back(t);
    }
  }
  std::vector<bench::StepStats> stats;
  for (const auto& t : times) stats.push_back(bench::step_stats(t));
  double fastest_other = std::numeric_limits<double>::infinity();
  for (size_t m = 1; m < stats.size(); ++m) fastest_other = std::min(fastest_other, stats[m].total);
  fmt::print("  {} batch {} threads {} denormals {}\n", workload, batch, threads, dlscale::denormals_name(denormals));
  for (size_t m = 0; m < stats.size(); ++m) {
    const bench::StepStats& s = stats[m];
    fmt::print("    {:<9} step {:9.2f} ms   forward {:9.2f}   backward {:9.2f}   update {:8.2f}", drivers[m],
               1e3 * s.total, 1e3 * s.forward, 1e3 * s.backward, 1e3 * s.update);
    if (m == 0 && stats.size() > 1) fmt::print("   kokkos / fastest other = {:.2f}", s.total / fastest_other);
    fmt::print("\n");
  }
  std::fflush(stdout);
}

/// Parses the command line and runs the benchmark; main() turns an exception into exit code 1.
int run_main(int argc, char** argv) {
  std::string cases = "fcn5:64,alexnet:16,resnet50:16,lstm32:128", threads = "1", others = "onednn,libtorch",
              denormals = "flush";
  int iterations = 5, warmup = 1;
  CLI::App app{"Kokkos driver against the other CPU drivers, alternating in one process"};
  app.add_option("--cases", cases, "workload:batch pairs, comma-separated (a workload's own overrides use ';')");
  app.add_option("--threads", threads, "comma-separated thread counts");
  app.add_option("--drivers", others, "the drivers to compare with, where this build has them");
  app.add_option("--denormals", denormals, "flush (the CPU default of dlscale run) or ieee, for every driver");
  app.add_option("--iterations", iterations);
  app.add_option("--warmup", warmup);
  CLI11_PARSE(app, argc, argv);

  dlscale::Registry registry;
  dlscale::register_drivers(registry);
  if (registry.find("kokkos") == nullptr) {
    fmt::print(stderr, "bench_kokkos_vs_cpu_drivers: this build has no kokkos driver\n");
    return 2;
  }
  std::vector<std::string> drivers = {"kokkos"};
  for (const std::string& d : bench::split(others)) {
    if (registry.find(d) != nullptr) {
      drivers.push_back(d);
    } else {
      fmt::print("(this build has no {} driver: left out)\n", d);
    }
  }
  fmt::print("{} timed alternating steps after {} warm-up per case; medians\n", iterations, warmup);
  for (const std::string& t : bench::split(threads)) {
    for (const std::string& c : bench::split(cases)) {
      const bench::BenchCase bc = bench::parse_case(c);
      run(registry, drivers, bc.workload, bc.batch, std::stoi(t), dlscale::parse_denormals(denormals), warmup,
          iterations);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  dlscale::select_blas_core(argv);  // the BLAS kernels dlscale itself would run on
  try {
    return run_main(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_kokkos_vs_cpu_drivers: {}\n", e.what());
    return 1;
  }
}
