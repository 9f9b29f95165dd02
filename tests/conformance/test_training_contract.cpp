// What Model promises about training beyond agreeing with the reference driver (that is
// test_driver_conformance.cpp's), written once for every driver under test: on the CPU build the
// CPU drivers, on the GPU build (DLSCALE_CONFORMANCE_ON_GPU) every driver on the GPU. backward()
// overwrites the gradients, never accumulates, on every code path (the oneDNN LSTM primitive
// accumulates by itself); grad_buffer() holds the canonical export; update() is plain SGD and
// the next forward pass sees it (staged weight copies are refreshed); a batch of another size
// rebuilds what the batch size shaped; two CPU threads agree with one; the loss falls on a fixed
// batch; dropout masks follow the seed and are redrawn every step; bad input is refused up front.
// What one backend alone promises (its thread controls, its versions(), the devices and
// workloads it refuses) stays in that backend's own test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "drivers/driver.h"
#include "tests/common/relative_error.h"
#include "tests/conformance/conformance_support.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

// In dlscale::conformance: conformance_support.h's names without using-declarations.
namespace dlscale::conformance {
namespace {

std::vector<float> gradients_of_one_step(Model& m) {
  m.forward();
  m.backward();
  return m.export_gradients();
}

class TrainingPath : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(TrainingPath, BackwardOverwritesTheGradients) {
  const auto& [driver, variant] = GetParam();
  SKIP_WITHOUT_DEVICE(driver);
  const Workload w = without_dropout(make_workload(variant));
  auto m = make_model(driver, w, 3);
  const std::vector<float> first = gradients_of_one_step(*m);
  const std::vector<float> second = gradients_of_one_step(*m);
  EXPECT_TRUE(same_results(second, first)) << "a second backward pass without update() must give the same gradients";
}

TEST_P(TrainingPath, GradBufferIsTheCanonicalExport) {
  const auto& [driver, variant] = GetParam();
  SKIP_WITHOUT_DEVICE(driver);
  const Workload w = without_dropout(make_workload(variant));
  auto m = make_model(driver, w, 3);
  const std::vector<float> exported = gradients_of_one_step(*m);
  const GradBuffer g = m->grad_buffer();
  if (g.on_device) {
    ASSERT_NE(kDevice, DeviceType::kCpu) << "a CPU model keeps its gradients in host memory";
    // In the driver's own layout (alignment padding, cuDNN's LSTM weight spaces): every gradient
    // is in it, and export_gradients() translates (the conformance tests compare that).
    EXPECT_GE(g.count, static_cast<size_t>(parameter_count(w)));
    GTEST_SKIP() << "device memory in the driver's layout: compared through export_gradients() only";
  }
  ASSERT_EQ(g.count, static_cast<size_t>(parameter_count(w)));
  EXPECT_EQ(std::vector<float>(g.data, g.data + g.count), exported);
}

TEST_P(TrainingPath, UpdateIsPlainSgdAndTheNextForwardSeesIt) {
  const auto& [driver, variant] = GetParam();
  SKIP_WITHOUT_DEVICE(driver);
  const Workload w = without_dropout(make_workload(variant));
  auto m = make_model(driver, w, 3);
  const std::vector<float> before = m->export_parameters();
  const std::vector<float> g = gradients_of_one_step(*m);
  const double first_loss = m->loss();
  const Optimizer sgd{0.05};
  m->update(sgd);
  const std::vector<float> after = m->export_parameters();
  const auto lr = static_cast<float>(sgd.learning_rate);
  for (size_t i = 0; i < before.size(); ++i) {
    // p - lr g, rounded once (an update contracted into an FMA) or twice.
    const float fused = std::fma(-lr, g[i], before[i]), unfused = before[i] - lr * g[i];
    ASSERT_TRUE(after[i] == fused || after[i] == unfused) << "parameter " << i << ": " << after[i] << " vs " << fused;
  }
  // Staged weight copies (the oneDNN convolution and LSTM) must be refreshed: a fresh model
  // loaded with the updated parameters computes the same loss.
  m->forward();
  auto fresh = registry().find(driver)->create(w, {kDevice, 0, 1, kSeed});
  fresh->load_parameters(after);
  fresh->set_batch(synthetic_batch(w, 3, kSeed, 0));
  fresh->forward();
  EXPECT_TRUE(same_results(m->loss(), fresh->loss()));
  EXPECT_NE(m->loss(), first_loss);
}

TEST_P(TrainingPath, ABatchSizeChangeRebuildsTheBuffers) {
  const auto& [driver, variant] = GetParam();
  SKIP_WITHOUT_DEVICE(driver);
  const Workload w = without_dropout(make_workload(variant));
  auto resized = make_model(driver, w, 4);
  gradients_of_one_step(*resized);
  resized->set_batch(synthetic_batch(w, 2, kSeed, 1));
  auto fresh = registry().find(driver)->create(w, {kDevice, 0, 1, kSeed});
  fresh->load_parameters(canonical_parameters(w, kSeed));
  fresh->set_batch(synthetic_batch(w, 2, kSeed, 1));
  EXPECT_TRUE(same_results(gradients_of_one_step(*resized), gradients_of_one_step(*fresh)));
  EXPECT_TRUE(same_results(resized->loss(), fresh->loss()));
}

#ifndef DLSCALE_CONFORMANCE_ON_GPU
// Two threads split the sums differently, so they round differently: each result is within its
// float32 error of the float64 reference, and the two within the sum of those errors. The bound
// is four times the one-thread error, measured here against the reference (so it follows the
// network's depth and the kernels the BLAS runs, generic ones included), and never under 16
// float32 units of round-off. A driver that cannot compute on two threads here refuses them at
// create() (the Kokkos driver with a space that keeps its first thread count); that is its
// answer, not a failure.
TEST_P(TrainingPath, TwoThreadsAgreeWithOne) {
  const auto& [driver, variant] = GetParam();
  const Workload w = without_dropout(make_workload(variant));
  std::unique_ptr<Model> one, two;
  try {
    one = make_model(driver, w, 4, 1);
    two = make_model(driver, w, 4, 2);
  } catch (const std::invalid_argument& e) {
    GTEST_SKIP() << e.what();
  }
  auto reference = make_model("reference", w, 4);
  const std::vector<float> g1 = gradients_of_one_step(*one), g2 = gradients_of_one_step(*two),
                           want = gradients_of_one_step(*reference);
  constexpr double kFloor = 16 * 0x1p-24;
  const double gradient_bound = std::max(kFloor, 4 * relative_error(g1, want));
  const double loss_bound =
      std::max(kFloor, 4 * std::abs(one->loss() - reference->loss()) / std::abs(reference->loss()));
  EXPECT_LT(relative_error(g2, g1), gradient_bound);
  EXPECT_NEAR(two->loss(), one->loss(), loss_bound * std::abs(one->loss()));
}
#endif

INSTANTIATE_TEST_SUITE_P(EveryDriver, TrainingPath,
                         ::testing::Combine(::testing::ValuesIn(drivers_under_test()),
                                            ::testing::ValuesIn(kPathVariants)),
                         [](const auto& param_info) {
                           return test_name(std::get<0>(param_info.param) + "_" + std::get<1>(param_info.param));
                         });
// A build with the reference driver alone has no other driver to run these on.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TrainingPath);

class TrainingDriver : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainingDriver, TheLossFallsOnAFixedBatch) {
  SKIP_WITHOUT_DEVICE(GetParam());
  const Workload w = make_workload("mnist_fnn:width=16");
  auto m = make_model(GetParam(), w, 8);
  m->forward();
  const double start = m->loss();
  for (int step = 0; step < 20; ++step) {
    m->backward();
    m->update(Optimizer{0.1});
    m->forward();
  }
  EXPECT_LT(m->loss(), 0.8 * start);
}

// The models step one after the other, never interleaved: LibTorch's dropout draws from one
// generator per process, which making a model reseeds.
TEST_P(TrainingDriver, DropoutMasksAreSeededAndRedrawnEveryStep) {
  SKIP_WITHOUT_DEVICE(GetParam());
  const Workload w = make_workload("mnist_cnn:width=4,fc=16");  // three dropout layers
  auto a = make_model(GetParam(), w, 4);
  a->forward();
  const double first = a->loss();
  a->forward();
  EXPECT_NE(a->loss(), first) << "the second step must draw new masks";
  auto b = make_model(GetParam(), w, 4);
  b->forward();
  EXPECT_TRUE(same_results(b->loss(), first)) << "same seed, same masks";
  auto other = make_model(GetParam(), w, 4, 1, kSeed + 1);
  other->forward();
  EXPECT_NE(other->loss(), first) << "another seed (another rank) must draw other masks";
}

TEST_P(TrainingDriver, RefusesBadInputUpFront) {
  SKIP_WITHOUT_DEVICE(GetParam());
  const Workload w = make_workload("mnist_fnn:width=16");
  auto m = registry().find(GetParam())->create(w, {kDevice, 0, 1, kSeed});
  EXPECT_THROW(m->forward(), std::logic_error) << "forward() before set_batch()";
  Batch bad = synthetic_batch(w, 2, kSeed, 0);
  bad.labels[0] = 10;  // ten classes: 0..9
  EXPECT_THROW(m->set_batch(bad), std::invalid_argument);
  EXPECT_THROW(m->load_parameters(std::vector<float>(3)), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Contract, TrainingDriver, ::testing::ValuesIn(drivers_under_test()),
                         [](const auto& param_info) { return test_name(param_info.param); });
// A build with the reference driver alone has no other driver to run these on.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TrainingDriver);

}  // namespace
}  // namespace dlscale::conformance
