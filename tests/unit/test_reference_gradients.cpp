// The reference driver is the oracle for every other backend, so its own gradients are checked
// against central finite differences of its loss, in double, on every layer kind: small
// variants of each catalog network, and hand-built networks for layers the catalog does not
// isolate. Also checked: dropout masks are a function of (seed, step) only, and the Model
// interface (float gradient buffer, SGD from that buffer, the step counter).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "drivers/driver.h"
#include "drivers/reference/reference_network.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"
#include "workloads/random.h"

namespace dlscale {
namespace {

constexpr uint64_t kParamSeed = 11, kDataSeed = 13, kDropoutSeed = 7;

/// The canonical parameters in double, each moved by a small random amount: batch-norm weights
/// start at exactly 1 and biases at 0, which would hide a missing gamma factor or a sign error.
std::vector<double> test_parameters(const Workload& w) {
  const std::vector<float> canonical = canonical_parameters(w, kParamSeed);
  const CounterRng rng(kParamSeed, 99);
  std::vector<double> params(canonical.size());
  for (size_t i = 0; i < params.size(); ++i) params[i] = canonical[i] + 0.1 * rng.normal(i);
  return params;
}

/// Up to `max_samples` distinct flat indices of one tensor, always its first and last element.
std::vector<int64_t> sample_indices(const ParamSpec& spec, int64_t max_samples) {
  std::vector<int64_t> out;
  if (spec.count <= max_samples) {
    for (int64_t i = 0; i < spec.count; ++i) out.push_back(i);
    return out;
  }
  std::set<int64_t> picked = {0, spec.count - 1};
  const CounterRng rng(kParamSeed, static_cast<uint64_t>(spec.offset));
  for (uint64_t draw = 0; static_cast<int64_t>(picked.size()) < max_samples; ++draw) {
    picked.insert(rng.below(draw, spec.count));
  }
  return {picked.begin(), picked.end()};
}

/// How one finite-difference check runs.
struct GradCheck {
  int64_t batch = 3;        ///< samples in the synthetic batch
  int64_t max_samples = 6;  ///< entries checked per tensor (all of a smaller tensor)
  uint64_t step = 0;        ///< selects the dropout masks
  double h = 1e-6;          ///< central-difference step
  double rel_tol = 1e-6;    ///< on the norm of the sampled analytic entries
  double abs_tol = 1e-8;    ///< rounding noise of the differences, for gradients that are exactly 0
};

/// Compares every tensor's analytic gradient with central differences on a sample of its
/// entries: ||numeric - analytic|| <= rel_tol ||analytic|| + abs_tol.
void check_gradients(const Workload& w, const GradCheck& check = {}) {
  SCOPED_TRACE(w.name);
  const ReferenceNetwork net(w, kDropoutSeed);
  std::vector<double> params = test_parameters(w);
  const Batch batch = synthetic_batch(w, check.batch, kDataSeed, 0);
  std::vector<double> grads;
  const double loss = net.loss_and_gradients(params, batch, &grads, check.step);
  ASSERT_TRUE(std::isfinite(loss));
  ASSERT_EQ(grads.size(), params.size());
  EXPECT_DOUBLE_EQ(net.loss(params, batch, check.step), loss);

  int nonzero_tensors = 0;
  const std::vector<ParamSpec> layout = parameter_layout(w);
  for (const ParamSpec& spec : layout) {
    double diff2 = 0, norm2 = 0;
    for (int64_t i : sample_indices(spec, check.max_samples)) {
      const auto k = static_cast<size_t>(spec.offset + i);
      const double saved = params[k];
      params[k] = saved + check.h;
      const double up = net.loss(params, batch, check.step);
      params[k] = saved - check.h;
      const double down = net.loss(params, batch, check.step);
      params[k] = saved;
      const double numeric = (up - down) / (2 * check.h);
      diff2 += (numeric - grads[k]) * (numeric - grads[k]);
      norm2 += grads[k] * grads[k];
    }
    EXPECT_LE(std::sqrt(diff2), check.rel_tol * std::sqrt(norm2) + check.abs_tol)
        << spec.name << ": |numeric - analytic| = " << std::sqrt(diff2) << ", |analytic| = " << std::sqrt(norm2);
    if (norm2 > 0) ++nonzero_tensors;
  }
  // A check where most gradients vanish (dead ReLUs, a disconnected layer) would prove little.
  EXPECT_GE(nonzero_tensors, static_cast<int>(layout.size()) * 3 / 4);
}

/// The default check with another batch size and sample count.
GradCheck sized(int64_t batch, int64_t max_samples = 6) {
  GradCheck check;
  check.batch = batch;
  check.max_samples = max_samples;
  return check;
}

// --- small variants of the catalog networks ---------------------------------------------------

TEST(ReferenceGradients, Fcn5) { check_gradients(make_workload("fcn5:features=6,width=4")); }

TEST(ReferenceGradients, Fcn8) { check_gradients(make_workload("fcn8:features=5,width=3")); }

TEST(ReferenceGradients, MnistFnn) { check_gradients(make_workload("mnist_fnn:width=4")); }

TEST(ReferenceGradients, MnistCnn) { check_gradients(without_dropout(make_workload("mnist_cnn:width=2,fc=4"))); }

TEST(ReferenceGradients, Cifar10Cnn) {
  check_gradients(without_dropout(make_workload("cifar10_cnn:width=2,fc=4")), sized(2));
}

TEST(ReferenceGradients, MnistCnnNayak) {
  check_gradients(without_dropout(make_workload("mnist_cnn_nayak:width=2,fc=5")));
}

TEST(ReferenceGradients, AlexNet) {
  check_gradients(without_dropout(make_workload("alexnet:image=63,width=2,fc=6,classes=4")));
}

TEST(ReferenceGradients, Vgg16Cifar) { check_gradients(without_dropout(make_workload("vgg16_cifar:width=1,fc=4"))); }

TEST(ReferenceGradients, ResNet50) {
  // This tiny ResNet is far more sensitive than the full one: in its last stages batch norm
  // normalises a handful of values per channel (1x1 maps, 4 samples), so gradients reach 1e3
  // and a step of 1e-6 already moves some pre-activations across a ReLU kink. A step of 1e-8
  // stays on one side of every kink; the differences are then limited by rounding (about 1e-6
  // relative), hence the looser tolerances.
  GradCheck check = sized(4, 3);
  check.h = 1e-8;
  check.rel_tol = 1e-5;
  check.abs_tol = 1e-6;
  check_gradients(make_workload("resnet50:image=16,width=2,classes=3"), check);
}

TEST(ReferenceGradients, Lstm32) {
  check_gradients(make_workload("lstm32:vocab=11,embed=3,hidden=4,seq=3"), sized(3, 64));
}

TEST(ReferenceGradients, ImdbLstm) {
  check_gradients(make_workload("imdb_lstm:vocab=13,embed=3,hidden=4,seq=4"), sized(4, 64));
}

TEST(ReferenceGradients, WithDropoutAtAFixedStep) {
  // The mask is fixed by (seed, step), so the loss is a smooth function of the parameters there.
  GradCheck check;
  check.step = 5;
  check_gradients(make_workload("mnist_cnn:width=2,fc=4"), check);
}

// --- hand-built networks for layers the catalog does not isolate ------------------------------

Layer layer(LayerKind kind, int64_t in = 0, int64_t out = 0) {
  Layer l{kind};
  l.in = in;
  l.out = out;
  return l;
}

Layer conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding, bool bias = true) {
  Layer l = layer(LayerKind::kConv2d, in, out);
  l.kernel = kernel;
  l.stride = stride;
  l.padding = padding;
  l.bias = bias;
  return l;
}

Layer max_pool(int64_t kernel, int64_t stride, int64_t padding) {
  Layer l = layer(LayerKind::kMaxPool2d);
  l.kernel = kernel;
  l.stride = stride;
  l.padding = padding;
  return l;
}

Layer bottleneck(int64_t in, int64_t mid, int64_t out, int64_t stride) {
  Layer l = layer(LayerKind::kBottleneck, in, out);
  l.mid = mid;
  l.stride = stride;
  return l;
}

Workload dense(const std::string& name, std::vector<int64_t> input_shape, int64_t classes, std::vector<Layer> layers) {
  Workload w;
  w.name = name;
  w.input_shape = std::move(input_shape);
  w.num_classes = classes;
  w.layers = std::move(layers);
  return w;
}

TEST(ReferenceGradients, Conv2dStride2Padding1Tanh) {
  // Non-square input, so that a height/width mix-up cannot pass; 7x6 -> 4x3.
  check_gradients(dense(
      "conv_s2_p1", {2, 7, 6}, 4,
      {conv(2, 3, 3, 2, 1), layer(LayerKind::kTanh), layer(LayerKind::kFlatten), layer(LayerKind::kLinear, 36, 4)}));
}

TEST(ReferenceGradients, MaxPoolWithPadding) {
  // 6x5 -conv k2-> 5x4 -pool k3 s2 p1-> 3x2; border windows overlap the -inf padding.
  check_gradients(
      dense("maxpool_pad", {2, 6, 5}, 3,
            {conv(2, 3, 2, 1, 0), max_pool(3, 2, 1), layer(LayerKind::kFlatten), layer(LayerKind::kLinear, 18, 3)}));
}

TEST(ReferenceGradients, GlobalAvgPoolAndLinearWithoutBias) {
  Layer fc = layer(LayerKind::kLinear, 4, 3);
  fc.bias = false;
  check_gradients(
      dense("gap", {3, 5, 4}, 3, {conv(3, 4, 3, 1, 1), layer(LayerKind::kTanh), layer(LayerKind::kGlobalAvgPool), fc}));
}

TEST(ReferenceGradients, BatchNormAlone) {
  check_gradients(
      dense("bn", {3, 4, 5}, 4,
            {layer(LayerKind::kBatchNorm2d, 3), layer(LayerKind::kFlatten), layer(LayerKind::kLinear, 60, 4)}),
      sized(3, 64));
}

TEST(ReferenceGradients, BatchNormAfterConvolution) {
  check_gradients(dense("conv_bn", {2, 4, 4}, 3,
                        {conv(2, 3, 3, 1, 1, false), layer(LayerKind::kBatchNorm2d, 3), layer(LayerKind::kSigmoid),
                         layer(LayerKind::kFlatten), layer(LayerKind::kLinear, 48, 3)}),
                  sized(3, 64));
}

TEST(ReferenceGradients, BottleneckWithProjection) {
  // A projection for in != out at stride 1, then one for stride 2 alone; the convolution in
  // front makes the blocks' input gradients count.
  check_gradients(dense("bottleneck_proj", {4, 5, 5}, 3,
                        {conv(4, 4, 1, 1, 0), bottleneck(4, 2, 6, 1), bottleneck(6, 3, 6, 2),
                         layer(LayerKind::kGlobalAvgPool), layer(LayerKind::kLinear, 6, 3)}),
                  sized(3, 12));
}

TEST(ReferenceGradients, BottleneckWithIdentityShortcut) {
  check_gradients(dense("bottleneck_id", {4, 5, 5}, 3,
                        {conv(4, 4, 3, 1, 1), bottleneck(4, 2, 4, 1), layer(LayerKind::kFlatten),
                         layer(LayerKind::kLinear, 100, 3)}),
                  sized(3, 12));
}

TEST(ReferenceGradients, DeepLstmLastStepOnly) {
  Workload w;
  w.name = "lstm3_last";
  w.input_kind = InputKind::kTokens;
  w.input_shape = {4};
  w.vocab = 7;
  w.num_classes = 5;
  Layer lstm = layer(LayerKind::kLstm, 3, 4);
  lstm.num_layers = 3;
  lstm.all_steps = false;
  w.layers = {layer(LayerKind::kEmbedding, 7, 3), lstm, layer(LayerKind::kLinear, 4, 5)};
  check_gradients(w, sized(3, 64));
}

// --- losses -------------------------------------------------------------------------------------

TEST(ReferenceLoss, ZeroLogitsGiveLogOfTheClassCount) {
  const Workload softmax = dense("softmax", {5}, 7, {layer(LayerKind::kLinear, 5, 7)});
  const Batch batch = synthetic_batch(softmax, 4, kDataSeed, 0);
  const std::vector<double> zeros(static_cast<size_t>(parameter_count(softmax)), 0.0);
  EXPECT_NEAR(ReferenceNetwork(softmax).loss(zeros, batch), std::log(7.0), 1e-15);

  Workload binary = dense("binary", {5}, 1, {layer(LayerKind::kLinear, 5, 1)});
  binary.loss = LossKind::kSigmoidBinaryCrossEntropy;
  const Batch binary_batch = synthetic_batch(binary, 4, kDataSeed, 0);
  const std::vector<double> binary_zeros(static_cast<size_t>(parameter_count(binary)), 0.0);
  EXPECT_NEAR(ReferenceNetwork(binary).loss(binary_zeros, binary_batch), std::log(2.0), 1e-15);
}

TEST(ReferenceLoss, BinaryCrossEntropyIsStableForLargeLogits) {
  // One input, weight 1000: logits of about +-1000, where a naive log(sigmoid) gives -inf.
  Workload w = dense("bce_large", {1}, 1, {layer(LayerKind::kLinear, 1, 1)});
  w.loss = LossKind::kSigmoidBinaryCrossEntropy;
  Batch batch;
  batch.size = 2;
  batch.features = {1.0f, -1.0f};
  batch.labels = {0, 1};
  const std::vector<double> params = {1000.0, 0.0};
  std::vector<double> grads;
  EXPECT_NEAR(ReferenceNetwork(w).loss_and_gradients(params, batch, &grads), 1000.0, 1e-9);
  EXPECT_NEAR(grads[0], 1.0, 1e-12);  // mean of (s(z) - y) x = ((1 - 0) * 1 + (0 - 1) * -1) / 2
  EXPECT_NEAR(grads[1], 0.0, 1e-12);
}

// --- dropout ------------------------------------------------------------------------------------

TEST(ReferenceDropout, MaskDependsOnSeedAndStepOnly) {
  const Workload w = make_workload("mnist_cnn:width=2,fc=4");
  const std::vector<double> params = test_parameters(w);
  const Batch batch = synthetic_batch(w, 3, kDataSeed, 0);
  const ReferenceNetwork a(w, kDropoutSeed), same(w, kDropoutSeed), other_seed(w, kDropoutSeed + 1);
  const std::vector<double> out = a.output(params, batch, 3);
  EXPECT_EQ(out, a.output(params, batch, 3));
  EXPECT_EQ(out, same.output(params, batch, 3));
  EXPECT_NE(out, a.output(params, batch, 4));
  EXPECT_NE(out, other_seed.output(params, batch, 3));
}

TEST(ReferenceDropout, DropsAboutPAndScalesTheRestByOneOverOneMinusP) {
  // Dropout as the only layer: the logits are the dropped-out input itself.
  const int64_t n = 4000;
  Layer drop = layer(LayerKind::kDropout);
  drop.p = 0.25;
  const Workload w = dense("dropout", {n}, n, {drop});
  const Batch batch = synthetic_batch(w, 1, kDataSeed, 0);
  const std::vector<double> out = ReferenceNetwork(w, kDropoutSeed).output({}, batch, 0);
  ASSERT_EQ(out.size(), static_cast<size_t>(n));
  int64_t dropped = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0.0) {
      ++dropped;
    } else {
      EXPECT_DOUBLE_EQ(out[i], batch.features[i] / 0.75);
    }
  }
  EXPECT_NEAR(static_cast<double>(dropped) / n, 0.25, 0.03);  // about 4 standard deviations
}

