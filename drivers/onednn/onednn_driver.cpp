// The oneDNN driver's Model and Driver. Parameters and gradients each live in one flat, aligned
// float buffer in the canonical layout: oneDNN reads Linear, batch-norm, bias and LSTM-bias
// parameters in place and writes their gradients straight into their slices; convolution and
// LSTM weights are reordered into the primitives' preferred layouts once per parameter change,
// and their gradients back into the slices once per step. So the all-reduce and the update (SGD,
// or Adam with its moments in two more flat buffers) each touch one buffer, and grad_buffer() is
// already in the canonical order.
//
// The batch size is known only at set_batch(): that is where every primitive is created (again
// only if the size changes). Threads: Debian's oneDNN runs on OpenMP, whose thread count is a
// per-calling-thread setting; it is applied before primitives are created (oneDNN sizes some
// kernels' work split then) and again at every entry point, because another driver in the same
// process (LibTorch shares libgomp) may have changed it in between.
//
// Floating-point mode: every entry point runs in the case's mode (drivers/cpu/denormal_scope.h),
// the same for every CPU driver. FCN-5's saturated sigmoids make part of its activations and
// gradients denormal, and with IEEE denormals every GEMM touching them slows down on microcode
// assists (bench/onednn_fcn5.cpp).
#include "drivers/onednn/onednn_driver.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>

#include <fmt/format.h>

#include "drivers/cpu/denormal_scope.h"
#include "drivers/onednn/onednn_bottleneck.h"
#include "drivers/onednn/onednn_common.h"
#include "drivers/onednn/onednn_layers.h"
#include "drivers/onednn/onednn_loss.h"
#include "drivers/onednn/onednn_lstm.h"

namespace dlscale {

namespace {

using onednn::NetLayer;
using onednn::ParamSlot;

/// A float buffer aligned to 64 bytes (a cache line and an AVX-512 vector), zero-initialised.
class AlignedFloats {
 public:
  explicit AlignedFloats(size_t count) : count_(count) {
    const size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
    data_.reset(static_cast<float*>(std::aligned_alloc(64, bytes == 0 ? 64 : bytes)));
    if (!data_) throw std::bad_alloc();
    std::memset(data_.get(), 0, bytes);
  }
  float* data() const { return data_.get(); }
  size_t size() const { return count_; }
  std::vector<float> to_vector() const { return {data_.get(), data_.get() + count_}; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  size_t count_;
  std::unique_ptr<float, Free> data_;
};

/// For the length of one driver call: the case's OpenMP thread count (oneDNN sizes some kernels'
/// work split by it, and another driver in the process may have changed it) and its
/// floating-point mode on every thread of the team.
class ExecutionScope {
 public:
  ExecutionScope(int threads, Denormals denormals) : threads_(apply_threads(threads)), mode_(denormals, threads) {}

 private:
  static int apply_threads(int threads) {
    if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
    return threads;
  }
  int threads_;  // set before the mode: the scope's team has the case's size
  DenormalScope mode_;
};

/// Calls range(begin, end) once per thread of the team, over [0, n) split into chunks of whole
/// cache lines, so that no two threads write the same line.
template <class Range>
void split_over_threads(int64_t n, const Range& range) {
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t lines = (n + 15) / 16;
    range(std::min(n, lines * t / threads * 16), std::min(n, lines * (t + 1) / threads * 16));
  }
}

// p -= lr g over [begin, end). The update streams 12 bytes per parameter and nothing else, and
// the baseline x86-64 code GCC emits (SSE2) keeps one core below its memory bandwidth: 93 ms
// for FCN-5's 118 M parameters, against 72 ms with AVX-512. Function multiversioning picks the
// widest clone the CPU has at load time, keeping the build portable.
DLSCALE_ONEDNN_MULTIVERSION void sgd_range(float* p, const float* g, float lr, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) p[i] -= lr * g[i];
}

void sgd(float* p, const float* g, float lr, int64_t n) {
  split_over_threads(n, [&](int64_t begin, int64_t end) { sgd_range(p, g, lr, begin, end); });
}

/// One Adam step's scalars, in float as torch.optim.Adam applies them to float tensors; the
/// bias corrections are computed in double first (Python floats there).
struct AdamStep {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, sqrt_correction2, epsilon;
  AdamStep(const Optimizer& opt, int64_t t)
      : beta1(static_cast<float>(opt.beta1)),
        one_minus_beta1(static_cast<float>(1 - opt.beta1)),
        beta2(static_cast<float>(opt.beta2)),
        one_minus_beta2(static_cast<float>(1 - opt.beta2)),
        step_size(static_cast<float>(opt.learning_rate / (1 - std::pow(opt.beta1, static_cast<double>(t))))),
        sqrt_correction2(static_cast<float>(std::sqrt(1 - std::pow(opt.beta2, static_cast<double>(t))))),
        epsilon(static_cast<float>(opt.epsilon)) {}
};

// Adam over [begin, end) in the order of operations of driver.h's Optimizer comment. Streams 20
// bytes per parameter: multiversioned like sgd_range.
DLSCALE_ONEDNN_MULTIVERSION void adam_range(float* p, const float* g, float* m, float* v, const AdamStep& s,
                                            int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    m[i] = s.beta1 * m[i] + s.one_minus_beta1 * g[i];
    v[i] = s.beta2 * v[i] + s.one_minus_beta2 * (g[i] * g[i]);
    p[i] -= s.step_size * (m[i] / (std::sqrt(v[i]) / s.sqrt_correction2 + s.epsilon));
  }
}

