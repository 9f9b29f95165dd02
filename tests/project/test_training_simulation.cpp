// The simulated step against closed forms where they exist (a crossbar, identical ranks),
// against the message-level ring at small P, and the effects the model is for (placement,
// stragglers). Every comparison is between simulated times, never the clock.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "project/analytic_model.h"
#include "project/platform.h"
#include "project/training_simulation.h"

namespace dlscale::project {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

/// A crossbar: one device per node, every node's NIC on one switch, intra-node links far faster
/// than the NICs. Every ring edge crosses NIC up and NIC down: latency 2 x 1 us, bandwidth 10 GB/s.
ClusterDescription crossbar() {
  ClusterDescription c;
  c.name = "crossbar";
  c.nodes = 64;
  c.devices_per_node = 1;
  c.intra_node = {1e15, 0};
  c.nic = {10e9, 1e-6};
  return c;
}
constexpr double kCrossbarLatency = 2e-6, kCrossbarBandwidth = 10e9;

ClusterDescription preset(const std::string& name) {
  return load_platform_file(std::string(DLSCALE_SOURCE_DIR) + "/project/platforms/" + name + ".toml");
}

TrainingInputs inputs(int ranks, std::vector<GradientBucket> buckets, bool overlap,
                      AllreduceModel model = AllreduceModel::flow) {
  TrainingInputs in;
  in.ranks = ranks;
  in.samples = {{0.010, 0.020, 0.004}};
  in.buckets = std::move(buckets);
  in.overlap = overlap;
  in.model = model;
  in.steps = 2;
  return in;
}

double relative(double got, double want) { return std::abs(got - want) / std::abs(want); }

void expect_parts_add_up(const StepBreakdown& s) {
  EXPECT_NEAR(s.compute_s + s.straggler_wait_s + s.exposed_allreduce_s + s.update_and_other_s, s.step_s,
              1e-12 * s.step_s);
}

TEST(ProjectSimulation, CrossbarAllreduceEqualsRingFormula) {
  double worst = 0;
  for (int p : {2, 3, 4, 8, 16, 32, 64}) {
    for (double size : {64.0 * 1024, 1 * kMiB, 25e6, 100 * kMiB}) {
      // A multiple of P: SimGrid counts whole bytes, and 2(P-1)/P n rounded would be off by up
      // to half a byte (2e-6 of 64 KiB at P=3).
      const double bytes = p * std::round(size / p);
      // Without overlap, the exposed all-reduce is the whole ring of the one bucket.
      const TrainingSimulation sim = simulate_training(crossbar(), inputs(p, {{bytes, 1}}, false));
      const double want = ring_allreduce_time_s(p, bytes, kCrossbarLatency, kCrossbarBandwidth);
      const double error = relative(sim.mean.exposed_allreduce_s, want);
      EXPECT_LT(error, 1e-6) << "P=" << p << " bytes=" << bytes;
      worst = std::max(worst, error);
    }
  }
  std::printf("largest relative error of the simulated all-reduce: %.2e\n", worst);
}

TEST(ProjectSimulation, CrossbarBinomialEqualsTreeFormula) {
  double worst = 0;
  for (int p : {2, 3, 4, 5, 8, 13, 16, 32}) {
    for (double bytes : {64.0 * 1024, 1 * kMiB, 100 * kMiB}) {
      TrainingInputs in = inputs(p, {{bytes, 1}}, false);
      in.algorithm = AllreduceAlgorithm::binomial;
      const TrainingSimulation sim = simulate_training(crossbar(), in);
      const double want = binomial_allreduce_time_s(p, bytes, kCrossbarLatency, kCrossbarBandwidth);
      const double error = relative(sim.mean.exposed_allreduce_s, want);
      EXPECT_LT(error, 1e-6) << "P=" << p << " bytes=" << bytes;
      worst = std::max(worst, error);
    }
  }
  // On two ranks: up, then back down.
  EXPECT_DOUBLE_EQ(binomial_allreduce_time_s(2, 1e6, 1e-6, 1e9), 2 * (1e-6 + 1e-3));
  std::printf("largest relative error of the simulated binomial all-reduce: %.2e\n", worst);
}

TEST(ProjectSimulation, BinomialBucketsInFlightShareTheLinkBothWays) {
  // Two ranks, two buckets, each crossing the link in a + n/B = 10 ms (half of backward), the
  // second ready when the first has gone up: the first comes down while the second goes up, so
  // the all-reduce ends 2 x 10 ms after backward, not 3 x 10 ms as one bucket after another.
  const double hop = 0.010, bytes = (hop - kCrossbarLatency) * kCrossbarBandwidth;
  TrainingInputs in = inputs(2, {{bytes, 0.5}, {bytes, 1.0}}, true);
  in.algorithm = AllreduceAlgorithm::binomial;
  const StepBreakdown got = simulate_training(crossbar(), in).mean;
  EXPECT_LT(relative(got.exposed_allreduce_s, 2 * hop), 1e-6) << got.exposed_allreduce_s;
  expect_parts_add_up(got);
}

TEST(ProjectSimulation, RingsOnTwoLanesShareTheLinksAndOverlapTheirLatencies) {
  // Two buckets ready together at the end of backward, on a crossbar whose edges take 2 ms: one
  // lane reduces them one after the other, two rings' times; two lanes at once, sharing every
  // link, in one ring's time for both, which pays the ring's latencies once.
  ClusterDescription c = crossbar();
  c.nic = {kCrossbarBandwidth, 1e-3};
  const double latency = 2e-3;
  for (const AllreduceModel model : {AllreduceModel::flow, AllreduceModel::message}) {
    for (int p : {2, 4}) {
      const double bytes = 4 * kMiB;  // a multiple of P
      TrainingInputs in = inputs(p, {{bytes, 1.0}, {bytes, 1.0}}, true, model);
      const double one_lane = simulate_training(c, in).mean.exposed_allreduce_s;
      in.lanes = 2;
      const double two_lanes = simulate_training(c, in).mean.exposed_allreduce_s;
      const std::string where =
          std::string(model == AllreduceModel::flow ? "flow" : "message") + " P=" + std::to_string(p);
      EXPECT_LT(relative(one_lane, 2 * ring_allreduce_time_s(p, bytes, latency, kCrossbarBandwidth)), 1e-6) << where;
      EXPECT_LT(relative(two_lanes, ring_allreduce_time_s(p, 2 * bytes, latency, kCrossbarBandwidth)), 1e-6) << where;
    }
  }
}

TEST(ProjectSimulation, CrossbarStepEqualsClosedForm) {
  // Four buckets ready after each quarter of backward; at large P or size the ring outlasts
  // backward and part of it is exposed, at small ones it hides behind it. Sharded, each bucket
  // is reduce-scattered and, after the update, all-gathered. With rows, the last bucket (an
  // embedding's, ready as backward ends) is all-gathered as rows of a quarter of its bytes, or at
  // P = 64 goes dense: a whole all-reduce, sharded or not.
  double worst = 0;
  for (int p : {2, 8, 64}) {
    for (double total : {4 * kMiB, 100 * kMiB}) {
      for (bool overlap : {true, false}) {
        for (const auto& [sharded, rows] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
          std::vector<GradientBucket> buckets;
          for (int b = 1; b <= 4; ++b) buckets.push_back({total / 4, b / 4.0});
          if (rows) {
            buckets.back().rows = true;
            buckets.back().gathered_bytes = p == 64 ? 0 : total / 16;  // dense at P = 64
          }
          TrainingInputs in = inputs(p, buckets, overlap);
          in.sharded = sharded;
          const StepBreakdown want = identical_ranks_step(p, in.samples[0], in.buckets, overlap, kCrossbarLatency,
                                                          kCrossbarBandwidth, sharded);
          const StepBreakdown got = simulate_training(crossbar(), in).mean;
          const std::string where = "P=" + std::to_string(p) + " bytes=" + std::to_string(total) +
                                    (overlap ? " overlapped" : " blocking") + (sharded ? " sharded" : "") +
                                    (rows ? " rows" : "");
          EXPECT_LT(relative(got.step_s, want.step_s), 1e-6) << where;
          EXPECT_LT(relative(got.exposed_allreduce_s, want.exposed_allreduce_s), 1e-6) << where;
          EXPECT_NEAR(got.compute_s, want.compute_s, 1e-12) << where;  // a mean of P equal times
          EXPECT_NEAR(got.straggler_wait_s, 0, 1e-12) << where;
          EXPECT_LT(relative(got.update_and_other_s, want.update_and_other_s), 1e-6) << where;
          if (sharded) {
            EXPECT_LT(relative(got.parameter_gather_s, want.parameter_gather_s), 1e-6) << where;
          } else {
            EXPECT_EQ(got.parameter_gather_s, 0) << where;
          }
          expect_parts_add_up(got);
          worst = std::max(
              {worst, relative(got.step_s, want.step_s), relative(got.exposed_allreduce_s, want.exposed_allreduce_s)});
        }
      }
    }
  }
  std::printf("largest relative error of the simulated step and exposed all-reduce: %.2e\n", worst);
}

TEST(ProjectSimulation, ShardedStepMovesTheAllreducesBytes) {
  // One bucket after backward: a reduce-scatter and an all-gather are the all-reduce's two
  // halves, so the sharded step (with the same update) is the unsharded one, its exposed
  // all-reduce half of it and the other half after the update; with an update that takes 1/P
  // of the time, the sharded step is shorter by the difference.
  for (const AllreduceModel model : {AllreduceModel::flow, AllreduceModel::message}) {
    for (int p : {2, 3, 8}) {
      const double bytes = 24 * kMiB;  // a multiple of P
      TrainingInputs in = inputs(p, {{bytes, 1.0}}, false, model);
      const StepBreakdown whole = simulate_training(crossbar(), in).mean;
      in.sharded = true;
      const StepBreakdown sharded = simulate_training(crossbar(), in).mean;
      const std::string where =
          std::string(model == AllreduceModel::flow ? "flow" : "message") + " P=" + std::to_string(p);
      EXPECT_LT(relative(sharded.step_s, whole.step_s), 1e-9) << where;
      EXPECT_LT(relative(2 * sharded.exposed_allreduce_s, whole.exposed_allreduce_s), 1e-9) << where;
      EXPECT_LT(relative(sharded.parameter_gather_s, sharded.exposed_allreduce_s), 1e-9) << where;
      in.samples[0].update_s /= p;
      const StepBreakdown shared_update = simulate_training(crossbar(), in).mean;
      EXPECT_LT(relative(whole.step_s - shared_update.step_s, 0.004 * (1 - 1.0 / p)), 1e-6) << where;
      expect_parts_add_up(sharded);
    }
  }
}

TEST(ProjectSimulation, TwoLevelAllreduceEqualsItsClosedForm) {
  // Nodes of 1, 2, 3, 4 and 8 ranks with a slow network: each bucket up a binomial tree within
  // the node, round the leaders' ring, and down again; one rank per node is the flat ring.
  ClusterDescription c = crossbar();
  c.devices_per_node = 8;
  c.intra_node = {50e9, 0.5e-6};  // within a node: 1 us and 50 GB/s device to device
  c.nic = {1e9, 1e-6};            // between leaders: 2 x 0.5 + 2 x 1 = 3 us, 1 GB/s
  double worst = 0;
  for (int per_node : {1, 2, 3, 4, 8}) {
    c.devices_per_node = per_node;
    for (int nodes : {1, 2, 5}) {
      const int p = per_node * nodes;
      if (p < 2) continue;
      const double bytes = 3 * 5 * 8 * kMiB;  // a multiple of every ring's ranks
      TrainingInputs in = inputs(p, {{bytes, 1.0}}, false);
      in.host_hierarchy = true;
      const double got = simulate_training(c, in).mean.exposed_allreduce_s;
      const double want = two_level_allreduce_time_s(per_node, nodes, bytes, 1e-6, 50e9, 3e-6, 1e9);
      EXPECT_LT(relative(got, want), 1e-6) << per_node << " x " << nodes;
      worst = std::max(worst, relative(got, want));
      if (per_node == 1) {
        in.host_hierarchy = false;
        EXPECT_LT(relative(simulate_training(c, in).mean.exposed_allreduce_s, got), 1e-9) << nodes;
      }
    }
  }
  std::printf("largest relative error of the two-level all-reduce: %.2e\n", worst);
}

TEST(ProjectSimulation, TwoLevelAllreduceCrossesTheNetworkOnce) {
  // Two nodes of two ranks on a network 50 times slower than the node: the flat ring's edges
  // between the nodes carry 2(P-1)/P = 1.5 buckets each way, the leaders' ring 1. With the
  // tree's two fast rounds the two-level all-reduce is below the flat one's 1/1.5 plus a bit.
  ClusterDescription c = crossbar();
  c.devices_per_node = 2;
  c.intra_node = {50e9, 0};
  c.nic = {1e9, 0};
  TrainingInputs in = inputs(4, {{64 * kMiB, 1.0}}, false);
  const double flat = simulate_training(c, in).mean.exposed_allreduce_s;
  in.host_hierarchy = true;
  const double two_level = simulate_training(c, in).mean.exposed_allreduce_s;
  std::printf("64 MiB on 2 nodes of 2: flat %.3f ms, two levels %.3f ms\n", flat * 1e3, two_level * 1e3);
  EXPECT_LT(relative(flat, 1.5 * 64 * kMiB / 1e9), 1e-6);
  EXPECT_LT(two_level, flat / 1.5 * 1.05);
}

TEST(ProjectSimulation, FlowModelMatchesMessageModelAtSmallP) {
  // The flow model's one flow per edge against the ring's 2(P-1) messages per rank: on the
  // crossbar, and on the 8-GPU preset with both placements (cyclic: eight rings' edges share
  // each NIC), overlapped and blocking. Identical ranks: the two agree exactly. Ranks drawing
  // different samples (stragglers): the message ring lets the ranks that are ready early send
  // their first chunks before the last rank joins, which the flow model (it starts the ring
  // when the last rank has the bucket) does not; the flow model is then slower, by less than
  // 1% of the step in these cases (0.72% at most, cyclic P=16).
  double worst_identical = 0, worst_stragglers = 0;
  std::string worst_where;
  for (const std::string& platform : {std::string("crossbar"), std::string("block"), std::string("cyclic")}) {
    ClusterDescription c = crossbar();
    if (platform != "crossbar") {
      c = preset("gpu-8x-nvlink-25GBps-nic");
      c.placement = platform == "block" ? Placement::block : Placement::cyclic;
    }
    for (int p : {2, 4, 8, 16}) {
      for (bool overlap : {true, false}) {
        for (bool stragglers : {false, true})
          for (bool sharded : {false, true}) {
            // Bucket sizes a multiple of P (whole bytes per chunk in the message model).
            std::vector<GradientBucket> buckets = {{8 * kMiB, 0.3}, {8 * kMiB, 0.7}, {16 * kMiB, 1.0}};
            TrainingInputs flow = inputs(p, buckets, overlap);
            if (stragglers) flow.samples = {{0.010, 0.020, 0.004}, {0.011, 0.021, 0.004}, {0.010, 0.025, 0.005}};
            flow.sharded = sharded;
            TrainingInputs message = flow;
            message.model = AllreduceModel::message;
            const StepBreakdown f = simulate_training(c, flow).mean, m = simulate_training(c, message).mean;
            const std::string where = platform + " P=" + std::to_string(p) + (overlap ? " overlapped" : " blocking") +
                                      (sharded ? " sharded" : "");
            const double error = relative(f.step_s, m.step_s);
            if (stragglers) {
              EXPECT_GE(f.step_s, m.step_s * (1 - 1e-9)) << where;
              EXPECT_LT(error, 0.01) << where;
              if (error > worst_stragglers) worst_where = where;
              worst_stragglers = std::max(worst_stragglers, error);
            } else {
              EXPECT_LT(error, 1e-9) << where;
              EXPECT_LT(std::abs(f.exposed_allreduce_s - m.exposed_allreduce_s), 1e-9 * m.step_s) << where;
              worst_identical = std::max(worst_identical, error);
            }
          }
      }
    }
  }
  std::printf(
      "largest relative step-time difference, flow against message model: %.2e identical ranks, %.2e "
      "with stragglers (%s)\n",
      worst_identical, worst_stragglers, worst_where.c_str());
}

TEST(ProjectSimulation, BlockPlacementBeatsCyclicOnTheGpuPreset) {
  ClusterDescription c = preset("gpu-8x-nvlink-25GBps-nic");
  const TrainingInputs in = inputs(64, {{100 * kMiB, 1}}, false);
  const double block = simulate_training(c, in).mean.exposed_allreduce_s;
  c.placement = Placement::cyclic;
  const double cyclic = simulate_training(c, in).mean.exposed_allreduce_s;
  std::printf("100 MiB all-reduce at P=64: block %.3f ms, cyclic %.3f ms\n", block * 1e3, cyclic * 1e3);
  EXPECT_GT(cyclic, 3 * block);
  // Block: the ring is paced by its edges between nodes, one per NIC each way (latency: two
  // NVLink and two NIC hops of 0.5 us).
  EXPECT_LT(relative(block, ring_allreduce_time_s(64, 100 * kMiB, 2e-6, 25e9)), 1e-6);
}

TEST(ProjectSimulation, StragglerWaitGrowsWithRanks) {
  TrainingInputs in = inputs(2, {{4 * kMiB, 1}}, true);
  for (int i = 0; i < 20; ++i) in.samples.push_back({0.010, 0.020 + 0.0005 * i, 0.004});
  in.steps = 5;
  const StepBreakdown two = simulate_training(crossbar(), in).mean;
  in.ranks = 64;
  const StepBreakdown many = simulate_training(crossbar(), in).mean;
  EXPECT_GT(many.straggler_wait_s, two.straggler_wait_s);
  EXPECT_GT(many.straggler_wait_s, 0.003);  // the slowest of 64 draws is near the slowest sample
  expect_parts_add_up(two);
  expect_parts_add_up(many);
  // The same inputs give the same result: the draws are seeded.
  EXPECT_EQ(simulate_training(crossbar(), in).mean.step_s, many.step_s);
}

TEST(ProjectSimulation, OneRankHasNoAllreduce) {
  const StepBreakdown s = simulate_training(crossbar(), inputs(1, {{kMiB, 1}}, true)).mean;
  EXPECT_DOUBLE_EQ(s.step_s, 0.034);
  EXPECT_DOUBLE_EQ(s.exposed_allreduce_s, 0);
}

TEST(ProjectSimulation, OversubscribedFatTreeSlowsRingsAcrossLeaves) {
  // 2 nodes per leaf, 16 nodes; cyclic placement puts every ring edge across nodes, and those
  // from every second node across leaves: 8 flows of 12.5 GB/s (a 100 GB/s node's NICs shared
  // by 8) leave each leaf, 100 GB/s against uplinks of 200 GB/s (1:1) or 50 GB/s (4:1).
  ClusterDescription c = preset("gpu-8x-4nic-fat-tree-2to1");
  c.nodes_per_switch = 2;
  c.placement = Placement::cyclic;
  const TrainingInputs in = inputs(128, {{100 * kMiB, 1}}, false);
  c.oversubscription = 1;
  const double full = simulate_training(c, in).mean.exposed_allreduce_s;
  c.oversubscription = 4;
  const double quarter = simulate_training(c, in).mean.exposed_allreduce_s;
  std::printf("100 MiB at P=128, cyclic: %.3f ms non-blocking, %.3f ms at 4:1\n", full * 1e3, quarter * 1e3);
  EXPECT_GT(quarter, 1.5 * full);
}

/// A SimGrid platform file in the test's temporary folder, removed with it.
class XmlFile {
 public:
  XmlFile(const std::string& name, const std::string& text)
      : path_(std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "-" + name)) {
    std::ofstream(path_) << text;
  }
  ~XmlFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

TEST(ProjectSimulation, SimgridXmlPlatformRanksInNaturalHostOrder) {
  // Three hosts; n-1 to n-2 is a fast link, n-10 is behind slow ones. Two ranks land on n-1 and
  // n-2 (natural order), not on n-1 and n-10 (the names' character order).
  const XmlFile xml("three-hosts.xml", R"(<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <zone id="three-hosts" routing="Full">
    <host id="n-1" speed="1Gf"/>
    <host id="n-10" speed="1Gf"/>
    <host id="n-2" speed="1Gf"/>
    <link id="fast" bandwidth="10GBps" latency="2us" sharing_policy="SPLITDUPLEX"/>
    <link id="slow-1" bandwidth="1GBps" latency="2us" sharing_policy="SPLITDUPLEX"/>
    <link id="slow-2" bandwidth="1GBps" latency="2us" sharing_policy="SPLITDUPLEX"/>
    <route src="n-1" dst="n-2"><link_ctn id="fast" direction="UP"/></route>
    <route src="n-1" dst="n-10"><link_ctn id="slow-1" direction="UP"/></route>
    <route src="n-2" dst="n-10"><link_ctn id="slow-2" direction="UP"/></route>
  </zone>
</platform>
)");
  const ClusterDescription cluster = load_simgrid_platform_file(xml.path());
  EXPECT_EQ(cluster.name, std::to_string(::getpid()) + "-three-hosts");
  EXPECT_EQ(cluster.nodes, 3);
  EXPECT_EQ(cluster.devices_per_node, 1);
  EXPECT_STREQ(placement_name(cluster), "by-host-name");
  const double bytes = 8 * kMiB;
  const StepBreakdown got = simulate_training(cluster, inputs(2, {{bytes, 1}}, false)).mean;
  EXPECT_LT(relative(got.exposed_allreduce_s, ring_allreduce_time_s(2, bytes, 2e-6, 10e9)), 1e-6)
      << got.exposed_allreduce_s;
  // All three: the ring's slowest edges are the slow links.
  const StepBreakdown three = simulate_training(cluster, inputs(3, {{3 * bytes, 1}}, false)).mean;
  EXPECT_LT(relative(three.exposed_allreduce_s, ring_allreduce_time_s(3, 3 * bytes, 2e-6, 1e9)), 1e-6);
  EXPECT_THROW(simulate_training(cluster, inputs(4, {{bytes, 1}}, false)), std::invalid_argument);
}

TEST(ProjectSimulation, SimgridXmlErrorsAreRefused) {
  EXPECT_THROW(load_simgrid_platform_file("/nonexistent/platform.xml"), std::invalid_argument);
  const XmlFile broken("broken.xml", "<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\">");
  try {
    load_simgrid_platform_file(broken.path());
    ADD_FAILURE() << "a broken XML file was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(broken.path()), std::string::npos) << e.what();
  }
}

TEST(ProjectSimulation, BadInputsAreRefused) {
  EXPECT_THROW(simulate_training(crossbar(), inputs(65, {{kMiB, 1}}, true)), std::invalid_argument);
  EXPECT_THROW(simulate_training(crossbar(), inputs(2, {{kMiB, 0.5}, {kMiB, 0.25}}, true)), std::invalid_argument);
  EXPECT_THROW(simulate_training(crossbar(), inputs(2, {{0, 1}}, true)), std::invalid_argument);
  TrainingInputs no_lane = inputs(2, {{kMiB, 1}}, true);
  no_lane.lanes = 0;
  EXPECT_THROW(simulate_training(crossbar(), no_lane), std::invalid_argument);
  TrainingInputs sharded_tree = inputs(2, {{kMiB, 1}}, true);
  sharded_tree.sharded = true;
  sharded_tree.algorithm = AllreduceAlgorithm::binomial;
  EXPECT_THROW(simulate_training(crossbar(), sharded_tree), std::invalid_argument);
  TrainingInputs rows_tree = inputs(2, {{kMiB, 1, true, kMiB / 4}}, true);
  rows_tree.algorithm = AllreduceAlgorithm::binomial;
  EXPECT_THROW(simulate_training(crossbar(), rows_tree), std::invalid_argument);
  TrainingInputs rows_elsewhere = inputs(2, {{kMiB, 1, false, kMiB / 4}}, true);
  EXPECT_THROW(simulate_training(crossbar(), rows_elsewhere), std::invalid_argument);
  TrainingInputs two_level_messages = inputs(2, {{kMiB, 1}}, true, AllreduceModel::message);
  two_level_messages.host_hierarchy = true;
  EXPECT_THROW(simulate_training(crossbar(), two_level_messages), std::invalid_argument);
}

}  // namespace
}  // namespace dlscale::project
