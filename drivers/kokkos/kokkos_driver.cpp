// The Kokkos driver's Model and Driver, and the process-wide Kokkos runtime. Parameters and
// gradients each live in one flat View in the canonical layout; the layers read and write their
// slices in place, so grad_buffer() is the canonical export and the update (SGD, or Adam with its
// moments in two more flat Views) is one kernel.
//
// Kokkos is initialised once per process, by the first create(), with that case's thread count
// (OpenMP and Threads execution spaces) and GPU (CUDA), and finalised from std::atexit: after
// main() returns, when every Model (and so every View) is gone, and before the destructors of
// statics created earlier. An execution space cannot change its thread count or GPU afterwards,
// so a later case that asks for others is refused with the reason.
//
// Threads: with a Serial execution space (Debian's Kokkos) the driver's own kernels run on one
// thread whatever the case asks, and the case's threads can reach only the BLAS behind Kokkos
// Kernels' GEMM. Where that BLAS is OpenBLAS the driver sets its thread count at every entry
// point (OpenBLAS' OpenMP build follows the calling thread's OpenMP setting, which another
// driver in the process may have changed in between); where nothing can use more than one
// thread, a case asking for more is refused. versions() records which of these applies.
#include "drivers/kokkos/kokkos_driver.h"

#include <dlfcn.h>

#include <KokkosKernels_config.h>
#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdlib>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <type_traits>

#if !defined(KOKKOSKERNELS_VERSION) && __has_include(<Trilinos_version.h>)
#include <Trilinos_version.h>  // Kokkos Kernels inside Trilinos defines no version of its own
#endif

#include <fmt/format.h>

#include "drivers/cpu/denormal_scope.h"
#include "drivers/kokkos/kokkos_common.h"

