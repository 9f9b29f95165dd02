// LibTorch driver. Parameters and gradients each live in one flat tensor in the canonical
// layout; every parameter is a leaf tensor viewing the flat parameters, and every gradient a view
// into the flat gradients, so the all-reduce and the update each touch one buffer.
//
// Linear layers use a custom autograd function whose backward writes dW and db straight into the
// flat gradient tensor (mm_out/sum_out). With stock autograd those gradients would land in fresh
// tensors and need an extra pass per step (a copy, or a zero plus an in-place accumulate) to
// reach the all-reduce buffer — several passes over 472 MB on FCN-5, where Linear weights are
// nearly all the parameters. The arithmetic is the same GEMMs stock autograd runs. Every other
// parameterised layer (convolutions, batch norm, embedding, LSTM) uses stock autograd with its
// .grad preset to the view, which autograd accumulates into in place; those views are zeroed
// before each backward pass (they are small next to the layers' compute).
#include "drivers/driver_module.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/api/include/torch/cuda.h>

#ifdef DLSCALE_WITH_CUDA
#include "drivers/gpu/gpu_devices.h"
#include "drivers/gpu/gpu_step.h"
#endif
#ifdef DLSCALE_TORCH_CUDA_ALLOCATOR
#include <c10/cuda/CUDACachingAllocator.h>
#endif
#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "drivers/cpu/denormal_scope.h"

