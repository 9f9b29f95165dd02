// How an accuracy run divides its data: the split, the epochs' orders and the shards are
// deterministic, cover every sample exactly once, and hold out round(fraction x N).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "suite/data/accuracy_data.h"

namespace dlscale {
namespace {

std::vector<int64_t> sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST(AccuracyData, PermutationIsOneAndDependsOnlyOnTheSeed) {
  const std::vector<int64_t> p = permutation(1000, 7);
  EXPECT_EQ(sorted(p), iota(1000));
  EXPECT_EQ(permutation(1000, 7), p);
  EXPECT_NE(permutation(1000, 8), p);
  EXPECT_NE(p, iota(1000));
}

TEST(AccuracyData, SplitHoldsOutTheRoundedFractionAndKeepsEverySampleOnce) {
  EXPECT_EQ(validation_count(7996, 0.2), 1599);  // 1599.2
  EXPECT_EQ(validation_count(10, 0.25), 3);      // 2.5 rounds away from zero
  const TrainValidationSplit s = split_training_set(7996, 0.2, 42);
  EXPECT_EQ(s.validation.size(), 1599u);
  EXPECT_EQ(s.train.size(), 7996u - 1599u);
  std::vector<int64_t> all = s.train;
  all.insert(all.end(), s.validation.begin(), s.validation.end());
  EXPECT_EQ(sorted(all), iota(7996));
  // The tail of the seed's permutation, as Keras holds out the tail of its data.
  const std::vector<int64_t> p = permutation(7996, 42);
  EXPECT_TRUE(std::equal(s.validation.begin(), s.validation.end(), p.end() - 1599));
}

TEST(AccuracyData, EachEpochShufflesTheTrainingSamplesOnly) {
  const TrainValidationSplit s = split_training_set(500, 0.2, 1);
  const std::vector<int64_t> e1 = epoch_order(s.train, 42, 1), e2 = epoch_order(s.train, 42, 2);
  EXPECT_EQ(sorted(e1), sorted(s.train));
  EXPECT_EQ(sorted(e2), sorted(s.train));
  EXPECT_NE(e1, e2);
  EXPECT_EQ(epoch_order(s.train, 42, 1), e1);
  EXPECT_NE(epoch_order(s.train, 43, 1), e1);  // another repeat, another order
}

TEST(AccuracyData, ShardsAreContiguousAndCoverTheSet) {
  for (int ranks : {1, 2, 3, 7}) {
    int64_t next = 0;
    for (int r = 0; r < ranks; ++r) {
      const Shard s = shard_of(1601, r, ranks);
      EXPECT_EQ(s.first, next);
      EXPECT_LE(s.count, 1601 / ranks + 1);
      EXPECT_GE(s.count, 1601 / ranks);
      next += s.count;
    }
    EXPECT_EQ(next, 1601);
  }
  EXPECT_EQ(shard_of(1, 1, 2).count, 0);  // fewer samples than ranks: some ranks evaluate none
}

}  // namespace
}  // namespace dlscale
