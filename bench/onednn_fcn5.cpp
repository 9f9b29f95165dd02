// How close does the oneDNN driver get to oneDNN's own GEMM on FCN-5? The driver's achieved
// GFLOP/s (training FLOPs of workloads/counts.cpp over the median step time) is compared with
// oneDNN's matmul primitive on exactly the GEMMs of one training step — per Linear layer the
// forward [B,in]x[in,out], backward-data [B,out]x[out,in] (not for the first layer, whose input
// needs no gradient) and backward-weights [out,B]x[B,in], with the operand layouts the driver
// has (weights [out,in] row-major) — measured in the same process, a driver step and one pass
// over the GEMMs alternating so that drift in the shared machine hits both. Goal: ratio >= 0.9.
//
//   build/<preset>/bench/bench_onednn_fcn5 [-w fcn5] [--batch 64] [--threads 1,2] [--iterations 10]
//       [--denormals flush|ieee]
//
// Run it on an otherwise idle machine, without a launcher binding it to one core.
//
// Expected (2-core avx512_core KVM guest, oneDNN 2.6.3, 10 iterations): the driver's forward
// plus backward reaches 0.96 (1 thread) and 0.98 (2 threads) of the matmul rate (93 and 170
// GFLOP/s); the whole step 0.83, because the SGD update streams 12 bytes per parameter (1.4 GB
// for FCN-5) at the memory's pace, 71 ms of 498 on one thread and 39 of 271 on two, work no
// GEMM baseline contains. With --denormals ieee the backward pass grows by half (denormal
// sigmoid outputs and gradients) and the whole step falls to 0.66-0.68.
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <CLI/CLI.hpp>
#include <unordered_map>

#include <fmt/format.h>

#include "bench/onednn_bench_util.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"
#include "workloads/random.h"

namespace {

using dlscale::bench::Clock;
using dnnl::memory;

/// One C = A x B of the training step as a oneDNN matmul, with its own operands.
struct Gemm {
  std::string name;
  int64_t m, n, k;
  dnnl::matmul primitive;
  std::unordered_map<int, memory> args;
  std::vector<double> times;

  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};

memory random_memory(const dnnl::engine& engine, const memory::desc& md, uint64_t stream) {
  memory mem(md, engine);
  auto* p = static_cast<float*>(mem.get_data_handle());
  const dlscale::CounterRng rng(1, stream);
  const size_t n = md.get_size() / sizeof(float);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(rng.uniform(i) - 0.5);
  return mem;
}

/// [m,k] x [k,n]; a transposed operand is the row-major matrix of the other shape read with
/// swapped strides (how the driver's [out,in] weights serve as [in,out]).
Gemm make_gemm(const dnnl::engine& engine, std::string name, int64_t m, int64_t k, int64_t n, bool a_transposed,
               bool b_transposed) {
  const auto f32 = memory::data_type::f32;
  const memory::desc a({m, k}, f32, a_transposed ? memory::dims{1, m} : memory::dims{k, 1});
  const memory::desc b({k, n}, f32, b_transposed ? memory::dims{1, k} : memory::dims{n, 1});
  const memory::desc c({m, n}, f32, memory::dims{n, 1});
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine);
  Gemm g{std::move(name), m, n, k, dnnl::matmul(pd), {}, {}};
  g.args = {{DNNL_ARG_SRC, random_memory(engine, a, 1)},
            {DNNL_ARG_WEIGHTS, random_memory(engine, b, 2)},
            {DNNL_ARG_DST, memory(c, engine)}};
  return g;
}

/// The GEMMs of one training step of a fully connected workload, in execution order.
std::vector<Gemm> step_gemms(const dnnl::engine& engine, const dlscale::Workload& w, int64_t batch) {
  std::vector<Gemm> fwd, bwd;
  bool first = true;
  size_t index = 0;
  for (const dlscale::Layer& l : w.layers) {
    if (l.kind == dlscale::LayerKind::kLinear) {
      const std::string layer = fmt::format("layer{} {}x{}", index, l.out, l.in);
      fwd.push_back(make_gemm(engine, layer + " fwd", batch, l.in, l.out, false, true));
      bwd.push_back(make_gemm(engine, layer + " bwd-w", l.out, batch, l.in, true, false));
      if (!first) bwd.push_back(make_gemm(engine, layer + " bwd-d", batch, l.out, l.in, false, false));
      first = false;
    } else if (l.kind != dlscale::LayerKind::kSigmoid && l.kind != dlscale::LayerKind::kReLU &&
               l.kind != dlscale::LayerKind::kFlatten) {
      throw std::invalid_argument("bench_onednn_fcn5: fully connected workloads only");
    }
    ++index;
  }
  for (auto it = bwd.rbegin(); it != bwd.rend(); ++it) fwd.push_back(std::move(*it));
  return fwd;
}

