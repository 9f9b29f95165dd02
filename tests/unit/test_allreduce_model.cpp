// The ring all-reduce model: its fit recovers known alpha and beta, and the projection follows
// the documented arithmetic for weak, strong and oversubscribed cases.
#include <gtest/gtest.h>

#include "suite/meters/allreduce_microbenchmark.h"
#include "suite/meters/projection.h"

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

/// One fit measured on one host, standing in for every P.
ProjectionNetwork one_host(double alpha, double beta, int ranks_per_host = 8) {
  ProjectionNetwork n;
  n.within = {alpha, beta, 2, 1};
  n.ranks_per_host = ranks_per_host;
  return n;
}

TEST(AllreduceModel, WeakProjectionAddsTheAllreduceToConstantCompute) {
  const double alpha = 1e-5, beta = 1e-9, bytes = 4e6;
  const Projection p = project_steps(0.1, 2, false, bytes, one_host(alpha, beta), 1, 64, 8, {1, 2, 4, 8});
  ASSERT_EQ(p.ranks.size(), 4u);
  EXPECT_DOUBLE_EQ(p.step_s[0], 0.1);
  EXPECT_DOUBLE_EQ(p.step_s[2], 0.1 + ring_allreduce_s(alpha, beta, 4, bytes));
  EXPECT_DOUBLE_EQ(p.efficiency[2], 0.1 / p.step_s[2]);
}

TEST(AllreduceModel, StrongProjectionDividesTheCompute) {
  const Projection p = project_steps(0.1, 2, true, 4e6, one_host(0, 0), 1, 64, 8, {1, 4});
  EXPECT_DOUBLE_EQ(p.step_s[0], 0.2);  // one rank does both ranks' work
  EXPECT_DOUBLE_EQ(p.step_s[1], 0.05);
  EXPECT_DOUBLE_EQ(p.efficiency[1], 0.2 / (4 * 0.05));
}

TEST(AllreduceModel, ShardedUpdateIsDividedAmongTheRanks) {
  // Weak scaling: forward and backward stay; the update of each rank's share, 20 ms on 2 ranks,
  // is 40 ms on one and 10 ms on four.
  const Projection p = project_steps(0.1, 2, false, 4e6, one_host(0, 0), 1, 64, 8, {1, 4}, 0.02);
  EXPECT_DOUBLE_EQ(p.step_s[0], 0.14);
  EXPECT_DOUBLE_EQ(p.step_s[1], 0.11);
}

TEST(AllreduceModel, RanksBeyondTheCoresShareThem) {
  // 2 CPUs, up to 4 ranks on the node, 1 thread each: from 3 ranks on, one core runs two of them,
  // and the step waits for those.
  const Projection p = project_steps(0.1, 2, false, 0, one_host(0, 0, 4), 1, 2, 4, {3, 4, 8});
  EXPECT_DOUBLE_EQ(p.step_s[0], 0.2);
  EXPECT_DOUBLE_EQ(p.step_s[1], 0.2);
  EXPECT_DOUBLE_EQ(p.step_s[2], 0.2);  // more ranks go to other nodes
}

TEST(AllreduceModel, PastOneHostTheProjectionTakesTheBetweenHostFit) {
  ProjectionNetwork n = one_host(1e-6, 1e-10, 2);
  n.between = {1e-4, 1e-8, 4, 2};
  const double bytes = 4e6;
  const Projection p = project_steps(0.1, 4, false, bytes, n, 1, 64, 2, {2, 4, 8});
  EXPECT_EQ(p.between_hosts, (std::vector<int64_t>{0, 1, 1}));
  EXPECT_DOUBLE_EQ(p.step_s[0], 0.1 + ring_allreduce_s(1e-6, 1e-10, 2, bytes));
  EXPECT_DOUBLE_EQ(p.step_s[1], 0.1 + ring_allreduce_s(1e-4, 1e-8, 4, bytes));
  EXPECT_EQ(n.note(), "P <= 2: within-host fit (2 ranks on 1 host); P > 2: between-host fit (4 ranks on 2 hosts)");
}

TEST(AllreduceModel, AMissingFitIsStoodInForAndNamed) {
  const ProjectionNetwork within_only = one_host(1e-6, 1e-10, 2);
  const Projection p = project_steps(0.1, 2, false, 4e6, within_only, 1, 64, 2, {2, 4});
  EXPECT_EQ(p.between_hosts, (std::vector<int64_t>{0, 0}));
  EXPECT_NE(within_only.note().find("no between-host figures measured"), std::string::npos) << within_only.note();
  ProjectionNetwork between_only;
  between_only.between = {1e-4, 1e-8, 2, 2};
  between_only.ranks_per_host = 1;
  const Projection q = project_steps(0.1, 2, false, 4e6, between_only, 1, 64, 1, {1, 2});
  EXPECT_EQ(q.between_hosts, (std::vector<int64_t>{1, 1}));
  EXPECT_NE(between_only.note().find("every P: between-host fit (2 ranks on 2 hosts), no within-host figures measured"),
            std::string::npos)
      << between_only.note();
}

}  // namespace
}  // namespace dlscale
