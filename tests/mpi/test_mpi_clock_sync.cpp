// The clock synchronisation of the timelines under real ranks, which all run on this machine and
// so read one clock: the true offset between any two ranks is 0. Whatever the load, a ping-pong
// brackets the peer's clock read between its send and its receive, so a measured offset is
// within its bound of the truth: |offset| <= bound, for every pair and for the sums along the
// tree's paths. Nothing here depends on how fast the machine is.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <vector>

#include "suite/comm/clock_sync.h"
#include "tests/common/mpi_world.h"

namespace dlscale {
namespace {

/// Every rank's offset and bound, on every rank.
std::vector<ClockOffset> gathered(const ClockOffset& mine) {
  std::vector<double> all(3 * static_cast<size_t>(world_size()));
  const double values[3] = {mine.at_s, mine.offset_s, mine.bound_s};
  EXPECT_EQ(MPI_Allgather(values, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, MPI_COMM_WORLD), MPI_SUCCESS);
  std::vector<ClockOffset> out;
  for (size_t r = 0; r < all.size() / 3; ++r) out.push_back({all[3 * r], all[3 * r + 1], all[3 * r + 2]});
  return out;
}

TEST(ClockSync, RanksOfOneHostTakeRankZerosClockExactly) {
  // One host: nobody measures; every rank's offset and bound are rank 0's, 0.
  for (const ClockOffset& c : gathered(measure_clock_offset(MPI_COMM_WORLD))) {
    EXPECT_EQ(c.offset_s, 0.0);
    EXPECT_EQ(c.bound_s, 0.0);
  }
}

TEST(ClockSync, EveryOffsetOfTheTreeIsWithinItsBoundOfTheTruth) {
  // Every rank taken as a host of its own: at 3 and 4 ranks, rank 3's path is 3 -> 2 -> 0.
  const std::vector<ClockOffset> all = gathered(measure_clock_offset_tree(MPI_COMM_WORLD));
  EXPECT_EQ(all[0].offset_s, 0.0);
  EXPECT_EQ(all[0].bound_s, 0.0);
  for (size_t r = 1; r < all.size(); ++r) {
    SCOPED_TRACE(r);
    EXPECT_GT(all[r].bound_s, 0.0);                         // a real round trip
    EXPECT_LE(std::fabs(all[r].offset_s), all[r].bound_s);  // the truth, 0, lies within the bound
    EXPECT_TRUE(std::isfinite(all[r].at_s));
  }
  if (all.size() >= 4) {
    // A path of two pairs carries both bounds: rank 3's is at least as wide as rank 2's part.
    EXPECT_GE(all[3].bound_s, all[2].bound_s);
  }
}

}  // namespace
}  // namespace dlscale
