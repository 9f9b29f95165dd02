// The Kokkos driver's Model contract beyond what the conformance test checks (agreement with the
// float64 reference): gradients are overwritten, not accumulated, on every code path;
// grad_buffer() is the canonical export; update() is plain SGD; a batch-size change rebuilds
// every buffer; dropout masks are seeded and redrawn; the BLAS thread count follows the context
// even when models alternate; bad input and devices are refused up front; versions() reports
// what the driver runs on. evaluate() and Adam: tests/conformance/test_inference_contract.cpp,
// for every driver.
#include <dlfcn.h>
#include <gtest/gtest.h>

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

const Driver& kokkos() {
  static const Registry registry = [] {
    Registry r;
    register_drivers(r);
    return r;
  }();
  const Driver* d = registry.find("kokkos");
  if (d == nullptr) throw std::logic_error("the kokkos driver is not registered");
  return *d;
}

DeviceType home() { return kokkos().default_device(); }

std::unique_ptr<Model> make_model(const Workload& w, int64_t batch, int threads = 1, uint64_t seed = kSeed) {
  auto m = kokkos().create(w, {home(), 0, threads, seed});
  m->load_parameters(canonical_parameters(w, kSeed));
  m->set_batch(synthetic_batch(w, batch, kSeed, 0));
  return m;
}

std::vector<float> gradients_of_one_step(Model& m) {
  m.forward();
  m.backward();
  return m.export_gradients();
}

// One small variant per code path: Linear; convolution through im2col and overlapping padded
// max-pooling; the bottleneck (direct 1x1 convolutions, projections, fused BN-ReLU); embedding
// and the LSTM (all steps with two stacked layers, last step with one).
const char* const kVariants[] = {"fcn5:features=40,width=16", "alexnet:image=63,width=2,fc=16,classes=10",
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
  ASSERT_EQ(g.count, static_cast<size_t>(parameter_count(w)));
  if (g.on_device) GTEST_SKIP() << "device memory: compared through export_gradients() only";
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
    // p - lr g, rounded once (a contracted FMA) or twice.
    const float fused = std::fma(-lr, g[i], before[i]), unfused = before[i] - lr * g[i];
    ASSERT_TRUE(after[i] == fused || after[i] == unfused) << "parameter " << i << ": " << after[i] << " vs " << fused;
  }
  m->forward();
  auto fresh = kokkos().create(w, {home(), 0, 1, kSeed});
  fresh->load_parameters(after);
  fresh->set_batch(synthetic_batch(w, 3, kSeed, 0));
  fresh->forward();
  EXPECT_EQ(m->loss(), fresh->loss());
  EXPECT_NE(m->loss(), first_loss);
}

TEST_P(EveryPath, ABatchSizeChangeRebuildsTheBuffers) {
  const Workload w = without_dropout(make_workload(GetParam()));
  auto resized = make_model(w, 4);
  gradients_of_one_step(*resized);
  resized->set_batch(synthetic_batch(w, 2, kSeed, 1));
  auto fresh = kokkos().create(w, {home(), 0, 1, kSeed});
  fresh->load_parameters(canonical_parameters(w, kSeed));
  fresh->set_batch(synthetic_batch(w, 2, kSeed, 1));
  EXPECT_EQ(gradients_of_one_step(*resized), gradients_of_one_step(*fresh));
  EXPECT_EQ(resized->loss(), fresh->loss());
}