namespace dlscale {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// LibTorch's autocast state for a device type (CPU or CUDA) on the calling thread. LibTorch 2.4
// replaced the per-device calls (is_cpu_enabled, get_autocast_cpu_dtype, is_enabled for CUDA, ...)
// by ones taking the device type, and the old ones print a deprecation warning at every call
// there: on every Linear's forward pass.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool autocast_enabled(at::DeviceType device) { return at::autocast::is_autocast_enabled(device); }
at::ScalarType autocast_type(at::DeviceType device) { return at::autocast::get_autocast_dtype(device); }
void set_autocast(at::DeviceType device, bool enabled, at::ScalarType type) {
  at::autocast::set_autocast_enabled(device, enabled);
  at::autocast::set_autocast_dtype(device, type);
}
#else
bool autocast_enabled(at::DeviceType device) {
  return device == at::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
at::ScalarType autocast_type(at::DeviceType device) {
  return device == at::kCUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
}
void set_autocast(at::DeviceType device, bool enabled, at::ScalarType type) {
  if (device == at::kCUDA) {
    at::autocast::set_enabled(enabled);
    at::autocast::set_autocast_gpu_dtype(type);
  } else {
    at::autocast::set_cpu_enabled(enabled);
    at::autocast::set_autocast_cpu_dtype(type);
  }
}
#endif

/// y = x W^T + b on a 2-D x, whose backward writes dW and db in place into slices of the flat
/// gradient buffer and returns no gradient for W and b (so autograd never allocates one).
/// Under autocast (bf16 cases, on the CPU or a GPU) it does what autocast does to a Linear: the
/// products read bf16 copies of x and W and return bf16, and the gradients follow in bf16 (dW and
/// db are rounded to bf16 as autocast's casts round them, then stored in the fp32 flat buffer).
struct LinearIntoFlatGrad : torch::autograd::Function<LinearIntoFlatGrad> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                            const at::Tensor& dw, const at::Tensor& db) {
    const at::DeviceType device = x.device().type();
    const at::ScalarType type = autocast_enabled(device) ? autocast_type(device) : x.scalar_type();
    const at::Tensor xc = x.to(type), wc = w.to(type);
    ctx->save_for_backward({xc, wc});
    ctx->saved_data["dw"] = dw;
    ctx->saved_data["db"] = db;
    ctx->saved_data["x_type"] = static_cast<int64_t>(x.scalar_type());
    return b.defined() ? at::addmm(b.to(type), xc, wc.t()) : at::mm(xc, wc.t());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& w = saved[1];
    const at::Tensor g = grad_out[0].to(x.scalar_type());
    at::Tensor dw = ctx->saved_data["dw"].toTensor();
    if (g.scalar_type() == dw.scalar_type()) {
      at::mm_out(dw, g.t(), x);
    } else {
      dw.copy_(at::mm(g.t(), x));
    }
    at::Tensor db = ctx->saved_data["db"].toTensor();
    if (db.defined()) at::sum_out(db, g, {0}, false, db.scalar_type());
    at::Tensor dx;
    if (ctx->needs_input_grad(0)) {
      dx = g.mm(w).to(static_cast<at::ScalarType>(ctx->saved_data["x_type"].toInt()));
    }
    return {dx, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

/// Autocast on `device` to `type` on the calling thread for the scope's length, as
/// `torch.autocast(device, dtype)` does: LibTorch's own mixed precision (its op lists decide
/// which operations run in bf16: products, convolutions and LSTMs do, losses do not).
class Autocast {
 public:
  Autocast(at::DeviceType device, at::ScalarType type)
      : device_(device), was_enabled_(autocast_enabled(device)), was_type_(autocast_type(device)) {
    set_autocast(device, true, type);
    at::autocast::increment_nesting();
  }
  ~Autocast() {
    // The cast weights autocast caches live until the outermost scope ends.
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    set_autocast(device_, was_enabled_, was_type_);
  }
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  at::DeviceType device_;
  bool was_enabled_;
  at::ScalarType was_type_;
};

/// Runs after autograd has finished a parameter's gradient (its AccumulateGrad node, also for
/// Linear weights, whose backward wrote the gradient itself) and reports the parameter's range of
/// the flat gradient buffer as final.
class GradientReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  GradientReadyHook(const std::function<void(size_t, size_t)>* ready, size_t first, size_t count)
      : ready_(ready), first_(first), count_(count) {}
  variable_list operator()(const variable_list& outputs, const variable_list&) override {
    if (*ready_) (*ready_)(first_, count_);
    return outputs;
  }

 private:
  const std::function<void(size_t, size_t)>* ready_;
  size_t first_, count_;
};

/// One parameter tensor: a leaf viewing the flat parameters and its slice of the flat gradients.
struct Param {
  at::Tensor value, grad;
};

/// Runs `f`, turning LibTorch's report of a failed allocation (a c10::Error, not std::bad_alloc)
/// into OutOfMemory, so that a case is recorded `oom` wherever it runs out: set-up or any step.
template <typename F>
decltype(auto) out_of_memory_as_such(F&& f) {
  try {
    return f();
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    if (what.find("can't allocate memory") != std::string::npos || what.find("out of memory") != std::string::npos) {
      throw OutOfMemory(what);
    }
    throw;
  }
}

class LibTorchModel final : public Model {
 public:
  LibTorchModel(const Workload& w, const DriverContext& ctx)
      : workload_(w),
        device_(ctx.device == DeviceType::kCuda ? at::Device(at::kCUDA, static_cast<at::DeviceIndex>(ctx.device_index))
                                                : at::Device(at::kCPU)),
        threads_(ctx.threads),
        denormals_(ctx.denormals),
        autocast_(ctx.precision == Precision::kBf16) {
    at::set_num_threads(ctx.threads);
    at::manual_seed(ctx.seed);  // dropout masks
#ifdef DLSCALE_TORCH_CUDA_ALLOCATOR
    if (device_.is_cuda()) {
      // The allocator keeps the blocks of earlier cases cached: released first, so that this
      // case's peak is its own.
      c10::cuda::CUDACachingAllocator::emptyCache();
      c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index());
    }
#endif
    if (device_.is_cuda()) {
      // Explicit both ways: PyTorch lets cuDNN use TF32 for fp32 convolutions by default, which
      // would make its "fp32" differ from every other driver's.
      const bool tf32 = ctx.precision == Precision::kTf32;
      at::globalContext().setAllowTF32CuBLAS(tf32);
      at::globalContext().setAllowTF32CuDNN(tf32);
    }
    const at::TensorOptions opts = at::TensorOptions().dtype(at::kFloat).device(device_);
    const int64_t n = parameter_count(w);
    params_ = at::empty({n}, opts);
    grads_ = at::zeros({n}, opts);
    layer_params_.resize(w.layers.size());
    for (const ParamSpec& p : parameter_layout(w)) {
      Param param{params_.narrow(0, p.offset, p.count).view(p.shape).detach().requires_grad_(true),
                  grads_.narrow(0, p.offset, p.count).view(p.shape)};
      if (w.layers[static_cast<size_t>(p.layer)].kind != LayerKind::kLinear) {
        param.value.mutable_grad() = param.grad;  // autograd accumulates into the flat buffer
        accumulated_.push_back(param.grad);
      }
      // Keep the accumulator alive: the leaf holds it only weakly.
      accumulators_.push_back(torch::autograd::impl::grad_accumulator(param.value));
      accumulators_.back()->add_post_hook(
          std::make_unique<GradientReadyHook>(&ready_, static_cast<size_t>(p.offset), static_cast<size_t>(p.count)));
      layer_params_[static_cast<size_t>(p.layer)].push_back(param);
    }
    lstm_zero_bias_.resize(w.layers.size());
    for (size_t i = 0; i < w.layers.size(); ++i) {
      if (w.layers[i].kind == LayerKind::kLstm) lstm_zero_bias_[i] = at::zeros({4 * w.layers[i].out}, opts);
    }
    for (const Layer& l : w.layers) {
      // Running statistics: updated by every training forward as PyTorch does, read by evaluate().
      if (l.kind == LayerKind::kBatchNorm2d) add_running_stats(l.in, opts);
      if (l.kind == LayerKind::kBottleneck) {
        add_running_stats(l.mid, opts);
        add_running_stats(l.mid, opts);
        add_running_stats(l.out, opts);
        if (l.stride != 1 || l.in != l.out) add_running_stats(l.out, opts);
      }
    }
  }

