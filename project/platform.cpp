#include "project/platform.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <toml++/toml.h>

namespace dlscale::project {
namespace {

// Every message names the source and line, then the key as the user wrote it ("[nic]
// bandwidth_GBps"), then what was wrong with its value: the one line a user needs to fix it.
[[noreturn]] void fail_at(const std::string& source, const toml::node* node, const std::string& what) {
  if (node != nullptr && node->source().begin.line > 0) {
    throw std::invalid_argument(fmt::format("{}:{}: {}", source, node->source().begin.line, what));
  }
  throw std::invalid_argument(fmt::format("{}: {}", source, what));
}

std::string key_name(const std::string& table, const std::string& key) {
  return table.empty() ? key : fmt::format("[{}] {}", table, key);
}

std::string shown(const toml::node& node) {
  if (const auto* text = node.as_string()) return "\"" + text->get() + "\"";
  std::ostringstream out;
  node.visit([&out](const auto& v) { out << v; });
  return out.str();
}

/// The keys of one table: each read at most once, and every key left unread at the end is a
/// typo or a key this version does not know, reported by name rather than silently ignored.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string name, std::string source)
      : table_(table), name_(std::move(name)), source_(std::move(source)) {}

  const toml::node* find(const std::string& key) {
    read_.insert(key);
    return table_.get(key);
  }

  const toml::node& require(const std::string& key) {
    const toml::node* node = find(key);
    if (node == nullptr) fail_at(source_, &table_, key_name(name_, key) + " is missing");
    return *node;
  }

  double positive_number(const std::string& key) {
    const toml::node& node = require(key);
    std::optional<double> v = node.value<double>();
    if (!v || !std::isfinite(*v) || *v <= 0) {
      fail_at(source_, &node, fmt::format("{} must be a positive number, got {}", key_name(name_, key), shown(node)));
    }
    return *v;
  }

  double non_negative_number(const std::string& key, double fallback) {
    const toml::node* node = find(key);
    if (node == nullptr) return fallback;
    std::optional<double> v = node->value<double>();
    if (!v || !std::isfinite(*v) || *v < 0) {
      fail_at(source_, node, fmt::format("{} must be a number >= 0, got {}", key_name(name_, key), shown(*node)));
    }
    return *v;
  }

  int positive_integer(const std::string& key, std::optional<int> fallback = std::nullopt) {
    const toml::node* node = find(key);
    if (node == nullptr) {
      if (fallback) return *fallback;
      fail_at(source_, &table_, key_name(name_, key) + " is missing");
    }
    std::optional<int64_t> v = node->value_exact<int64_t>();
    if (!v || *v < 1 || *v > (int64_t{1} << 30)) {
      fail_at(source_, node, fmt::format("{} must be a positive integer, got {}", key_name(name_, key), shown(*node)));
    }
    return static_cast<int>(*v);
  }

  std::string one_of(const std::string& key, const std::set<std::string>& allowed, const std::string& fallback) {
    const toml::node* node = find(key);
    if (node == nullptr) return fallback;
    std::optional<std::string> v = node->value_exact<std::string>();
    if (!v || allowed.count(*v) == 0) {
      std::string names;
      for (const std::string& a : allowed) names += (names.empty() ? "" : ", ") + ("\"" + a + "\"");
      fail_at(source_, node, fmt::format("{} must be one of {}, got {}", key_name(name_, key), names, shown(*node)));
    }
    return *v;
  }

  const toml::table& table(const std::string& key) {
    const toml::node& node = require(key);
    const toml::table* t = node.as_table();
    if (t == nullptr) fail_at(source_, &node, fmt::format("{} must be a table ([{}])", key, key));
    return *t;
  }

  void reject_unknown() const {
    for (const auto& [key, node] : table_) {
      if (read_.count(std::string(key.str())) == 0) {
        fail_at(source_, &node, fmt::format("unknown key {}", key_name(name_, std::string(key.str()))));
      }
    }
  }

