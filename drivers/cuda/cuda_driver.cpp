// CUDA driver. Parameters and gradients live in two flat device buffers in the driver's own
// layout: the canonical tensors in canonical order, each starting on a 256-byte boundary (what
// cuBLAS and cuDNN want for their fastest kernels), except that each LSTM layer is one cuDNN
// weight space, whose internal order cuDNN chooses. load_parameters/export_* translate.
//
// Activations and their gradients are fp32, or bf16 under bf16 precision: then they stay bf16
// from layer to layer, as under autocast, and only the loss works on an fp32 copy of the logits.
//
// The network is built on the first set_batch() of a batch size: per-layer activation and
// gradient buffers, cuDNN descriptors, convolution algorithms found by cuDNN's find API on the
// real buffers, and one shared workspace, so that a timed step allocates nothing. A batch of
// another size (an evaluation's last, shorter batch, say) rebuilds it; what must outlive a
// rebuild lives in the model: parameters, gradients, batch-norm running statistics, Adam's
// moments, the algorithm choices.
#include "drivers/driver_module.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "drivers/cuda/cuda_kernels.h"
#include "drivers/cuda/cuda_layers.h"
#include "drivers/cuda/cuda_lstm.h"
#include "drivers/gpu/cuda_resources.h"
#include "drivers/gpu/gpu_devices.h"
#include "drivers/gpu/gpu_step.h"
#include "drivers/gpu/nccl_communicator.h"

