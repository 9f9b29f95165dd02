// Which world ranks a case of P takes under each placement, whatever order the launcher gave.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "suite/matrix/placement.h"

namespace dlscale {
namespace {

TEST(Placement, PackedFillsAHostBeforeTheNext) {
  // mpirun --map-by node numbered the ranks round robin: a, b, a, b.
  const std::vector<std::string> hosts{"a", "b", "a", "b"};
  EXPECT_EQ(placement_order(hosts, Placement::kPacked), (std::vector<int>{0, 2, 1, 3}));
  const CaseRanks two = case_ranks(hosts, Placement::kPacked, 2);
  EXPECT_EQ(two.world, (std::vector<int>{0, 2}));
  EXPECT_EQ(two.hosts, 1);
  EXPECT_EQ(two.max_per_host, 2);
}

TEST(Placement, SpreadTakesOneRankPerHostFirst) {
  const std::vector<std::string> hosts{"a", "a", "b", "b"};  // --map-by slot
  EXPECT_EQ(placement_order(hosts, Placement::kSpread), (std::vector<int>{0, 2, 1, 3}));
  const CaseRanks two = case_ranks(hosts, Placement::kSpread, 2);
  EXPECT_EQ(two.world, (std::vector<int>{0, 2}));
  EXPECT_EQ(two.hosts, 2);
  EXPECT_EQ(two.max_per_host, 1);
  const CaseRanks three = case_ranks(hosts, Placement::kSpread, 3);
  EXPECT_EQ(three.world, (std::vector<int>{0, 2, 1}));
  EXPECT_EQ(three.max_per_host, 2);
}

TEST(Placement, WorldRankZeroAlwaysComesFirst) {
  const std::vector<std::string> hosts{"c", "a", "b", "a", "c"};
  for (Placement p : {Placement::kPacked, Placement::kSpread}) {
    EXPECT_EQ(placement_order(hosts, p).front(), 0) << placement_name(p);
  }
  EXPECT_EQ(case_ranks(hosts, Placement::kPacked, 5).hosts, 3);
}

TEST(Placement, OneHostGivesTheWorldOrderEitherWay) {
  const std::vector<std::string> hosts(4, "n1");
  for (Placement p : {Placement::kPacked, Placement::kSpread}) {
    EXPECT_EQ(placement_order(hosts, p), (std::vector<int>{0, 1, 2, 3})) << placement_name(p);
  }
}

TEST(Placement, ParticipantsKeepTheCaseOrder) {
  EXPECT_EQ(format_participants({0}), "0");
  EXPECT_EQ(format_participants({0, 1}), "0-1");
  EXPECT_EQ(format_participants({0, 1, 2, 3}), "0-3");
  EXPECT_EQ(format_participants({0, 2, 1, 3}), "0,2,1,3");
  EXPECT_EQ(format_participants({0, 2, 3, 4, 1}), "0,2-4,1");
}

TEST(Placement, AutoHierarchyWhereACaseSharesHostsAcrossHosts) {
  const std::vector<std::string> hosts{"n1", "n1", "n2", "n2"};
  const CaseRanks packed4 = case_ranks(hosts, Placement::kPacked, 4),
                  packed2 = case_ranks(hosts, Placement::kPacked, 2),
                  spread2 = case_ranks(hosts, Placement::kSpread, 2);
  EXPECT_EQ(resolved_hierarchy(Hierarchy::kAuto, packed4, false), Hierarchy::kHost);        // 2 hosts x 2 ranks
  EXPECT_EQ(resolved_hierarchy(Hierarchy::kAuto, packed2, false), Hierarchy::kFlat);        // one host
  EXPECT_EQ(resolved_hierarchy(Hierarchy::kAuto, spread2, false), Hierarchy::kFlat);        // one rank per host
  EXPECT_EQ(resolved_hierarchy(Hierarchy::kAuto, packed4, true), Hierarchy::kFlat);         // NCCL's own
  EXPECT_EQ(resolved_hierarchy(Hierarchy::kAuto, packed4, false, true), Hierarchy::kFlat);  // reduce-scattered
  EXPECT_EQ(resolved_hierarchy(Hierarchy::kHost, packed2, false), Hierarchy::kHost);        // as asked
  EXPECT_EQ(resolved_hierarchy(Hierarchy::kFlat, packed4, false), Hierarchy::kFlat);
  for (Hierarchy h : {Hierarchy::kAuto, Hierarchy::kFlat, Hierarchy::kHost}) {
    EXPECT_EQ(parse_hierarchy(hierarchy_name(h)), h);
  }
  EXPECT_THROW(parse_hierarchy("tree"), std::invalid_argument);
}

}  // namespace
}  // namespace dlscale