  void load_parameters(const std::vector<float>& canonical) override {
    check_size(canonical.size(), "load_parameters");
    at::NoGradGuard no_grad;
    params_.copy_(at::from_blob(const_cast<float*>(canonical.data()), {params_.numel()}, at::kFloat));
    // A model loaded with new parameters starts afresh: no running statistics, no Adam moments.
    for (at::Tensor& m : running_mean_) m.zero_();
    for (at::Tensor& v : running_var_) v.fill_(1);
    if (adam_m_.defined()) {
      adam_m_.zero_();
      adam_v_.zero_();
    }
    adam_steps_ = 0;
  }

  std::vector<float> export_parameters() override { return to_vector(params_); }
  std::vector<float> export_gradients() override { return to_vector(grads_); }

  void set_batch(const Batch& batch) override {
    out_of_memory_as_such([&] {
      check_batch(workload_, batch, "libtorch driver");  // from_blob below trusts the sizes
      std::vector<int64_t> shape{batch.size};
      shape.insert(shape.end(), workload_.input_shape.begin(), workload_.input_shape.end());
      if (workload_.input_kind == InputKind::kTokens) {
        input_ = at::from_blob(const_cast<int64_t*>(batch.tokens.data()), shape, at::kLong).to(device_, true, true);
      } else {
        input_ = at::from_blob(const_cast<float*>(batch.features.data()), shape, at::kFloat).to(device_, true, true);
      }
      labels_ = at::from_blob(const_cast<int64_t*>(batch.labels.data()), {static_cast<int64_t>(batch.labels.size())},
                              at::kLong)
                    .to(device_, true, true);
      if (workload_.loss == LossKind::kSigmoidBinaryCrossEntropy) labels_ = labels_.to(at::kFloat);
    });
  }

  void forward() override {
    if (!input_.defined()) throw std::logic_error("libtorch driver: forward() before set_batch()");
    out_of_memory_as_such([&] {
      const auto scope = cpu_mode();
      const at::Tensor logits = run_layers(/*training=*/true);
      if (workload_.loss == LossKind::kSigmoidBinaryCrossEntropy) {
        loss_ = at::binary_cross_entropy_with_logits(logits.reshape({-1}), labels_);
      } else {
        loss_ = at::cross_entropy_loss(logits.reshape({-1, workload_.num_classes}), labels_);
      }
    });
  }

