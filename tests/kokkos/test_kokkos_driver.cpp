// The Kokkos driver's Model contract beyond what the conformance test checks (agreement with the
// float64 reference): gradients are overwritten, not accumulated, on every code path;
// grad_buffer() is the canonical export; update() is plain SGD; a batch-size change rebuilds
// every buffer; dropout masks are seeded and redrawn; the BLAS thread count follows the context
// even when models alternate; bad input and devices are refused up front; versions() reports
// what the driver runs on; evaluate() changes nothing training sees and turns dropout off; batch
// norm's running statistics follow PyTorch; Adam's first step moves every parameter by about the
// learning rate; load_parameters() resets Adam and the running statistics.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <stdexcept>
#include <string>

#include "drivers/driver.h"
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

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
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

// Inference and Adam (Model::evaluate, OptimizerKind::kAdam): their agreement with the reference is
// the conformance test's; here, what the contract promises beyond a number.

Optimizer adam(double lr) {
  Optimizer o{lr};
  o.kind = OptimizerKind::kAdam;
  return o;
}

void train_step(Model& m, const Optimizer& opt) {
  m.forward();
  m.backward();
  m.update(opt);
}

// Dropout stays in (the variants that have it): an evaluate() between two training steps must not
// advance the masks' random stream either.
TEST_P(EveryPath, EvaluateChangesNothingTrainingSees) {
  const Workload w = make_workload(GetParam());
  auto evaluated = make_model(w, 3), untouched = make_model(w, 3);
  for (Model* m : {evaluated.get(), untouched.get()}) train_step(*m, adam(1e-3));  // Adam state, running stats
  const std::vector<float> parameters = evaluated->export_parameters();
  const Batch held_out = synthetic_batch(w, 5, kSeed, 1);  // another size: the model rebuilds for it
  const Evaluation first = evaluated->evaluate(held_out), second = evaluated->evaluate(held_out);
  EXPECT_EQ(first.predictions, held_out.size * w.labels_per_sample());
  EXPECT_GT(first.loss_sum, 0);
  EXPECT_GE(first.correct, 0);
  EXPECT_LE(first.correct, first.predictions);
  EXPECT_EQ(second.loss_sum, first.loss_sum) << "inference must be deterministic and change no statistic";
  EXPECT_EQ(second.correct, first.correct);
  EXPECT_EQ(evaluated->export_parameters(), parameters);

  evaluated->set_batch(synthetic_batch(w, 3, kSeed, 0));
  for (Model* m : {evaluated.get(), untouched.get()}) train_step(*m, adam(1e-3));
  EXPECT_EQ(evaluated->loss(), untouched->loss()) << "the training step after evaluate() differs";
  EXPECT_EQ(evaluated->export_parameters(), untouched->export_parameters()) << "Adam's state changed";
  EXPECT_EQ(evaluated->evaluate(held_out).loss_sum, untouched->evaluate(held_out).loss_sum)
      << "the running statistics changed";
}

// Adam's first step: m = (1 - beta1) g and v = (1 - beta2) g^2, so after the bias corrections
// every parameter moves by lr g / (|g| + eps), about lr against its gradient's sign.
TEST_P(EveryPath, AdamsFirstStepMovesEveryParameterByTheLearningRate) {
  const Workload w = without_dropout(make_workload(GetParam()));
  auto m = make_model(w, 3);
  const std::vector<float> before = m->export_parameters();
  const std::vector<float> g = gradients_of_one_step(*m);
  const Optimizer opt = adam(1e-3);
  m->update(opt);
  const std::vector<float> after = m->export_parameters();
  size_t moved = 0;
  for (size_t i = 0; i < before.size(); ++i) {
    const double step = opt.learning_rate * g[i] / (std::abs(static_cast<double>(g[i])) + opt.epsilon);
    const double want = before[i] - step;
    // Float rounding of the update and of the parameter itself.
    const double tolerance = 1e-5 * opt.learning_rate + 2 * std::abs(want) * 1.2e-7;
    ASSERT_NEAR(after[i], want, tolerance) << "parameter " << i << ", gradient " << g[i];
    moved += std::abs(static_cast<double>(g[i])) > 1e-6 ? 1 : 0;
  }
  // Dead ReLUs and unused embedding rows leave some gradients zero; most must be there.
  EXPECT_GT(moved, before.size() / 4) << "too few parameters had a gradient to test with";
}

// load_parameters() starts afresh: Adam's moments and step count and the running statistics are
// those of a new model, so one step from there equals one step of a fresh model.
TEST_P(EveryPath, LoadParametersResetsAdamAndTheRunningStatistics) {
  const Workload w = without_dropout(make_workload(GetParam()));
  auto reused = make_model(w, 3), fresh = make_model(w, 3);
  for (int step = 0; step < 2; ++step) train_step(*reused, adam(1e-2));
  reused->load_parameters(canonical_parameters(w, kSeed));
  reused->set_batch(synthetic_batch(w, 3, kSeed, 0));
  const Batch held_out = synthetic_batch(w, 4, kSeed, 1);
  const Evaluation reset = reused->evaluate(held_out), made = fresh->evaluate(held_out);
  EXPECT_EQ(reset.loss_sum, made.loss_sum) << "running statistics survived load_parameters()";
  EXPECT_EQ(reset.correct, made.correct);
  for (Model* m : {reused.get(), fresh.get()}) {
    m->set_batch(synthetic_batch(w, 3, kSeed, 0));
    train_step(*m, adam(1e-2));
  }
  EXPECT_EQ(reused->export_parameters(), fresh->export_parameters()) << "Adam's state survived load_parameters()";
}