// --- inference and batch-norm running statistics -------------------------------------------------

/// Batch norm alone over 2 channels of 2x3 pixels, flattened into 12 logits: the network's output
/// is the normalised input itself.
Workload batch_norm_only() {
  return dense("bn_only", {2, 2, 3}, 12, {layer(LayerKind::kBatchNorm2d, 2), layer(LayerKind::kFlatten)});
}

TEST(ReferenceRunningStatistics, FoldTheBatchStatisticsWithMomentumAndTheUnbiasedVariance) {
  const Workload w = batch_norm_only();
  const ReferenceNetwork net(w);
  const Batch batch = synthetic_batch(w, 3, kDataSeed, 0);
  const std::vector<double> params = test_parameters(w);
  RunningStatistics running = net.initial_running_statistics();
  ASSERT_EQ(running.mean.size(), 1U);
  EXPECT_EQ(running.mean[0], std::vector<double>(2, 0.0));
  EXPECT_EQ(running.var[0], std::vector<double>(2, 1.0));
  std::vector<double> grads;
  net.loss_and_gradients(params, batch, &grads, 0, &running);
  for (int64_t c = 0; c < 2; ++c) {
    double sum = 0, sum2 = 0;
    const int64_t m = 3 * 6;
    for (int64_t b = 0; b < 3; ++b) {
      for (int64_t j = 0; j < 6; ++j) sum += batch.features[static_cast<size_t>((b * 2 + c) * 6 + j)];
    }
    const double mean = sum / m;
    for (int64_t b = 0; b < 3; ++b) {
      for (int64_t j = 0; j < 6; ++j) {
        const double d = batch.features[static_cast<size_t>((b * 2 + c) * 6 + j)] - mean;
        sum2 += d * d;
      }
    }
    EXPECT_NEAR(running.mean[0][static_cast<size_t>(c)], 0.1 * mean, 1e-12);
    EXPECT_NEAR(running.var[0][static_cast<size_t>(c)], 0.9 + 0.1 * sum2 / (m - 1), 1e-12);
  }
}