void adam(float* p, const float* g, float* m, float* v, const AdamStep& s, int64_t n) {
  split_over_threads(n, [&](int64_t begin, int64_t end) { adam_range(p, g, m, v, s, begin, end); });
}

class OnednnModel final : public Model {
 public:
  OnednnModel(const Workload& w, const DriverContext& ctx)
      : workload_(w),
        threads_(ctx.threads),
        denormals_(ctx.denormals),
        params_(static_cast<size_t>(parameter_count(w))),
        grads_(params_.size()),
        ranges_(layer_parameter_ranges(w)),
        loss_(w.loss, w.num_classes) {
    const ExecutionScope scope(threads_, denormals_);
    if (ctx.precision == Precision::kBf16) env_.compute = dnnl::memory::data_type::bf16;
    std::vector<std::vector<ParamSlot>> slots(w.layers.size());
    for (const ParamSpec& p : parameter_layout(w)) {
      slots[static_cast<size_t>(p.layer)].push_back({params_.data() + p.offset, grads_.data() + p.offset});
    }
    first_param_ = w.layers.size();
    for (size_t i = 0; i < w.layers.size(); ++i) {
      if (!slots[i].empty() && first_param_ == w.layers.size()) first_param_ = i;
      layers_.push_back(make_layer(w.layers[i], i, slots[i], ctx.seed));
    }
  }

  void load_parameters(const std::vector<float>& canonical) override {
    if (canonical.size() != params_.size()) {
      throw std::invalid_argument(
          fmt::format("onednn driver: load_parameters: expected {} values, got {}", params_.size(), canonical.size()));
    }
    std::memcpy(params_.data(), canonical.data(), canonical.size() * sizeof(float));
    ++version_;
    // New parameters start afresh: no optimiser state, no running statistics.
    adam_m_ = AlignedFloats(0);
    adam_v_ = AlignedFloats(0);
    adam_steps_ = 0;
    for (auto& layer : layers_) layer->reset_statistics();
  }

  std::vector<float> export_parameters() override { return params_.to_vector(); }
  std::vector<float> export_gradients() override { return grads_.to_vector(); }

  void set_batch(const Batch& batch) override {
    const ExecutionScope scope(threads_, denormals_);
    check_batch(workload_, batch, "onednn driver");
    labels_ = batch.labels;
    tokens_ = batch.tokens;
    if (batch.size != built_batch_) build(batch.size);
    if (workload_.input_kind == InputKind::kDense) {
      std::memcpy(input_.value.get_data_handle(), batch.features.data(), batch.features.size() * sizeof(float));
    }
  }

  void forward() override {
    if (built_batch_ == 0) throw std::logic_error("onednn driver: forward() before set_batch()");
    const ExecutionScope scope(threads_, denormals_);
    forward_layers(true);
    loss_value_ = onednn::with_context("loss", [&] { return loss_.forward(env_); });
  }

