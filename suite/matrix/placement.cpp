#include "suite/matrix/placement.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

namespace dlscale {

const char* placement_name(Placement p) { return p == Placement::kSpread ? "spread" : "packed"; }

const char* hierarchy_name(Hierarchy h) {
  switch (h) {
    case Hierarchy::kFlat:
      return "flat";
    case Hierarchy::kHost:
      return "host";
    case Hierarchy::kAuto:
      break;
  }
  return "auto";
}

Hierarchy parse_hierarchy(const std::string& name) {
  if (name == "auto") return Hierarchy::kAuto;
  if (name == "flat") return Hierarchy::kFlat;
  if (name == "host") return Hierarchy::kHost;
  throw std::invalid_argument("unknown all-reduce hierarchy '" + name + "' (expected auto, flat or host)");
}

Hierarchy resolved_hierarchy(Hierarchy asked, const CaseRanks& placed, bool gpu, bool sharded) {
  if (asked != Hierarchy::kAuto) return asked;
  return !gpu && !sharded && placed.hosts > 1 && placed.max_per_host > 1 ? Hierarchy::kHost : Hierarchy::kFlat;
}

std::vector<int> placement_order(const std::vector<std::string>& hosts, Placement placement) {
  // Per world rank: its host's number (by first appearance) and its place among that host's ranks.
  std::map<std::string, int> host_number;
  std::vector<int> seen;  // ranks so far per host number
  std::vector<std::pair<int, int>> key(hosts.size());
  for (size_t r = 0; r < hosts.size(); ++r) {
    const auto [it, fresh] = host_number.emplace(hosts[r], static_cast<int>(host_number.size()));
    if (fresh) seen.push_back(0);
    key[r] = {it->second, seen[static_cast<size_t>(it->second)]++};
  }
  std::vector<int> order(hosts.size());
  for (size_t r = 0; r < order.size(); ++r) order[r] = static_cast<int>(r);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const auto& ka = key[static_cast<size_t>(a)];
    const auto& kb = key[static_cast<size_t>(b)];
    if (placement == Placement::kPacked) return ka < kb;  // host, then place on it
    return std::make_pair(ka.second, ka.first) < std::make_pair(kb.second, kb.first);
  });
  return order;
}

CaseRanks case_ranks(const std::vector<std::string>& hosts, Placement placement, int ranks) {
  CaseRanks out;
  const std::vector<int> order = placement_order(hosts, placement);
  out.world.assign(order.begin(), order.begin() + std::min<size_t>(order.size(), static_cast<size_t>(ranks)));
  std::map<std::string, int> per_host;
  for (int r : out.world) ++per_host[hosts[static_cast<size_t>(r)]];
  out.hosts = std::max<int>(1, static_cast<int>(per_host.size()));
  for (const auto& [host, n] : per_host) out.max_per_host = std::max(out.max_per_host, n);
  return out;
}

std::string format_participants(const std::vector<int>& world) {
  std::string out;
  for (size_t i = 0; i < world.size();) {
    size_t j = i;
    while (j + 1 < world.size() && world[j + 1] == world[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j > i ? fmt::format("{}-{}", world[i], world[j]) : fmt::format("{}", world[i]);
    i = j + 1;
  }
  return out;
}

}  // namespace dlscale
