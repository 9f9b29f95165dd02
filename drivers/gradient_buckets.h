// How a gradient buffer is cut into buckets, and when each may start its reduction, declared once
// for everything that reduces one in buckets or estimates them: the
// harness's MPI buckets (suite/comm/gradient_allreduce.h), the NCCL reducer of GPU drivers
// (drivers/gpu/gpu_step.cpp) and dlscale-project's estimate for files that do not record a case's
// buckets (project/cli/case_inputs.cpp).
#pragma once

#include <algorithm>
#include <climits>
#include <cstddef>
#include <utility>
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

/// The float32 gradients in a bucket of `bucket_mb` MB: at least 1, and at most INT_MAX, the
/// largest count one MPI or NCCL call of the bucket takes on every library version.
inline size_t bucket_elements_for(double bucket_mb) {
  const double elements = bucket_mb * 1e6 / static_cast<double>(sizeof(float));
  return elements >= static_cast<double>(INT_MAX) ? size_t{INT_MAX}
                                                  : std::max<size_t>(1, static_cast<size_t>(elements));
}

/// Which buckets of a gradient buffer may start their reduction, step by step: the bookkeeping
/// that every reducer shares (the harness's MPI buckets, a GPU driver's NCCL ones), whatever moves
/// the bytes. A bucket starts once its elements, and those of every bucket after it, have been
/// reported final: strictly from the last bucket to the first, so that every rank starts the same
/// collectives in the same order, whichever order its model reports the gradients in (several
/// buckets of one layer come in one report), and also on a rank whose backward failed half-way
/// and starts the rest after it (start_rest).
class BucketSchedule {
 public:
  BucketSchedule() = default;
  /// `elements` cut into buckets of about `bucket_mb` MB (cut_buckets, `unit_starts` as there).
  BucketSchedule(size_t elements, double bucket_mb, const std::vector<size_t>& unit_starts = {})
      : bucket_elements_(bucket_elements_for(bucket_mb)),
        buckets_(cut_buckets(elements, bucket_elements_, unit_starts)) {
    restart();
  }

  const std::vector<BucketRange>& buckets() const { return buckets_; }
  size_t bucket_elements() const { return bucket_elements_; }
  /// Other buckets over the same buffer (merge_waiting's), from the next restart() on.
  void replace(std::vector<BucketRange> buckets) {
    buckets_ = std::move(buckets);
    restart();
  }
  /// A new step: every bucket waits for all its elements again.
  void restart() {
    pending_.resize(buckets_.size());
    for (size_t i = 0; i < buckets_.size(); ++i) pending_[i] = buckets_[i].count;
    next_ = buckets_.size();
  }
  /// Elements [first, first + count) are final: calls `start(index)` for each bucket that may
  /// start now, in the order they must start.
  template <class Start>
  void ready(size_t first, size_t count, Start&& start) {
    if (count == 0 || buckets_.empty()) return;
    const size_t end = first + count;
    for (size_t i = bucket_holding(buckets_, first); i < buckets_.size() && buckets_[i].first < end; ++i) {
      const BucketRange& b = buckets_[i];
      const size_t overlap = std::min(end, b.first + b.count) - std::max(first, b.first);
      pending_[i] -= std::min(pending_[i], overlap);
    }
    while (next_ > 0 && pending_[next_ - 1] == 0) start(--next_);
  }
  /// After backward: calls `start(index)` for every bucket not started yet, in the same order.
  template <class Start>
  void start_rest(Start&& start) {
    while (next_ > 0) start(--next_);
  }

 private:
  size_t bucket_elements_ = 1;        ///< the bucket size asked for
  std::vector<BucketRange> buckets_;  ///< in buffer order: the first starts last
  std::vector<size_t> pending_;       ///< per bucket, elements not reported final this step
  size_t next_ = 0;                   ///< buckets [0, next_) not started this step
};

}  // namespace dlscale
