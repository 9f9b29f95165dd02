// The reference driver's Model: parameters live in double and every step runs
// ReferenceNetwork. The harness sees the same float interface as with any other backend (a
// float gradient buffer to all-reduce, float canonical exports), so the reference driver runs
// under the same runner, MPI path and conformance tests.
#include "drivers/reference/reference_driver.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "drivers/cpu/denormal_scope.h"
#include "drivers/reference/reference_network.h"

namespace dlscale {

namespace {

class ReferenceModel final : public Model {
 public:
  ReferenceModel(const Workload& w, const DriverContext& ctx)
      : denormals_(ctx.denormals),
        ranges_(layer_parameter_ranges(w)),
        network_(w, ctx.seed),
        params_(static_cast<size_t>(network_.parameter_count()), 0.0),
        grads_(params_.size(), 0.0),
        grad_buffer_(params_.size(), 0.0f),
        running_(network_.initial_running_statistics()) {}

  void load_parameters(const std::vector<float>& canonical) override {
    if (canonical.size() != params_.size()) {
      throw std::invalid_argument(fmt::format("reference driver: load_parameters: expected {} values, got {}",
                                              params_.size(), canonical.size()));
    }
    for (size_t i = 0; i < params_.size(); ++i) params_[i] = canonical[i];
    // A model with new parameters starts afresh: no optimiser state, no running statistics.
    adam_m_.clear();
    adam_v_.clear();
    adam_step_ = 0;
    running_ = network_.initial_running_statistics();
  }

  std::vector<float> export_parameters() override { return std::vector<float>(params_.begin(), params_.end()); }

  void set_batch(const Batch& batch) override { batch_ = batch; }

  // One call computes the loss and the gradients together: the network keeps no state between
  // calls, and running the forward pass twice would only make this slow driver slower. Its
  // phase timings are therefore not meaningful (forward holds the backward work too).
  void forward() override {
    const DenormalScope scope(denormals_, 1);
    try {
      loss_ = network_.loss_and_gradients(params_, batch_, &grads_, step_, &running_);
    } catch (const std::bad_alloc&) {
      throw OutOfMemory(fmt::format("reference driver: out of host memory for the activations of {} (batch {})",
                                    network_.workload().name, batch_.size));
    }
    ++step_;  // the next forward draws new dropout masks
    has_gradients_ = true;
  }

  void backward() override {
    if (!has_gradients_) throw std::logic_error("reference driver: backward() without a preceding forward()");
    const DenormalScope scope(denormals_, 1);  // the float gradients may be denormal
    // Layer by layer from the last, as a backward pass finishes them, reporting each.
    for (size_t layer = ranges_.size(); layer-- > 0;) {
      const ParamRange r = ranges_[layer];
      for (size_t i = r.first; i < r.first + r.count; ++i) grad_buffer_[i] = static_cast<float>(grads_[i]);
      if (ready_ && r.count > 0) ready_(r.first, r.count);
    }
    has_gradients_ = false;
  }

  bool set_gradient_ready_callback(std::function<void(size_t, size_t)> ready) override {
    ready_ = std::move(ready);
    return true;
  }

  double loss() override { return loss_; }

  GradBuffer grad_buffer() override { return {grad_buffer_.data(), grad_buffer_.size(), false}; }

  // Reads the float buffer, not the double gradients: the harness has all-reduced it in place.
  // Adam's state is double like the parameters: the oracle computes every step in float64.
  void update(const Optimizer& opt, const ParameterShard& shard) override {
    const DenormalScope scope(denormals_, 1);
    const std::vector<ParamRange> ranges = shard.ranges_in(params_.size());
    if (opt.kind == OptimizerKind::kSgd) {
      for (const ParamRange& r : ranges) {
        for (size_t i = r.first; i < r.first + r.count; ++i)
          params_[i] -= opt.learning_rate * static_cast<double>(grad_buffer_[i]);
      }
      return;
    }
    const size_t state = shard.elements(params_.size());
    if (adam_m_.empty()) {
      adam_m_.assign(state, 0.0);
      adam_v_.assign(state, 0.0);
    }
    if (adam_m_.size() != state) throw std::logic_error("reference driver: Adam's shard changed between updates");
    ++adam_step_;
    const double t = static_cast<double>(adam_step_);
    const double step_size = opt.learning_rate / (1 - std::pow(opt.beta1, t));
    const double sqrt_correction2 = std::sqrt(1 - std::pow(opt.beta2, t));
    size_t s = 0;  // the state's index: packed in range order
    for (const ParamRange& r : ranges) {
      for (size_t i = r.first; i < r.first + r.count; ++i, ++s) {
        const double g = grad_buffer_[i];
        adam_m_[s] = opt.beta1 * adam_m_[s] + (1 - opt.beta1) * g;
        adam_v_[s] = opt.beta2 * adam_v_[s] + (1 - opt.beta2) * g * g;
        params_[i] -= step_size * adam_m_[s] / (std::sqrt(adam_v_[s]) / sqrt_correction2 + opt.epsilon);
      }
    }
  }

  ParameterBuffer parameters() override { return {params_.data(), params_.size(), sizeof(double)}; }

