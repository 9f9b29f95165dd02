// The catalog against docs/workloads.md, analytic FLOPs by hand, and the determinism of the
// canonical parameters and synthetic data.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

namespace dlscale {
namespace {

TEST(Workloads, ParameterCountsMatchWorkloadsMd) {
  const std::map<std::string, int64_t> expected = {
      {"fcn5", 117997696},   {"fcn8", 130586752},       {"alexnet", 61100840}, {"resnet50", 25557032},
      {"lstm32", 6180624},   {"lstm64", 6180624},       {"mnist_cnn", 225034}, {"cifar10_cnn", 315722},
      {"mnist_fnn", 669706}, {"vgg16_cifar", 33638218}, {"imdb_lstm", 213301}, {"mnist_cnn_nayak", 1669002}};
  ASSERT_EQ(catalog().size(), expected.size());
  for (const CatalogEntry& e : catalog()) {
    ASSERT_TRUE(expected.count(e.name)) << e.name;
    EXPECT_EQ(parameter_count(make_workload(e.name)), expected.at(e.name)) << e.name;
  }
}

TEST(Workloads, AlexNetForwardMultiplyAdds) {
  EXPECT_EQ(flops_per_sample(make_workload("alexnet")).forward_macs, 714188480.0);
}

TEST(Workloads, ResNet50MultiplyAddsAreAbout4Billion) {
  // docs/workloads.md (ResNet-50): "4.09 G forward multiply-adds per image (convolutions and classifier)".
  const double macs = flops_per_sample(make_workload("resnet50")).forward_macs;
  EXPECT_GT(macs, 4.0e9);
  EXPECT_LT(macs, 4.2e9);
}

TEST(Workloads, NayakLayerCountsMatchThePaperTable) {
  const auto layout = parameter_layout(make_workload("mnist_cnn_nayak"));
  ASSERT_EQ(layout.size(), 8u);
  EXPECT_EQ(layout[0].count + layout[1].count, 832);
  EXPECT_EQ(layout[2].count + layout[3].count, 18496);
  EXPECT_EQ(layout[4].count + layout[5].count, 1639424);
  EXPECT_EQ(layout[6].count + layout[7].count, 10250);
}

TEST(Workloads, ShapesFlowThroughEveryCatalogNetwork) {
  for (const CatalogEntry& e : catalog()) {
    const Workload w = make_workload(e.name);
    const auto shapes = activation_shapes(w);
    ASSERT_EQ(shapes.size(), w.layers.size()) << e.name;
    const std::vector<int64_t> logits =
        w.label_per_step ? std::vector<int64_t>{w.input_shape[0], w.num_classes} : std::vector<int64_t>{w.num_classes};
    EXPECT_EQ(shapes.back(), logits) << e.name;
  }
  EXPECT_THROW(make_workload("alexnet:image=20"), std::invalid_argument);  // the window outgrows the image
  // A strided window larger than its input is an error, not a 1x1 output.
  Workload w;
  w.name = "hand";
  w.input_shape = {1, 2, 2};
  w.num_classes = 1;
  Layer conv{LayerKind::kConv2d, 1, 1};
  conv.kernel = 3;
  conv.stride = 2;
  w.layers = {conv, {LayerKind::kFlatten}};
  EXPECT_THROW(activation_shapes(w), std::invalid_argument);
  // The last layer must produce what the loss consumes.
  Workload mismatched = make_workload("mnist_fnn");
  mismatched.num_classes = 11;
  EXPECT_THROW(activation_shapes(mismatched), std::invalid_argument);
}

TEST(Workloads, CanonicalLayoutIsWeightThenBiasPerLinear) {
  const auto layout = parameter_layout(make_workload("mnist_fnn"));
  EXPECT_EQ(layout[0].name, "layer1.weight");  // layer 0 is the Flatten
  ASSERT_EQ(layout.size(), 6u);
  EXPECT_EQ(layout[0].shape, (std::vector<int64_t>{512, 784}));
  EXPECT_EQ(layout[1].offset, 512 * 784);
  EXPECT_EQ(layout[1].shape, (std::vector<int64_t>{512}));
  EXPECT_EQ(layout[5].offset + layout[5].count, 669706);
}

TEST(Workloads, FlopsByHand) {
  // fcn5:features=10,width=4 -> Linear 10x4, 4x4, 4x4, 4x10.
  const FlopCounts f = flops_per_sample(make_workload("fcn5:features=10,width=4"));
  const double macs = 40 + 16 + 16 + 40, bias = 4 + 4 + 4 + 10;
  EXPECT_DOUBLE_EQ(f.forward_macs, macs);
  EXPECT_DOUBLE_EQ(f.forward, 2 * macs + bias);
  // Backward: grad-weight and bias everywhere, grad-input except the first layer.
  EXPECT_DOUBLE_EQ(f.backward, 2 * macs + bias + 2 * (macs - 40));
}

TEST(Workloads, LstmFlopsByHand) {
  // Embedding 20x4, one LSTM 4->3 over 5 steps (all steps), Linear 3->20 per step.
  const FlopCounts f = flops_per_sample(make_workload("lstm32:vocab=20,embed=4,hidden=3,seq=5"));
  // LSTM has two stacked layers: layer 0 in=4, layer 1 in=3; gates 4H = 12.
  const double lstm_macs = 5 * 12 * (4 + 3) + 5 * 12 * (3 + 3), fc_macs = 5 * 3 * 20;
  EXPECT_DOUBLE_EQ(f.forward_macs, lstm_macs + fc_macs);
  EXPECT_DOUBLE_EQ(f.forward, 2 * (lstm_macs + fc_macs) + 2 * 5 * 12 + 5 * 20);
  // Everything after the embedding needs its input gradient.
  EXPECT_DOUBLE_EQ(f.backward, 2 * f.forward - 2 * 5 * 12 - 5 * 20);
}

TEST(Workloads, OverridesKeepTheStructure) {
  const Workload w = make_workload("fcn8:width=16,features=32");
  EXPECT_EQ(w.name, "fcn8:width=16,features=32");
  EXPECT_EQ(w.layers.size(), 13u);  // 7 Linear + 6 Sigmoid
  EXPECT_EQ(without_dropout(make_workload("alexnet")).layers.size(), make_workload("alexnet").layers.size() - 2);
  EXPECT_EQ(parameter_count(w), 32 * 16 + 16 + 5 * (16 * 16 + 16) + 16 * 32 + 32);
  EXPECT_THROW(make_workload("fcn5:width=0"), std::invalid_argument);
  EXPECT_THROW(make_workload("fcn5:width"), std::invalid_argument);
  // A colon promises overrides: none, or an empty one, is a slip rather than the defaults.
  EXPECT_THROW(make_workload("fcn5:"), std::invalid_argument);
  EXPECT_THROW(make_workload("fcn5:width=32,"), std::invalid_argument);
  EXPECT_THROW(make_workload("fcn5:,width=32"), std::invalid_argument);
  EXPECT_THROW(make_workload("lenet"), std::invalid_argument);
}

TEST(Workloads, CanonicalParametersAreSeededAndBounded) {
  const Workload w = make_workload("mnist_fnn:width=32");
  const auto a = canonical_parameters(w, 7), b = canonical_parameters(w, 7), c = canonical_parameters(w, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const float bound = 1.0f / std::sqrt(784.0f);
  for (int64_t i = 0; i < 784 * 32; ++i) EXPECT_LE(std::abs(a[static_cast<size_t>(i)]), bound);
  const auto fcn = canonical_parameters(make_workload("fcn5:features=64,width=32"), 1);
  double max_abs = 0, mean = 0;
  for (float v : fcn) {
    max_abs = std::max(max_abs, static_cast<double>(std::abs(v)));
    mean += v;
  }
  EXPECT_LE(max_abs, 0.5);
  EXPECT_GT(max_abs, 0.45);  // uniform(-0.5, 0.5) fills its range
  EXPECT_NEAR(mean / static_cast<double>(fcn.size()), 0.0, 0.02);
}

TEST(Workloads, TokenWorkloadsGetTokensAndPerStepLabels) {
  const Workload lm = make_workload("lstm32:vocab=50,embed=4,hidden=4,seq=6");
  const Batch b = synthetic_batch(lm, 3, 1, 0);
  EXPECT_TRUE(b.features.empty());
  ASSERT_EQ(b.tokens.size(), 18u);
  ASSERT_EQ(b.labels.size(), 18u);
  for (int64_t t : b.tokens) EXPECT_LT(t, 50);
  const Batch imdb = synthetic_batch(make_workload("imdb_lstm:seq=10"), 64, 1, 0);
  ASSERT_EQ(imdb.labels.size(), 64u);
  int ones = 0;
  for (int64_t l : imdb.labels) {
    EXPECT_TRUE(l == 0 || l == 1);
    ones += static_cast<int>(l);
  }
  EXPECT_GT(ones, 10);
  EXPECT_LT(ones, 54);
}

TEST(Workloads, SyntheticDataDiffersPerRankAndIsReproducible) {
  const Workload w = make_workload("mnist_fnn");
  const Batch r0 = synthetic_batch(w, 16, 3, 0), r0b = synthetic_batch(w, 16, 3, 0), r1 = synthetic_batch(w, 16, 3, 1);
  EXPECT_EQ(r0.features, r0b.features);
  EXPECT_EQ(r0.labels, r0b.labels);
  EXPECT_NE(r0.features, r1.features);
  ASSERT_EQ(r0.features.size(), 16u * 784u);
  double mean = 0, sq = 0;
  for (float v : r0.features) {
    mean += v;
    sq += static_cast<double>(v) * v;
  }
  mean /= static_cast<double>(r0.features.size());
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(sq / static_cast<double>(r0.features.size()), 1.0, 0.05);
  for (int64_t label : r0.labels) {
    EXPECT_GE(label, 0);
    EXPECT_LT(label, 10);
  }
}

}  // namespace
}  // namespace dlscale