namespace dlscale {

namespace kk {

void sgd(Floats params, Floats grads, float lr) {
  Kokkos::parallel_for(
      "kokkos_driver::sgd", Range(0, static_cast<int64_t>(params.extent(0))),
      KOKKOS_LAMBDA(int64_t i) { params(i) -= lr * grads(i); });
}

// In float, as torch.optim.Adam applies its scalars to float tensors; the bias corrections are
// computed in double first (Python floats there).
void adam(Floats params, Floats grads, Floats m, Floats v, const Optimizer& opt, int64_t t) {
  const auto beta1 = static_cast<float>(opt.beta1), one_minus_beta1 = static_cast<float>(1 - opt.beta1);
  const auto beta2 = static_cast<float>(opt.beta2), one_minus_beta2 = static_cast<float>(1 - opt.beta2);
  const auto step_size = static_cast<float>(opt.learning_rate / (1 - std::pow(opt.beta1, static_cast<double>(t))));
  const auto sqrt_correction2 = static_cast<float>(std::sqrt(1 - std::pow(opt.beta2, static_cast<double>(t))));
  const auto epsilon = static_cast<float>(opt.epsilon);
  Kokkos::parallel_for(
      "kokkos_driver::adam", Range(0, static_cast<int64_t>(params.extent(0))), KOKKOS_LAMBDA(int64_t i) {
        const float g = grads(i);
        const float mi = beta1 * m(i) + one_minus_beta1 * g;
        const float vi = beta2 * v(i) + one_minus_beta2 * (g * g);
        m(i) = mi;
        v(i) = vi;
        params(i) -= step_size * (mi / (math::sqrt(vi) / sqrt_correction2 + epsilon));
      });
}

}  // namespace kk

namespace {

using kk::ExecSpace;
using kk::kOnDevice;

// ---------------------------------------------------------------------------------------------
// What the execution space is.

constexpr bool kHostExecution = std::is_same<ExecSpace, Kokkos::DefaultHostExecutionSpace>::value;
#if defined(KOKKOS_ENABLE_CUDA)
constexpr bool kCudaExecution = std::is_same<ExecSpace, Kokkos::Cuda>::value;
#else
constexpr bool kCudaExecution = false;
#endif

/// Whether Kokkos::initialize's thread count is the number of threads the kernels run on.
constexpr bool threads_set_at_initialize() {
#if defined(KOKKOS_ENABLE_OPENMP)
  if (std::is_same<ExecSpace, Kokkos::OpenMP>::value) return true;
#endif
#if defined(KOKKOS_ENABLE_THREADS)
  if (std::is_same<ExecSpace, Kokkos::Threads>::value) return true;
#endif
  return false;
}

/// Whether the kernels and the BLAS run on threads whose floating-point mode DenormalScope sets:
/// the calling thread (Serial) or its OpenMP team (OpenMP). Kokkos::Threads keeps its own pool.
constexpr bool kernels_on_calling_threads() {
#if defined(KOKKOS_ENABLE_SERIAL)
  if (std::is_same<ExecSpace, Kokkos::Serial>::value) return true;
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
  if (std::is_same<ExecSpace, Kokkos::OpenMP>::value) return true;
#endif
  return false;
}

std::string version_string(int v) { return fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100); }

std::string kernels_version() {
#if defined(KOKKOSKERNELS_VERSION)
  return version_string(KOKKOSKERNELS_VERSION);
#elif defined(TRILINOS_VERSION_STRING)
  return fmt::format("the one in Trilinos {} (it defines no version macro)", TRILINOS_VERSION_STRING);
#else
  return "unknown (no version macro)";
#endif
}

std::string kernels_tpls() {
  std::string tpls;
  auto add = [&](const char* name) { tpls += tpls.empty() ? name : std::string(", ") + name; };
#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
  add("BLAS");
#endif
#if defined(KOKKOSKERNELS_ENABLE_TPL_CBLAS)
  add("CBLAS");
#endif
#if defined(KOKKOSKERNELS_ENABLE_TPL_MKL)
  add("MKL");
#endif
#if defined(KOKKOSKERNELS_ENABLE_TPL_ARMPL)
  add("ARMPL");
#endif
#if defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS)
  add("cuBLAS");
#endif
#if defined(KOKKOSKERNELS_ENABLE_TPL_ROCBLAS)
  add("rocBLAS");
#endif
#if defined(KOKKOSKERNELS_ENABLE_TPL_MAGMA)
  add("MAGMA");
#endif
  return tpls.empty() ? "none (Kokkos Kernels' own GEMM)" : tpls;
}

// ---------------------------------------------------------------------------------------------
// The BLAS behind Kokkos Kernels' host GEMM: OpenBLAS' thread controls, looked up at run time
// (the BLAS is whatever libblas.so.3 resolves to; OpenBLAS' own header is not required).

class BlasThreads {
 public:
  static const BlasThreads& get() {
    static const BlasThreads instance;
    return instance;
  }

  /// Whether the thread count can be set: OpenBLAS with threads (pthreads or OpenMP).
  bool settable() const { return set_ != nullptr && get_ != nullptr && parallel_ != nullptr && parallel_() != 0; }

  /// Sets the BLAS to `threads`; throws when it will use another number.
  void apply(int threads) const {
    if (get_() != threads) set_(threads);
    const int now = get_();
    if (now != threads) {
      throw std::invalid_argument(
          fmt::format("kokkos driver: the BLAS (OpenBLAS) runs {} threads when asked for {}", now, threads));
    }
  }

  std::string describe() const {
    if (set_ == nullptr || get_ == nullptr || parallel_ == nullptr) {
      return "not set: no OpenBLAS thread control (openblas_set_num_threads) in the process; the BLAS keeps its own "
             "default";
    }
    switch (parallel_()) {
      case 0:
        return "OpenBLAS, sequential build: 1";
      case 1:
        return "OpenBLAS, pthreads build: the case's threads (openblas_set_num_threads)";
      case 2:
        return "OpenBLAS, OpenMP build: the case's threads (openblas_set_num_threads, at every driver call)";
      default:
        return fmt::format("OpenBLAS, threading model #{}: the case's threads (openblas_set_num_threads)", parallel_());
    }
  }