  Evaluation evaluate(const Batch& batch) override {
    const DenormalScope scope(denormals_, 1);
    std::vector<double> logits;
    double mean_loss = 0;
    try {
      mean_loss = network_.inference(params_, batch, running_, &logits);
    } catch (const std::bad_alloc&) {
      throw OutOfMemory(fmt::format("reference driver: out of host memory for the activations of {} (batch {})",
                                    network_.workload().name, batch.size));
    }
    const Workload& w = network_.workload();
    Evaluation e;
    e.predictions = static_cast<int64_t>(batch.labels.size());
    e.loss_sum = mean_loss * static_cast<double>(e.predictions);
    for (int64_t r = 0; r < e.predictions; ++r) {
      const int64_t label = batch.labels[static_cast<size_t>(r)];
      if (w.loss == LossKind::kSigmoidBinaryCrossEntropy) {
        e.correct += (logits[static_cast<size_t>(r)] > 0) == (label == 1);
        continue;
      }
      const auto first = logits.begin() + r * w.num_classes;
      e.correct += std::max_element(first, first + w.num_classes) - first == label;  // the first maximum
    }
    return e;
  }

  void synchronize() override {}

  std::vector<float> export_gradients() override { return grad_buffer_; }

  MemoryStats memory() const override {
    return {0, static_cast<int64_t>((adam_m_.size() + adam_v_.size()) * sizeof(double))};
  }

 private:
  Denormals denormals_;                        ///< single-threaded: the mode of the calling thread
  std::vector<ParamRange> ranges_;             ///< per layer
  std::function<void(size_t, size_t)> ready_;  ///< the harness's, or empty
  ReferenceNetwork network_;
  std::vector<double> params_, grads_;
  std::vector<float> grad_buffer_;
  Batch batch_;
  double loss_ = 0;
  uint64_t step_ = 0;
  bool has_gradients_ = false;
  RunningStatistics running_;            ///< the batch norms', updated by every forward()
  std::vector<double> adam_m_, adam_v_;  ///< Adam's moments; empty until its first update
  int64_t adam_step_ = 0;                ///< Adam's t
};

/// The measured peak of a driver that computes in float64 on one thread: the loop of its Linear
/// layers (reference_network.cpp), each output the dot product of a row of A with a row of B.
class ReferenceGemm final : public PeakKernel {
 public:
  ReferenceGemm(int64_t n, Denormals denormals)
      : n_(n), denormals_(denormals), a_(static_cast<size_t>(n * n), 0.5), b_(a_.size(), 0.25), c_(a_.size()) {}
  void run() override {
    const DenormalScope mode(denormals_, 1);
    for (int64_t r = 0; r < n_; ++r) {
      for (int64_t o = 0; o < n_; ++o) {
        double sum = 0.0;
        for (int64_t i = 0; i < n_; ++i)
          sum += a_[static_cast<size_t>(r * n_ + i)] * b_[static_cast<size_t>(o * n_ + i)];
        c_[static_cast<size_t>(r * n_ + o)] = sum;
      }
    }
  }
  void synchronize() override {}
  double work() const override { return 2.0 * static_cast<double>(n_) * static_cast<double>(n_) * n_; }
  std::string describe() const override {
    return fmt::format("the reference Linear loop (dot products of rows), float64, one thread, n={}", n_);
  }

 private:
  int64_t n_;
  Denormals denormals_;
  std::vector<double> a_, b_, c_;
};

class ReferenceDriver final : public Driver {
 public:
  std::string_view name() const override { return "reference"; }

  Support supports_denormals(DeviceType, Denormals mode) const override { return cpu_supports_denormals(mode); }

  Support supports(const Workload& w, DeviceType device) const override {
    if (device != DeviceType::kCpu) return Support::no("reference driver: CPU only");
    try {
      ReferenceNetwork check(w);  // validates the layer list; allocates no parameters
    } catch (const std::invalid_argument& e) {
      return Support::no(e.what());
    }
    return Support::yes();
  }

  std::unique_ptr<Model> create(const Workload& w, const DriverContext& ctx) const override {
    if (ctx.device != DeviceType::kCpu) throw std::invalid_argument("reference driver: CPU only");
    try {
      return std::make_unique<ReferenceModel>(w, ctx);
    } catch (const std::bad_alloc&) {
      throw OutOfMemory(fmt::format("reference driver: out of host memory for {} ({} parameters in double)", w.name,
                                    parameter_count(w)));
    }
  }

  Support supports_peak(PeakKind kind, DeviceType device, Precision precision) const override {
    if (kind != PeakKind::kGemm || device != DeviceType::kCpu || precision != Precision::kFp32) {
      return Driver::supports_peak(kind, device, precision);
    }
    return Support::yes();
  }

  std::unique_ptr<PeakKernel> make_peak_kernel(PeakKind kind, int64_t n, const DriverContext& ctx) const override {
    if (kind != PeakKind::kGemm) return Driver::make_peak_kernel(kind, n, ctx);
    const Support ok = supports_peak(kind, ctx.device, ctx.precision);
    if (!ok.ok) throw std::invalid_argument(ok.reason);
    return std::make_unique<ReferenceGemm>(n, ctx.denormals);
  }

  std::map<std::string, std::string> versions() const override { return {{"reference", "dlscale built-in, float64"}}; }
};

}  // namespace

void register_reference(Registry& registry) { registry.add(std::make_unique<ReferenceDriver>()); }

}  // namespace dlscale