  Evaluation evaluate(const Batch& batch) override {
    set_batch(batch);
    return out_of_memory_as_such([&] {
      const auto scope = cpu_mode();
      // No autograd graph, no saved activations; parameters are only read.
      c10::InferenceMode inference;
      const at::Tensor logits = run_layers(/*training=*/false);
      Evaluation e;
      e.predictions = labels_.numel();
      if (workload_.loss == LossKind::kSigmoidBinaryCrossEntropy) {
        const at::Tensor x = logits.reshape({-1});
        e.loss_sum = at::binary_cross_entropy_with_logits(x, labels_, {}, {}, at::Reduction::Sum).item<double>();
        e.correct = (x.gt(0) == labels_.gt(0.5)).sum().item<int64_t>();
      } else {
        const at::Tensor x = logits.reshape({-1, workload_.num_classes});
        e.loss_sum = at::cross_entropy_loss(x, labels_, {}, at::Reduction::Sum).item<double>();
        // at::argmax returns the first of equal maxima: the lowest index wins a tie.
        e.correct = (x.argmax(1) == labels_).sum().item<int64_t>();
      }
      return e;  // item() waited for the device
    });
  }

  void backward() override {
    out_of_memory_as_such([&] {
      const auto scope = cpu_mode();
      for (at::Tensor& g : accumulated_) g.zero_();
      loss_.backward();
    });
  }

  double loss() override { return loss_.item<double>(); }

  GradBuffer grad_buffer() override {
    return {grads_.data_ptr<float>(), static_cast<size_t>(grads_.numel()), device_.is_cuda()};
  }

  void update(const Optimizer& opt, const ParameterShard& shard) override {
    if (!shard.whole && device_.is_cuda()) throw std::logic_error("libtorch driver: a sharded update on a GPU");
    out_of_memory_as_such([&] {
      const auto scope = cpu_mode();
      at::NoGradGuard no_grad;
      const std::vector<ParamRange> ranges = shard.ranges_in(static_cast<size_t>(params_.numel()));
      const auto part = [](const at::Tensor& t, size_t first, size_t count) {
        return t.narrow(0, static_cast<int64_t>(first), static_cast<int64_t>(count));
      };
      if (opt.kind == OptimizerKind::kSgd) {
        for (const ParamRange& r : ranges)
          part(params_, r.first, r.count).add_(part(grads_, r.first, r.count), -opt.learning_rate);
        return;
      }
      // torch.optim.Adam (foreach=False) on the flat tensors, op for op, scalars in double as
      // Python passes them: fp32 moments beside the fp32 master weights in every precision.
      const auto state = static_cast<int64_t>(shard.elements(static_cast<size_t>(params_.numel())));
      if (!adam_m_.defined()) {
        adam_m_ = at::zeros({state}, params_.options());
        adam_v_ = at::zeros({state}, params_.options());
      }
      if (adam_m_.numel() != state) throw std::logic_error("libtorch driver: Adam's shard changed between updates");
      ++adam_steps_;
      const double t = static_cast<double>(adam_steps_);
      const double bias_correction1 = 1 - std::pow(opt.beta1, t), bias_correction2 = 1 - std::pow(opt.beta2, t);
      size_t offset = 0;  // the state is packed in range order
      for (const ParamRange& r : ranges) {
        const at::Tensor g = part(grads_, r.first, r.count);
        at::Tensor m = part(adam_m_, offset, r.count), v = part(adam_v_, offset, r.count);
        m.mul_(opt.beta1).add_(g, 1 - opt.beta1);
        v.mul_(opt.beta2).addcmul_(g, g, 1 - opt.beta2);
        const at::Tensor denom = (v.sqrt() / std::sqrt(bias_correction2)).add_(opt.epsilon);
        part(params_, r.first, r.count).addcdiv_(m, denom, -opt.learning_rate / bias_correction1);
        offset += r.count;
      }
    });
  }