namespace dlscale {

namespace {

using namespace cuda;  // NOLINT: this file is the driver's own

constexpr int64_t kAlignFloats = 64;                // 256 bytes
constexpr size_t kCublasWorkspace = 32ull << 20;    // what cuBLAS recommends for Hopper
constexpr size_t kSearchWorkspaceMax = 1ull << 30;  // cap on scratch for the algorithm searches

int64_t align(int64_t v) { return (v + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

class CudaModel final : public Model {
 public:
  CudaModel(const Workload& w, const DriverContext& ctx) : workload_(w), device_(ctx.device_index) {
    ctx_.cudnn = cudnn_;
    ctx_.cublas = cublas_;
    ctx_.stream = stream_;
    ctx_.memory = &memory_;
    ctx_.precision = ctx.precision;
    ctx_.act = ctx.precision == Precision::kBf16 ? Act::kBf16 : Act::kFloat;
    ctx_.act_cudnn = ctx.precision == Precision::kBf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    seed_ = ctx.seed;
    ctx_.conv_algorithms = &conv_algorithms_;
    DLSCALE_CHECK_CUDA(cudnnSetStream(cudnn_, stream_));
    DLSCALE_CHECK_CUDA(cublasSetStream(cublas_, stream_));
    // After cublasSetStream, which resets the handle to cuBLAS's own pool: a fixed workspace of
    // ours means cuBLAS never allocates during a timed step.
    cublas_workspace_ = gpu::DeviceBuffer(kCublasWorkspace, &memory_);
    DLSCALE_CHECK_CUDA(cublasSetWorkspace(cublas_, cublas_workspace_.get(), kCublasWorkspace));
    DLSCALE_CHECK_CUDA(cublasSetMathMode(
        cublas_, ctx.precision == Precision::kTf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    lay_out_parameters();
  }

  void load_parameters(const std::vector<float>& canonical) override {
    if (canonical.size() != static_cast<size_t>(parameter_count(workload_))) {
      throw std::invalid_argument(
          fmt::format("load_parameters: expected {} values, got {}", parameter_count(workload_), canonical.size()));
    }
    std::vector<float> driver(static_cast<size_t>(total_), 0.0f);
    for (const WeightPiece& p : pieces_) {
      std::copy_n(canonical.begin() + p.canonical, p.count, driver.begin() + p.driver);
    }
    DLSCALE_CHECK_CUDA(
        cudaMemcpyAsync(params_.get(), driver.data(), driver.size() * 4, cudaMemcpyHostToDevice, stream_));
    // A model loaded with new parameters starts afresh: no running statistics, no Adam moments.
    reset_running_statistics();
    if (adam_m_.get() != nullptr) {
      DLSCALE_CHECK_CUDA(cudaMemsetAsync(adam_m_.get(), 0, adam_m_.bytes(), stream_));
      DLSCALE_CHECK_CUDA(cudaMemsetAsync(adam_v_.get(), 0, adam_v_.bytes(), stream_));
    }
    adam_steps_ = 0;
    DLSCALE_CHECK_CUDA(cudaStreamSynchronize(stream_));
  }

  std::vector<float> export_parameters() override { return to_canonical(params_); }
  std::vector<float> export_gradients() override { return to_canonical(grads_); }

  void set_batch(const Batch& batch) override {
    check_batch(workload_, batch, "cuda driver");  // before any copy into the device buffers
    if (batch.size != batch_) build(batch.size);
    if (workload_.input_kind == InputKind::kTokens) {
      copy_in(tokens_, batch.tokens.data(), batch.tokens.size() * 8);
    } else {
      copy_in(input_, batch.features.data(), batch.features.size() * 4);
    }
    if (workload_.loss == LossKind::kSigmoidBinaryCrossEntropy) {
      const std::vector<float> labels(batch.labels.begin(), batch.labels.end());
      copy_in(labels_, labels.data(), labels.size() * 4);
    } else {
      copy_in(labels_, batch.labels.data(), batch.labels.size() * 8);
    }
    DLSCALE_CHECK_CUDA(cudaStreamSynchronize(stream_));
  }

  void forward() override {
    require_batch();
    run_layers(/*training=*/true);
    mean(row_loss_.as(), rows(), loss_.as<double>(), stream_);
  }

  Evaluation evaluate(const Batch& batch) override {
    set_batch(batch);
    run_layers(/*training=*/false);
    const float* logits = logits32_;
    if (workload_.loss == LossKind::kSigmoidBinaryCrossEntropy) {
      binary_correct(logits, labels_.as(), row_correct_.as(), rows(), stream_);
    } else {
      argmax_correct(logits, labels_.as<int64_t>(), row_correct_.as(), rows(), workload_.num_classes, stream_);
    }
    double* sums = evaluation_.as<double>();  // loss sum, correct count
    sum(row_loss_.as(), rows(), sums, stream_);
    sum(row_correct_.as(), rows(), sums + 1, stream_);
    double host[2] = {0, 0};
    DLSCALE_CHECK_CUDA(cudaMemcpyAsync(host, sums, sizeof host, cudaMemcpyDeviceToHost, stream_));
    DLSCALE_CHECK_CUDA(cudaStreamSynchronize(stream_));
    return {host[0], static_cast<int64_t>(host[1]), rows()};  // counts of 0/1 summed in double: exact
  }

  void backward() override {
    require_batch();
    for (size_t i = layers_.size(); i-- > 0;) {
      if (!layers_[i]) continue;  // Flatten: its buffers alias its input's
      layers_[i]->backward(input_of(i), acts_[i], grads_of_acts_[i], input_grad_of(i));
      // The layer's gradient work is queued: a reduction queued after it reads them final.
      if (ready_ && ready_ranges_[i].count > 0) ready_(ready_ranges_[i].first, ready_ranges_[i].count);
    }
  }

  bool set_gradient_ready_callback(std::function<void(size_t, size_t)> ready) override {
    ready_ = std::move(ready);
    return true;
  }

  double loss() override {
    double value = 0;
    DLSCALE_CHECK_CUDA(cudaMemcpyAsync(&value, loss_.get(), sizeof value, cudaMemcpyDeviceToHost, stream_));
    DLSCALE_CHECK_CUDA(cudaStreamSynchronize(stream_));
    return value;
  }

  GradBuffer grad_buffer() override { return {grads_.as(), static_cast<size_t>(total_), true}; }

  void update(const Optimizer& opt, const ParameterShard& shard) override {
    // Its parameters are in cuDNN's weight spaces, not the flat layout a shard's ranges name.
    if (!shard.whole) throw std::logic_error("cuda driver: a sharded update");
    if (opt.kind == OptimizerKind::kSgd) {
      sgd_update(params_.as(), grads_.as(), total_, static_cast<float>(opt.learning_rate), stream_);
      return;
    }
    if (adam_m_.get() == nullptr) {
      // At the first Adam update, so that SGD cases hold no moments (the padding's stay zero,
      // as its gradients do, and leave the padding's parameters at zero).
      adam_m_ = gpu::DeviceBuffer(static_cast<size_t>(total_) * 4, &memory_);
      adam_v_ = gpu::DeviceBuffer(static_cast<size_t>(total_) * 4, &memory_);
    }
    ++adam_steps_;
    // The scalars in double on the host, as torch.optim.Adam computes them in Python.
    const double t = static_cast<double>(adam_steps_);
    const double bias_correction1 = 1 - std::pow(opt.beta1, t), bias_correction2 = 1 - std::pow(opt.beta2, t);
    AdamStep step{};
    step.beta1 = static_cast<float>(opt.beta1);
    step.beta2 = static_cast<float>(opt.beta2);
    step.one_minus_beta1 = static_cast<float>(1 - opt.beta1);
    step.one_minus_beta2 = static_cast<float>(1 - opt.beta2);
    step.step_size = static_cast<float>(opt.learning_rate / bias_correction1);
    step.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
    step.epsilon = static_cast<float>(opt.epsilon);
    adam_update(params_.as(), grads_.as(), adam_m_.as(), adam_v_.as(), total_, step, stream_);
  }

  void synchronize() override { DLSCALE_CHECK_CUDA(cudaStreamSynchronize(stream_)); }

  MemoryStats memory() const override {
    return {memory_.peak, adam_m_.get() == nullptr ? 0 : 2 * static_cast<int64_t>(total_) * 4};
  }

  std::unique_ptr<StepTimer> make_step_timer() override { return gpu::make_event_timer(stream_.get(), device_.index); }

  /// The stream all of this model's work is queued on (the NCCL reducer queues there too).
  cudaStream_t stream() const { return stream_.get(); }

 private:
  int64_t rows() const { return batch_ * workload_.labels_per_sample(); }

  /// The network on the current batch, then the per-row losses (row_loss_). training: every
  /// layer's forward(); otherwise infer(), which keeps dropout's generator and the running
  /// statistics as they are. The loss kernels also write the logits' gradient, which only
  /// backward() reads.
  void run_layers(bool training) {
    if (bf16()) {
      // Mixed precision: this step's bf16 copies of the fp32 master weights and of the input, as
      // autocast casts them at the first product.
      to_bf16(params_.as(), params16_.get(), total_, stream_);
      if (input16_.get() != nullptr) to_bf16(input_.as(), input16_.get(), input16_.bytes() / 2, stream_);
    }
    for (size_t i = 0; i < layers_.size(); ++i) {
      if (!layers_[i]) continue;
      if (training) {
        layers_[i]->forward(input_of(i), acts_[i]);
      } else {
        layers_[i]->infer(input_of(i), acts_[i]);
      }
    }
    // The loss in fp32, as autocast computes it: under bf16 on a widened copy of the logits, its
    // gradient narrowed back to bf16 for the last layer's backward.
    float* dlogits = static_cast<float*>(grads_of_acts_.back());
    if (bf16()) {
      from_bf16(acts_.back(), logits32_, logit_count_, stream_);
      dlogits = dlogits32_.as();
    }
    if (workload_.loss == LossKind::kSigmoidBinaryCrossEntropy) {
      sigmoid_binary_cross_entropy(logits32_, labels_.as(), row_loss_.as(), dlogits, rows(), stream_);
    } else {
      const float one = 1.0f, zero = 0.0f;
      DLSCALE_CHECK_CUDA(cudnnSoftmaxForward(cudnn_, CUDNN_SOFTMAX_LOG, CUDNN_SOFTMAX_MODE_INSTANCE, &one, logits_desc_,
                                             logits32_, &zero, logits_desc_, log_probs_.get()));
      softmax_cross_entropy(log_probs_.as(), labels_.as<int64_t>(), row_loss_.as(), dlogits, rows(),
                            workload_.num_classes, stream_);
    }
    if (bf16()) to_bf16(dlogits, grads_of_acts_.back(), logit_count_, stream_);
  }

  bool bf16() const { return ctx_.precision == Precision::kBf16; }

  /// Batch norm's running statistics as a fresh model has them: mean 0, variance 1.
  void reset_running_statistics() {
    if (running_.get() == nullptr) return;
    std::vector<float> fresh(running_.bytes() / 4);
    for (size_t i = 0; i < running_channels_.size(); ++i) {
      // Each batch norm's block: its means, then its variances.
      std::fill_n(fresh.begin() + running_offsets_[i] + running_channels_[i], running_channels_[i], 1.0f);
    }
    DLSCALE_CHECK_CUDA(
        cudaMemcpyAsync(running_.get(), fresh.data(), running_.bytes(), cudaMemcpyHostToDevice, stream_));
    DLSCALE_CHECK_CUDA(cudaStreamSynchronize(stream_));
  }

  /// Places every parameter tensor in the flat buffers and records how canonical maps to them.
  void lay_out_parameters() {
    const std::vector<ParamSpec> specs = parameter_layout(workload_);
    layer_params_.resize(workload_.layers.size());
    dropout_streams_.resize(workload_.layers.size());
    std::vector<std::vector<int64_t>> offsets(workload_.layers.size());  // driver offset per tensor
    std::map<int, size_t> lstm_bytes;
    int64_t next = 0;
    size_t s = 0;
    for (size_t li = 0; li < workload_.layers.size(); ++li) {
      const Layer& l = workload_.layers[li];
      // Each layer its own dropout stream: equal seeds would give equal masks to equal shapes.
      dropout_streams_[li].seed = seed_ + 0x9e3779b97f4a7c15ULL * (li + 1);
      if (l.kind == LayerKind::kLstm) {
        const LstmWeightLayout lw = lstm_weight_layout(cudnn_, l, specs[s].offset, ctx_.precision);
        next = align(next);
        for (const WeightPiece& p : lw.pieces) pieces_.push_back({p.canonical, next + p.driver, p.count});
        offsets[li].push_back(next);
        lstm_bytes[static_cast<int>(li)] = lw.bytes;
        next += lw.values;
        while (s < specs.size() && specs[s].layer == static_cast<int>(li)) ++s;
        continue;
      }
      for (; s < specs.size() && specs[s].layer == static_cast<int>(li); ++s) {
        next = align(next);
        pieces_.push_back({specs[s].offset, next, specs[s].count});
        offsets[li].push_back(next);
        next += specs[s].count;
      }
    }
    total_ = align(std::max<int64_t>(next, 1));
    // Each layer's slice of the flat buffers, its padding included: from its first tensor to the
    // next layer's, so that the slices cover every element once.
    ready_ranges_.assign(workload_.layers.size(), ParamRange{});
    int64_t end = total_;
    for (size_t li = offsets.size(); li-- > 0;) {
      if (offsets[li].empty()) continue;
      ready_ranges_[li] = {static_cast<size_t>(offsets[li].front()), static_cast<size_t>(end - offsets[li].front())};
      end = offsets[li].front();
    }
    params_ = gpu::DeviceBuffer(static_cast<size_t>(total_) * 4, &memory_);
    grads_ = gpu::DeviceBuffer(static_cast<size_t>(total_) * 4, &memory_);
    if (ctx_.precision == Precision::kBf16) params16_ = gpu::DeviceBuffer(static_cast<size_t>(total_) * 2, &memory_);
    lay_out_running_statistics();
    for (size_t li = 0; li < offsets.size(); ++li) {
      LayerParams& p = layer_params_[li];
      for (int64_t off : offsets[li]) {
        p.value.push_back(params_.as() + off);
        p.grad.push_back(grads_.as() + off);
        if (ctx_.precision == Precision::kBf16) p.bf16.push_back(static_cast<char*>(params16_.get()) + 2 * off);
      }
      if (auto it = lstm_bytes.find(static_cast<int>(li)); it != lstm_bytes.end()) p.weight_space_bytes = it->second;
    }
  }

  /// One device buffer for the running mean and variance of every batch norm (a BatchNorm2d
  /// layer, or the three or four inside a bottleneck, in canonical order), reset to 0 and 1.
  void lay_out_running_statistics() {
    std::vector<std::pair<size_t, int64_t>> norms;  // (layer, channels)
    for (size_t li = 0; li < workload_.layers.size(); ++li) {
      const Layer& l = workload_.layers[li];
      if (l.kind == LayerKind::kBatchNorm2d) norms.emplace_back(li, l.in);
      if (l.kind == LayerKind::kBottleneck) {
        for (int64_t c : {l.mid, l.mid, l.out}) norms.emplace_back(li, c);
        if (l.stride != 1 || l.in != l.out) norms.emplace_back(li, l.out);  // the projection shortcut's
      }
    }
    int64_t floats = 0;
    for (const auto& [layer, channels] : norms) {
      running_offsets_.push_back(floats);
      running_channels_.push_back(channels);
      floats += 2 * channels;
    }
    if (floats == 0) return;
    running_ = gpu::DeviceBuffer(static_cast<size_t>(floats) * 4, &memory_);
    for (size_t i = 0; i < norms.size(); ++i) {
      float* mean = running_.as() + running_offsets_[i];
      layer_params_[norms[i].first].running.insert(layer_params_[norms[i].first].running.end(),
                                                   {mean, mean + running_channels_[i]});
    }
    reset_running_statistics();
  }

  /// Builds every buffer, layer and algorithm choice for batches of `n`.
  void build(int64_t n) {
    layers_.clear();
    owned_.clear();
    acts_.clear();
    grads_of_acts_.clear();
    batch_ = 0;
    const std::vector<std::vector<int64_t>> shapes = activation_shapes(workload_);
    const auto floats = [&](int64_t count) { return gpu::DeviceBuffer(static_cast<size_t>(count) * 4, &memory_); };
    const auto activations = [&](int64_t count) {
      return gpu::DeviceBuffer(static_cast<size_t>(count) * bytes_of(ctx_.act), &memory_);
    };
    input16_ = gpu::DeviceBuffer();
    if (workload_.input_kind == InputKind::kTokens) {
      tokens_ = gpu::DeviceBuffer(static_cast<size_t>(n * workload_.input_size()) * 8, &memory_);
    } else {
      input_ = floats(n * workload_.input_size());
      if (bf16()) input16_ = activations(n * workload_.input_size());
    }
    for (size_t i = 0; i < workload_.layers.size(); ++i) {
      if (workload_.layers[i].kind == LayerKind::kFlatten) {
        // A view: the same buffers as its input. As the first layer it passes the input on, and
        // nothing needs the input's gradient.
        acts_.push_back(i == 0 ? network_input() : acts_.back());
        grads_of_acts_.push_back(i == 0 ? nullptr : grads_of_acts_.back());
        continue;
      }
      const int64_t elems = n * shape_elements(shapes[i]);
      owned_.push_back(activations(elems));
      acts_.push_back(owned_.back().get());
      owned_.push_back(activations(elems));
      grads_of_acts_.push_back(owned_.back().get());
    }
    for (size_t i = 0; i < workload_.layers.size(); ++i) {
      const Layer& l = workload_.layers[i];
      if (l.kind == LayerKind::kFlatten) {
        layers_.push_back(nullptr);
        continue;
      }
      const std::vector<int64_t>& in = i == 0 ? workload_.input_shape : shapes[i - 1];
      // A rebuild (an evaluation at another batch size) carries each dropout stream on from where
      // it was.
      layers_.push_back(
          make_layer(ctx_, l, n, in, shapes[i], layer_params_[i], tokens_.as<int64_t>(), dropout_streams_[i]));
    }
    const int64_t rows = n * workload_.labels_per_sample();
    const int64_t classes = workload_.num_classes;
    row_loss_ = floats(rows);
    row_correct_ = floats(rows);
    loss_ = gpu::DeviceBuffer(sizeof(double), &memory_);
    logit_count_ = n * shape_elements(shapes.back());
    logits32_copy_ = bf16() ? floats(logit_count_) : gpu::DeviceBuffer();
    dlogits32_ = bf16() ? floats(logit_count_) : gpu::DeviceBuffer();
    logits32_ = bf16() ? logits32_copy_.as() : static_cast<float*>(acts_.back());
    evaluation_ = gpu::DeviceBuffer(2 * sizeof(double), &memory_);
    if (workload_.loss == LossKind::kSigmoidBinaryCrossEntropy) {
      labels_ = floats(rows);
    } else {
      labels_ = gpu::DeviceBuffer(static_cast<size_t>(rows) * 8, &memory_);
      log_probs_ = floats(rows * classes);
      DLSCALE_CHECK_CUDA(cudnnSetTensor4dDescriptor(logits_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                    static_cast<int>(rows), static_cast<int>(classes), 1, 1));
    }
    batch_ = n;
    // The searches time the algorithms on the real weights (on zeros some run faster than they will).
    if (bf16()) to_bf16(params_.as(), params16_.get(), total_, stream_);
    choose_algorithms();
  }

  /// Runs every layer's algorithm search with scratch memory, then allocates the one workspace
  /// the chosen algorithms need.
  void choose_algorithms() {
    workspace_ = gpu::DeviceBuffer();
    size_t free_bytes = 0, total_bytes = 0;
    DLSCALE_CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    size_t needed = 0;
    {
      // Not counted in the memory peak: it is freed before training and training never needs it.
      const gpu::DeviceBuffer search(std::min(kSearchWorkspaceMax, free_bytes / 2), nullptr);
      ctx_.search_workspace = search.get();
      ctx_.search_workspace_bytes = search.bytes();
      for (size_t i = 0; i < layers_.size(); ++i) {
        if (!layers_[i]) continue;
        needed = std::max(needed, layers_[i]->prepare(input_of(i), acts_[i], input_grad_of(i), grads_of_acts_[i]));
      }
      ctx_.search_workspace = nullptr;
      ctx_.search_workspace_bytes = 0;
    }
    workspace_ = gpu::DeviceBuffer(needed, &memory_);
    ctx_.workspace = workspace_.get();
    ctx_.workspace_bytes = workspace_.bytes();
    DLSCALE_CHECK_CUDA(cudaStreamSynchronize(stream_));
  }

  /// What the first layer reads: the input features (their bf16 copy under bf16) or, for token
  /// inputs, nothing (the embedding reads the tokens).
  void* network_input() const { return input16_.get() != nullptr ? input16_.get() : input_.get(); }
  const void* input_of(size_t i) const { return i == 0 ? network_input() : acts_[i - 1]; }
  /// Where layer i's input gradient goes; nullptr when no earlier layer needs it.
  void* input_grad_of(size_t i) const { return i == 0 ? nullptr : grads_of_acts_[i - 1]; }

  void require_batch() const {
    if (batch_ == 0) throw std::logic_error("cuda driver: set_batch() must come before training");
  }

  void copy_in(const gpu::DeviceBuffer& to, const void* from, size_t bytes) {
    if (bytes > to.bytes()) throw std::invalid_argument("cuda driver: batch larger than the network was built for");
    DLSCALE_CHECK_CUDA(cudaMemcpyAsync(to.get(), from, bytes, cudaMemcpyHostToDevice, stream_));
  }

  std::vector<float> to_canonical(const gpu::DeviceBuffer& buffer) {
    std::vector<float> driver(static_cast<size_t>(total_));
    DLSCALE_CHECK_CUDA(
        cudaMemcpyAsync(driver.data(), buffer.get(), driver.size() * 4, cudaMemcpyDeviceToHost, stream_));
    DLSCALE_CHECK_CUDA(cudaStreamSynchronize(stream_));
    std::vector<float> canonical(static_cast<size_t>(parameter_count(workload_)));
    for (const WeightPiece& p : pieces_) {
      std::copy_n(driver.begin() + p.driver, p.count, canonical.begin() + p.canonical);
    }
    return canonical;
  }

  // Declaration order is destruction order in reverse: handles and the stream outlive every
  // buffer and layer that uses them.
  /// Makes the model's GPU current; constructed before the stream and the library handles,
  /// which belong to the GPU that is current when they are created.
  struct DeviceSelection {
    explicit DeviceSelection(int device) : index(device) {
      std::string why;
      const int count = gpu::visible_gpu_count(&why);
      if (device < 0 || device >= count) {
        throw std::invalid_argument(
            fmt::format("cuda driver: GPU {} requested, {} visible{}", device, count, why.empty() ? "" : ": " + why));
      }
      DLSCALE_CHECK_CUDA(cudaSetDevice(device));
    }
    int index;
  };

  Workload workload_;
  DeviceSelection device_;
  gpu::MemoryTracker memory_;
  gpu::Stream stream_;
  gpu::CudnnHandle cudnn_;
  gpu::CublasHandle cublas_;
  LayerContext ctx_;
  std::map<std::string, ConvAlgorithms> conv_algorithms_;
  gpu::DeviceBuffer cublas_workspace_, params_, grads_, params16_, workspace_;
  int64_t total_ = 0;                // floats in the flat buffers, padding included
  std::vector<WeightPiece> pieces_;  // canonical <-> driver layout
  std::vector<LayerParams> layer_params_;
  std::vector<DropoutStream> dropout_streams_;  // per layer; outlive a rebuild like running_
  std::vector<ParamRange> ready_ranges_;        // per layer: its slice of grads_, for ready_
  std::function<void(size_t, size_t)> ready_;   // the reducer's, to start buckets during backward
  int64_t batch_ = 0;                           // the batch size the network is built for; 0: none yet
  uint64_t seed_ = 0;                           // dropout
  gpu::DeviceBuffer running_;  // batch norms' running statistics: per norm, its means then its variances
  std::vector<int64_t> running_offsets_, running_channels_;  // per norm: first float in running_, channels
  gpu::DeviceBuffer adam_m_, adam_v_;                        // Adam's moments, made at its first update
  int64_t adam_steps_ = 0;                                   // Adam's t: updates since made or loaded
  gpu::DeviceBuffer input_, input16_, tokens_, labels_, row_loss_, row_correct_, log_probs_, loss_, evaluation_;
  gpu::TensorDesc logits_desc_;
  int64_t logit_count_ = 0;                        // the last layer's outputs for the built batch
  gpu::DeviceBuffer logits32_copy_, dlogits32_;    // bf16: fp32 copies of the logits and their gradient
  float* logits32_ = nullptr;                      // the logits in fp32: the last activation or its copy
  std::vector<gpu::DeviceBuffer> owned_;           // activation and gradient buffers
  std::vector<void*> acts_, grads_of_acts_;        // per layer: its output and the loss's gradient there
  std::vector<std::unique_ptr<GpuLayer>> layers_;  // nullptr for Flatten
};

/// The measured peaks on a GPU: cublasGemmEx on n x n matrices in the case's precision (fp32 and
/// tf32 in fp32 storage, bf16 operands with an fp32 result, all accumulating in fp32), and a
/// device-to-device copy for the memory bandwidth; both on a stream of their own.
class CudaPeakKernel final : public PeakKernel {
 public:
  CudaPeakKernel(PeakKind kind, int64_t n, const DriverContext& ctx)
      : kind_(kind), n_(n), precision_(ctx.precision), device_(select(ctx.device_index)) {
    const size_t operand = precision_ == Precision::kBf16 && kind == PeakKind::kGemm ? 2 : 4;
    const size_t elements = kind == PeakKind::kGemm ? static_cast<size_t>(n * n) : static_cast<size_t>(n);
    a_ = gpu::DeviceBuffer(elements * operand, nullptr);
    b_ = gpu::DeviceBuffer(elements * operand, nullptr);
    c_ = gpu::DeviceBuffer(elements * 4, nullptr);
    // Bytes of 0x3f: floats of 0.75 and bf16 of 0.75, not zeros, which tensor cores run cooler on.
    DLSCALE_CHECK_CUDA(cudaMemset(a_.get(), 0x3f, a_.bytes()));
    DLSCALE_CHECK_CUDA(cudaMemset(b_.get(), 0x3f, b_.bytes()));
    DLSCALE_CHECK_CUDA(cudaDeviceSynchronize());
    DLSCALE_CHECK_CUDA(cublasSetStream(cublas_, stream_));
    workspace_ = gpu::DeviceBuffer(kCublasWorkspace, nullptr);
    DLSCALE_CHECK_CUDA(cublasSetWorkspace(cublas_, workspace_.get(), kCublasWorkspace));
  }
  void run() override {
    if (kind_ == PeakKind::kStream) {
      DLSCALE_CHECK_CUDA(cudaMemcpyAsync(c_.get(), a_.get(), a_.bytes(), cudaMemcpyDeviceToDevice, stream_));
      return;
    }
    const float one = 1.0f, zero = 0.0f;
    const int n = static_cast<int>(n_);
    const cudaDataType in = precision_ == Precision::kBf16 ? CUDA_R_16BF : CUDA_R_32F;
    const cublasComputeType_t compute =
        precision_ == Precision::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    DLSCALE_CHECK_CUDA(cublasGemmEx(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a_.get(), in, n, b_.get(), in, n,
                                    &zero, c_.get(), CUDA_R_32F, n, compute, CUBLAS_GEMM_DEFAULT));
  }
  void synchronize() override { DLSCALE_CHECK_CUDA(cudaStreamSynchronize(stream_)); }
  double work() const override {
    const double n = static_cast<double>(n_);
    return kind_ == PeakKind::kGemm ? 2.0 * n * n * n : 2.0 * static_cast<double>(a_.bytes());
  }
  std::string describe() const override {
    if (kind_ == PeakKind::kStream) {
      return fmt::format("cudaMemcpyAsync device to device, {} bytes read and written each, GPU {}", a_.bytes(),
                         device_);
    }
    return fmt::format("cublasGemmEx {} ({} operands, fp32 result and accumulation), n={}, GPU {}",
                       precision_ == Precision::kTf32 ? "CUBLAS_COMPUTE_32F_FAST_TF32" : "CUBLAS_COMPUTE_32F",
                       precision_ == Precision::kBf16 ? "bf16" : "fp32", n_, device_);
  }

 private:
  static int select(int device) {
    DLSCALE_CHECK_CUDA(cudaSetDevice(device));
    return device;
  }
  PeakKind kind_;
  int64_t n_;
  Precision precision_;
  int device_;  // current before the stream and the handle are made, which belong to it
  gpu::Stream stream_;
  gpu::CublasHandle cublas_;
  gpu::DeviceBuffer a_, b_, c_, workspace_;
};

class CudaDriver final : public Driver {
 public:
  std::string_view name() const override { return "cuda"; }

  DeviceType default_device() const override { return DeviceType::kCuda; }

  Support device_available(DeviceType device) const override {
    if (device != DeviceType::kCuda) return Support::no("the cuda driver runs on GPUs only (--device cuda)");
    std::string why;
    if (gpu::visible_gpu_count(&why) == 0)
      return Support::no(fmt::format("no usable CUDA GPU on this machine ({})", why));
    return Support::yes();
  }

  int device_count(DeviceType device, std::string* why) const override {
    if (device == DeviceType::kCuda) return gpu::visible_gpu_count(why);
    if (why != nullptr) *why = "the cuda driver runs on GPUs only";
    return 0;
  }

  std::string describe_device(DeviceType device, int index) const override {
    if (device != DeviceType::kCuda) return "cpu";
    std::string why;
    if (index < gpu::visible_gpu_count(&why)) return gpu::gpu_info(index).describe();
    return fmt::format("cuda:{} (not available: {})", index, why.empty() ? "no such GPU" : why);
  }

  std::unique_ptr<GradientReducer> make_reducer(DeviceType device, int device_index, const RankGroup& ranks,
                                                Deadline deadline) const override {
    if (device != DeviceType::kCuda) return nullptr;
    return gpu::make_nccl_reducer(ranks, device_index, deadline,
                                  [](const Model& m) -> void* { return dynamic_cast<const CudaModel&>(m).stream(); });
  }

  Support supports(const Workload&, DeviceType device) const override {
    if (device != DeviceType::kCuda) return Support::no("the cuda driver runs on GPUs only");
    return Support::yes();  // every layer kind of workloads/workload.h
  }

  Support supports_precision(const Workload&, DeviceType, Precision) const override { return Support::yes(); }

  std::unique_ptr<Model> create(const Workload& w, const DriverContext& ctx) const override {
    if (ctx.device != DeviceType::kCuda) throw std::invalid_argument("the cuda driver runs on GPUs only");
    return std::make_unique<CudaModel>(w, ctx);
  }

  Support supports_peak(PeakKind kind, DeviceType device, Precision precision) const override {
    if (const Support here = device_available(device); !here.ok) return here;
    if (kind == PeakKind::kStream && precision != Precision::kFp32) {
      return Support::no("cuda driver: the memory bandwidth is measured once, as fp32");
    }
    return Support::yes();
  }

  std::unique_ptr<PeakKernel> make_peak_kernel(PeakKind kind, int64_t n, const DriverContext& ctx) const override {
    const Support ok = supports_peak(kind, ctx.device, ctx.precision);
    if (!ok.ok) throw std::invalid_argument(ok.reason);
    return std::make_unique<CudaPeakKernel>(kind, n, ctx);
  }

  std::map<std::string, std::string> versions() const override {
    std::map<std::string, std::string> v;
    int runtime = 0, driver = 0;
    if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) {
      v["cuda_runtime"] = fmt::format("{}.{}", runtime / 1000, (runtime % 1000) / 10);
    }
    // 0 or an error where no NVIDIA driver is installed.
    v["cuda_driver"] = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0
                           ? fmt::format("{}.{}", driver / 1000, (driver % 1000) / 10)
                           : std::string("none");
    (void)cudaGetLastError();
    const size_t cudnn = cudnnGetVersion();
    v["cudnn"] = fmt::format("{}.{}.{}", cudnn / 10000, (cudnn % 10000) / 100, cudnn % 100);
    v["cublas"] = fmt::format("{}.{}.{}", CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
    v["nccl"] = gpu::nccl_version();
    return v;
  }
};

}  // namespace

DLSCALE_DRIVER_MODULE(CudaDriver)

}  // namespace dlscale