TEST(ReferenceRunningStatistics, InferenceNormalisesWithThemAndUpdatesNothing) {
  const Workload w = batch_norm_only();
  const ReferenceNetwork net(w);
  const Batch batch = synthetic_batch(w, 2, kDataSeed, 0);
  const std::vector<double> params = test_parameters(w);  // gamma, then beta, per channel
  RunningStatistics running = net.initial_running_statistics();
  running.mean[0] = {0.5, -0.25};
  running.var[0] = {4.0, 0.5};
  const RunningStatistics before = running;
  std::vector<double> logits;
  net.inference(params, batch, running, &logits);
  ASSERT_EQ(logits.size(), batch.features.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    const size_t c = (i / 6) % 2;
    const double want =
        params[c] * (batch.features[i] - running.mean[0][c]) / std::sqrt(running.var[0][c] + 1e-5) + params[2 + c];
    EXPECT_NEAR(logits[i], want, 1e-12) << i;
  }
  EXPECT_EQ(running.mean, before.mean);
  EXPECT_EQ(running.var, before.var);
}

TEST(ReferenceInference, HasNoDropout) {
  const Workload w = make_workload("mnist_cnn:width=2,fc=4");
  const std::vector<double> params = test_parameters(w);
  const Batch batch = synthetic_batch(w, 3, kDataSeed, 0);
  const ReferenceNetwork net(w, kDropoutSeed), plain(without_dropout(w));
  std::vector<double> logits;
  net.inference(params, batch, net.initial_running_statistics(), &logits);
  EXPECT_EQ(logits, plain.output(params, batch, 0));
}

