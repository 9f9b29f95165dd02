// How much does dlscale's LibTorch driver cost over a bare LibTorch training loop? Both train
// the same network from the same parameters on the same batch, in one process, alternating
// step by step so that drift in the machine (clock, cache, other load) hits both equally.
//
// The bare loops are idiomatic LibTorch: leaf tensors, stock autograd, SGD in place, with the
// gradients either reset to undefined after each step (autograd then allocates fresh ones) or
// zeroed in place (LibTorch 1.13's Optimizer::zero_grad()). Both are timed, and the driver is
// compared with the faster. The driver step is the harness's own training_step(), the code
// path `dlscale run` times.
//
//   build/current/bench/bench_libtorch_step_overhead [-w fcn5] [--batch 64] [--iterations 20] [--threads N]
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "drivers/cpu/blas_core.h"
#include "drivers/driver.h"
#include "suite/case/training_step.h"
#include "suite/comm/mpi_context.h"
#include "suite/meters/statistics.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

namespace {

using Clock = std::chrono::steady_clock;

class BareLoop {
 public:
  BareLoop(const dlscale::Workload& w, const std::vector<float>& params, const dlscale::Batch& b, bool zero_grads)
      : w_(w), zero_grads_(zero_grads) {
    for (const dlscale::ParamSpec& p : dlscale::parameter_layout(w)) {
      leaves_.push_back(
          torch::from_blob(const_cast<float*>(params.data() + p.offset), p.shape).clone().requires_grad_());
    }
    std::vector<int64_t> shape{b.size};
    shape.insert(shape.end(), w.input_shape.begin(), w.input_shape.end());
    x_ = torch::from_blob(const_cast<float*>(b.features.data()), shape).clone();
    y_ = torch::from_blob(const_cast<int64_t*>(b.labels.data()), {b.size}, torch::kLong).clone();
  }

  double step(double lr) {
    const Clock::time_point start = Clock::now();
    torch::Tensor h = x_;
    size_t next = 0;
    for (const dlscale::Layer& l : w_.layers) {
      switch (l.kind) {
        case dlscale::LayerKind::kLinear:
          h = torch::linear(h, leaves_[next], leaves_[next + 1]);
          next += 2;
          break;
        case dlscale::LayerKind::kSigmoid:
          h = torch::sigmoid(h);
          break;
        case dlscale::LayerKind::kReLU:
          h = torch::relu(h);
          break;
        case dlscale::LayerKind::kFlatten:
          h = h.flatten(1);
          break;
        default:
          // The bare loop exists for the FCN comparison; other layer kinds are not written out here.
          throw std::invalid_argument("bench_libtorch_step_overhead: fully connected workloads only");
      }
    }
    torch::nn::functional::cross_entropy(h, y_).backward();
    {
      torch::NoGradGuard no_grad;
      for (torch::Tensor& p : leaves_) {
        p.add_(p.grad(), -lr);
        if (zero_grads_) {
          p.mutable_grad().zero_();
        } else {
          p.mutable_grad() = torch::Tensor();
        }
      }
    }
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

 private:
  dlscale::Workload w_;
  bool zero_grads_;
  std::vector<torch::Tensor> leaves_;
  torch::Tensor x_, y_;
};

}  // namespace

int main(int argc, char** argv) {
  dlscale::select_blas_core(argv);  // the BLAS kernels dlscale itself would run on
  dlscale::MpiSession session(&argc, &argv);
  dlscale::MpiContext mpi(MPI_COMM_WORLD);
  std::string workload = "fcn5";
  int64_t batch = 64;
  int iterations = 20, warmup = 2, threads = mpi.default_threads();
  CLI::App app{"LibTorch driver step vs a bare LibTorch loop"};
  app.add_option("-w,--workload", workload);
  app.add_option("--batch", batch);
  app.add_option("--iterations", iterations);
  app.add_option("--warmup", warmup);
  app.add_option("--threads", threads);
  CLI11_PARSE(app, argc, argv);
  if (mpi.size() != 1) {
    fmt::print(stderr, "run this benchmark on one rank\n");
    return 2;
  }

  dlscale::Registry registry;
  dlscale::register_drivers(registry);
  const dlscale::Workload w = dlscale::make_workload(workload);
  const std::vector<float> params = dlscale::canonical_parameters(w, 42);
  const dlscale::Batch b = dlscale::synthetic_batch(w, batch, 42, 0);
  auto model = registry.find("libtorch")->create(w, {dlscale::DeviceType::kCpu, 0, threads, 42});
  model->load_parameters(params);
  model->set_batch(b);
  BareLoop bare_none(w, params, b, false), bare_zero(w, params, b, true);
  const dlscale::Optimizer opt;

  std::vector<double> t_driver, t_none, t_zero, ratio;
  for (int i = 0; i < warmup + iterations; ++i) {
    const double d = dlscale::training_step(*model, MPI_COMM_WORLD, opt, false).total;
    const double n = bare_none.step(opt.learning_rate);
    const double z = bare_zero.step(opt.learning_rate);
    if (i < warmup) continue;
    t_driver.push_back(d);
    t_none.push_back(n);
    t_zero.push_back(z);
    ratio.push_back(d / std::min(n, z));
  }
  const auto row = [](const char* name, const std::vector<double>& t) {
    fmt::print("  {:<34} median {:.4f} s  [p05 {:.4f}, p95 {:.4f}]\n", name, dlscale::median(t),
               dlscale::percentile(t, 5), dlscale::percentile(t, 95));
  };
  fmt::print("{} batch {} threads {} ({} alternating iterations after {} warm-up)\n", workload, batch, threads,
             iterations, warmup);
  row("dlscale libtorch driver step", t_driver);
  row("bare loop, gradients set to none", t_none);
  row("bare loop, gradients zeroed", t_zero);
  const double best = std::min(dlscale::median(t_none), dlscale::median(t_zero));
  fmt::print("  ratio driver / faster bare loop: {:.3f} (of medians), {:.3f} (median of paired ratios)\n",
             dlscale::median(t_driver) / best, dlscale::median(ratio));
  return 0;
}