  ParameterBuffer parameters() override {
    if (device_.is_cuda()) return {};
    return {params_.data_ptr<float>(), static_cast<size_t>(params_.numel()), sizeof(float)};
  }

  void synchronize() override {
    if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
  }

  bool set_gradient_ready_callback(std::function<void(size_t, size_t)> ready) override {
    ready_ = std::move(ready);
    return true;
  }

  MemoryStats memory() const override {
    const int64_t state = adam_m_.defined() ? 2 * adam_m_.numel() * static_cast<int64_t>(sizeof(float)) : 0;
    if (!device_.is_cuda()) return {0, state};
#ifdef DLSCALE_TORCH_CUDA_ALLOCATOR
    // The peak of what the caching allocator reserved from CUDA since the model was made: the
    // device memory the case held, cached blocks included.
    // Index 0 is StatType::AGGREGATE (all pools), named by index because that enum moved
    // out of c10::cuda::CUDACachingAllocator in later LibTorch versions.
    constexpr size_t kAllPools = 0;
    return {c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index()).reserved_bytes[kAllPools].peak, state};
#else
    return {-1, state};  // a LibTorch without its CUDA allocator library (c10_cuda) to ask
#endif
  }

#ifdef DLSCALE_WITH_CUDA
  /// LibTorch queues its work on the legacy default stream: events there time it.
  std::unique_ptr<StepTimer> make_step_timer() override {
    return device_.is_cuda() ? gpu::make_event_timer(nullptr, device_.index()) : nullptr;
  }
#endif

 private:
  /// The network on the current batch, to fp32 logits. training: dropout draws masks and batch
  /// norm normalises with the batch's statistics (updating the running ones); otherwise dropout
  /// passes its input through and batch norm uses the running statistics, as module.eval() does.
  at::Tensor run_layers(bool training) {
    std::optional<Autocast> autocast;
    if (autocast_) autocast.emplace(device_.type(), at::kBFloat16);
    at::Tensor h = input_;
    size_t stats = 0;
    for (size_t i = 0; i < workload_.layers.size(); ++i) {
      const Layer& l = workload_.layers[i];
      const std::vector<Param>& p = layer_params_[i];
      switch (l.kind) {
        case LayerKind::kLinear: {
          std::vector<int64_t> out_shape = h.sizes().vec();
          out_shape.back() = l.out;
          const at::Tensor b = l.bias ? p[1].value : at::Tensor(), db = l.bias ? p[1].grad : at::Tensor();
          h = LinearIntoFlatGrad::apply(h.reshape({-1, l.in}), p[0].value, b, p[0].grad, db).view(out_shape);
          break;
        }
        case LayerKind::kConv2d:
          h = at::conv2d(h, p[0].value, l.bias ? p[1].value : at::Tensor(), {l.stride, l.stride},
                         {l.padding, l.padding});
          break;
        case LayerKind::kMaxPool2d:
          h = at::max_pool2d(h, {l.kernel, l.kernel}, {l.stride, l.stride}, {l.padding, l.padding});
          break;
        case LayerKind::kGlobalAvgPool:
          h = h.mean({2, 3});
          break;
        case LayerKind::kReLU:
          h = at::relu(h);
          break;
        case LayerKind::kSigmoid:
          h = at::sigmoid(h);
          break;
        case LayerKind::kTanh:
          h = at::tanh(h);
          break;
        case LayerKind::kDropout:
          h = at::dropout(h, l.p, training);
          break;
        case LayerKind::kBatchNorm2d:
          h = batch_norm(h, p[0], p[1], stats++, training);
          break;
        case LayerKind::kBottleneck:
          h = bottleneck(h, l, p, stats, training);
          break;
        case LayerKind::kFlatten:
          h = h.flatten(1);
          break;
        case LayerKind::kEmbedding:
          h = at::embedding(p[0].value, h);
          break;
        case LayerKind::kLstm:
          h = lstm(h, l, p, lstm_zero_bias_[i], training);
          break;
      }
    }
    return h.to(at::kFloat);  // the loss in fp32 whatever the layers computed in
  }

