// How gradient buffers are cut into buckets (drivers/gradient_buckets.h): from the buffer's end,
// so that the bucket reduced after backward, the first layers', holds only the remainder, and
// the first ones reduced, the last layers', are small.
#include "drivers/gradient_buckets.h"

#include <gtest/gtest.h>

namespace dlscale {
namespace {

std::vector<std::pair<size_t, size_t>> ranges(const std::vector<BucketRange>& buckets) {
  std::vector<std::pair<size_t, size_t>> out;
  for (const BucketRange& b : buckets) out.emplace_back(b.first, b.count);
  return out;
}

TEST(GradientBuckets, CutFromTheEndTheRemainderFirst) {
  using R = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(ranges(cut_buckets(13002, 5000)), (R{{0, 3002}, {3002, 5000}, {8002, 5000}}));
  EXPECT_EQ(ranges(cut_buckets(10000, 5000)), (R{{0, 5000}, {5000, 5000}}));
  EXPECT_EQ(ranges(cut_buckets(3, 5000)), (R{{0, 3}}));  // one bucket: the whole buffer
  EXPECT_EQ(ranges(cut_buckets(3, 0)), (R{{0, 1}, {1, 1}, {2, 1}}));
  EXPECT_TRUE(cut_buckets(0, 5).empty());
}

TEST(GradientBuckets, TheFirstReducedGrowFromOneMegabyteToTheBucketSize) {
  using R = std::vector<std::pair<size_t, size_t>>;
  const size_t f = kFirstBucketElements;
  // From the end: f, 2f, 4f, then whole buckets of 5f, the remainder first in the buffer.
  EXPECT_EQ(
      ranges(cut_buckets(25 * f, 5 * f)),
      (R{{0, 3 * f}, {3 * f, 5 * f}, {8 * f, 5 * f}, {13 * f, 5 * f}, {18 * f, 4 * f}, {22 * f, 2 * f}, {24 * f, f}}));
  // Growth stops where the buffer does: what is left before it is one bucket.
  EXPECT_EQ(ranges(cut_buckets(5 * f, 8 * f)), (R{{0, 2 * f}, {2 * f, 2 * f}, {4 * f, f}}));
  // A buffer of at most the first size: one bucket.
  EXPECT_EQ(ranges(cut_buckets(f, 8 * f)), (R{{0, f}}));
}

TEST(GradientBuckets, EveryElementInTheBucketThatHoldsIt) {
  for (const size_t elements : {size_t{1}, size_t{7}, size_t{13002}, 11 * kFirstBucketElements + 5}) {
    for (const size_t size : {size_t{1}, size_t{3}, size_t{5000}, size_t{20000}, 3 * kFirstBucketElements}) {
      const std::vector<BucketRange> buckets = cut_buckets(elements, size);
      size_t next = 0;  // the buckets tile the buffer in order
      for (const BucketRange& b : buckets) {
        EXPECT_EQ(b.first, next);
        EXPECT_GT(b.count, 0u);
        next += b.count;
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

}  // namespace
}  // namespace dlscale