  Evaluation evaluate(const Batch& batch) override {
    set_batch(batch);
    const ExecutionScope scope(threads_, denormals_);
    forward_layers(false);
    return onednn::with_context("loss", [&] { return loss_.evaluate(env_); });
  }

  void backward() override {
    const ExecutionScope scope(threads_, denormals_);
    onednn::with_context("loss", [&] { loss_.backward(env_); });
    // Layers below the first parameterised one have nothing to train and no gradient to pass.
    for (size_t i = layers_.size(); i-- > first_param_;) {
      onednn::with_context(layers_[i]->name(), [&] { layers_[i]->backward(env_); });
      // The layer's gradients are in their slices now (staged ones synced back inside).
      if (ready_ && ranges_[i].count > 0) ready_(ranges_[i].first, ranges_[i].count);
    }
  }

  bool set_gradient_ready_callback(std::function<void(size_t, size_t)> ready) override {
    ready_ = std::move(ready);
    return true;
  }

  double loss() override { return loss_value_; }

  GradBuffer grad_buffer() override { return {grads_.data(), grads_.size(), false}; }

  void update(const Optimizer& opt, const ParameterShard& shard) override {
    const ExecutionScope scope(threads_, denormals_);
    const std::vector<ParamRange> ranges = shard.ranges_in(params_.size());
    if (opt.kind == OptimizerKind::kAdam) {
      const size_t state = shard.elements(params_.size());
      if (adam_m_.size() == 0) {  // the first Adam step since making or loading
        try {
          adam_m_ = AlignedFloats(state);
          adam_v_ = AlignedFloats(state);
        } catch (const std::bad_alloc&) {
          throw OutOfMemory(fmt::format("onednn driver: out of host memory for Adam's state of {} parameters", state));
        }
      }
      if (adam_m_.size() != state) throw std::logic_error("onednn driver: Adam's shard changed between updates");
      ++adam_steps_;
      const AdamStep step(opt, adam_steps_);
      size_t at = 0;  // the state is packed in range order
      for (const ParamRange& r : ranges) {
        adam(params_.data() + r.first, grads_.data() + r.first, adam_m_.data() + at, adam_v_.data() + at, step,
             static_cast<int64_t>(r.count));
        at += r.count;
      }
    } else {
      for (const ParamRange& r : ranges) {
        sgd(params_.data() + r.first, grads_.data() + r.first, static_cast<float>(opt.learning_rate),
            static_cast<int64_t>(r.count));
      }
    }
    ++version_;  // staged weight copies are stale now
  }

  ParameterBuffer parameters() override { return {params_.data(), params_.size(), sizeof(float)}; }
  void parameters_changed() override { ++version_; }

  void synchronize() override { env_.stream.wait(); }

  MemoryStats memory() const override {
    return {0, static_cast<int64_t>((adam_m_.size() + adam_v_.size()) * sizeof(float))};
  }

 private:
  std::unique_ptr<NetLayer> make_layer(const Layer& l, size_t index, const std::vector<ParamSlot>& slots,
                                       uint64_t seed) {
    using namespace onednn;
    const std::string name = describe_layer(l, index);
    const ParamSlot none;
    switch (l.kind) {
      case LayerKind::kLinear:
        return std::make_unique<LinearLayer>(name, l.in, l.out, slots[0], l.bias ? slots[1] : none, &version_);
      case LayerKind::kConv2d:
        return std::make_unique<ConvLayer>(name, ConvSpec{l.in, l.out, l.kernel, l.stride, l.padding, l.bias}, slots[0],
                                           l.bias ? slots[1] : none, &version_);
      case LayerKind::kMaxPool2d:
        return std::make_unique<PoolLayer>(name, l.kernel, l.stride, l.padding, false);
      case LayerKind::kGlobalAvgPool:
        return std::make_unique<PoolLayer>(name, 0, 1, 0, true);
      case LayerKind::kReLU:
      case LayerKind::kSigmoid:
      case LayerKind::kTanh:
        return std::make_unique<ActivationLayer>(name, l.kind);
      case LayerKind::kDropout:
        return std::make_unique<DropoutLayer>(name, l.p, seed, index);
      case LayerKind::kBatchNorm2d:
        return std::make_unique<BatchNormLayer>(name, l.in, slots[0], slots[1], false);
      case LayerKind::kBottleneck:
        return std::make_unique<BottleneckLayer>(name, l, slots, &version_);
      case LayerKind::kFlatten:
        return std::make_unique<FlattenLayer>(name);
      case LayerKind::kEmbedding:
        return std::make_unique<EmbeddingLayer>(name, l.in, l.out, workload_.input_shape.front(), slots[0], &tokens_);
      case LayerKind::kLstm:
        return std::make_unique<LstmLayer>(name, l, slots, &version_);
    }
    throw std::invalid_argument("onednn driver: " + name + " has an unknown kind");
  }