  /// On the CPU, the case's floating-point mode on LibTorch's intra-op (OpenMP) threads for the
  /// length of a computing call; nothing on a GPU.
  std::optional<DenormalScope> cpu_mode() const {
    if (device_.is_cuda()) return std::nullopt;
    return std::optional<DenormalScope>(std::in_place, denormals_, threads_);
  }

  void add_running_stats(int64_t channels, const at::TensorOptions& opts) {
    running_mean_.push_back(at::zeros({channels}, opts));
    running_var_.push_back(at::ones({channels}, opts));
  }

  /// training: normalises with the batch's statistics and moves the running ones towards them
  /// (momentum 0.1, unbiased variance); otherwise normalises with the running ones.
  at::Tensor batch_norm(const at::Tensor& x, const Param& weight, const Param& bias, size_t stats, bool training) {
    return at::batch_norm(x, weight.value, bias.value, running_mean_[stats], running_var_[stats], training,
                          /*momentum=*/0.1, /*eps=*/1e-5, /*cudnn_enabled=*/true);
  }

  /// ResNet v1.5 bottleneck; parameters in the canonical order of workloads/workload.h.
  at::Tensor bottleneck(const at::Tensor& x, const Layer& l, const std::vector<Param>& p, size_t& stats,
                        bool training) {
    at::Tensor h = at::conv2d(x, p[0].value);
    h = at::relu(batch_norm(h, p[1], p[2], stats++, training));
    h = at::conv2d(h, p[3].value, at::Tensor(), {l.stride, l.stride}, {1, 1});
    h = at::relu(batch_norm(h, p[4], p[5], stats++, training));
    h = at::conv2d(h, p[6].value);
    h = batch_norm(h, p[7], p[8], stats++, training);
    at::Tensor shortcut = x;
    if (p.size() > 9) {
      shortcut = at::conv2d(x, p[9].value, at::Tensor(), {l.stride, l.stride});
      shortcut = batch_norm(shortcut, p[10], p[11], stats++, training);
    }
    return at::relu(h + shortcut);
  }

  /// Stacked LSTM over [B, T, in], batch first; the second bias LibTorch expects is a constant
  /// zero so that each layer has exactly one trainable bias of 4H.
  at::Tensor lstm(const at::Tensor& x, const Layer& l, const std::vector<Param>& p, const at::Tensor& zero_bias,
                  bool training) {
    std::vector<at::Tensor> weights;
    for (int64_t s = 0; s < l.num_layers; ++s) {
      const size_t base = static_cast<size_t>(3 * s);
      weights.insert(weights.end(), {p[base].value, p[base + 1].value, p[base + 2].value, zero_bias});
    }
    const at::Tensor h0 = at::zeros({l.num_layers, x.size(0), l.out}, x.options());
    auto result = at::lstm(x, {h0, h0}, weights, /*has_biases=*/true, l.num_layers, /*dropout=*/0.0,
                           /*train=*/training, /*bidirectional=*/false, /*batch_first=*/true);
    const at::Tensor& out = std::get<0>(result);  // [B, T, H]
    return l.all_steps ? out : out.select(1, out.size(1) - 1);
  }

  void check_size(size_t n, const char* what) const {
    if (n != static_cast<size_t>(params_.numel())) {
      throw std::invalid_argument(fmt::format("{}: expected {} values, got {}", what, params_.numel(), n));
    }
  }

  static std::vector<float> to_vector(const at::Tensor& t) {
    const at::Tensor host = t.to(at::kCPU).contiguous();
    const float* src = host.data_ptr<float>();
    return std::vector<float>(src, src + host.numel());
  }

