// What Model::evaluate() and Adam promise beyond agreeing with the reference driver (that is
// test_driver_conformance.cpp's InferenceAndAdam), written once for every driver under test: on
// the CPU build the CPU drivers, on the GPU build (DLSCALE_CONFORMANCE_ON_GPU) every driver on
// the GPU. An evaluation between training steps changes nothing training sees; Adam's first
// step has its closed form; load_parameters() starts afresh; inference has no dropout; batch
// norm's running statistics follow PyTorch; ties and zero logits are counted by the documented
// rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "drivers/driver.h"
#include "tests/conformance/conformance_support.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

// In dlscale::conformance: conformance_support.h's names without using-declarations.
namespace dlscale::conformance {
namespace {

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

class EveryPath : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

// Dropout stays in (the variants that have it): an evaluate() between training steps must not
// advance the masks' random stream either. The two runs follow each other, never interleaved:
// LibTorch's dropout draws from one generator per process, which making a model reseeds.
TEST_P(EveryPath, EvaluateChangesNothingTrainingSees) {
  const auto& [driver, variant] = GetParam();
  SKIP_WITHOUT_DEVICE(driver);
  const Workload w = make_workload(variant);
  const Batch held_out = synthetic_batch(w, 5, kSeed, 1);  // another size: a model may rebuild for it
  struct Run {
    std::vector<double> losses;
    std::vector<float> parameters;
    Evaluation last;
  };
  auto run = [&](bool evaluate_between) {
    Run r;
    auto m = make_model(driver, w, 3);
    for (int step = 0; step < 3; ++step) {
      m->set_batch(synthetic_batch(w, 3, kSeed, step));
      train_step(*m, adam(1e-3));  // Adam's moments, the running statistics and the masks move
      r.losses.push_back(m->loss());
      if (!evaluate_between) continue;
      const std::vector<float> before = m->export_parameters();
      const Evaluation first = m->evaluate(held_out), second = m->evaluate(held_out);
      EXPECT_EQ(first.predictions, held_out.size * w.labels_per_sample());
      EXPECT_GT(first.loss_sum, 0);
      EXPECT_LE(first.correct, first.predictions);
      EXPECT_EQ(second.loss_sum, first.loss_sum) << "inference must be deterministic and change no statistic";
      EXPECT_EQ(second.correct, first.correct);
      EXPECT_EQ(m->export_parameters(), before);
    }
    r.parameters = m->export_parameters();
    r.last = m->evaluate(held_out);
    return r;
  };
  const Run evaluated = run(true), untouched = run(false);
  EXPECT_TRUE(same_results(evaluated.losses, untouched.losses)) << "a training step after evaluate() differs";
  EXPECT_TRUE(same_results(evaluated.parameters, untouched.parameters)) << "Adam's state or the masks changed";
  EXPECT_TRUE(same_results(evaluated.last.loss_sum, untouched.last.loss_sum)) << "the running statistics changed";
  EXPECT_EQ(evaluated.last.correct, untouched.last.correct);
}

// Adam's first step: m = (1 - beta1) g and v = (1 - beta2) g^2, so after the bias corrections
// every parameter moves by lr g / (|g| + eps), about lr against its gradient's sign.
TEST_P(EveryPath, AdamsFirstStepMovesEveryParameterByTheLearningRate) {
  const auto& [driver, variant] = GetParam();
  SKIP_WITHOUT_DEVICE(driver);
  const Workload w = without_dropout(make_workload(variant));
  auto m = make_model(driver, w, 3);
  const std::vector<float> before = m->export_parameters();
  m->forward();
  m->backward();
  const std::vector<float> g = m->export_gradients();
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
  const auto& [driver, variant] = GetParam();
  SKIP_WITHOUT_DEVICE(driver);
  const Workload w = without_dropout(make_workload(variant));
  auto reused = make_model(driver, w, 3), fresh = make_model(driver, w, 3);
  for (int step = 0; step < 2; ++step) train_step(*reused, adam(1e-2));
  reused->load_parameters(canonical_parameters(w, kSeed));
  const Batch held_out = synthetic_batch(w, 4, kSeed, 1);
  const Evaluation reset = reused->evaluate(held_out), made = fresh->evaluate(held_out);
  EXPECT_TRUE(same_results(reset.loss_sum, made.loss_sum)) << "running statistics survived load_parameters()";
  EXPECT_EQ(reset.correct, made.correct);
  for (Model* m : {reused.get(), fresh.get()}) {
    m->set_batch(synthetic_batch(w, 3, kSeed, 0));
    train_step(*m, adam(1e-2));
  }
  EXPECT_TRUE(same_results(reused->export_parameters(), fresh->export_parameters()))
      << "Adam's state survived load_parameters()";
}

INSTANTIATE_TEST_SUITE_P(EveryDriver, EveryPath,
                         ::testing::Combine(::testing::ValuesIn(drivers_under_test()),
                                            ::testing::ValuesIn(kPathVariants)),
                         [](const auto& param_info) {
                           return test_name(std::get<0>(param_info.param) + "_" + std::get<1>(param_info.param));
                         });
// A build with the reference driver alone has no other driver to run these on.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(EveryPath);

class EveryDriver : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryDriver, EvaluateTurnsDropoutOff) {
  SKIP_WITHOUT_DEVICE(GetParam());
  const Workload with = make_workload("mnist_cnn:width=4,fc=16"), without = without_dropout(with);
  ASSERT_LT(without.layers.size(), with.layers.size());
  auto dropping = make_model(GetParam(), with, 4), plain = make_model(GetParam(), without, 4);
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
TEST_P(EveryDriver, BatchNormRunningStatisticsFollowPyTorch) {
  SKIP_WITHOUT_DEVICE(GetParam());
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

  auto m = registry().find(GetParam())->create(w, {kDevice, 0, 1, kSeed});
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

// All-zero parameters make every logit 0: every class ties, so argmax says class 0, and for
// binary cross-entropy a logit of 0 is not above 0, so the prediction is 0 as well.
TEST_P(EveryDriver, TiesGoToTheLowestClassAndZeroLogitsPredictZero) {
  SKIP_WITHOUT_DEVICE(GetParam());
  for (const std::string name : {"mnist_fnn:width=16", "imdb_lstm:vocab=50,embed=8,hidden=6,seq=12"}) {
    SCOPED_TRACE(name);
    const Workload w = make_workload(name);
    const Batch batch = synthetic_batch(w, 40, 3, 0);
    auto m = make_model(GetParam(), w, 4);
    m->load_parameters(std::vector<float>(static_cast<size_t>(parameter_count(w)), 0.0f));
    const Evaluation e = m->evaluate(batch);
    const int64_t zeros = std::count(batch.labels.begin(), batch.labels.end(), 0);
    ASSERT_GT(zeros, 0);
    ASSERT_LT(zeros, static_cast<int64_t>(batch.labels.size()));  // so that a wrong rule would show
    EXPECT_EQ(e.correct, zeros);
    EXPECT_EQ(e.predictions, static_cast<int64_t>(batch.labels.size()));
    const double classes = w.loss == LossKind::kSigmoidBinaryCrossEntropy ? 2.0 : static_cast<double>(w.num_classes);
    EXPECT_NEAR(e.loss_sum, static_cast<double>(e.predictions) * std::log(classes), 1e-5 * e.loss_sum);
  }
}

INSTANTIATE_TEST_SUITE_P(Contract, EveryDriver, ::testing::ValuesIn(drivers_under_test()),
                         [](const auto& param_info) { return test_name(param_info.param); });
// A build with the reference driver alone has no other driver to run these on.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(EveryDriver);

}  // namespace
}  // namespace dlscale::conformance
