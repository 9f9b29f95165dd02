// The catalog against WORKLOADS.md, analytic FLOPs by hand, and the determinism of the
// canonical parameters and synthetic data.
#include <gtest/gtest.h>

#include <cmath>

#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

namespace dlscale {
namespace {

TEST(Workloads, ParameterCountsMatchWorkloadsMd) {
  EXPECT_EQ(parameter_count(make_workload("fcn5")), 117997696);
  EXPECT_EQ(parameter_count(make_workload("fcn8")), 130586752);
  EXPECT_EQ(parameter_count(make_workload("mnist_fnn")), 669706);
}

TEST(Workloads, CanonicalLayoutIsWeightThenBiasPerLinear) {
  const auto layout = parameter_layout(make_workload("mnist_fnn"));
  ASSERT_EQ(layout.size(), 6u);
  EXPECT_EQ(layout[0].name, "layer0.weight");
  EXPECT_EQ(layout[0].shape, (std::vector<int64_t>{512, 784}));
  EXPECT_EQ(layout[1].offset, 512 * 784);
  EXPECT_EQ(layout[1].shape, (std::vector<int64_t>{512}));
  EXPECT_EQ(layout[5].offset + layout[5].count, 669706);
}

TEST(Workloads, FlopsByHand) {
  // fcn5:features=10,width=4 -> Linear 10x4, 4x4, 4x4, 4x10.
  const FlopCounts f = flops_per_sample(make_workload("fcn5:features=10,width=4"));
  const double macs = 40 + 16 + 16 + 40, bias = 4 + 4 + 4 + 10;
  EXPECT_DOUBLE_EQ(f.forward, 2 * macs + bias);
  // Backward: grad-weight and bias everywhere, grad-input except the first layer.
  EXPECT_DOUBLE_EQ(f.backward, 2 * macs + bias + 2 * (macs - 40));
}

TEST(Workloads, OverridesKeepTheStructure) {
  const Workload w = make_workload("fcn8:width=16,features=32");
  EXPECT_EQ(w.name, "fcn8:width=16,features=32");
  EXPECT_EQ(w.layers.size(), 13u);  // 7 Linear + 6 Sigmoid
  EXPECT_EQ(parameter_count(w), 32 * 16 + 16 + 5 * (16 * 16 + 16) + 16 * 32 + 32);
  EXPECT_THROW(make_workload("fcn5:width=0"), std::invalid_argument);
  EXPECT_THROW(make_workload("fcn5:width"), std::invalid_argument);
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
