// Does overlapping the gradient all-reduce with backward hide it? For each driver and case, two
// models from the same parameters and data train side by side in one job, alternating step by
// step: one reduces its gradients with one blocking all-reduce after backward, the other in
// buckets started as backward finishes them (--bucket-mb), progressed by the communication thread
// (suite/comm/gradient_allreduce.h). Per step, the slowest rank's step time and exposed all-reduce
// (the end of backward to the end of the gradient average, docs/metrics.md) are taken; the table
// gives their medians. Goals: the exposed all-reduce with buckets at most 30% of the blocking
// one, and the overlapped step shorter than the blocking step.
//
//   mpirun -np 2 build/<preset>/bench/bench_overlap_vs_blocking [--drivers libtorch,onednn]
//       [--device cpu|cuda] [--cases "fcn5:features=8192;width=2048:32,resnet50:8"] [--bucket-mb 25]
//       [--threads 1] [--iterations 8] [--warmup 2]
//
// On GPUs (--device cuda, --drivers cuda,libtorch) the buckets are NCCL all-reduces on a side
// stream, and the blocking model reduces one bucket larger than every gradient, after backward,
// through the same path; so one GPU (one rank) shows what the stream overlap costs and hides.
// The all-reduce phase of each step (--phases' third) is its exposed all-reduce.
//
// The bucketed model's buckets are merged after the last warm-up step, as a case's are.
//
// Measured on one host (AMD EPYC, Zen 4, 2 vCPUs), 2 ranks x 1 thread, 25 MB buckets, 8 steps
// after 2 warm-up; overlapped / blocking step (quartiles of the per-step ratio) and exposed /
// blocking all-reduce: fcn5 (features 8192, width 2048) b32 libtorch 1.04 (1.02-1.06) and 0.63,
// onednn 1.02 (1.01-1.02) and 0.59, kokkos 1.05 (1.04-1.06) and 0.67; resnet50 b8 libtorch 0.99
// and 0.38, onednn 1.00 and 0.33, kokkos 1.00 and 0.39; lstm32 b64 0.99-1.02. On a Zen 3 EPYC
// of 2 vCPUs fcn5 gave 1.01-1.07 across runs. On one host the ranks' all-reduce is memory
// copies on the cores backward runs on, so when every core computes, what the buckets hide from
// the exposed all-reduce comes back as a slower backward. FCN-5's first layer, two fifths of its
// gradients, is finished last, so at least that stays exposed on any machine.
//
// Across hosts of the cluster test bed, bench/shaped_link.py --overlap runs this bench between
// two hosts on a shaped link, and bench/ddp_across_hosts.py sets dlscale's steps against PyTorch
// DDP's (docs/metrics.md#bucketed-overlapped-all-reduce---bucket-mb).
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "bench/onednn_bench_util.h"
#include "drivers/cpu/blas_core.h"
#include "suite/case/device_binding.h"
#include "suite/case/training_step.h"
#include "suite/comm/gradient_allreduce.h"
#include "suite/comm/mpi_context.h"
#include "suite/meters/statistics.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

