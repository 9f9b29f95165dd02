// The oneDNN driver's Model contract beyond what the conformance test checks (agreement with the
// float64 reference): gradients are overwritten, not accumulated, by every layer kind (the LSTM
// primitive accumulates by itself); grad_buffer() is the canonical export; update() is plain SGD;
// a batch-size change rebuilds the primitives; the thread count follows the context even when
// models alternate; dropout masks are seeded; bad input and devices are refused up front.
// evaluate() and Adam: tests/conformance/test_inference_contract.cpp, for every driver.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <stdexcept>
#include <string>

#include "drivers/driver.h"
#include "tests/common/relative_error.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

namespace dlscale {
namespace {

constexpr uint64_t kSeed = 7;

const Driver& onednn() {
  static const Registry registry = [] {
    Registry r;
    register_drivers(r);
    return r;
  }();
  const Driver* d = registry.find("onednn");
  if (d == nullptr) throw std::logic_error("the onednn driver is not registered");
  return *d;
}

std::unique_ptr<Model> make_model(const Workload& w, int64_t batch, int threads = 1) {
  auto m = onednn().create(w, {DeviceType::kCpu, 0, threads, kSeed});
  m->load_parameters(canonical_parameters(w, kSeed));
  m->set_batch(synthetic_batch(w, batch, kSeed, 0));
  return m;
}

std::vector<float> gradients_of_one_step(Model& m) {
  m.forward();
  m.backward();
  return m.export_gradients();
}

// One small variant per code path: inner product, convolution with staged weights, pooling,
// batch norm and the bottleneck, embedding and the LSTM (all steps and last step).
const char* const kVariants[] = {"fcn5:features=40,width=16", "mnist_cnn:width=4,fc=16",
                                 "resnet50:image=64,width=2,classes=10", "lstm32:vocab=50,embed=8,hidden=8,seq=6",
                                 "imdb_lstm:vocab=50,embed=8,hidden=6,seq=12"};

class EveryPath : public ::testing::TestWithParam<const char*> {};

TEST_P(EveryPath, BackwardOverwritesTheGradients) {
  const Workload w = without_dropout(make_workload(GetParam()));
  auto m = make_model(w, 3);
  const std::vector<float> first = gradients_of_one_step(*m);
  const std::vector<float> second = gradients_of_one_step(*m);
  EXPECT_EQ(first, second) << "a second backward pass without update() must give the same gradients";
}

TEST_P(EveryPath, GradBufferIsTheCanonicalExport) {
  const Workload w = without_dropout(make_workload(GetParam()));
  auto m = make_model(w, 3);
  const std::vector<float> exported = gradients_of_one_step(*m);
  const GradBuffer g = m->grad_buffer();
  ASSERT_FALSE(g.on_device);
  ASSERT_EQ(g.count, static_cast<size_t>(parameter_count(w)));
  EXPECT_EQ(std::vector<float>(g.data, g.data + g.count), exported);
}

TEST_P(EveryPath, UpdateIsPlainSgdAndTheNextForwardSeesIt) {
  const Workload w = without_dropout(make_workload(GetParam()));
  auto m = make_model(w, 3);
  const std::vector<float> before = m->export_parameters();
  const std::vector<float> g = gradients_of_one_step(*m);
  const double first_loss = m->loss();
  const Optimizer sgd{0.05};
  m->update(sgd);
  const std::vector<float> after = m->export_parameters();
  const auto lr = static_cast<float>(sgd.learning_rate);
  for (size_t i = 0; i < before.size(); ++i) {
    // p - lr g, rounded once (the vectorised update contracts it into an FMA) or twice.
    const float fused = std::fma(-lr, g[i], before[i]), unfused = before[i] - lr * g[i];
    ASSERT_TRUE(after[i] == fused || after[i] == unfused) << "parameter " << i << ": " << after[i] << " vs " << fused;
  }
  // Staged weight copies (convolution, LSTM) must be refreshed: a fresh model loaded with the
  // updated parameters computes the same loss.
  m->forward();
  auto fresh = onednn().create(w, {DeviceType::kCpu, 0, 1, kSeed});
  fresh->load_parameters(after);
  fresh->set_batch(synthetic_batch(w, 3, kSeed, 0));
  fresh->forward();
  EXPECT_EQ(m->loss(), fresh->loss());
  EXPECT_NE(m->loss(), first_loss);
}

TEST_P(EveryPath, ABatchSizeChangeRebuildsThePrimitives) {
  const Workload w = without_dropout(make_workload(GetParam()));
  auto resized = make_model(w, 4);
  gradients_of_one_step(*resized);
  resized->set_batch(synthetic_batch(w, 2, kSeed, 1));
  auto fresh = onednn().create(w, {DeviceType::kCpu, 0, 1, kSeed});
  fresh->load_parameters(canonical_parameters(w, kSeed));
  fresh->set_batch(synthetic_batch(w, 2, kSeed, 1));
  EXPECT_EQ(gradients_of_one_step(*resized), gradients_of_one_step(*fresh));
  EXPECT_EQ(resized->loss(), fresh->loss());
}

TEST_P(EveryPath, TwoThreadsAgreeWithOne) {
  const Workload w = without_dropout(make_workload(GetParam()));
  auto one = make_model(w, 4, 1), two = make_model(w, 4, 2);
  const std::vector<float> g1 = gradients_of_one_step(*one), g2 = gradients_of_one_step(*two);
  EXPECT_LT(relative_error(g2, g1), 1e-5);
  EXPECT_NEAR(two->loss(), one->loss(), 1e-6 * std::abs(one->loss()));
}

std::string variant_name(const ::testing::TestParamInfo<const char*>& param) {
  std::string name = param.param;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(OnednnDriver, EveryPath, ::testing::ValuesIn(kVariants), variant_name);

TEST(OnednnDriver, TheLossFallsOnAFixedBatch) {
  const Workload w = make_workload("mnist_fnn:width=16");
  auto m = make_model(w, 8);
  m->forward();
  const double start = m->loss();
  for (int step = 0; step < 20; ++step) {
    m->backward();
    m->update(Optimizer{0.1});
    m->forward();
  }
  EXPECT_LT(m->loss(), 0.8 * start);
}

TEST(OnednnDriver, ThreadsFollowTheContextWhenModelsAlternate) {
  const Workload w = make_workload("fcn5:features=40,width=16");
  auto one = make_model(w, 4, 1), two = make_model(w, 4, 2);
  for (int round = 0; round < 2; ++round) {
    one->forward();
    EXPECT_EQ(omp_get_max_threads(), 1);
    two->forward();
    two->backward();
    EXPECT_EQ(omp_get_max_threads(), 2);
    one->update(Optimizer{});
    EXPECT_EQ(omp_get_max_threads(), 1);
  }
}

TEST(OnednnDriver, DropoutMasksAreSeededAndRedrawnEveryStep) {
  const Workload w = make_workload("mnist_cnn:width=4,fc=16");  // three dropout layers
  auto a = make_model(w, 4), b = make_model(w, 4);
  a->forward();
  b->forward();
  EXPECT_EQ(a->loss(), b->loss()) << "same seed, same masks";
  const double first = a->loss();
  a->forward();
  EXPECT_NE(a->loss(), first) << "the second step must draw new masks";
  auto other = onednn().create(w, {DeviceType::kCpu, 0, 1, kSeed + 1});
  other->load_parameters(canonical_parameters(w, kSeed));
  other->set_batch(synthetic_batch(w, 4, kSeed, 0));
  other->forward();
  EXPECT_NE(other->loss(), first) << "another seed (another rank) must draw other masks";
}

TEST(OnednnDriver, RefusesWhatItCannotRun) {
  const Workload w = make_workload("mnist_fnn:width=16");
  EXPECT_FALSE(onednn().supports(w, DeviceType::kCuda).ok);
  EXPECT_TRUE(onednn().supports(w, DeviceType::kCpu).ok);
  EXPECT_THROW(onednn().create(w, {DeviceType::kCuda, 0, 1, kSeed}), std::invalid_argument);
  auto m = onednn().create(w, {DeviceType::kCpu, 0, 1, kSeed});
  EXPECT_THROW(m->forward(), std::logic_error) << "forward() before set_batch()";
  Batch bad = synthetic_batch(w, 2, kSeed, 0);
  bad.labels[0] = 10;  // ten classes: 0..9
  EXPECT_THROW(m->set_batch(bad), std::invalid_argument);
  EXPECT_THROW(m->load_parameters(std::vector<float>(3)), std::invalid_argument);
}

TEST(OnednnDriver, ReportsItsVersionIsaAndRuntime) {
  const auto v = onednn().versions();
  ASSERT_TRUE(v.count("onednn"));
  EXPECT_TRUE(std::regex_match(v.at("onednn"), std::regex(R"(\d+\.\d+\.\d+ \(.+\))"))) << v.at("onednn");
  ASSERT_TRUE(v.count("onednn_isa"));
  EXPECT_FALSE(v.at("onednn_isa").empty());
  ASSERT_TRUE(v.count("onednn_cpu_runtime"));
  // The driver sets threads through OpenMP; supports() refuses other threaded runtimes.
  EXPECT_TRUE(v.at("onednn_cpu_runtime") == "OpenMP" || v.at("onednn_cpu_runtime") == "sequential")
      << v.at("onednn_cpu_runtime");
}

}  // namespace
}  // namespace dlscale