 private:
  BlasThreads()
      : set_(reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))),
        get_(reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"))),
        parallel_(reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"))) {}

  void (*set_)(int);
  int (*get_)();
  int (*parallel_)();
};

// ---------------------------------------------------------------------------------------------
// The process-wide runtime.

struct Runtime {
  std::mutex mutex;
  bool started_here = false, finalized = false;
  int threads = 0, device = 0;
};

Runtime& runtime() {
  static Runtime r;
  return r;
}

void finalize_kokkos() {
  Runtime& r = runtime();
  const std::lock_guard<std::mutex> lock(r.mutex);
  if (r.started_here && Kokkos::is_initialized()) Kokkos::finalize();
  r.finalized = true;
}

/// Initialises Kokkos on the first call; afterwards checks that `ctx` fits what it started with.
void ensure_kokkos(const DriverContext& ctx) {
  Runtime& r = runtime();
  const std::lock_guard<std::mutex> lock(r.mutex);
  if (r.finalized) throw std::logic_error("kokkos driver: Kokkos was already finalised in this process");
  if (!Kokkos::is_initialized()) {
#if KOKKOS_VERSION >= 30700
    Kokkos::InitializationSettings settings;
    if (threads_set_at_initialize()) settings.set_num_threads(ctx.threads);
    if (kCudaExecution) settings.set_device_id(ctx.device_index);
    Kokkos::initialize(settings);
#else
    Kokkos::InitArguments args;
    if (threads_set_at_initialize()) args.num_threads = ctx.threads;
    if (kCudaExecution) args.device_id = ctx.device_index;
    Kokkos::initialize(args);
#endif
    r.started_here = true;
    r.threads = ctx.threads;
    r.device = ctx.device_index;
    // Registered after the statics that exist by now, so it runs before their destructors.
    if (std::atexit(finalize_kokkos) != 0) throw std::runtime_error("kokkos driver: std::atexit failed");
    return;
  }
  if (!r.started_here) return;  // someone else's Kokkos: their settings stand
  if (threads_set_at_initialize() && ctx.threads != r.threads) {
    throw std::invalid_argument(fmt::format(
        "kokkos driver: Kokkos::{} started with {} threads in this process (the first case's) and cannot change "
        "them; run one thread count per process",
        ExecSpace::name(), r.threads));
  }
  if (kCudaExecution && ctx.device_index != r.device) {
    throw std::invalid_argument(
        fmt::format("kokkos driver: Kokkos::Cuda started on GPU {} in this process and cannot move to GPU {}", r.device,
                    ctx.device_index));
  }
}

// ---------------------------------------------------------------------------------------------
// The measured peak: the GEMM every Linear and convolution layer of the driver calls (kk::gemm).

class KokkosGemm final : public PeakKernel {
 public:
  KokkosGemm(int64_t n, const DriverContext& ctx)
      : n_(n),
        threads_(ctx.threads),
        denormals_(ctx.denormals),
        a_(kk::make_floats("kokkos_peak::a", n * n)),
        b_(kk::make_floats("kokkos_peak::b", n * n)),
        c_(kk::make_floats("kokkos_peak::c", n * n)) {
    Kokkos::deep_copy(a_, 0.5f);
    Kokkos::deep_copy(b_, 0.25f);
    Kokkos::deep_copy(c_, 0.0f);
  }
  void run() override {
    std::optional<DenormalScope> scope;
    if (!kOnDevice) {
      if (BlasThreads::get().settable()) BlasThreads::get().apply(threads_);
      scope.emplace(denormals_, threads_);
    }
    kk::gemm(false, false, 1.0f, {a_.data(), n_, n_}, {b_.data(), n_, n_}, 0.0f, {c_.data(), n_, n_});
  }
  void synchronize() override { Kokkos::fence(); }
  double work() const override { return 2.0 * static_cast<double>(n_) * static_cast<double>(n_) * n_; }
  std::string describe() const override {
    return fmt::format("KokkosBlas::gemm (TPLs: {}) on Kokkos::{}, float32, n={}, BLAS threads: {}", kernels_tpls(),
                       ExecSpace::name(), n_, kOnDevice ? "-" : BlasThreads::get().describe());
  }

 private:
  int64_t n_;
  int threads_;
  Denormals denormals_;
  kk::Floats a_, b_, c_;
};

// ---------------------------------------------------------------------------------------------
// The model.

template <typename T>
using HostView = Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

std::vector<float> to_host(const kk::Floats& v) {
  std::vector<float> out(v.extent(0));
  Kokkos::deep_copy(HostView<float>(out.data(), out.size()), v);
  return out;
}

class KokkosModel final : public Model {
 public:
  KokkosModel(const Workload& w, const DriverContext& ctx)
      : workload_(w),
        threads_(ctx.threads),
        denormals_(ctx.denormals),
        ranges_(layer_parameter_ranges(w)),
        params_("kokkos_driver::parameters", static_cast<size_t>(parameter_count(w))),
        grads_("kokkos_driver::gradients", params_.extent(0)),
        loss_(w.loss, w.num_classes) {
    std::vector<std::vector<kk::ParamSlot>> slots(w.layers.size());
    for (const ParamSpec& p : parameter_layout(w)) {
      slots[static_cast<size_t>(p.layer)].push_back(
          {kk::slice(params_, p.offset, p.count), kk::slice(grads_, p.offset, p.count)});
    }
    first_param_ = w.layers.size();
    for (size_t i = 0; i < w.layers.size(); ++i) {
      if (!slots[i].empty() && first_param_ == w.layers.size()) first_param_ = i;
      layers_.push_back(kk::make_layer(describe_layer(w.layers[i], i), w.layers[i], slots[i], &tokens_, ctx.seed, i));
    }
  }

  void load_parameters(const std::vector<float>& canonical) override {
    if (canonical.size() != params_.extent(0)) {
      throw std::invalid_argument(fmt::format("kokkos driver: load_parameters: expected {} values, got {}",
                                              params_.extent(0), canonical.size()));
    }
    Kokkos::deep_copy(params_, HostView<const float>(canonical.data(), canonical.size()));
    // New parameters start afresh: no optimiser state, no running statistics.
    adam_m_ = kk::Floats();
    adam_v_ = kk::Floats();
    adam_steps_ = 0;
    for (auto& layer : layers_) layer->reset_statistics();
  }

  std::vector<float> export_parameters() override { return to_host(params_); }
  std::vector<float> export_gradients() override { return to_host(grads_); }

  void set_batch(const Batch& batch) override {
    check_batch(workload_, batch, "kokkos driver");
    try {
      if (batch.size != built_batch_) build(batch);
      Kokkos::deep_copy(labels_, HostView<const int64_t>(batch.labels.data(), batch.labels.size()));
      if (workload_.input_kind == InputKind::kTokens) {
        Kokkos::deep_copy(tokens_, HostView<const int64_t>(batch.tokens.data(), batch.tokens.size()));
      } else {
        Kokkos::deep_copy(input_.data, HostView<const float>(batch.features.data(), batch.features.size()));
      }
    } catch (const std::bad_alloc&) {
      throw OutOfMemory(
          fmt::format("kokkos driver: out of memory building {} for batch {}", workload_.name, batch.size));
    }
  }

  void forward() override {
    if (built_batch_ == 0) throw std::logic_error("kokkos driver: forward() before set_batch()");
    const auto scope = use_threads();
    for (auto& layer : layers_) layer->forward(kk::Pass::kTraining);
    loss_.forward();
  }

  Evaluation evaluate(const Batch& batch) override {
    set_batch(batch);
    const auto scope = use_threads();
    for (auto& layer : layers_) layer->forward(kk::Pass::kInference);
    return loss_.evaluate();  // waits for the device
  }

  void backward() override {
    const auto scope = use_threads();
    loss_.backward();
    // Layers below the first parameterised one have nothing to train and no gradient to pass.
    for (size_t i = layers_.size(); i-- > first_param_;) {
      layers_[i]->backward();
      if (ready_ && ranges_[i].count > 0) {
        ExecSpace().fence();  // kernels may still be queued; the range is final after the fence
        ready_(ranges_[i].first, ranges_[i].count);
      }
    }
  }

  /// On the host only: device gradients go through no host-memory reduction.
  bool set_gradient_ready_callback(std::function<void(size_t, size_t)> ready) override {
    if (kOnDevice) return false;
    ready_ = std::move(ready);
    return true;
  }

  double loss() override { return loss_.value(); }

  GradBuffer grad_buffer() override { return {grads_.data(), grads_.extent(0), kOnDevice}; }

  void update(const Optimizer& opt, const ParameterShard& shard) override {
    if (!shard.whole && kOnDevice) throw std::logic_error("kokkos driver: a sharded update on a device");
    const auto scope = use_threads();
    const std::vector<ParamRange> ranges = shard.ranges_in(params_.extent(0));
    const auto part = [](const kk::Floats& v, size_t first, size_t count) {
      return kk::slice(v, static_cast<int64_t>(first), static_cast<int64_t>(count));
    };
    if (opt.kind == OptimizerKind::kSgd) {
      for (const ParamRange& r : ranges) {
        kk::sgd(part(params_, r.first, r.count), part(grads_, r.first, r.count), static_cast<float>(opt.learning_rate));
      }
      return;
    }
    const size_t state = shard.elements(params_.extent(0));
    if (adam_m_.extent(0) == 0) {  // the first Adam step since making or loading: zero moments
      try {
        adam_m_ = kk::Floats("kokkos_driver::adam_m", state);
        adam_v_ = kk::Floats("kokkos_driver::adam_v", state);
      } catch (const std::bad_alloc&) {  // what Kokkos' allocation failures derive from
        throw OutOfMemory(fmt::format("kokkos driver: out of memory for Adam's state of {} parameters", state));
      }
    }
    if (adam_m_.extent(0) != state) throw std::logic_error("kokkos driver: Adam's shard changed between updates");
    ++adam_steps_;
    size_t offset = 0;  // the state is packed in range order
    for (const ParamRange& r : ranges) {
      kk::adam(part(params_, r.first, r.count), part(grads_, r.first, r.count), part(adam_m_, offset, r.count),
               part(adam_v_, offset, r.count), opt, adam_steps_);
      offset += r.count;
    }
  }

  ParameterBuffer parameters() override {
    if (kOnDevice) return {};
    return {params_.data(), params_.extent(0), sizeof(float)};
  }

  void synchronize() override { Kokkos::fence(); }

  MemoryStats memory() const override {
    return {kOnDevice ? -1 : 0, static_cast<int64_t>((adam_m_.extent(0) + adam_v_.extent(0)) * sizeof(float))};
  }

 private:
  /// At every computing entry point on the host: the case's BLAS threads, and its floating-point
  /// mode for the length of the call (held by the returned scope).
  std::optional<DenormalScope> use_threads() const {
    if (kOnDevice) return std::nullopt;
    if (BlasThreads::get().settable()) BlasThreads::get().apply(threads_);
    return std::optional<DenormalScope>(std::in_place, denormals_, threads_);
  }

  /// Allocates every buffer for batches of `batch.size` samples.
  void build(const Batch& batch) {
    built_batch_ = 0;  // stays 0 if building fails part-way
    const int64_t n = batch.size;
    labels_ = kk::Ids(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kokkos_driver::labels"), batch.labels.size());
    kk::Activation cur;
    cur.shape = {n};
    cur.shape.insert(cur.shape.end(), workload_.input_shape.begin(), workload_.input_shape.end());
    if (workload_.input_kind == InputKind::kTokens) {
      tokens_ = kk::Ids(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kokkos_driver::tokens"), batch.tokens.size());
    } else {
      input_ = {kk::make_floats("kokkos_driver::input", n * workload_.input_size()), cur.shape};
      cur = input_;
    }
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->build(cur, i > first_param_ ? layers_[i - 1]->out_grad() : kk::Floats());
      cur = layers_[i]->out();
    }
    loss_.build(cur, layers_.back()->out_grad(), labels_);
    built_batch_ = n;
  }

  Workload workload_;
  int threads_;
  Denormals denormals_;
  std::vector<ParamRange> ranges_;             ///< per layer
  std::function<void(size_t, size_t)> ready_;  ///< the harness's, or empty
  kk::Floats params_, grads_;
  kk::Floats adam_m_, adam_v_;  ///< Adam's moments, on the device; empty until its first update
  int64_t adam_steps_ = 0;      ///< Adam's t
  std::vector<std::unique_ptr<kk::NetLayer>> layers_;
  size_t first_param_ = 0;  // layers below it run no backward pass
  kk::Loss loss_;
  kk::Activation input_;
  kk::Ids labels_, tokens_;
  int64_t built_batch_ = 0;
};

// ---------------------------------------------------------------------------------------------
// The driver.

/// Why `w` cannot train here, or an empty string. The same rules as the reference driver's.
std::string unsupported_reason(const Workload& w) {
  if (w.layers.empty()) return "the workload has no layers";
  std::vector<std::vector<int64_t>> shapes;
  try {
    shapes = activation_shapes(w);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  if (w.input_kind == InputKind::kTokens && w.layers.front().kind != LayerKind::kEmbedding) {
    return "token input needs an Embedding first layer";
  }
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const Layer& l = w.layers[i];
    const std::vector<int64_t>& in = i == 0 ? w.input_shape : shapes[i - 1];
    const bool window_too_large = (l.kind == LayerKind::kConv2d || l.kind == LayerKind::kMaxPool2d) &&
                                  (in[1] + 2 * l.padding < l.kernel || in[2] + 2 * l.padding < l.kernel);
    if (window_too_large) return fmt::format("{}: the window is larger than the padded input", describe_layer(l, i));
    if (l.kind == LayerKind::kMaxPool2d && (l.padding < 0 || 2 * l.padding > l.kernel)) {
      return fmt::format("{}: padding exceeds kernel / 2", describe_layer(l, i));
    }
    if (l.kind == LayerKind::kDropout && !(l.p >= 0 && l.p <= 1)) {
      return fmt::format("{}: dropout probability not in [0, 1]", describe_layer(l, i));
    }
    if (l.kind == LayerKind::kLstm && l.num_layers < 1)
      return fmt::format("{}: no stacked layer", describe_layer(l, i));
    if (l.kind == LayerKind::kEmbedding && (i != 0 || w.input_kind != InputKind::kTokens)) {
      return fmt::format("{} must be the first layer of a token workload", describe_layer(l, i));
    }
  }
  int64_t outputs = 1;
  for (int64_t d : shapes.back()) outputs *= d;
  if (w.num_classes < 1 || outputs != w.labels_per_sample() * w.num_classes) {
    return fmt::format("the last layer gives {} values per sample, the loss needs {} labels x {} classes", outputs,
                       w.labels_per_sample(), w.num_classes);
  }
  if (w.loss == LossKind::kSigmoidBinaryCrossEntropy && w.num_classes != 1) {
    return "binary cross-entropy needs one logit per sample";
  }
  return {};
}

class KokkosDriver final : public Driver {
 public:
  std::string_view name() const override { return "kokkos"; }

  Support supports(const Workload& w, DeviceType device) const override {
    const Support here = device_available(device);
    if (!here.ok) return here;
    const std::string why = unsupported_reason(w);
    return why.empty() ? Support::yes() : Support::no("kokkos driver: " + why);
  }

  Support device_available(DeviceType device) const override {
    if ((device == DeviceType::kCpu && kHostExecution) || (device == DeviceType::kCuda && kCudaExecution)) {
      return Support::yes();
    }
    return Support::no(fmt::format("kokkos driver: this Kokkos executes on {} ({}), not on the {}", ExecSpace::name(),
                                   kHostExecution ? "the CPU" : "a device",
                                   device == DeviceType::kCpu ? "CPU" : "GPU"));
  }

  DeviceType default_device() const override { return kCudaExecution ? DeviceType::kCuda : DeviceType::kCpu; }

  Support supports_denormals(DeviceType device, Denormals mode) const override {
    if (mode == Denormals::kIeee || kOnDevice) return Driver::supports_denormals(device, mode);
    if (!kernels_on_calling_threads()) {
      return Support::no(
          fmt::format("kokkos driver: Kokkos::{} runs its own thread pool, whose floating-point mode "
                      "the driver cannot set; use --denormals ieee",
                      ExecSpace::name()));
    }
    return cpu_supports_denormals(mode);
  }

  std::unique_ptr<Model> create(const Workload& w, const DriverContext& ctx) const override {
    const Support ok = supports(w, ctx.device);
    if (!ok.ok) throw std::invalid_argument(ok.reason);
    if (ctx.threads < 1) throw std::invalid_argument("kokkos driver: threads must be positive");
    if (!kOnDevice && ctx.threads > 1 && !threads_set_at_initialize() && !BlasThreads::get().settable()) {
      throw std::invalid_argument(fmt::format(
          "kokkos driver: nothing here can use {} threads: Kokkos::{} runs one, and the BLAS thread count cannot be "
          "set ({})",
          ctx.threads, ExecSpace::name(), BlasThreads::get().describe()));
    }
    // At set-up, where every rank agrees on a failure, rather than in the timed loop.
    if (!kOnDevice && BlasThreads::get().settable()) BlasThreads::get().apply(ctx.threads);
    ensure_kokkos(ctx);
    try {
      return std::make_unique<KokkosModel>(w, ctx);
    } catch (const std::bad_alloc&) {
      throw OutOfMemory(fmt::format("kokkos driver: out of memory for {} ({} parameters)", w.name, parameter_count(w)));
    }
  }

  Support supports_peak(PeakKind kind, DeviceType device, Precision precision) const override {
    if (kind != PeakKind::kGemm) return Driver::supports_peak(kind, device, precision);
    if (const Support here = device_available(device); !here.ok) return here;
    if (precision != Precision::kFp32) {
      return Support::no(fmt::format("kokkos driver: its GEMM is float32 only, not {}", precision_name(precision)));
    }
    return Support::yes();
  }

  std::unique_ptr<PeakKernel> make_peak_kernel(PeakKind kind, int64_t n, const DriverContext& ctx) const override {
    if (kind != PeakKind::kGemm) return Driver::make_peak_kernel(kind, n, ctx);
    const Support ok = supports_peak(kind, ctx.device, ctx.precision);
    if (!ok.ok) throw std::invalid_argument(ok.reason);
    if (!kOnDevice && BlasThreads::get().settable()) BlasThreads::get().apply(ctx.threads);
    ensure_kokkos(ctx);
    return std::make_unique<KokkosGemm>(n, ctx);
  }

  std::map<std::string, std::string> versions() const override {
    std::string concurrency;
    if (!threads_set_at_initialize() && kHostExecution) {
      concurrency = "1 (the driver's kernels are serial; the case's threads go to the BLAS only)";
    } else if (Kokkos::is_initialized()) {
      concurrency = std::to_string(ExecSpace().concurrency());
    } else {
      concurrency = threads_set_at_initialize() ? "the first case's threads (fixed for the process)"
                                                : "set by Kokkos::initialize at the first case";
    }
    return {{"kokkos", version_string(KOKKOS_VERSION)},
            {"kokkos_kernels", kernels_version()},
            {"kokkos_kernels_tpls", kernels_tpls()},
            {"kokkos_execution_space", ExecSpace::name()},
            {"kokkos_memory_space", kk::MemSpace::name()},
            {"kokkos_concurrency", concurrency},
            {"kokkos_blas_threads", kOnDevice ? "not used (device GEMMs)" : BlasThreads::get().describe()}};
  }
};

}  // namespace

void register_kokkos(Registry& registry) { registry.add(std::make_unique<KokkosDriver>()); }

}  // namespace dlscale
