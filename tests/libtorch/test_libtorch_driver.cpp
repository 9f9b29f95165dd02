// The LibTorch driver's hand-routed Linear backward (gradients written straight into the flat
// buffer) against stock LibTorch autograd on the same parameters and data; its Adam against
// LibTorch's own torch::optim::Adam; bf16 evaluation and master weights. What every driver
// promises (overwritten gradients, plain SGD, a falling loss, evaluate() and Adam) is
// tests/conformance's.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "drivers/driver.h"
#include "tests/common/relative_error.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

namespace dlscale {
namespace {

struct Reference {
  double loss;
  std::vector<float> grads;
};

/// Loss and gradients by stock autograd, parameters as ordinary leaf tensors.
Reference stock_autograd(const Workload& w, const std::vector<float>& params, const Batch& b) {
  std::vector<torch::Tensor> leaves;
  for (const ParamSpec& p : parameter_layout(w)) {
    leaves.push_back(torch::from_blob(const_cast<float*>(params.data() + p.offset), p.shape).clone().requires_grad_());
  }
  torch::Tensor h = torch::from_blob(const_cast<float*>(b.features.data()), {b.size, w.input_size()}).clone();
  size_t next = 0;
  for (const Layer& l : w.layers) {
    switch (l.kind) {
      case LayerKind::kLinear:
        h = torch::linear(h, leaves[next], leaves[next + 1]);
        next += 2;
        break;
      case LayerKind::kSigmoid:
        h = torch::sigmoid(h);
        break;
      case LayerKind::kReLU:
        h = torch::relu(h);
        break;
      case LayerKind::kFlatten:
        break;  // the input is already [batch, features]
      default:
        ADD_FAILURE() << "stock_autograd covers fully connected workloads only";
    }
  }
  const torch::Tensor labels = torch::from_blob(const_cast<int64_t*>(b.labels.data()), {b.size}, torch::kLong).clone();
  torch::Tensor loss = torch::nn::functional::cross_entropy(h, labels);
  loss.backward();
  Reference r{loss.item<double>(), {}};
  for (const auto& leaf : leaves) {
    const torch::Tensor g = leaf.grad().contiguous();
    r.grads.insert(r.grads.end(), g.data_ptr<float>(), g.data_ptr<float>() + g.numel());
  }
  return r;
}

class LibTorchDriverTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    register_drivers(registry_);
    driver_ = registry_.find("libtorch");
    ASSERT_NE(driver_, nullptr);
  }
  Registry registry_;
  const Driver* driver_ = nullptr;
};

TEST_P(LibTorchDriverTest, GradientsMatchStockAutograd) {
  const Workload w = make_workload(GetParam());
  const std::vector<float> params = canonical_parameters(w, 5);
  const Batch batch = synthetic_batch(w, 6, 5, 0);
  auto model = driver_->create(w, {DeviceType::kCpu, 0, 1, 5});
  model->load_parameters(params);
  model->set_batch(batch);
  model->forward();
  model->backward();
  const Reference ref = stock_autograd(w, params, batch);
  EXPECT_NEAR(model->loss(), ref.loss, 1e-5 * std::abs(ref.loss));
  const std::vector<float> grads = model->export_gradients();
  ASSERT_EQ(grads.size(), ref.grads.size());
  EXPECT_LT(relative_error(grads, ref.grads), 1e-5);
  // The gradient buffer is the canonical layout itself.
  const GradBuffer buf = model->grad_buffer();
  ASSERT_EQ(buf.count, grads.size());
  EXPECT_TRUE(std::equal(grads.begin(), grads.end(), buf.data));
}

Optimizer adam(double lr) {
  Optimizer o{lr};
  o.kind = OptimizerKind::kAdam;
  return o;
}

TEST_P(LibTorchDriverTest, AdamIsTorchOptimAdamAndStartsAfreshOnLoad) {
  const Workload w = make_workload(GetParam());
  const std::vector<float> params = canonical_parameters(w, 4);
  auto model = driver_->create(w, {DeviceType::kCpu, 0, 1, 4});
  // LibTorch's own Adam (the C++ twin of torch.optim.Adam, the same ATen ops) on a copy of the
  // parameters, fed the driver's gradients of every step.
  torch::Tensor reference = torch::tensor(params).requires_grad_();
  torch::optim::Adam torch_adam({reference}, torch::optim::AdamOptions(0.01));
  const auto train = [&](bool with_reference) {
    model->load_parameters(params);
    std::vector<float> after;
    for (int step = 0; step < 3; ++step) {
      model->set_batch(synthetic_batch(w, 5, 4, step));
      model->forward();
      model->backward();
      if (with_reference) {
        reference.mutable_grad() = torch::tensor(model->export_gradients());
        torch_adam.step();
      }
      model->update(adam(0.01));
      after = model->export_parameters();
      if (with_reference) {
        const torch::Tensor expected = reference.detach().contiguous();
        EXPECT_TRUE(std::equal(after.begin(), after.end(), expected.data_ptr<float>())) << "step " << step + 1;
      }
    }
    return after;
  };
  const std::vector<float> first = train(true);
  EXPECT_NE(first, params);
  // load_parameters() clears m, v and t: the same three steps again give the same parameters.
  EXPECT_EQ(train(false), first);
}

INSTANTIATE_TEST_SUITE_P(SmallVariants, LibTorchDriverTest,
                         ::testing::Values("fcn5:features=40,width=16", "fcn8:features=24,width=8",
                                           "mnist_fnn:width=16"),
                         [](const auto& param_info) { return std::to_string(param_info.index); });

/// bf16 (CPU autocast): evaluate() runs the autocast layers in inference mode, close to fp32's
/// answer, and Adam updates fp32 master weights (values a bf16 copy could not hold).
TEST(LibTorchDriver, Bf16EvaluatesAndAdamKeepsFp32MasterWeights) {
  const Workload w = make_workload("mnist_cnn:width=4,fc=16");
  const std::vector<float> params = canonical_parameters(w, 2);
  const Batch held_out = synthetic_batch(w, 8, 3, 0);
  Evaluation result[2];
  std::vector<float> trained[2];
  const Precision precisions[2] = {Precision::kFp32, Precision::kBf16};
  for (int k = 0; k < 2; ++k) {
    Registry r;
    register_drivers(r);
    auto model = r.find("libtorch")->create(without_dropout(w), {DeviceType::kCpu, 0, 1, 2, precisions[k]});
    model->load_parameters(params);
    for (int step = 0; step < 3; ++step) {
      model->set_batch(synthetic_batch(w, 4, 2, step));
      model->forward();
      model->backward();
      model->update(adam(0.001));
    }
    result[k] = model->evaluate(held_out);
    trained[k] = model->export_parameters();
  }
  EXPECT_NEAR(result[1].loss_sum, result[0].loss_sum, 0.02 * result[0].loss_sum);
  EXPECT_EQ(result[1].predictions, result[0].predictions);
  EXPECT_NE(trained[1], params);
  const auto holds_more_than_bf16 = [](float v) {
    uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    return (bits & 0xffffu) != 0;
  };
  EXPECT_GT(std::count_if(trained[1].begin(), trained[1].end(), holds_more_than_bf16),
            static_cast<std::ptrdiff_t>(trained[1].size() / 2));
}

TEST(LibTorchDriver, CudaWithoutCudaIsReportedUnsupportedNotFaked) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "this LibTorch has CUDA and a GPU";
  Registry r;
  register_drivers(r);
  const Support s = r.find("libtorch")->device_available(DeviceType::kCuda);
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("without CUDA"), std::string::npos);
}

}  // namespace
}  // namespace dlscale