  Workload workload_;
  at::Device device_;
  int threads_;
  Denormals denormals_;
  bool autocast_;  // bf16: forward() under autocast on the model's device
  at::Tensor params_, grads_, input_, labels_, loss_;
  std::vector<at::Tensor> lstm_zero_bias_;        // per layer: LibTorch's second LSTM bias, held at zero
  std::vector<std::vector<Param>> layer_params_;  // per layer, in canonical order
  std::vector<at::Tensor> accumulated_;           // gradient views autograd accumulates into
  std::vector<at::Tensor> running_mean_, running_var_;
  at::Tensor adam_m_, adam_v_;                 // Adam's moments, made at its first update
  int64_t adam_steps_ = 0;                     // Adam's t: updates since the model was made or loaded
  std::function<void(size_t, size_t)> ready_;  // set by the harness to overlap the all-reduce
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
};

/// "AVX512", "AVX2" or "DEFAULT": the kernels ATen dispatches to on this CPU, by ATen's rule
/// (AVX512 needs AVX512F/BW/VL/DQ; ATEN_CPU_CAPABILITY may lower the choice).
std::string aten_cpu_capability() {
  std::string best = "DEFAULT";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = "AVX2";
  if (best == "AVX2" && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    best = "AVX512";
  }
  const char* asked = std::getenv("ATEN_CPU_CAPABILITY");
  if (asked == nullptr) return best;
  const std::string lowered = std::string(asked) == "default" ? "DEFAULT" : std::string(asked) == "avx2" ? "AVX2" : "";
  if (lowered == "DEFAULT" || (lowered == "AVX2" && best == "AVX512")) return lowered;
  return best;
}
/// The measured peak: torch::mm of two n x n tensors in the case's precision (bf16 tensors give a
/// bf16 product, as the driver's bf16 Linear layers compute it; tf32 lets cuBLAS use TF32).
class LibTorchGemm final : public PeakKernel {
 public:
  LibTorchGemm(int64_t n, const DriverContext& ctx)
      : n_(n),
        threads_(ctx.threads),
        denormals_(ctx.denormals),
        device_(ctx.device == DeviceType::kCuda ? at::Device(at::kCUDA, static_cast<at::DeviceIndex>(ctx.device_index))
                                                : at::Device(at::kCPU)),
        precision_(ctx.precision) {
    at::set_num_threads(threads_);
    if (device_.is_cuda()) at::globalContext().setAllowTF32CuBLAS(precision_ == Precision::kTf32);
    const at::ScalarType type = precision_ == Precision::kBf16 ? at::kBFloat16 : at::kFloat;
    const at::TensorOptions opts = at::TensorOptions().dtype(type).device(device_);
    a_ = at::full({n, n}, 0.5, opts);
    b_ = at::full({n, n}, 0.25, opts);
    c_ = at::empty({n, n}, opts);
  }
  void run() override {
    if (at::get_num_threads() != threads_) at::set_num_threads(threads_);
    std::optional<DenormalScope> mode;
    if (!device_.is_cuda()) mode.emplace(denormals_, threads_);
    at::mm_out(c_, a_, b_);
  }
  void synchronize() override {
    if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
  }
  double work() const override { return 2.0 * static_cast<double>(n_) * static_cast<double>(n_) * n_; }
  std::string describe() const override {
    return fmt::format("torch::mm_out, {} tensors on {}, n={}, {} intra-op threads (LibTorch {})",
                       precision_name(precision_), device_.str(), n_, threads_, TORCH_VERSION);
  }

 private:
  int64_t n_;
  int threads_;
  Denormals denormals_;
  at::Device device_;
  Precision precision_;
  at::Tensor a_, b_, c_;
};

class LibTorchDriver final : public Driver {
 public:
  std::string_view name() const override { return "libtorch"; }

  Support supports(const Workload&, DeviceType) const override { return Support::yes(); }

