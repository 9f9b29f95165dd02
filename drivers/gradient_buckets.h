// How a gradient buffer is cut into buckets, declared once for everything that cuts one: the
// harness's MPI buckets (suite/comm/gradient_allreduce.h), the NCCL reducer of GPU drivers
// (drivers/gpu/gpu_step.cpp) and dlscale-project's estimate for files that do not record a case's
// buckets (project/cli/case_inputs.cpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace dlscale {

struct BucketRange {
  size_t first = 0;  ///< the bucket's first element in the buffer
  size_t count = 0;
};

/// The buckets reduced first and last hold about this many elements (1 MB of float32), and each
/// next one inwards twice as many, up to the bucket size.
constexpr size_t kFirstBucketElements = 250'000;

/// `elements` cut into contiguous buckets of about `bucket_elements` (at least 1), in buffer
/// order. Backward produces the last layers' gradients first and the buckets are reduced from
/// the last to the first, so:
/// - the buckets at the buffer's end, reduced first, are small: about kFirstBucketElements, then
///   twice as many each, up to the bucket size. The network starts on the last layer's gradients
///   as soon as they are in, not after a whole bucket's worth of backward. PyTorch DDP's first
///   bucket is 1 MiB, its next a whole one, and its network waits for that: on four hosts at
///   200 Mbit/s, ResNet-50's first 25 MB took backward 0.23 s, in which the link, the step's
///   bottleneck there, had nothing to carry.
/// - the buckets at the buffer's start grow the same way from it: the bucket reduced last, the
///   one whose whole reduction comes after backward, is small, and each one before it is final
///   early enough to cross while backward computes the first layers. Cut into whole buckets
///   from the end, the first layers' gradients were one bucket of up to the bucket size: on four
///   hosts at 300 Mbit/s ResNet-50's 21 MB remainder took 0.9-1.3 s after backward, while the
///   link had been idle before it, waiting for its first layer.
/// - the middle is cut into buckets of about the bucket size, the remainder first.
/// `unit_starts` (ascending) are the first elements of the ranges that become final together (a
/// layer's parameters, whose gradients backward finishes at once): buckets begin only there, at
/// the unit start nearest to each size, since cutting a range that is final at one time into
/// several buckets only adds rings that start together. A unit longer than the bucket size is cut
/// into buckets of that size from its end. Empty: every element may begin a bucket.
inline std::vector<BucketRange> cut_buckets(size_t elements, size_t bucket_elements,
                                            const std::vector<size_t>& unit_starts = {}) {
  bucket_elements = std::max<size_t>(bucket_elements, 1);
  // Where a bucket may begin: the unit starts, and every bucket size from the end of a longer unit.
  std::vector<size_t> points;
  if (!unit_starts.empty()) {
    points.push_back(0);
    for (size_t u = 0; u < unit_starts.size(); ++u) {
      const size_t start = std::min(unit_starts[u], elements);
      const size_t end = u + 1 < unit_starts.size() ? std::min(unit_starts[u + 1], elements) : elements;
      for (size_t p = end; p > start + bucket_elements; p -= bucket_elements) points.push_back(p - bucket_elements);
      points.push_back(start);
    }
    points.push_back(elements);
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end()), points.end());
  }
  // The point nearest `target` among those in [lowest, highest], of which there is at least one.
  const auto nearest = [&](size_t target, size_t lowest, size_t highest) {
    target = std::clamp(target, lowest, highest);
    if (points.empty()) return target;
    const auto above = std::lower_bound(points.begin(), points.end(), target);
    const bool has_up = above != points.end() && *above <= highest;
    const bool has_down = above != points.begin() && *std::prev(above) >= lowest;
    if (has_up && *above == target) return target;
    if (!has_down) return *above;
    const size_t down = *std::prev(above);
    return has_up && *above - target < target - down ? *above : down;
  };
  size_t low = 0, high = elements;
  std::vector<BucketRange> reduced_first, reduced_last;  // from the buffer's end and from its start
  const size_t first_size = std::min(kFirstBucketElements, bucket_elements);
  for (size_t size = first_size; size < bucket_elements && size < high - low;
       size = std::min(2 * size, bucket_elements)) {
    const size_t cut = nearest(high - size, low, high - 1);
    reduced_first.push_back({cut, high - cut});
    high = cut;
  }
  for (size_t size = first_size; size < bucket_elements && size < high - low;
       size = std::min(2 * size, bucket_elements)) {
    const size_t cut = nearest(low + size, low + 1, high);
    reduced_last.push_back({low, cut - low});
    low = cut;
  }
  std::vector<BucketRange> middle;  // from its end: whole buckets, the remainder last
  while (high > low) {
    const size_t cut = high - low > bucket_elements ? nearest(high - bucket_elements, low, high - 1) : low;
    middle.push_back({cut, high - cut});
    high = cut;
  }
  std::vector<BucketRange> out = reduced_last;
  out.insert(out.end(), middle.rbegin(), middle.rend());
  out.insert(out.end(), reduced_first.rbegin(), reduced_first.rend());
  return out;
}

/// A bucket is merged into the group reduced just before it only when it was final this much
/// earlier than that group's reduction began, as a share of the time from the step's start to
/// then: the spread of readiness from step to step, so that a bucket final just in time in the
/// step measured is not merged where, a little later in another step, it would hold the group up.
constexpr double kMergeMargin = 0.02;

/// `buckets` (cut_buckets' order) with runs of neighbours merged where the network had made them
/// wait anyway, from one measured step: `ready_s[i]` when bucket i and every bucket after it were
/// final, `started_s[i]` when its reduction began (seconds from the step's start, the latest over
/// the ranks). Going from the last bucket, reduced first, a bucket joins the group reduced just
/// before it when it was final before that group's first bucket began (by kMergeMargin) and the
/// group stays within `bucket_elements`: it was queued behind the group, so reducing it with the
/// group starts nothing later and saves one ring's start and drain. Where the link was the step's
/// bottleneck (four hosts at 200 Mbit/s, ResNet-50), the small buckets at the buffer's start,
/// which are there so that little is left after backward where the link keeps up, were all final
/// seconds before the link reached them, and each still cost a ring; where the link keeps up,
/// each bucket is final after the one before it began and nothing merges.
inline std::vector<BucketRange> merge_waiting(const std::vector<BucketRange>& buckets,
                                              const std::vector<double>& ready_s, const std::vector<double>& started_s,
                                              size_t bucket_elements) {
  std::vector<BucketRange> reversed;  // the groups, from the buffer's end
  double group_started = 0;
  for (size_t i = buckets.size(); i-- > 0;) {
    const bool joins = !reversed.empty() && ready_s[i] <= group_started * (1 - kMergeMargin) &&
                       reversed.back().count + buckets[i].count <= bucket_elements;
    if (joins) {
      reversed.back().first = buckets[i].first;
      reversed.back().count += buckets[i].count;
    } else {
      reversed.push_back(buckets[i]);
      group_started = started_s[i];
    }
  }
  return {reversed.rbegin(), reversed.rend()};
}

/// The index of the bucket of `buckets` (cut_buckets' order) that holds element `e`.
inline size_t bucket_holding(const std::vector<BucketRange>& buckets, size_t e) {
  const auto after =
      std::upper_bound(buckets.begin(), buckets.end(), e, [](size_t x, const BucketRange& b) { return x < b.first; });
  return static_cast<size_t>(after - buckets.begin()) - 1;
}

}  // namespace dlscale