// --- the Model interface ------------------------------------------------------------------------

class ReferenceDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    register_drivers(registry_);
    driver_ = registry_.find("reference");
    ASSERT_NE(driver_, nullptr);
  }
  Registry registry_;
  const Driver* driver_ = nullptr;
};

TEST_F(ReferenceDriverTest, SupportsEveryCatalogWorkloadOnCpuOnly) {
  for (const CatalogEntry& e : catalog()) {
    const Workload w = make_workload(e.name);
    EXPECT_TRUE(driver_->supports(w, DeviceType::kCpu).ok) << e.name;
    const Support cuda = driver_->supports(w, DeviceType::kCuda);
    EXPECT_FALSE(cuda.ok);
    EXPECT_EQ(cuda.reason, "reference driver: CPU only");
  }
  EXPECT_EQ(driver_->versions().at("reference"), "dlscale built-in, float64");
}

TEST_F(ReferenceDriverTest, StepMatchesTheNetworkAndSgdUsesTheGradientBuffer) {
  const Workload w = make_workload("mnist_cnn:width=2,fc=4");  // with dropout: the step counter matters
  const std::vector<float> start = canonical_parameters(w, kParamSeed);
  const Batch batch = synthetic_batch(w, 3, kDataSeed, 0);
  auto model = driver_->create(w, {DeviceType::kCpu, 0, 1, kDropoutSeed});
  model->load_parameters(start);
  EXPECT_EQ(model->export_parameters(), start);
  model->set_batch(batch);
  EXPECT_THROW(model->backward(), std::logic_error);

  const ReferenceNetwork net(w, kDropoutSeed);
  std::vector<double> params(start.begin(), start.end()), grads;
  const double loss0 = net.loss_and_gradients(params, batch, &grads, 0);
  model->forward();
  model->backward();
  EXPECT_EQ(model->loss(), loss0);
  const GradBuffer buffer = model->grad_buffer();
  ASSERT_EQ(buffer.count, params.size());
  EXPECT_FALSE(buffer.on_device);
  std::vector<float> expected_grads(grads.begin(), grads.end());
  EXPECT_EQ(model->export_gradients(), expected_grads);

  // The harness all-reduces the buffer in place (sum, then 1/P): the update must read it.
  for (size_t i = 0; i < buffer.count; ++i) buffer.data[i] *= 0.5f;
  const double lr = 0.1;
  model->update(Optimizer{lr});
  for (size_t i = 0; i < params.size(); ++i) params[i] -= lr * static_cast<double>(expected_grads[i] * 0.5f);
  EXPECT_EQ(model->export_parameters(), std::vector<float>(params.begin(), params.end()));

  // The second forward is step 1: new dropout masks, on the updated double parameters.
  model->forward();
  EXPECT_EQ(model->loss(), net.loss(params, batch, 1));
  EXPECT_NE(model->loss(), net.loss(params, batch, 0));
}

