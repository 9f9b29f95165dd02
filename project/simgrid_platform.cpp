#include "project/simgrid_platform.h"

#include <fmt/format.h>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/NetZone.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <stdexcept>

#include "project/isolated_run.h"

namespace sg4 = simgrid::s4u;

namespace dlscale::project {

std::unique_ptr<sg4::Engine> make_engine() {
  std::vector<std::string> arguments = {
      "dlscale-project",
      // CM02 is the plain max-min model: a message of n bytes over a route takes the sum of its
      // links' latencies plus n / (its share of the slowest link's bandwidth). SimGrid's default
      // models (LV08, and SMPI's) scale latencies and bandwidths to match TCP and MPI
      // measurements (LV08: latency x 13.01, bandwidth x 0.97), which made a ring all-reduce
      // about 20% slower than the link figures say; with CM02 the figures in a platform's TOML
      // mean what they say, and a ring on a crossbar equals 2(P-1)a + 2(P-1)/P n/B (tests/project).
      "--cfg=network/model:CM02",
      // Cross-traffic makes every flow also load its reverse route (TCP acknowledgements). A
      // ring sends one way on every edge while the next edge sends the other way over the same
      // duplex links, so it would slow every ring by a few percent that RDMA fabrics do not lose.
      "--cfg=network/crosstraffic:0",
      // CM02 caps a flow at TCP-gamma / (2 x latency), TCP's window limit; 0 turns the cap off
      // (RDMA has no window), so that a flow gets its share of the link and no less.
      "--cfg=network/TCP-gamma:0",
      // Actors here are shallow (no recursion, a few frames): 8192 of them on 128 KiB stacks
      // instead of the default 8 MiB keep the simulation's address space and memory small.
      "--cfg=contexts/stack-size:128",
      // SimGrid reports every configuration change at INFO level, on every run.
      "--log=root.thres:warning",
  };
  std::vector<char*> argv;
  for (std::string& a : arguments) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(arguments.size());
  return std::make_unique<sg4::Engine>(&argc, argv.data());  // it copies what it keeps of them
}

namespace {

/// A full-duplex link (one direction for each way, as a NIC or NVLink is) of the given figures.
sg4::Link* duplex_link(sg4::NetZone* zone, const std::string& name, double bandwidth_Bps, double latency_s) {
  sg4::Link* link = zone->create_split_duplex_link(name, bandwidth_Bps);
  link->set_latency(latency_s);
  link->seal();
  return link;
}

/// The route from a member of a star zone to its centre: `link` in the member's outgoing
/// direction, and back the other way (symmetrical). No link: the member sits on the centre.
void attach(sg4::NetZone* zone, simgrid::kernel::routing::NetPoint* member, simgrid::kernel::routing::NetPoint* gateway,
            sg4::Link* link) {
  std::vector<sg4::LinkInRoute> links;
  if (link != nullptr) links.emplace_back(link, sg4::LinkInRoute::Direction::UP);
  zone->add_route(member, nullptr, gateway, nullptr, links, true);
}

/// One node: a star zone of its devices around the node's switch, each on its own intra-node
/// link, with a gateway router on the switch itself through which traffic leaves the node.
struct Node {
  sg4::NetZone* zone = nullptr;
  simgrid::kernel::routing::NetPoint* gateway = nullptr;
  std::vector<sg4::Host*> devices;
};

Node build_node(const ClusterDescription& c, const sg4::NetZone* parent, int index) {
  Node node;
  node.zone = sg4::create_star_zone(fmt::format("node-{}", index));
  node.zone->set_parent(parent);
  node.gateway = node.zone->create_router(fmt::format("node-{}-switch", index));
  attach(node.zone, node.gateway, nullptr, nullptr);
  for (int d = 0; d < c.devices_per_node; ++d) {
    sg4::Host* host = node.zone->create_host(fmt::format("node-{}-dev-{}", index, d), 1e9);
    host->seal();
    sg4::Link* link = duplex_link(node.zone, fmt::format("node-{}-dev-{}-link", index, d), c.intra_node.bandwidth_Bps,
                                  c.intra_node.latency_s);
    attach(node.zone, host->get_netpoint(), nullptr, link);
    node.devices.push_back(host);
  }
  node.zone->seal();
  return node;
}

/// A star of nodes (the whole fabric, or one leaf switch of a fat tree): each node's NICs are
/// one link, as wide as all of them, from the node's switch to this star's centre.
std::vector<Node> build_nodes(const ClusterDescription& c, sg4::NetZone* star, int first, int count) {
  std::vector<Node> nodes;
  for (int i = first; i < first + count; ++i) {
    Node node = build_node(c, star, i);
    sg4::Link* nic =
        duplex_link(star, fmt::format("node-{}-nic", i), c.nics_per_node * c.nic.bandwidth_Bps, c.nic.latency_s);
    attach(star, node.zone->get_netpoint(), node.gateway, nic);
    nodes.push_back(std::move(node));
  }
  return nodes;
}

/// "node-2" before "node-10": runs of digits compare as numbers, the rest character by character.
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t ei = i, ej = j;
      while (ei < a.size() && std::isdigit(static_cast<unsigned char>(a[ei]))) ++ei;
      while (ej < b.size() && std::isdigit(static_cast<unsigned char>(b[ej]))) ++ej;
      const std::string da = a.substr(i, ei - i), db = b.substr(j, ej - j);
      const size_t za = da.find_first_not_of('0'), zb = db.find_first_not_of('0');
      const std::string na = za == std::string::npos ? "" : da.substr(za),
                        nb = zb == std::string::npos ? "" : db.substr(zb);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ei;
      j = ej;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

/// The file's hosts in natural name order (the ranks' order).
std::vector<sg4::Host*> load_xml_hosts(const std::string& path) {
  sg4::Engine* engine = sg4::Engine::get_instance();
  engine->load_platform(path);
  std::vector<sg4::Host*> hosts = engine->get_all_hosts();
  std::sort(hosts.begin(), hosts.end(),
            [](const sg4::Host* a, const sg4::Host* b) { return natural_less(a->get_name(), b->get_name()); });
  return hosts;
}

}  // namespace

ClusterDescription load_simgrid_platform_file(const std::string& path) {
  const std::string absolute = std::filesystem::absolute(path).string();
  if (!std::filesystem::is_regular_file(absolute)) {
    throw std::invalid_argument(fmt::format("{}: no such file", path));
  }
  std::vector<double> count;
  try {
    count = run_isolated([&] {
              const std::unique_ptr<sg4::Engine> engine = make_engine();
              return std::vector<double>{static_cast<double>(load_xml_hosts(absolute).size())};
            }).values;
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(fmt::format("{}: SimGrid cannot load it: {}", path, e.what()));
  }
  if (count.size() != 1 || count[0] < 1) throw std::invalid_argument(fmt::format("{}: no host in it", path));
  ClusterDescription c;
  c.name = std::filesystem::path(path).stem().string();
  c.nodes = static_cast<int>(count[0]);
  c.devices_per_node = 1;
  c.simgrid_xml_file = absolute;
  return c;
}

std::vector<sg4::Host*> build_cluster(const ClusterDescription& c, int ranks) {
  const int node_count = nodes_for_ranks(c, ranks);
  if (!c.simgrid_xml_file.empty()) {
    std::vector<sg4::Host*> hosts = load_xml_hosts(c.simgrid_xml_file);
    hosts.resize(static_cast<size_t>(ranks));  // nodes_for_ranks checked that it has them
    return hosts;
  }
  // The first zone made without a parent becomes the Engine's root.
  sg4::NetZone* root = sg4::create_star_zone("cluster");
  if (sg4::Engine::get_instance()->get_netzone_root() != root) {
    throw std::logic_error("build_cluster: the Engine already has a platform");
  }

  std::vector<Node> nodes;
  if (c.fabric == Fabric::star) {
    nodes = build_nodes(c, root, 0, node_count);
  } else {
    // A two-level fat tree: leaves of nodes_per_switch nodes, each leaf's uplinks to the spine
    // modelled as one link of its nodes' NIC bandwidth over the oversubscription. The spine
    // itself is non-blocking: an oversubscribed fat tree loses its bandwidth at the leaves.
    for (int first = 0, leaf = 0; first < node_count; first += c.nodes_per_switch, ++leaf) {
      const int count = std::min(c.nodes_per_switch, node_count - first);
      sg4::NetZone* zone = sg4::create_star_zone(fmt::format("leaf-{}", leaf));
      zone->set_parent(root);
      // The leaf's way out is a router in a zone of its own beside the nodes: SimGrid 3.32 finds
      // the route from a device to a gateway only when both sit at the same depth of zones
      // (a router in the leaf zone itself, one level above the devices, is not found).
      sg4::NetZone* port = sg4::create_star_zone(fmt::format("leaf-{}-switch", leaf));
      port->set_parent(zone);
      simgrid::kernel::routing::NetPoint* gateway = port->create_router(fmt::format("leaf-{}-switch-router", leaf));
      attach(port, gateway, nullptr, nullptr);
      port->seal();
      attach(zone, port->get_netpoint(), gateway, nullptr);
      std::vector<Node> leaf_nodes = build_nodes(c, zone, first, count);
      zone->seal();
      const double uplink_Bps = c.nodes_per_switch * c.nics_per_node * c.nic.bandwidth_Bps / c.oversubscription;
      sg4::Link* uplink = duplex_link(root, fmt::format("leaf-{}-uplink", leaf), uplink_Bps, c.uplink_latency_s);
      attach(root, zone->get_netpoint(), gateway, uplink);
      for (Node& n : leaf_nodes) nodes.push_back(std::move(n));
    }
  }
  root->seal();

  std::vector<sg4::Host*> hosts(ranks);
  for (int r = 0; r < ranks; ++r) {
    const DeviceSlot slot = place_rank(c, ranks, r);
    hosts[r] = nodes.at(slot.node).devices.at(slot.device);
  }
  return hosts;
}

}  // namespace dlscale::project