 private:
  const toml::table& table_;
  std::string name_, source_;
  std::set<std::string> read_;
};

LinkSpec read_link(TableReader& reader) {
  LinkSpec link;
  link.bandwidth_Bps = reader.positive_number("bandwidth_GBps") * 1e9;
  link.latency_s = reader.non_negative_number("latency_us", 0) * 1e-6;
  return link;
}

}  // namespace

ClusterDescription parse_platform_toml(const std::string& text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw std::invalid_argument(fmt::format("{}:{}: {}", source, e.source().begin.line, e.description()));
  }
  ClusterDescription c;
  TableReader top(root, "", source);
  const toml::node& name = top.require("name");
  if (!name.is_string()) fail_at(source, &name, fmt::format("name must be a string, got {}", shown(name)));
  c.name = *name.value<std::string>();
  c.nodes = top.positive_integer("nodes");
  c.devices_per_node = top.positive_integer("devices_per_node");
  c.placement =
      top.one_of("placement", {"block", "cyclic"}, "block") == "cyclic" ? Placement::cyclic : Placement::block;
  {
    TableReader intra(top.table("intra_node"), "intra_node", source);
    c.intra_node = read_link(intra);
    intra.reject_unknown();
  }
  {
    TableReader nic(top.table("nic"), "nic", source);
    c.nics_per_node = nic.positive_integer("count", 1);
    c.nic = read_link(nic);
    nic.reject_unknown();
  }
  {
    TableReader fabric(top.table("fabric"), "fabric", source);
    c.fabric = fabric.one_of("topology", {"star", "fat-tree"}, "star") == "fat-tree" ? Fabric::fat_tree : Fabric::star;
    if (c.fabric == Fabric::star) {
      // A star has one switch: the fat-tree's keys would mean nothing there, so they are refused.
      for (const char* key : {"nodes_per_switch", "oversubscription", "uplink_latency_us"}) {
        if (const toml::node* node = fabric.find(key)) {
          fail_at(source, node, fmt::format("[fabric] {} applies to topology = \"fat-tree\" only", key));
        }
      }
    } else {
      c.nodes_per_switch = fabric.positive_integer("nodes_per_switch");
      c.oversubscription = fabric.non_negative_number("oversubscription", 1);
      if (c.oversubscription < 1) {
        fail_at(source, fabric.find("oversubscription"),
                fmt::format("[fabric] oversubscription must be 1 or more (downlink over uplink bandwidth), got {}",
                            c.oversubscription));
      }
      c.uplink_latency_s = fabric.non_negative_number("uplink_latency_us", 0) * 1e-6;
    }
    fabric.reject_unknown();
  }
  top.reject_unknown();
  return c;
}

ClusterDescription load_platform_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("{}: cannot be read", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw std::invalid_argument(fmt::format("{}: read failed", path));
  return parse_platform_toml(text.str(), path);
}

int nodes_for_ranks(const ClusterDescription& cluster, int ranks) {
  const int64_t devices = int64_t{cluster.nodes} * cluster.devices_per_node;
  if (ranks < 1 || ranks > devices) {
    throw std::invalid_argument(fmt::format("{} ranks on platform {}: it has {} nodes x {} devices = {}", ranks,
                                            cluster.name, cluster.nodes, cluster.devices_per_node, devices));
  }
  return (ranks + cluster.devices_per_node - 1) / cluster.devices_per_node;
}

DeviceSlot place_rank(const ClusterDescription& cluster, int ranks, int rank) {
  const int nodes = nodes_for_ranks(cluster, ranks);
  if (cluster.placement == Placement::block) return {rank / cluster.devices_per_node, rank % cluster.devices_per_node};
  return {rank % nodes, rank / nodes};
}

const char* fabric_name(Fabric f) { return f == Fabric::star ? "star" : "fat-tree"; }
const char* placement_name(Placement p) { return p == Placement::block ? "block" : "cyclic"; }
const char* placement_name(const ClusterDescription& cluster) {
  return cluster.simgrid_xml_file.empty() ? placement_name(cluster.placement) : "by-host-name";
}

}  // namespace dlscale::project