  /// Every layer's forward pass, for training or for inference (Env::training).
  void forward_layers(bool training) {
    env_.training = training;
    for (auto& layer : layers_) onednn::with_context(layer->name(), [&] { layer->forward(env_); });
  }

  /// Creates every primitive and buffer for batches of `n` samples.
  void build(int64_t n) {
    built_batch_ = 0;  // stays 0 if building fails part-way
    env_.batch = n;
    onednn::Tensor cur;
    try {
      if (workload_.input_kind == InputKind::kDense) {
        dnnl::memory::dims dims{n};
        dims.insert(dims.end(), workload_.input_shape.begin(), workload_.input_shape.end());
        input_ = {onednn::with_context("input", [&] { return onednn::allocate(env_, onednn::plain_md(dims)); }), {}};
        cur = input_;
      }
      for (size_t i = 0; i < layers_.size(); ++i) {
        onednn::with_context(layers_[i]->name(), [&] { layers_[i]->build(env_, cur, i >= first_param_); });
        cur = layers_[i]->out();
      }
      onednn::with_context("loss", [&] { loss_.build(env_, cur, &labels_); });
    } catch (const std::bad_alloc&) {
      throw OutOfMemory(fmt::format("onednn driver: out of host memory building {} for batch {}", workload_.name, n));
    }
    built_batch_ = n;
  }

  Workload workload_;
  int threads_;
  Denormals denormals_;
  AlignedFloats params_, grads_;
  AlignedFloats adam_m_{0}, adam_v_{0};        ///< Adam's moments; empty until its first update
  int64_t adam_steps_ = 0;                     ///< Adam's t
  std::vector<ParamRange> ranges_;             ///< per layer
  std::function<void(size_t, size_t)> ready_;  ///< the harness's, or empty
  uint64_t version_ = 0;                       // bumped whenever params_ changes
  onednn::Env env_;
  std::vector<std::unique_ptr<NetLayer>> layers_;
  size_t first_param_ = 0;  // layers below it run no backward pass
  onednn::Loss loss_;
  onednn::Tensor input_;
  std::vector<int64_t> labels_, tokens_;
  int64_t built_batch_ = 0;
  double loss_value_ = 0;
};

std::string isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::all:
      return "all";
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
  }
  return fmt::format("isa#{}", static_cast<int>(isa));
}

/// Whether oneDNN can make a bf16 matrix product here (with f32 results, as the driver asks).
bool has_bf16_kernels() {
  static const bool has = [] {
    try {
      const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      const auto bf16 = dnnl::memory::data_type::bf16;
      const dnnl::memory::desc a({16, 16}, bf16, dnnl::memory::format_tag::ab);
      const dnnl::memory::desc c({16, 16}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, a, c), engine);
      return true;
    } catch (const dnnl::error&) {
      return false;  // "could not create a primitive descriptor": no implementation for bf16
    }
  }();
  return has;
}

std::string runtime_name(unsigned runtime) {
  switch (runtime) {
    case DNNL_RUNTIME_SEQ:
      return "sequential";
    case DNNL_RUNTIME_OMP:
      return "OpenMP";
    case DNNL_RUNTIME_TBB:
      return "TBB";
    case DNNL_RUNTIME_THREADPOOL:
      return "threadpool";
    default:
      return fmt::format("runtime#{}", runtime);
  }
}

/// Whether oneDNN computes bf16 products with bf16 instructions on `isa` (AVX512_BF16's dot
/// products, or AMX), rather than emulating them with fp32 ones.
bool bf16_native_on(dnnl::cpu_isa isa) {
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

/// The ISA oneDNN's fp32 kernels run on when its effective ISA is `isa`: the VNNI, BF16 and AMX
/// extensions hold integer and bf16 instructions only, so fp32 products on such a CPU use the
/// plain AVX-512 (or AVX2) kernels, as their implementation names say (`brg:avx512_core`).
dnnl::cpu_isa fp32_isa_on(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx:
      return dnnl::cpu_isa::avx512_core;
    case dnnl::cpu_isa::avx2_vnni:
      return dnnl::cpu_isa::avx2;
    default:
      return isa;
  }
}

