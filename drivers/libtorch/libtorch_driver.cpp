// LibTorch driver. Parameters and gradients each live in one flat tensor in the canonical
// layout; every layer's weights and gradients are views into them. Linear layers use a custom
// autograd function whose backward writes dW and db straight into the flat gradient tensor
// (mm_out/sum_out): with stock autograd the gradients would land in fresh tensors and need an
// extra copy (or a zero plus an in-place accumulate) per step to reach the all-reduce buffer,
// which costs several passes over 472 MB on FCN-5. The arithmetic is the same GEMMs stock
// autograd runs.
#include "drivers/libtorch/libtorch_driver.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace dlscale {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// y = x W^T + b, whose backward writes dW and db in place into slices of the flat gradient
/// buffer and returns no gradient for W and b (so autograd never allocates or accumulates one).
struct LinearIntoFlatGrad : torch::autograd::Function<LinearIntoFlatGrad> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                            const at::Tensor& dw, const at::Tensor& db) {
    ctx->save_for_backward({x, w});
    ctx->saved_data["dw"] = dw;
    ctx->saved_data["db"] = db;
    return at::addmm(b, x, w.t());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& w = saved[1];
    const at::Tensor& g = grad_out[0];
    at::Tensor dw = ctx->saved_data["dw"].toTensor();
    at::Tensor db = ctx->saved_data["db"].toTensor();
    at::mm_out(dw, g.t(), x);
    at::sum_out(db, g, {0});
    at::Tensor dx;
    if (ctx->needs_input_grad(0)) dx = g.mm(w);
    return {dx, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct LinearViews {
  at::Tensor weight, bias;            // leaves that "require grad" so the graph reaches them
  at::Tensor grad_weight, grad_bias;  // views into the flat gradient tensor
};

class LibTorchModel final : public Model {
 public:
  LibTorchModel(const Workload& w, const DriverContext& ctx) : workload_(w) {
    at::set_num_threads(ctx.threads);
    const int64_t n = parameter_count(w);
    params_ = at::empty({n}, at::kFloat);
    grads_ = at::zeros({n}, at::kFloat);
    const std::vector<ParamSpec> layout = parameter_layout(w);
    linears_.resize(w.layers.size());
    for (const ParamSpec& p : layout) {
      LinearViews& v = linears_[static_cast<size_t>(p.layer)];
      at::Tensor param = params_.narrow(0, p.offset, p.count).view(p.shape).detach().requires_grad_(true);
      at::Tensor grad = grads_.narrow(0, p.offset, p.count).view(p.shape);
      if (p.shape.size() == 2) {
        v.weight = param;
        v.grad_weight = grad;
      } else {
        v.bias = param;
        v.grad_bias = grad;
      }
    }
  }

  void load_parameters(const std::vector<float>& canonical) override {
    check_size(canonical.size(), "load_parameters");
    std::memcpy(params_.data_ptr<float>(), canonical.data(), canonical.size() * sizeof(float));
  }

  std::vector<float> export_parameters() override { return to_vector(params_); }
  std::vector<float> export_gradients() override { return to_vector(grads_); }

  void set_batch(const Batch& batch) override {
    input_ = at::from_blob(const_cast<float*>(batch.features.data()), {batch.size, workload_.input_size()}, at::kFloat)
                 .clone();
    labels_ = at::from_blob(const_cast<int64_t*>(batch.labels.data()), {batch.size}, at::kLong).clone();
  }

  void forward() override {
    at::Tensor h = input_;
    for (size_t i = 0; i < workload_.layers.size(); ++i) {
      switch (workload_.layers[i].kind) {
        case LayerKind::kLinear: {
          const LinearViews& v = linears_[i];
          h = LinearIntoFlatGrad::apply(h, v.weight, v.bias, v.grad_weight, v.grad_bias);
          break;
        }
        case LayerKind::kSigmoid:
          h = at::sigmoid(h);
          break;
        case LayerKind::kReLU:
          h = at::relu(h);
          break;
      }
    }
    loss_ = at::cross_entropy_loss(h, labels_);
  }

  void backward() override { loss_.backward(); }

  double loss() override { return loss_.item<double>(); }

  GradBuffer grad_buffer() override { return {grads_.data_ptr<float>(), static_cast<size_t>(grads_.numel()), false}; }

  void update(const Optimizer& opt) override {
    at::NoGradGuard no_grad;
    params_.add_(grads_, -opt.learning_rate);
  }

  void synchronize() override {}

  MemoryStats memory() const override { return {}; }

 private:
  void check_size(size_t n, const char* what) const {
    if (n != static_cast<size_t>(params_.numel())) {
      throw std::invalid_argument(fmt::format("{}: expected {} values, got {}", what, params_.numel(), n));
    }
  }

  static std::vector<float> to_vector(const at::Tensor& t) {
    const float* src = t.data_ptr<float>();
    return std::vector<float>(src, src + t.numel());
  }

  Workload workload_;
  at::Tensor params_, grads_, input_, labels_, loss_;
  std::vector<LinearViews> linears_;  // indexed by layer; empty for layers without parameters
};

class LibTorchDriver final : public Driver {
 public:
  std::string_view name() const override { return "libtorch"; }

  Support supports(const Workload& w, DeviceType device) const override {
    if (device != DeviceType::kCpu) {
      return Support::no("libtorch driver: this build trains on CPU only (no NCCL gradient path)");
    }
    if (w.loss != LossKind::kSoftmaxCrossEntropy) return Support::no("libtorch driver: loss not supported");
    return Support::yes();
  }

  std::unique_ptr<Model> create(const Workload& w, const DriverContext& ctx) const override {
    try {
      return std::make_unique<LibTorchModel>(w, ctx);
    } catch (const c10::Error& e) {
      // LibTorch reports a failed host allocation as a c10::Error, not std::bad_alloc.
      const std::string what = e.what_without_backtrace();
      if (what.find("can't allocate memory") != std::string::npos) throw OutOfMemory(what);
      throw;
    }
  }

  std::map<std::string, std::string> versions() const override {
    return {{"libtorch", TORCH_VERSION}, {"libtorch_parallel", at::get_parallel_info()}};
  }
};

}  // namespace

void register_libtorch(Registry& registry) { registry.add(std::make_unique<LibTorchDriver>()); }

}  // namespace dlscale
