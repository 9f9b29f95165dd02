// Which of a job's ranks a case of P ranks runs on. One job can hold several hosts, and the
// choice decides whether a case's all-reduce crosses the network: `packed` fills a host before
// the next (as a Slurm job of P ranks gets them), `spread` takes one rank of every host before a
// second of any. The order depends on the hosts alone, not on how the launcher numbered the
// ranks, so a case is the same whatever --map-by the job used.
#pragma once

#include <string>
#include <vector>

namespace dlscale {

enum class Placement { kPacked, kSpread };

/// How a case's all-reduce crosses hosts (--allreduce-hierarchy): one ring of every rank
/// (`kFlat`), or (`kHost`) a reduce to one leader per host, a ring of the leaders and a broadcast
/// back within each host (suite/comm/ring_allreduce.h, HostSum), so that the network carries one
/// ring of H hosts rather than a ring of P ranks whose edges between hosts each carry 2(P-1)/P of
/// the buffer: NCCL's and Horovod's hierarchical all-reduce; with 2 ranks on each of 2 hosts, one
/// buffer over the link each way against 1.5. `kAuto`: kHost where the case spans hosts with
/// several of its ranks on one of them, else kFlat (resolved_hierarchy).
enum class Hierarchy { kAuto, kFlat, kHost };

/// "auto", "flat", "host".
const char* hierarchy_name(Hierarchy h);
/// The hierarchy named `name`; throws std::invalid_argument for anything else.
Hierarchy parse_hierarchy(const std::string& name);

/// "packed", "spread".
const char* placement_name(Placement p);

/// The world ranks in the order cases of `placement` take them, given every world rank's host
/// (`hosts[r]`). Hosts are numbered by the first world rank on each, and within a host its
/// ranks keep their world order, so world rank 0 comes first under either placement (it writes
/// the results file).
std::vector<int> placement_order(const std::vector<std::string>& hosts, Placement placement);

/// Where a case's ranks are: its world ranks in case-rank order, and how many hosts they span.
struct CaseRanks {
  std::vector<int> world;  ///< world[case rank] = world rank
  int hosts = 1;
  int max_per_host = 1;  ///< the most case ranks on one host
};

/// The first `ranks` of placement_order(hosts, placement).
CaseRanks case_ranks(const std::vector<std::string>& hosts, Placement placement, int ranks);

/// `asked`, with kAuto resolved for a case's ranks `placed`: kFlat or kHost; kFlat for a GPU case
/// (`gpu`), whose gradients NCCL reduces, choosing its own algorithms, and for a case whose
/// optimiser is sharded (`sharded`: its gradients are reduce-scattered round one flat ring).
Hierarchy resolved_hierarchy(Hierarchy asked, const CaseRanks& placed, bool gpu, bool sharded = false);

/// "0-3", "0,2,1,3": world ranks in case-rank order, ascending runs written as ranges
/// (dlscale_report's parse_participants reads both).
std::string format_participants(const std::vector<int>& world);

}  // namespace dlscale