TEST(KokkosDriver, EvaluateTurnsDropoutOff) {
  const Workload with = make_workload("mnist_cnn:width=4,fc=16"), without = without_dropout(with);
  ASSERT_LT(without.layers.size(), with.layers.size());
  auto dropping = make_model(with, 4), plain = make_model(without, 4);
  const Batch batch = synthetic_batch(with, 6, kSeed, 1);
  const Evaluation a = dropping->evaluate(batch), b = dropping->evaluate(batch), c = plain->evaluate(batch);
  EXPECT_EQ(a.loss_sum, b.loss_sum);
  EXPECT_EQ(a.correct, b.correct);
  EXPECT_NEAR(a.loss_sum, c.loss_sum, 1e-6 * c.loss_sum) << "inference with dropout must be the network without it";
  EXPECT_EQ(a.correct, c.correct);
}

// A batch norm alone ([3, 2, 2] samples, flattened into 12 logits) against a hand computation:
// before training it normalises with mean 0 and variance 1; one training forward() folds
// 0.1 x the batch mean and 0.1 x the unbiased batch variance into them; load_parameters() resets.
TEST(KokkosDriver, BatchNormRunningStatisticsFollowPyTorch) {
  constexpr int64_t kChannels = 3, kPlane = 4, kClasses = kChannels * kPlane;
  Workload w;
  w.name = "batch_norm_only";
  w.input_shape = {kChannels, 2, 2};
  w.num_classes = kClasses;
  Layer bn{LayerKind::kBatchNorm2d};
  bn.in = bn.out = kChannels;
  w.layers = {bn, Layer{LayerKind::kFlatten}};
  const std::vector<float> gamma{0.5f, 1.0f, 2.0f}, beta{0.1f, -0.2f, 0.3f};
  std::vector<float> parameters = gamma;
  parameters.insert(parameters.end(), beta.begin(), beta.end());

  // Channel means far from 0 and spreads far from 1, so that every running statistic matters.
  auto batch = [&](int64_t n, int phase) {
    Batch b;
    b.size = n;
    for (int64_t s = 0; s < n; ++s) {
      for (int64_t c = 0; c < kChannels; ++c) {
        for (int64_t i = 0; i < kPlane; ++i) {
          b.features.push_back(
              static_cast<float>(2.0 * (c + 1) + (c + 0.5) * std::sin(1.0 + phase + s * 7 + c * 3 + i)));
        }
      }
      b.labels.push_back((s * 5 + phase) % kClasses);
    }
    return b;
  };
  const Batch train = batch(4, 0), held_out = batch(5, 1);

  auto expected = [&](const std::vector<double>& mean, const std::vector<double>& var) {
    Evaluation e;
    for (int64_t s = 0; s < held_out.size; ++s) {
      std::vector<double> z(kClasses);
      for (int64_t j = 0; j < kClasses; ++j) {
        const auto c = static_cast<size_t>(j / kPlane);
        z[static_cast<size_t>(j)] =
            gamma[c] * (held_out.features[static_cast<size_t>(s * kClasses + j)] - mean[c]) / std::sqrt(var[c] + 1e-5) +
            beta[c];
      }
      const double max = *std::max_element(z.begin(), z.end());
      double sum = 0;
      for (double v : z) sum += std::exp(v - max);
      const int64_t label = held_out.labels[static_cast<size_t>(s)];
      e.loss_sum += max + std::log(sum) - z[static_cast<size_t>(label)];
      e.correct += std::max_element(z.begin(), z.end()) - z.begin() == label;
      ++e.predictions;
    }
    return e;
  };
  auto check = [&](const Evaluation& got, const Evaluation& want, const char* when) {
    SCOPED_TRACE(when);
    EXPECT_EQ(got.predictions, want.predictions);
    EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-5 * want.loss_sum);
    EXPECT_EQ(got.correct, want.correct);
  };

  auto m = kokkos().create(w, {home(), 0, 1, kSeed});
  m->load_parameters(parameters);
  check(m->evaluate(held_out), expected({0, 0, 0}, {1, 1, 1}), "initial statistics");

  m->set_batch(train);
  m->forward();
  std::vector<double> mean(kChannels, 0), var(kChannels, 0);
  const auto count = static_cast<double>(train.size * kPlane);
  for (size_t k = 0; k < train.features.size(); ++k) mean[k / kPlane % kChannels] += train.features[k] / count;
  for (size_t k = 0; k < train.features.size(); ++k) {
    const size_t c = k / kPlane % kChannels;
    var[c] += (train.features[k] - mean[c]) * (train.features[k] - mean[c]) / (count - 1);
  }
  std::vector<double> running_mean(kChannels), running_var(kChannels);
  for (size_t c = 0; c < kChannels; ++c) {
    running_mean[c] = 0.1 * mean[c];
    running_var[c] = 0.9 + 0.1 * var[c];
  }
  check(m->evaluate(held_out), expected(running_mean, running_var), "after one training forward()");

  m->load_parameters(parameters);
  check(m->evaluate(held_out), expected({0, 0, 0}, {1, 1, 1}), "after load_parameters()");
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