void run(const std::string& workload, int64_t batch, int threads, dlscale::Denormals denormals, int warmup,
         int iterations) {
  dlscale::Registry registry;
  dlscale::register_drivers(registry);
  const dlscale::Workload w = dlscale::make_workload(workload);
  auto model = registry.find("onednn")->create(
      w, {dlscale::DeviceType::kCpu, 0, threads, 42, dlscale::Precision::kFp32, denormals});
  model->load_parameters(dlscale::canonical_parameters(w, 42));
  model->set_batch(dlscale::synthetic_batch(w, batch, 42, 0));
  const dlscale::Optimizer opt;

  omp_set_num_threads(threads);  // the matmuls run on the same number of threads
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  std::vector<Gemm> gemms = step_gemms(engine, w, batch);

  std::vector<dlscale::bench::StepTime> steps;
  for (int i = 0; i < warmup + iterations; ++i) {
    const dlscale::bench::StepTime s = dlscale::bench::timed_step(*model, opt);
    omp_set_num_threads(threads);
    for (Gemm& g : gemms) {
      const Clock::time_point start = Clock::now();
      g.primitive.execute(stream, g.args);
      stream.wait();
      if (i >= warmup) g.times.push_back(dlscale::bench::seconds_since(start));
    }
    if (i >= warmup) steps.push_back(s);
  }

  fmt::print("{} batch {} threads {} denormals {} ({} iterations after {} warm-up; medians)\n", workload, batch,
             threads, dlscale::denormals_name(denormals), iterations, warmup);
  fmt::print("  {:<28} {:>6} {:>6} {:>6} {:>10} {:>9}\n", "oneDNN matmul", "M", "N", "K", "time ms", "GFLOP/s");
  double gemm_time = 0, gemm_flops = 0;
  for (const Gemm& g : gemms) {
    const double t = dlscale::median(g.times);
    gemm_time += t;
    gemm_flops += g.flops();
    fmt::print("  {:<28} {:>6} {:>6} {:>6} {:>10.2f} {:>9.1f}\n", g.name, g.m, g.n, g.k, 1e3 * t, g.flops() / t / 1e9);
  }
  const double matmul_rate = gemm_flops / gemm_time;
  fmt::print("  {:<28} {:>31.2f} {:>9.1f}\n", "all GEMMs of a step", 1e3 * gemm_time, matmul_rate / 1e9);

  const dlscale::bench::StepStats s = dlscale::bench::step_stats(steps);
  const double train_flops = dlscale::flops_per_sample(w).train() * static_cast<double>(batch);
  const double driver_rate = train_flops / s.total;
  const double compute_rate = train_flops / (s.forward + s.backward);
  fmt::print("  driver step {:.2f} ms (forward {:.2f}, backward {:.2f}, update {:.2f}); {:.2f} GFLOP per step\n",
             1e3 * s.total, 1e3 * s.forward, 1e3 * s.backward, 1e3 * s.update, train_flops / 1e9);
  fmt::print(
      "  driver {:.1f} GFLOP/s = {:.3f} x matmul (goal >= 0.9); forward+backward alone {:.1f} GFLOP/s = {:.3f} x\n",
      driver_rate / 1e9, driver_rate / matmul_rate, compute_rate / 1e9, compute_rate / matmul_rate);
  // The update reads parameters and gradients and writes parameters: 12 bytes per parameter.
  const double update_bytes = 12.0 * static_cast<double>(dlscale::parameter_count(w));
  fmt::print("  update: {:.1f} GB/s over {:.0f} MB of parameters and gradients\n", update_bytes / s.update / 1e9,
             8.0 * static_cast<double>(dlscale::parameter_count(w)) / 1e6);
}

/// Parses the command line and runs the benchmark; main() turns an exception into exit code 1.
int run_main(int argc, char** argv) {
  std::string workload = "fcn5", threads = "1,2", denormals = "flush";
  int64_t batch = 64;
  int iterations = 10, warmup = 2;
  CLI::App app{"oneDNN driver on FCN-5 against oneDNN's matmul on the same GEMMs"};
  app.add_option("-w,--workload", workload, "a fully connected workload");
  app.add_option("--batch", batch);
  app.add_option("--threads", threads, "comma-separated thread counts");
  app.add_option("--denormals", denormals, "flush (the CPU default of dlscale run) or ieee, for every driver");
  app.add_option("--iterations", iterations);
  app.add_option("--warmup", warmup);
  CLI11_PARSE(app, argc, argv);
  for (const std::string& t : dlscale::bench::split(threads)) {
    run(workload, batch, std::stoi(t), dlscale::parse_denormals(denormals), warmup, iterations);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_main(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_onednn_fcn5: {}\n", e.what());
    return 1;
  }
}