namespace {

namespace bench = dlscale::bench;

struct Medians {
  double step = 0, exposed = 0;
};

/// The slowest rank's value of this step.
double slowest(double mine) {
  double max = 0;
  MPI_Allreduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return max;
}

/// One of the two models of a case, with what reduces and times its steps.
struct Contender {
  std::unique_ptr<dlscale::Model> model;
  std::unique_ptr<dlscale::GradientReducer> reducer;    ///< a GPU driver's own (NCCL), made first, destroyed first
  std::unique_ptr<dlscale::StepTimer> timer;            ///< the model's own (CUDA events), or nullptr
  std::unique_ptr<dlscale::BucketedAllreduce> buckets;  ///< MPI buckets, for CPU models
  bool reports = false;                                 ///< buckets start during backward
};

void run(const dlscale::Registry& registry, const std::string& driver_name, dlscale::DeviceType device,
         const std::string& workload, int64_t batch, double bucket_mb, int threads, int warmup, int iterations,
         const dlscale::MpiContext& mpi) {
  const dlscale::Driver& driver = *registry.find(driver_name);
  const dlscale::Workload w = dlscale::make_workload(workload);
  const bool gpu = device == dlscale::DeviceType::kCuda;
  const int index = gpu ? dlscale::gpu_index_for(mpi.local_rank(), driver.device_count(device, nullptr)) : 0;
  const dlscale::DriverContext ctx{device,
                                   index,
                                   threads,
                                   42,
                                   dlscale::Precision::kFp32,
                                   gpu ? dlscale::Denormals::kIeee : dlscale::Denormals::kFlush};
  const dlscale::MpiRankGroup ranks(MPI_COMM_WORLD);
  // The blocking contender's bucket on a GPU is larger than every gradient: one all-reduce after
  // backward through the same NCCL path, which also reduces on one GPU (docs/cuda.md).
  const auto make = [&](double mb) {
    Contender c;
    c.reducer = driver.make_reducer(device, index, ranks, dlscale::Deadline::max());
    c.model = driver.create(w, ctx);
    c.model->load_parameters(dlscale::canonical_parameters(w, 42));
    c.model->set_batch(dlscale::synthetic_batch(w, batch, 42, mpi.rank()));
    c.timer = c.model->make_step_timer();
    if (c.reducer) {
      c.reports = c.reducer->bind(*c.model, gpu && mb == 0 ? 1e12 : mb);
    } else if (mb > 0) {
      c.buckets = std::make_unique<dlscale::BucketedAllreduce>(c.model->grad_buffer(), MPI_COMM_WORLD, mb,
                                                               dlscale::layer_parameter_starts(w));
      c.reports = c.buckets->follow(*c.model);
    }
    return c;
  };
  Contender contenders[2] = {make(0), make(bucket_mb)};
  const dlscale::Optimizer opt;
  std::vector<double> step[2], exposed[2];
  for (int i = 0; i < warmup + iterations; ++i) {
    for (int m = 0; m < 2; ++m) {
      Contender& c = contenders[m];
      MPI_Barrier(MPI_COMM_WORLD);
      // Phases timed: the all-reduce phase is the exposed all-reduce, on one rank too.
      const dlscale::StepTimes t =
          dlscale::training_step(*c.model, MPI_COMM_WORLD, opt, true, c.buckets.get(), c.timer.get(), c.reducer.get());
      const double s = slowest(t.total), e = slowest(t.phase[2]);
      // As a case does: the timed steps reduce the buckets as the last warm-up step merged them.
      if (i + 1 == warmup && c.buckets) c.buckets->merge_waiting_buckets();
      if (i < warmup) continue;
      step[m].push_back(s);
      exposed[m].push_back(e);
    }
  }
  if (mpi.rank() != 0) return;
  const Medians b{dlscale::median(step[0]), dlscale::median(exposed[0])};
  const Medians o{dlscale::median(step[1]), dlscale::median(exposed[1])};
  const Contender& over = contenders[1];
  const std::string mechanism = over.reducer   ? over.reducer->mechanism()
                                : over.buckets ? over.buckets->mechanism()
                                               : "mpi_allreduce";
  // The steps alternate, so each overlapped step has its blocking neighbour: the spread of their
  // ratio (quartiles) tells a real difference from the machine's noise.
  std::vector<double> ratio;
  for (size_t i = 0; i < step[0].size(); ++i) ratio.push_back(step[1][i] / step[0][i]);
  fmt::print("{:<9} {:<32} {:>5} {:>10.1f} {:>10.1f} {:>10.1f} {:>10.1f} {:>8.2f} {:>8.2f} {:>5.2f}-{:<5.2f} {}, {}\n",
             driver_name, workload, batch, 1e3 * b.step, 1e3 * b.exposed, 1e3 * o.step, 1e3 * o.exposed,
             o.exposed / b.exposed, o.step / b.step, dlscale::percentile(ratio, 25), dlscale::percentile(ratio, 75),
             over.reports ? "during backward" : "after backward", mechanism);
  std::fflush(stdout);
}

int run_main(int argc, char** argv) {
  dlscale::MpiSession session(&argc, &argv);
  dlscale::MpiContext mpi(MPI_COMM_WORLD);
  std::string drivers = "libtorch,onednn", cases = "fcn5:features=8192;width=2048:32,resnet50:8", device = "cpu";
  double bucket_mb = 25;
  int threads = 1, iterations = 8, warmup = 2;
  CLI::App app{"Overlapped against blocking gradient all-reduce, alternating in one job"};
  app.add_option("--drivers", drivers, "drivers, comma-separated");
  app.add_option("--device", device, "cpu, or cuda (one GPU per rank)")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--cases", cases, "workload:batch pairs, comma-separated (a workload's own overrides use ';')");
  app.add_option("--bucket-mb", bucket_mb, "bucket size of the overlapped model");
  app.add_option("--threads", threads, "compute threads per rank");
  app.add_option("--iterations", iterations);
  app.add_option("--warmup", warmup);
  CLI11_PARSE(app, argc, argv);
  dlscale::Registry registry;
  dlscale::register_drivers(registry);
  if (mpi.rank() == 0) {
    fmt::print("{} ranks on {} x {} threads, buckets of {} MB; medians of {} steps (slowest rank) after {} warm-up\n",
               mpi.size(), device, threads, bucket_mb, iterations, warmup);
    fmt::print("{:<9} {:<32} {:>5} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>11} {}\n", "driver", "workload", "batch",
               "block ms", "exposed", "overlap ms", "exposed", "exp/blk", "step o/b", "o/b p25-p75", "mechanism");
  }
  const dlscale::DeviceType type = device == "cuda" ? dlscale::DeviceType::kCuda : dlscale::DeviceType::kCpu;
  for (const std::string& d : bench::split(drivers)) {
    const dlscale::Driver* driver = registry.find(d);
    const dlscale::Support usable = driver ? driver->device_available(type) : dlscale::Support::no("not in this build");
    if (!usable.ok) {
      if (mpi.rank() == 0) fmt::print("({} on {}: {}; left out)\n", d, device, usable.reason);
      continue;
    }
    for (const std::string& c : bench::split(cases)) {
      const bench::BenchCase bc = bench::parse_case(c);
      run(registry, d, type, bc.workload, bc.batch, bucket_mb, threads, warmup, iterations, mpi);
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
    fmt::print(stderr, "bench_overlap_vs_blocking: {}\n", e.what());
    return 1;
  }
}