TEST_F(ReferenceDriverTest, AdamFollowsTorchOptimAdam) {
  const Workload w = make_workload("mnist_fnn:width=4");
  const std::vector<float> start = canonical_parameters(w, kParamSeed);
  auto model = driver_->create(w, {DeviceType::kCpu, 0, 1, 0});
  model->load_parameters(start);
  Optimizer adam{0.01};
  adam.kind = OptimizerKind::kAdam;
  std::vector<double> p(start.begin(), start.end()), m(p.size(), 0.0), v(p.size(), 0.0);
  for (int t = 1; t <= 3; ++t) {
    model->set_batch(synthetic_batch(w, 4, kDataSeed, t));
    model->forward();
    model->backward();
    const GradBuffer g = model->grad_buffer();
    model->update(adam);
    // torch.optim.Adam's single-tensor step, written out.
    const double bc1 = 1 - std::pow(0.9, t), bc2 = 1 - std::pow(0.999, t);
    for (size_t i = 0; i < p.size(); ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g.data[i];
      v[i] = 0.999 * v[i] + 0.001 * g.data[i] * static_cast<double>(g.data[i]);
      p[i] -= 0.01 / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + 1e-8);
    }
    if (t == 1) {
      // The first step moves every parameter by lr |g| / (|g| + eps) against its gradient's sign.
      const std::vector<float> first = model->export_parameters();
      for (size_t i = 0; i < p.size(); ++i) {
        const double g1 = g.data[i], moved = 0.01 * g1 / (std::abs(g1) + 1e-8);
        EXPECT_NEAR(first[i], start[i] - moved, 1e-7) << i;
      }
    }
  }
  const std::vector<float> got = model->export_parameters();
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(got[i], p[i], 1e-6) << i;

  // Loading parameters starts Adam afresh (t = 1 again, no moments).
  model->load_parameters(start);
  model->set_batch(synthetic_batch(w, 4, kDataSeed, 1));
  model->forward();
  model->backward();
  const GradBuffer g = model->grad_buffer();
  model->update(adam);
  const std::vector<float> restarted = model->export_parameters();
  for (size_t i = 0; i < p.size(); ++i) {
    const double g1 = g.data[i];
    EXPECT_NEAR(restarted[i], start[i] - 0.01 * g1 / (std::abs(g1) + 1e-8), 1e-7) << i;
  }
}