std::string variant_name(const ::testing::TestParamInfo<const char*>& param) {
  std::string name = param.param;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(KokkosDriver, EveryPath, ::testing::ValuesIn(kVariants), variant_name);

TEST(KokkosDriver, TheLossFallsOnAFixedBatch) {
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

TEST(KokkosDriver, DropoutMasksAreSeededAndRedrawnEveryStep) {
  const Workload w = make_workload("mnist_cnn:width=4,fc=16");  // three dropout layers
  auto a = make_model(w, 4), b = make_model(w, 4);
  a->forward();
  b->forward();
  EXPECT_EQ(a->loss(), b->loss()) << "same seed, same masks";
  const double first = a->loss();
  a->forward();
  EXPECT_NE(a->loss(), first) << "the second step must draw new masks";
  auto other = make_model(w, 4, 1, kSeed + 1);
  other->forward();
  EXPECT_NE(other->loss(), first) << "another seed must draw other masks";
}

/// OpenBLAS' current thread count, or -1 when no OpenBLAS is loaded.
int openblas_threads() {
  auto get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  auto parallel = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  return get != nullptr && parallel != nullptr && parallel() != 0 ? get() : -1;
}

TEST(KokkosDriver, BlasThreadsFollowTheContextWhenModelsAlternate) {
  if (home() != DeviceType::kCpu) GTEST_SKIP() << "the BLAS is not used on a device";
  if (openblas_threads() < 0) GTEST_SKIP() << "no threaded OpenBLAS in this process";
  const Workload w = make_workload("fcn5:features=40,width=16");
  std::unique_ptr<Model> one, two;
  try {
    one = make_model(w, 4, 1);
    two = make_model(w, 4, 2);
  } catch (const std::invalid_argument& e) {
    GTEST_SKIP() << e.what();  // an OpenMP or Threads space keeps its first thread count
  }
  for (int round = 0; round < 2; ++round) {
    one->forward();
    EXPECT_EQ(openblas_threads(), 1);
    two->forward();
    two->backward();
    EXPECT_EQ(openblas_threads(), 2);
    one->backward();
    EXPECT_EQ(openblas_threads(), 1);
  }
}

TEST(KokkosDriver, TwoThreadsAgreeWithOne) {
  const Workload w = without_dropout(make_workload("fcn5:features=200,width=64"));
  std::unique_ptr<Model> one, two;
  try {
    one = make_model(w, 4, 1);
    two = make_model(w, 4, 2);
  } catch (const std::invalid_argument& e) {
    GTEST_SKIP() << e.what();  // nothing here can use two threads, or the space keeps its first count
  }
  const std::vector<float> g1 = gradients_of_one_step(*one), g2 = gradients_of_one_step(*two);
  EXPECT_LT(relative_error(g2, g1), 1e-5);
  EXPECT_NEAR(two->loss(), one->loss(), 1e-6 * std::abs(one->loss()));
}

TEST(KokkosDriver, RefusesWhatItCannotRun) {
  const Workload w = make_workload("mnist_fnn:width=16");
  const DeviceType elsewhere = home() == DeviceType::kCpu ? DeviceType::kCuda : DeviceType::kCpu;
  EXPECT_TRUE(kokkos().supports(w, home()).ok);
  EXPECT_FALSE(kokkos().supports(w, elsewhere).ok);
  EXPECT_THROW(kokkos().create(w, {elsewhere, 0, 1, kSeed}), std::invalid_argument);
  Workload broken = w;
  broken.num_classes = 11;  // the last layer gives 10
  EXPECT_FALSE(kokkos().supports(broken, home()).ok);
  auto m = kokkos().create(w, {home(), 0, 1, kSeed});
  EXPECT_THROW(m->forward(), std::logic_error) << "forward() before set_batch()";
  Batch bad = synthetic_batch(w, 2, kSeed, 0);
  bad.labels[0] = 10;  // ten classes: 0..9
  EXPECT_THROW(m->set_batch(bad), std::invalid_argument);
  EXPECT_THROW(m->load_parameters(std::vector<float>(3)), std::invalid_argument);
}

TEST(KokkosDriver, ReportsWhatItRunsOn) {
  const auto v = kokkos().versions();
  ASSERT_TRUE(v.count("kokkos"));
  EXPECT_TRUE(std::regex_match(v.at("kokkos"), std::regex(R"(\d+\.\d+\.\d+)"))) << v.at("kokkos");
  for (const char* key : {"kokkos_kernels", "kokkos_kernels_tpls", "kokkos_execution_space", "kokkos_memory_space",
                          "kokkos_concurrency", "kokkos_blas_threads"}) {
    ASSERT_TRUE(v.count(key)) << key;
    EXPECT_FALSE(v.at(key).empty()) << key;
  }
}

}  // namespace
}  // namespace dlscale
