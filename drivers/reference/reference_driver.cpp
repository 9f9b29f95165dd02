// The reference driver's Model: parameters live in double and every step runs
// ReferenceNetwork. The harness sees the same float interface as with any other backend (a
// float gradient buffer to all-reduce, float canonical exports), so the reference driver runs
// under the same runner, MPI path and conformance tests.
#include "drivers/reference/reference_driver.h"

#include <new>
#include <stdexcept>

#include <fmt/format.h>

#include "drivers/reference/reference_network.h"

namespace dlscale {

namespace {

class ReferenceModel final : public Model {
 public:
  ReferenceModel(const Workload& w, const DriverContext& ctx)
      : network_(w, ctx.seed),
        params_(static_cast<size_t>(network_.parameter_count()), 0.0),
        grads_(params_.size(), 0.0),
        grad_buffer_(params_.size(), 0.0f) {}

  void load_parameters(const std::vector<float>& canonical) override {
    if (canonical.size() != params_.size()) {
      throw std::invalid_argument(fmt::format("reference driver: load_parameters: expected {} values, got {}",
                                              params_.size(), canonical.size()));
    }
    for (size_t i = 0; i < params_.size(); ++i) params_[i] = canonical[i];
  }

  std::vector<float> export_parameters() override { return std::vector<float>(params_.begin(), params_.end()); }

  void set_batch(const Batch& batch) override { batch_ = batch; }

  // One call computes the loss and the gradients together: the network keeps no state between
  // calls, and running the forward pass twice would only make this slow driver slower. Its
  // phase timings are therefore not meaningful (forward holds the backward work too).
  void forward() override {
    try {
      loss_ = network_.loss_and_gradients(params_, batch_, &grads_, step_);
    } catch (const std::bad_alloc&) {
      throw OutOfMemory(fmt::format("reference driver: out of host memory for the activations of {} (batch {})",
                                    network_.workload().name, batch_.size));
    }
    ++step_;  // the next forward draws new dropout masks
    has_gradients_ = true;
  }

  void backward() override {
    if (!has_gradients_) throw std::logic_error("reference driver: backward() without a preceding forward()");
    for (size_t i = 0; i < grads_.size(); ++i) grad_buffer_[i] = static_cast<float>(grads_[i]);
    has_gradients_ = false;
  }

  double loss() override { return loss_; }

  GradBuffer grad_buffer() override { return {grad_buffer_.data(), grad_buffer_.size(), false}; }

  // Reads the float buffer, not the double gradients: the harness has all-reduced it in place.
  void update(const Optimizer& opt) override {
    for (size_t i = 0; i < params_.size(); ++i) params_[i] -= opt.learning_rate * static_cast<double>(grad_buffer_[i]);
  }

  void synchronize() override {}

  std::vector<float> export_gradients() override { return grad_buffer_; }

  MemoryStats memory() const override { return {}; }

 private:
  ReferenceNetwork network_;
  std::vector<double> params_, grads_;
  std::vector<float> grad_buffer_;
  Batch batch_;
  double loss_ = 0;
  uint64_t step_ = 0;
  bool has_gradients_ = false;
};

class ReferenceDriver final : public Driver {
 public:
  std::string_view name() const override { return "reference"; }

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

  std::map<std::string, std::string> versions() const override { return {{"reference", "dlscale built-in, float64"}}; }
};

}  // namespace

void register_reference(Registry& registry) { registry.add(std::make_unique<ReferenceDriver>()); }

}  // namespace dlscale
