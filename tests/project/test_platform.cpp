// Platform descriptions: the presets parse, placement puts ranks where it says, and every
// mistake in a TOML file is reported with its key (and value).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "project/platform.h"

namespace dlscale::project {
namespace {

const std::string kValid = R"(
name = "test"
nodes = 4
devices_per_node = 2
placement = "cyclic"
[intra_node]
bandwidth_GBps = 100
latency_us = 0.5
[nic]
count = 2
bandwidth_GBps = 12.5
latency_us = 1
[fabric]
topology = "fat-tree"
nodes_per_switch = 2
oversubscription = 4
uplink_latency_us = 0.25
)";

/// The message parse_platform_toml throws for `text`, or "" when it parses.
std::string error_of(const std::string& text) {
  try {
    parse_platform_toml(text, "p.toml");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(ProjectPlatform, ParsesEveryKey) {
  const ClusterDescription c = parse_platform_toml(kValid, "p.toml");
  EXPECT_EQ(c.name, "test");
  EXPECT_EQ(c.nodes, 4);
  EXPECT_EQ(c.devices_per_node, 2);
  EXPECT_EQ(c.placement, Placement::cyclic);
  EXPECT_DOUBLE_EQ(c.intra_node.bandwidth_Bps, 100e9);
  EXPECT_DOUBLE_EQ(c.intra_node.latency_s, 0.5e-6);
  EXPECT_EQ(c.nics_per_node, 2);
  EXPECT_DOUBLE_EQ(c.nic.bandwidth_Bps, 12.5e9);
  EXPECT_DOUBLE_EQ(c.nic.latency_s, 1e-6);
  EXPECT_EQ(c.fabric, Fabric::fat_tree);
  EXPECT_EQ(c.nodes_per_switch, 2);
  EXPECT_DOUBLE_EQ(c.oversubscription, 4);
  EXPECT_DOUBLE_EQ(c.uplink_latency_s, 0.25e-6);
}

TEST(ProjectPlatform, PresetsParse) {
  for (const char* name : {"gpu-8x-nvlink-25GBps-nic", "cpu-2socket-100Gbps-nic", "gpu-8x-4nic-fat-tree-2to1"}) {
    const ClusterDescription c =
        load_platform_file(std::string(DLSCALE_SOURCE_DIR) + "/project/platforms/" + name + ".toml");
    EXPECT_EQ(c.name, name);
  }
}

TEST(ProjectPlatform, ErrorsNameTheKeyAndValue) {
  EXPECT_EQ(error_of(replaced(kValid, "bandwidth_GBps = 12.5", "bandwidth_GBps = -3")),
            "p.toml:11: [nic] bandwidth_GBps must be a positive number, got -3");
  EXPECT_EQ(error_of(replaced(kValid, "placement = \"cyclic\"", "placement = \"round\"")),
            "p.toml:5: placement must be one of \"block\", \"cyclic\", got \"round\"");
  EXPECT_EQ(error_of(replaced(kValid, "nodes = 4", "nodes = 2.5")),
            "p.toml:3: nodes must be a positive integer, got 2.5");
  EXPECT_EQ(error_of(replaced(kValid, "count = 2", "cuont = 2")), "p.toml:10: unknown key [nic] cuont");
  EXPECT_EQ(error_of(replaced(kValid, "oversubscription = 4", "oversubscription = 0.5")),
            "p.toml:16: [fabric] oversubscription must be 1 or more (downlink over uplink bandwidth), got 0.5");
  EXPECT_EQ(error_of(replaced(kValid, "topology = \"fat-tree\"", "topology = \"star\"")),
            "p.toml:15: [fabric] nodes_per_switch applies to topology = \"fat-tree\" only");
  EXPECT_NE(error_of(replaced(kValid, "devices_per_node = 2\n", "")).find("devices_per_node is missing"),
            std::string::npos);
  EXPECT_NE(error_of(replaced(kValid, "[intra_node]\nbandwidth_GBps = 100\n", "[intra_node]\n"))
                .find("[intra_node] bandwidth_GBps is missing"),
            std::string::npos);
  EXPECT_NE(error_of("name = ").find("p.toml:1:"), std::string::npos);  // a syntax error: file and line
  EXPECT_THROW(load_platform_file("/nonexistent/platform.toml"), std::invalid_argument);
}

TEST(ProjectPlatform, PlacementBlockAndCyclic) {
  ClusterDescription c = parse_platform_toml(kValid, "p.toml");  // 4 nodes x 2 devices
  c.placement = Placement::block;
  EXPECT_EQ(nodes_for_ranks(c, 5), 3);
  EXPECT_EQ(place_rank(c, 5, 3).node, 1);
  EXPECT_EQ(place_rank(c, 5, 3).device, 1);
  c.placement = Placement::cyclic;  // 5 ranks on 3 nodes: 0 3 | 1 4 | 2
  EXPECT_EQ(place_rank(c, 5, 3).node, 0);
  EXPECT_EQ(place_rank(c, 5, 3).device, 1);
  EXPECT_EQ(place_rank(c, 5, 2).node, 2);
  EXPECT_THROW(nodes_for_ranks(c, 9), std::invalid_argument);
  EXPECT_THROW(nodes_for_ranks(c, 0), std::invalid_argument);
}

}  // namespace
}  // namespace dlscale::project
