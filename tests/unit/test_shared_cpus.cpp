// The warning about ranks whose CPU sets overlap on one host: one line per group of ranks linked
// by CPUs they share, however many ranks the group holds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "suite/comm/mpi_context.h"

namespace dlscale {
namespace {

RankInfo rank(int r, const std::string& host, const std::string& cpus) {
  RankInfo info;
  info.rank = r;
  info.host = host;
  info.cpu_affinity = cpus;
  return info;
}

TEST(SharedCpus, TwoRanksAreNamedAsAPair) {
  EXPECT_EQ(shared_core_warnings({rank(0, "a", "0-3"), rank(1, "a", "2-5")}),
            (std::vector<std::string>{"ranks 0 and 1 on a share CPUs 2-3: their timings interfere"}));
}

TEST(SharedCpus, ManyRanksOnFewCoresGiveOneLine) {
  std::vector<RankInfo> table;
  for (int r = 0; r < 32; ++r) table.push_back(rank(r, "vm", "0-1"));
  EXPECT_EQ(shared_core_warnings(table),
            (std::vector<std::string>{"ranks 0-31 on vm share CPUs 0-1: their timings interfere"}));
}

TEST(SharedCpus, DisjointSetsOtherHostsAndChainsOfOverlaps) {
  // On a: 0 and 2 overlap on CPU 1, 2 and 4 on CPU 3 (one group, linked through 2); 5 is alone.
  // On b: 1 and 3 have the same CPUs as 0 and 2 on a, which is no overlap across hosts.
  const std::vector<RankInfo> table{rank(0, "a", "0-1"), rank(1, "b", "0-1"), rank(2, "a", "1-3"),
                                    rank(3, "b", "2-3"), rank(4, "a", "3"),   rank(5, "a", "8-9")};
  EXPECT_EQ(shared_core_warnings(table),
            (std::vector<std::string>{"ranks 0,2,4 on a share CPUs 1,3: their timings interfere"}));
}

TEST(SharedCpus, NoOverlapNoWarning) {
  EXPECT_TRUE(shared_core_warnings({rank(0, "a", "0-1"), rank(1, "a", "2-3"), rank(2, "b", "0-3")}).empty());
}

}  // namespace
}  // namespace dlscale