Support native_bf16() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  if (bf16_native_on(isa)) return Support::yes();
  return Support::no(fmt::format(
      "onednn driver: bf16 needs native bf16 products (AVX512_BF16 or AMX); oneDNN runs {} here", isa_name(isa)));
}

/// The measured peak: oneDNN's matmul primitive, C[f32] = A B with A and B in the case's
/// precision (bf16 products accumulate in fp32), on plain row-major matrices.
class OnednnGemm final : public PeakKernel {
  using memory = dnnl::memory;

 public:
  OnednnGemm(int64_t n, const DriverContext& ctx) : n_(n), threads_(ctx.threads), denormals_(ctx.denormals) {
    const ExecutionScope scope(threads_, denormals_);
    const auto type = ctx.precision == Precision::kBf16 ? memory::data_type::bf16 : memory::data_type::f32;
    const memory::dims dims{n, n};
    const memory::desc in_md(dims, type, memory::format_tag::ab);
    // B in the layout the kernel prefers (bf16 kernels want pairs of rows interleaved), reordered
    // once here, as a layer keeps its weights between updates; with a plain B every product
    // would repack it.
    const memory::desc b_md(dims, type, memory::format_tag::any);
    const memory::desc out_md(dims, memory::data_type::f32, memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(in_md, b_md, out_md), env_.engine);
    impl_ = pd.impl_info_str();
    type_ = type == memory::data_type::bf16 ? "bf16 x bf16 -> f32" : "f32 x f32 -> f32";
    a_ = onednn::allocate(env_, in_md);
    b_ = onednn::allocate(env_, pd.weights_desc());
    c_ = onednn::allocate(env_, out_md);
    // Filled through a reorder from f32, which converts to bf16 where needed.
    std::vector<float> values(static_cast<size_t>(n * n), 0.5f);
    memory src = onednn::wrap(env_, onednn::plain_md(dims), values.data());
    dnnl::reorder(src, a_).execute(env_.stream, src, a_);
    dnnl::reorder(src, b_).execute(env_.stream, src, b_);
    env_.stream.wait();
    matmul_ = dnnl::matmul(pd);
  }
  void run() override {
    const ExecutionScope scope(threads_, denormals_);
    matmul_.execute(env_.stream, {{DNNL_ARG_SRC, a_}, {DNNL_ARG_WEIGHTS, b_}, {DNNL_ARG_DST, c_}});
  }
  void synchronize() override { env_.stream.wait(); }
  double work() const override { return 2.0 * static_cast<double>(n_) * static_cast<double>(n_) * n_; }
  std::string describe() const override {
    return fmt::format("oneDNN matmul ({}), {}, B prepacked, n={}, ISA {}", impl_, type_, n_,
                       isa_name(dnnl::get_effective_cpu_isa()));
  }

 private:
  int64_t n_;
  int threads_;
  Denormals denormals_;
  onednn::Env env_;
  memory a_, b_, c_;
  dnnl::matmul matmul_;
  std::string impl_, type_;
};

class OnednnDriver final : public Driver {
 public:
  std::string_view name() const override { return "onednn"; }

  Support supports(const Workload& w, DeviceType device) const override {
    if (device != DeviceType::kCpu) return Support::no("onednn driver: CPU only");
    const unsigned runtime = dnnl_version()->cpu_runtime;
    if (runtime != DNNL_RUNTIME_OMP && runtime != DNNL_RUNTIME_SEQ) {
      return Support::no(
          fmt::format("onednn driver: this oneDNN threads with {}; the driver sets thread counts through OpenMP only",
                      runtime_name(runtime)));
    }
    for (size_t i = 0; i < w.layers.size(); ++i) {
      const Layer& l = w.layers[i];
      if (l.kind == LayerKind::kLstm && l.num_layers < 1) {
        return Support::no(fmt::format("onednn driver: {} has no stacked layer", describe_layer(l, i)));
      }
      if (l.kind == LayerKind::kEmbedding && (i != 0 || w.input_kind != InputKind::kTokens)) {
        return Support::no(
            fmt::format("onednn driver: {} must be the first layer of a token workload", describe_layer(l, i)));
      }
    }
    if (w.input_kind == InputKind::kTokens && (w.layers.empty() || w.layers.front().kind != LayerKind::kEmbedding)) {
      return Support::no("onednn driver: token input needs an Embedding first layer");
    }
    if (w.loss == LossKind::kSigmoidBinaryCrossEntropy && w.num_classes != 1) {
      return Support::no("onednn driver: binary cross-entropy needs one logit per sample");
    }
    try {
      activation_shapes(w);
    } catch (const std::invalid_argument& e) {
      return Support::no(e.what());
    }
    return Support::yes();
  }

