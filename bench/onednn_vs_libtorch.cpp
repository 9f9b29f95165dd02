// Step time of the oneDNN driver against the LibTorch driver on Shi et al.'s CPU cases (FCN-5 at
// batch 64, AlexNet and ResNet-50 at 16, LSTM-32 at 128, and Shatnawi's MNIST CNN at 16), at
// each thread count. Both models live in one process, start from the same parameters and
// batch, and alternate step by step, so that drift in the machine hits both equally. Phases are
// timed separately (forward, backward, update) to show where a difference comes from.
//
//   build/<preset>/bench/bench_onednn_vs_libtorch [--cases fcn5:64,alexnet:16] [--threads 1,2] [--iterations 5]
//
// DNNL_VERBOSE=1 (or ONEDNN_VERBOSE=1) lists every primitive the oneDNN driver runs, with its
// implementation, layouts and time; LibTorch's convolutions go through the same libdnnl and show
// up there too.
//
// Both drivers run in the same floating-point mode (--denormals, default flush as in dlscale
// run). Measured (2-vCPU KVM guest, Intel Xeon family 6 model 207 with AVX-512, Debian's LibTorch
// 1.13.1 and oneDNN 2.6.3, fcn5 at batch 64 and 2 threads, flush): onednn/libtorch = 0.29 with
// the OpenBLAS kernels Debian's OpenBLAS 0.3.21 picks for this CPU, which it does not recognise
// (SSE3 "Prescott"; LibTorch's matrix products run there), and 0.79 with
// OPENBLAS_CORETYPE=SkylakeX. Both drivers run the same oneDNN convolution kernels; LibTorch adds
// an nchw <-> nChw16c reorder around each of them.
#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include "bench/onednn_bench_util.h"
#include "drivers/cpu/blas_core.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

namespace {

namespace bench = dlscale::bench;

void print_row(const char* driver, const bench::StepStats& s) {
  fmt::print("    {:<9} step {:9.2f} ms   forward {:9.2f}   backward {:9.2f}   update {:8.2f}\n", driver, 1e3 * s.total,
             1e3 * s.forward, 1e3 * s.backward, 1e3 * s.update);
}

void run(const dlscale::Registry& registry, const std::string& workload, int64_t batch, int threads,
         dlscale::Denormals denormals, int warmup, int iterations) {
  const dlscale::Workload w = dlscale::make_workload(workload);
  const std::vector<float> params = dlscale::canonical_parameters(w, 42);
  const dlscale::Batch b = dlscale::synthetic_batch(w, batch, 42, 0);
  auto make = [&](const char* driver) {
    auto m = registry.find(driver)->create(
        w, {dlscale::DeviceType::kCpu, 0, threads, 42, dlscale::Precision::kFp32, denormals});
    m->load_parameters(params);
    m->set_batch(b);
    return m;
  };
  auto onednn = make("onednn"), libtorch = make("libtorch");
  const dlscale::Optimizer opt;
  std::vector<bench::StepTime> t_onednn, t_libtorch;
  std::vector<double> ratios;
  for (int i = 0; i < warmup + iterations; ++i) {
    const bench::StepTime a = bench::timed_step(*onednn, opt);
    const bench::StepTime c = bench::timed_step(*libtorch, opt);
    if (i < warmup) continue;
    t_onednn.push_back(a);
    t_libtorch.push_back(c);
    ratios.push_back(a.total() / c.total());
  }
  const bench::StepStats so = bench::step_stats(t_onednn), sl = bench::step_stats(t_libtorch);
  fmt::print(
      "  {} batch {} threads {} denormals {}: onednn/libtorch = {:.3f} (of medians), {:.3f} (median of paired "
      "ratios)\n",
      workload, batch, threads, dlscale::denormals_name(denormals), so.total / sl.total, dlscale::median(ratios));
  print_row("onednn", so);
  print_row("libtorch", sl);
  std::fflush(stdout);
}

/// Parses the command line and runs the benchmark; main() turns an exception into exit code 1.
int run_main(int argc, char** argv) {
  std::string cases = "fcn5:64,alexnet:16,resnet50:16,lstm32:128,mnist_cnn:16", threads = "1,2", denormals = "flush";
  int iterations = 5, warmup = 1;
  CLI::App app{"oneDNN driver against the LibTorch driver, alternating in one process"};
  app.add_option("--cases", cases, "workload:batch pairs, comma-separated (a workload's own overrides use ';')");
  app.add_option("--threads", threads, "comma-separated thread counts");
  app.add_option("--denormals", denormals, "flush (the CPU default of dlscale run) or ieee, for every driver");
  app.add_option("--iterations", iterations);
  app.add_option("--warmup", warmup);
  CLI11_PARSE(app, argc, argv);

  dlscale::Registry registry;
  dlscale::register_drivers(registry);
  for (const char* needed : {"onednn", "libtorch"}) {
    if (registry.find(needed) == nullptr) {
      fmt::print(stderr, "bench_onednn_vs_libtorch: this build has no {} driver\n", needed);
      return 2;
    }
  }
  fmt::print("{} timed alternating steps after {} warm-up per case; medians\n", iterations, warmup);
  for (const std::string& t : bench::split(threads)) {
    for (const std::string& c : bench::split(cases)) {
      const bench::BenchCase bc = bench::parse_case(c);
      run(registry, bc.workload, bc.batch, std::stoi(t), dlscale::parse_denormals(denormals), warmup, iterations);
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
    fmt::print(stderr, "bench_onednn_vs_libtorch: {}\n", e.what());
    return 1;
  }
}