  Support device_available(DeviceType device) const override {
    if (device != DeviceType::kCuda) return Support::yes();
#ifndef DLSCALE_WITH_CUDA
    // GPU steps need the CUDA parts of drivers/gpu/ (event timing, NCCL), which this build lacks.
    return Support::no("this dlscale was built without CUDA (build the cuda preset, docs/building.md)");
#else
    if (!torch::cuda::is_available()) return Support::no("this LibTorch was built without CUDA or sees no GPU");
    return Support::yes();
#endif
  }

#ifdef DLSCALE_WITH_CUDA
  int device_count(DeviceType device, std::string* why) const override {
    if (device == DeviceType::kCpu) return 1;
    if (!torch::cuda::is_available()) {
      if (why != nullptr) *why = "this LibTorch was built without CUDA or sees no GPU";
      return 0;
    }
    return gpu::visible_gpu_count(why);
  }

  std::string describe_device(DeviceType device, int index) const override {
    return device == DeviceType::kCuda ? gpu::gpu_info(index).describe() : std::string("cpu");
  }

  /// NCCL on the legacy default stream, where LibTorch's work is queued.
  std::unique_ptr<GradientReducer> make_reducer(DeviceType device, int device_index, const RankGroup& ranks,
                                                Deadline deadline) const override {
    if (device != DeviceType::kCuda) return nullptr;
    return gpu::make_nccl_reducer(ranks, device_index, deadline, [](const Model&) -> void* { return nullptr; });
  }
#endif

  Support supports_denormals(DeviceType device, Denormals mode) const override {
    return device == DeviceType::kCpu ? cpu_supports_denormals(mode) : Driver::supports_denormals(device, mode);
  }

  Support supports_precision(const Workload& w, DeviceType device, Precision precision) const override {
    if (precision == Precision::kTf32 && device == DeviceType::kCuda) return Support::yes();
    if (precision == Precision::kBf16) return Support::yes();  // autocast, on the CPU or a GPU
    return Driver::supports_precision(w, device, precision);
  }

  /// On the CPU: ATen's vector capability, chosen as ATen chooses it (its own query is not
  /// exported); bf16 products and convolutions go to LibTorch's oneDNN, which has bf16
  /// instructions only with AVX512-BF16 or AMX and emulates them otherwise.
  ComputeIsa compute_isa(DeviceType device, Precision precision) const override {
    if (device != DeviceType::kCpu) return {};
    ComputeIsa out{aten_cpu_capability(), true, {}};
    if (precision == Precision::kBf16) {
      const bool amx = __builtin_cpu_supports("amx-bf16"), avx512 = __builtin_cpu_supports("avx512bf16");
      out.native = at::hasMKLDNN() && (amx || avx512);
      if (out.native) out.isa += amx ? "+AMX-BF16" : "+AVX512-BF16";
      out.native_needs = "AVX512-BF16 or AMX-BF16 with a LibTorch built with oneDNN (mkldnn)";
    }
    return out;
  }

  std::unique_ptr<Model> create(const Workload& w, const DriverContext& ctx) const override {
    return out_of_memory_as_such([&] { return std::make_unique<LibTorchModel>(w, ctx); });
  }

  Support supports_peak(PeakKind kind, DeviceType device, Precision precision) const override {
    if (kind != PeakKind::kGemm) return Driver::supports_peak(kind, device, precision);
    if (const Support here = device_available(device); !here.ok) return here;
    if (precision == Precision::kTf32 && device != DeviceType::kCuda) {
      return Support::no("libtorch driver: tf32 is a GPU precision");
    }
    return Support::yes();
  }

  std::unique_ptr<PeakKernel> make_peak_kernel(PeakKind kind, int64_t n, const DriverContext& ctx) const override {
    if (kind != PeakKind::kGemm) return Driver::make_peak_kernel(kind, n, ctx);
    const Support ok = supports_peak(kind, ctx.device, ctx.precision);
    if (!ok.ok) throw std::invalid_argument(ok.reason);
    return out_of_memory_as_such([&] { return std::make_unique<LibTorchGemm>(n, ctx); });
  }

  std::map<std::string, std::string> versions() const override { return {{"libtorch", TORCH_VERSION}}; }
};

}  // namespace

DLSCALE_DRIVER_MODULE(LibTorchDriver)

}  // namespace dlscale