TEST_F(ReferenceDriverTest, EvaluateCountsArgmaxAndThresholdPredictions) {
  // One Linear layer with hand-set weights: the logits are the inputs themselves.
  const Workload softmax = dense("eye", {3}, 3, {layer(LayerKind::kLinear, 3, 3)});
  auto model = driver_->create(softmax, {DeviceType::kCpu, 0, 1, 0});
  model->load_parameters({1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0});
  Batch batch;
  batch.size = 3;
  batch.features = {3, 1, 2, /**/ 0, 0, 5, /**/ 1, 1, 0};  // argmax 0, 2, and a tie of 0 and 1
  batch.labels = {0, 1, 1};
  Evaluation e = model->evaluate(batch);
  EXPECT_EQ(e.predictions, 3);
  EXPECT_EQ(e.correct, 1);  // the first right, the second wrong, the tie goes to class 0
  const ReferenceNetwork net(softmax);
  const std::vector<double> eye = {1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0};
  EXPECT_NEAR(e.loss_sum, 3 * net.loss(eye, batch), 1e-12);

  Workload binary = dense("one", {1}, 1, {layer(LayerKind::kLinear, 1, 1)});
  binary.loss = LossKind::kSigmoidBinaryCrossEntropy;
  auto bce = driver_->create(binary, {DeviceType::kCpu, 0, 1, 0});
  bce->load_parameters({1, 0});
  Batch signs;
  signs.size = 4;
  signs.features = {2, -1, 0, 0.5};
  signs.labels = {1, 0, 1, 0};  // right, right, wrong (0 is not > 0), wrong
  e = bce->evaluate(signs);
  EXPECT_EQ(e.predictions, 4);
  EXPECT_EQ(e.correct, 2);
}

TEST_F(ReferenceDriverTest, RejectsWindowsLargerThanTheirInput) {
  // 2x2 input, 3x3 window, stride 2: activation_shapes' truncating division gives a 1x1 output.
  const Workload w = dense("too_small", {1, 2, 2}, 2,
                           {conv(1, 1, 3, 2, 0), layer(LayerKind::kFlatten), layer(LayerKind::kLinear, 1, 2)});
  EXPECT_FALSE(driver_->supports(w, DeviceType::kCpu).ok);
  EXPECT_THROW(ReferenceNetwork{w}, std::invalid_argument);
}

TEST_F(ReferenceDriverTest, RejectsParametersOfTheWrongSize) {
  const Workload w = make_workload("fcn5:features=6,width=4");
  auto model = driver_->create(w, {DeviceType::kCpu, 0, 1, 0});
  EXPECT_THROW(model->load_parameters(std::vector<float>(3)), std::invalid_argument);
  EXPECT_EQ(model->memory().device_peak_bytes, 0);
}

}  // namespace
}  // namespace dlscale