  Support supports_denormals(DeviceType, Denormals mode) const override { return cpu_supports_denormals(mode); }

  /// fp32, and bf16 wherever this oneDNN has bf16 kernels for the CPU: natively from
  /// avx512_core_bf16 on, emulated on avx512_core, none below (AVX2), which a probe primitive
  /// tells rather than a table of ISAs that changes between oneDNN versions.
  Support supports_precision(const Workload& w, DeviceType device, Precision precision) const override {
    if (precision != Precision::kBf16) return Driver::supports_precision(w, device, precision);
    if (!has_bf16_kernels()) {
      return Support::no(fmt::format("onednn driver: this oneDNN has no bf16 kernels for ISA {}",
                                     isa_name(dnnl::get_effective_cpu_isa())));
    }
    return Support::yes();
  }

  ComputeIsa compute_isa(DeviceType, Precision precision) const override {
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    if (precision != Precision::kBf16) return ComputeIsa{isa_name(fp32_isa_on(isa)), true, {}};
    return ComputeIsa{isa_name(isa), bf16_native_on(isa), "avx512_core_bf16 or avx512_core_amx"};
  }

  std::unique_ptr<Model> create(const Workload& w, const DriverContext& ctx) const override {
    if (ctx.device != DeviceType::kCpu) throw std::invalid_argument("onednn driver: CPU only");
    if (ctx.threads < 1) throw std::invalid_argument("onednn driver: threads must be positive");
    if (dnnl_version()->cpu_runtime == DNNL_RUNTIME_SEQ && ctx.threads != 1) {
      throw std::invalid_argument(
          fmt::format("onednn driver: this oneDNN is sequential and cannot use {} threads", ctx.threads));
    }
    try {
      return std::make_unique<OnednnModel>(w, ctx);
    } catch (const std::bad_alloc&) {
      throw OutOfMemory(
          fmt::format("onednn driver: out of host memory for {} ({} parameters)", w.name, parameter_count(w)));
    }
  }

  Support supports_peak(PeakKind kind, DeviceType device, Precision precision) const override {
    if (kind != PeakKind::kGemm) return Driver::supports_peak(kind, device, precision);
    if (device != DeviceType::kCpu) return Support::no("onednn driver: CPU only");
    if (precision == Precision::kBf16) return native_bf16();
    if (precision != Precision::kFp32) {
      return Support::no(fmt::format("onednn driver: no {} matmul on the CPU", precision_name(precision)));
    }
    return Support::yes();
  }

  std::unique_ptr<PeakKernel> make_peak_kernel(PeakKind kind, int64_t n, const DriverContext& ctx) const override {
    if (kind != PeakKind::kGemm) return Driver::make_peak_kernel(kind, n, ctx);
    const Support ok = supports_peak(kind, ctx.device, ctx.precision);
    if (!ok.ok) throw std::invalid_argument(ok.reason);
    return std::make_unique<OnednnGemm>(n, ctx);
  }

  std::map<std::string, std::string> versions() const override {
    const dnnl_version_t* v = dnnl_version();
    return {{"onednn", fmt::format("{}.{}.{} ({})", v->major, v->minor, v->patch, v->hash ? v->hash : "no hash")},
            {"onednn_isa", isa_name(dnnl::get_effective_cpu_isa())},
            {"onednn_cpu_runtime", runtime_name(v->cpu_runtime)}};
  }
};

}  // namespace

void register_onednn(Registry& registry) { registry.add(std::make_unique<OnednnDriver>()); }

}  // namespace dlscale
