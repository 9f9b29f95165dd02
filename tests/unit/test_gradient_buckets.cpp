// How gradient buffers are cut into buckets (drivers/gradient_buckets.h): small at both ends, so
// that the network starts on the last layer's gradients early and little is left to reduce after
// backward; whole buckets between; never inside a range the model reports final at once; merged
// after a step only where the network made them wait anyway.
#include "drivers/gradient_buckets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>

namespace dlscale {
namespace {

using R = std::vector<std::pair<size_t, size_t>>;

R ranges(const std::vector<BucketRange>& buckets) {
  R out;
  for (const BucketRange& b : buckets) out.emplace_back(b.first, b.count);
  return out;
}

TEST(GradientBuckets, WholeBucketsFromTheEndTheRemainderFirst) {
  EXPECT_EQ(ranges(cut_buckets(13002, 5000)), (R{{0, 3002}, {3002, 5000}, {8002, 5000}}));
  EXPECT_EQ(ranges(cut_buckets(10000, 5000)), (R{{0, 5000}, {5000, 5000}}));
  EXPECT_EQ(ranges(cut_buckets(3, 5000)), (R{{0, 3}}));  // one bucket: the whole buffer
  EXPECT_EQ(ranges(cut_buckets(3, 0)), (R{{0, 1}, {1, 1}, {2, 1}}));
  EXPECT_TRUE(cut_buckets(0, 5).empty());
}

TEST(GradientBuckets, TheFirstAndTheLastReducedGrowFromOneMegabyteToTheBucketSize) {
  const size_t f = kFirstBucketElements;
  // From the end: f, 2f, 4f; from the start the same; whole buckets of 5f between, the
  // remainder first.
  EXPECT_EQ(ranges(cut_buckets(25 * f, 5 * f)), (R{{0, f},
                                                   {f, 2 * f},
                                                   {3 * f, 4 * f},
                                                   {7 * f, f},
                                                   {8 * f, 5 * f},
                                                   {13 * f, 5 * f},
                                                   {18 * f, 4 * f},
                                                   {22 * f, 2 * f},
                                                   {24 * f, f}}));
  // Growth stops where the buffer does: what is left is one bucket.
  EXPECT_EQ(ranges(cut_buckets(5 * f, 8 * f)), (R{{0, f}, {f, f}, {2 * f, 2 * f}, {4 * f, f}}));
  // A buffer of at most the first size: one bucket.
  EXPECT_EQ(ranges(cut_buckets(f, 8 * f)), (R{{0, f}}));
}

TEST(GradientBuckets, BucketsBeginOnlyWhereAUnitDoes) {
  const size_t f = kFirstBucketElements;
  // A language model's embedding, LSTM and classifier: each is final at one time in backward, so
  // each is one bucket, not 1, 2, 4 MB pieces that would start together.
  EXPECT_EQ(ranges(cut_buckets(24 * f, 25 * f, {0, 10 * f, 14 * f})),
            (R{{0, 10 * f}, {10 * f, 4 * f}, {14 * f, 10 * f}}));
  // A unit longer than the bucket size is cut into buckets of that size from its end.
  EXPECT_EQ(ranges(cut_buckets(12 * f, 5 * f, {0, 11 * f})), (R{{0, f}, {f, 5 * f}, {6 * f, 5 * f}, {11 * f, f}}));
}

TEST(GradientBuckets, EveryElementInTheBucketThatHoldsIt) {
  for (const size_t elements : {size_t{1}, size_t{7}, size_t{13002}, 11 * kFirstBucketElements + 5}) {
    for (const size_t size : {size_t{1}, size_t{3}, size_t{5000}, size_t{20000}, 3 * kFirstBucketElements}) {
      // Units of growing length from the buffer's start, and none (any element may begin a bucket).
      std::vector<size_t> units;
      for (size_t start = 0, length = 1; start < elements; start += length, length = 3 * length + 1) {
        units.push_back(start);
      }
      for (const std::vector<size_t>& unit_starts : {std::vector<size_t>{}, units}) {
        const std::vector<BucketRange> buckets = cut_buckets(elements, size, unit_starts);
        size_t next = 0;  // the buckets tile the buffer in order
        for (const BucketRange& b : buckets) {
          EXPECT_EQ(b.first, next);
          EXPECT_GT(b.count, 0u);
          next += b.count;
          // A bucket begins at a unit's start or, inside a unit longer than the bucket size, a
          // whole number of bucket sizes before the unit's end.
          if (unit_starts.empty()) continue;
          const auto unit = std::upper_bound(unit_starts.begin(), unit_starts.end(), b.first) - 1;
          const size_t unit_end = unit + 1 == unit_starts.end() ? elements : *(unit + 1);
          EXPECT_TRUE(b.first == *unit || (unit_end - b.first) % size == 0) << b.first;
        }
        EXPECT_EQ(next, elements);
        for (size_t e = 0; e < elements; e += 1 + elements / 97) {
          const BucketRange& b = buckets[bucket_holding(buckets, e)];
          EXPECT_LE(b.first, e);
          EXPECT_LT(e, b.first + b.count);
        }
      }
    }
  }
}

TEST(GradientBuckets, MergedOnlyWhereTheNetworkMadeThemWait) {
  // Five buckets of one element (buffer order: bucket 4 is reduced first).
  const std::vector<BucketRange> five{{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}};
  // The link kept up: each bucket final after the one before it began (at once, then). Nothing merges.
  EXPECT_EQ(ranges(merge_waiting(five, {5, 4, 3, 2, 1}, {5, 4, 3, 2, 1}, 10)), ranges(five));
  // The link was behind: buckets 0-2 final by 3 s, while bucket 3 began only at 6 s, behind bucket
  // 4. They join bucket 3's group; bucket 4, the first, is alone.
  EXPECT_EQ(ranges(merge_waiting(five, {3, 3, 3, 2, 1}, {9, 8, 7, 6, 1}, 10)), (R{{0, 4}, {4, 1}}));
  // Groups stay within the bucket size: a new one begins where the next would pass it.
  EXPECT_EQ(ranges(merge_waiting(five, {3, 3, 3, 2, 1}, {9, 8, 7, 6, 1}, 2)), (R{{0, 2}, {2, 2}, {4, 1}}));
  // Final just in time, within kMergeMargin of the group's start: not merged, since in another
  // step it may be final a little later and would then hold the group up.
  const std::vector<BucketRange> two{{0, 1}, {1, 1}};
  EXPECT_EQ(ranges(merge_waiting(two, {5.95, 1}, {6, 6}, 10)), ranges(two));
  EXPECT_EQ(ranges(merge_waiting(two, {5.8, 1}, {6, 6}, 10)), (R{{0, 2}}));
  // What counts is when the group began, its first bucket: bucket 2, final at 5 s, was final before
  // bucket 3 began (6 s) but not before the group of 3 and 4 did (4 s), so it begins the next one.
  EXPECT_EQ(ranges(merge_waiting(five, {5, 4, 5, 1, 1}, {9, 8, 7, 6, 4}, 10)), (R{{0, 3}, {3, 2}}));
  EXPECT_TRUE(merge_waiting({}, {}, {}, 10).empty());
}

TEST(GradientBuckets, BucketSizeInFloat32Elements) {
  EXPECT_EQ(bucket_elements_for(1), 250'000u);  // MB, not MiB: 1e6 bytes
  EXPECT_EQ(bucket_elements_for(0), 1u);        // at least one element
  EXPECT_EQ(bucket_elements_for(1e-9), 1u);
  EXPECT_EQ(bucket_elements_for(1e12), static_cast<size_t>(INT_MAX));  // one MPI or NCCL call's count
}

TEST(BucketSchedule, StartsStrictlyFromTheLastBucketWhateverTheReportOrder) {
  // Three buckets of 1 MB; a layer's report may cover several, or part of one.
  const size_t k = bucket_elements_for(1);
  BucketSchedule s(3 * k, 1);
  ASSERT_EQ(ranges(s.buckets()), (R{{0, k}, {k, k}, {2 * k, k}}));
  std::vector<size_t> started;
  const auto start = [&](size_t i) { started.push_back(i); };
  s.ready(0, k, start);  // the first bucket final first: it waits for the ones after it
  EXPECT_TRUE(started.empty());
  s.ready(2 * k, k / 2, start);  // half of the last
  EXPECT_TRUE(started.empty());
  s.ready(k + k / 2, k, start);  // the rest of the last and half of the middle: the last starts
  EXPECT_EQ(started, (std::vector<size_t>{2}));
  s.ready(k, k / 2, start);  // the middle's rest: it, then the first, which was waiting
  EXPECT_EQ(started, (std::vector<size_t>{2, 1, 0}));
  s.start_rest(start);  // nothing left
  EXPECT_EQ(started.size(), 3u);
  // A new step: all wait again; a backward that failed half-way starts the rest in the same order.
  started.clear();
  s.restart();
  s.ready(2 * k, k, start);
  s.start_rest(start);
  EXPECT_EQ(started, (std::vector<size_t>{2, 1, 0}));
  // Reports repeated or of nothing start nothing twice.
  started.clear();
  s.restart();
  s.ready(2 * k, k, start);
  s.ready(2 * k, k, start);
  s.ready(0, 0, start);
  EXPECT_EQ(started, (std::vector<size_t>{2}));
}

TEST(BucketSchedule, ReplacedBucketsWaitAgain) {
  const size_t k = bucket_elements_for(1);
  BucketSchedule s(3 * k, 1);
  s.replace({{0, 2 * k}, {2 * k, k}});
  std::vector<size_t> started;
  s.ready(0, 2 * k + k / 2, [&](size_t i) { started.push_back(i); });
  EXPECT_TRUE(started.empty());
  s.ready(2 * k + k / 2, k - k / 2, [&](size_t i) { started.push_back(i); });
  EXPECT_EQ(started, (std::vector<size_t>{1, 0}));
  EXPECT_EQ(s.bucket_elements(), k);
  EXPECT_TRUE(BucketSchedule().buckets().empty());
}

}  // namespace
}  // namespace dlscale
