// The ring all-reduce model: its fit recovers known alpha and beta, and the projection follows
// the documented arithmetic for weak, strong and oversubscribed cases.
#include <gtest/gtest.h>

#include "suite/allreduce_bench.h"

namespace dlscale {
namespace {

TEST(AllreduceModel, SizesArePowersOfTwoPlusExtras) {
  EXPECT_EQ(allreduce_sizes(4, 64, {12, 32}), (std::vector<int64_t>{4, 8, 12, 16, 32, 64}));
  EXPECT_EQ(allreduce_sizes(0, -1, {4100}), (std::vector<int64_t>{4100}));
}

TEST(AllreduceModel, FitRecoversAlphaAndBeta) {
  const double alpha = 5e-6, beta = 4e-10;
  for (int ranks : {2, 3, 8}) {
    const std::vector<int64_t> bytes = allreduce_sizes(1024, 64 << 20);
    std::vector<double> t;
    for (int64_t b : bytes) t.push_back(ring_allreduce_s(alpha, beta, ranks, static_cast<double>(b)));
    double a = 0, bb = 0;
    fit_ring(bytes, t, ranks, &a, &bb);
    EXPECT_NEAR(a, alpha, alpha * 1e-9) << ranks;
    EXPECT_NEAR(bb, beta, beta * 1e-9) << ranks;
  }
  double a = 0, b = 0;
  EXPECT_THROW(fit_ring({1024}, {1e-5}, 2, &a, &b), std::invalid_argument);
}

TEST(AllreduceModel, RingTimeFollowsTheFormula) {
  EXPECT_DOUBLE_EQ(ring_allreduce_s(1e-6, 1e-9, 1, 1e6), 0.0);
  EXPECT_DOUBLE_EQ(ring_allreduce_s(1e-6, 1e-9, 4, 1e6), 6e-6 + 1.5 * 1e6 * 1e-9);
}

TEST(AllreduceModel, WeakProjectionAddsTheAllreduceToConstantCompute) {
  const double alpha = 1e-5, beta = 1e-9, bytes = 4e6;
  const Projection p = project_steps(0.1, 2, false, bytes, alpha, beta, 1, 64, 8, {1, 2, 4, 8});
  ASSERT_EQ(p.ranks.size(), 4u);
  EXPECT_DOUBLE_EQ(p.step_s[0], 0.1);
  EXPECT_DOUBLE_EQ(p.step_s[2], 0.1 + ring_allreduce_s(alpha, beta, 4, bytes));
  EXPECT_DOUBLE_EQ(p.efficiency[2], 0.1 / p.step_s[2]);
}

TEST(AllreduceModel, StrongProjectionDividesTheCompute) {
  const Projection p = project_steps(0.1, 2, true, 4e6, 0, 0, 1, 64, 8, {1, 4});
  EXPECT_DOUBLE_EQ(p.step_s[0], 0.2);  // one rank does both ranks' work
  EXPECT_DOUBLE_EQ(p.step_s[1], 0.05);
  EXPECT_DOUBLE_EQ(p.efficiency[1], 0.2 / (4 * 0.05));
}

TEST(AllreduceModel, RanksBeyondTheCoresShareThem) {
  // 2 CPUs, up to 4 ranks on the node, 1 thread each: from 3 ranks on, one core runs two of them,
  // and the step waits for those.
  const Projection p = project_steps(0.1, 2, false, 0, 0, 0, 1, 2, 4, {3, 4, 8});
  EXPECT_DOUBLE_EQ(p.step_s[0], 0.2);
  EXPECT_DOUBLE_EQ(p.step_s[1], 0.2);
  EXPECT_DOUBLE_EQ(p.step_s[2], 0.2);  // more ranks go to other nodes
}

}  // namespace
}  // namespace dlscale
