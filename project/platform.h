// A cluster described in a few figures (nodes, devices per node, the links between them, the
// fabric, where each rank lands), read from TOML, or by a SimGrid platform file.
// simgrid_platform.h turns it into a SimGrid platform; nothing here names SimGrid, so callers
// never see its headers.
#pragma once

#include <string>

namespace dlscale::project {

/// One hop: its bandwidth in bytes per second (GB = 1e9 B, as everywhere in dlscale) and the
/// latency it adds to a message crossing it.
struct LinkSpec {
  double bandwidth_Bps = 0;
  double latency_s = 0;
};

enum class Fabric {
  star,     ///< every node's NIC on one non-blocking switch
  fat_tree  ///< nodes on leaf switches, leaves on a spine through shared (possibly oversubscribed) uplinks
};

/// Which node rank r of P lands on (devices_per_node = D, N = the nodes P needs, ceil(P/D)).
enum class Placement {
  block,  ///< node r / D: ring neighbours share a node (what `mpirun --map-by core` and Slurm's block do)
  cyclic  ///< node r mod N: every ring edge crosses the network
};

struct ClusterDescription {
  std::string name;
  int nodes = 0;             ///< the largest cluster described: P may not exceed nodes * devices_per_node
  int devices_per_node = 0;  ///< ranks per node (GPUs, or sockets of a CPU node)
  LinkSpec intra_node;       ///< between one device and its node's switch (NVSwitch, the socket link)
  int nics_per_node = 1;
  LinkSpec nic;  ///< one NIC between its node and the first switch; a node's NICs form one link of count x bandwidth
  Fabric fabric = Fabric::star;
  int nodes_per_switch = 0;     ///< fat-tree: nodes under one leaf switch
  double oversubscription = 1;  ///< fat-tree: leaf downlink over uplink bandwidth (1 = non-blocking)
  double uplink_latency_s = 0;  ///< fat-tree: latency added by the hop from a leaf to the spine (and back down)
  Placement placement = Placement::block;
  /// A SimGrid platform file (XML) that describes the cluster instead of the figures above: one
  /// rank per host, rank r on the r-th host in the order of their names with numbers compared
  /// as numbers (node-2 before node-10); `nodes` is then its host count and `devices_per_node`
  /// 1 (load_simgrid_platform_file in simgrid_platform.h fills them).
  std::string simgrid_xml_file;
};

/// Parses a platform description; `source` names it in messages. Throws std::invalid_argument
/// with one message naming the file, line, key and value for a syntax error, a missing or
/// unknown key, or a value out of range.
ClusterDescription parse_platform_toml(const std::string& text, const std::string& source);

/// Reads and parses a file (std::invalid_argument also when it cannot be read).
ClusterDescription load_platform_file(const std::string& path);

/// A cluster described by a SimGrid platform file (`simgrid_xml_file`), named after the file
/// (its name less `.xml`), with `nodes` = its host count. SimGrid loads the file in a child
/// process (isolated_run.h) to count them (simgrid_platform.cpp). Throws std::invalid_argument
/// with SimGrid's message when the file cannot be read or loaded, or has no host.
ClusterDescription load_simgrid_platform_file(const std::string& path);

/// Nodes that P ranks occupy: ceil(P / devices_per_node). Throws std::invalid_argument when P
/// is below 1 or above the cluster's devices.
int nodes_for_ranks(const ClusterDescription& cluster, int ranks);

/// The node and the device within it of rank `rank` of `ranks`, under the description's placement.
struct DeviceSlot {
  int node = 0;
  int device = 0;
};
DeviceSlot place_rank(const ClusterDescription& cluster, int ranks, int rank);

const char* fabric_name(Fabric f);
const char* placement_name(Placement p);
/// "block", "cyclic", or for a SimGrid XML platform "by-host-name".
const char* placement_name(const ClusterDescription& cluster);

}  // namespace dlscale::project
