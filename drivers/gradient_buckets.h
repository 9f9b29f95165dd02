// How a gradient buffer is cut into buckets, declared once for everything that cuts one: the
// harness's MPI buckets (suite/comm/gradient_allreduce.h), the NCCL reducer of GPU drivers
// (drivers/gpu/gpu_step.cpp) and dlscale-project's estimate of a recorded case
// (project/cli/case_inputs.cpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace dlscale {

struct BucketRange {
  size_t first = 0;  ///< the bucket's first element in the buffer
  size_t count = 0;
};

/// The bucket reduced first holds at most this many elements (1 MB of float32), and each next one
/// twice as many, up to the bucket size.
constexpr size_t kFirstBucketElements = 250'000;

/// `elements` cut into contiguous buckets of `bucket_elements` (at least 1), counted from the end
/// of the buffer, in buffer order. Backward produces the last layers' gradients first and the
/// buckets are reduced from the last to the first, so:
/// - the first bucket, the one reduced after all of backward, holds the remainder: only the first
///   layers' gradients are left to reduce when backward ends (as PyTorch DDP fills its buckets
///   from the last parameter). Cut from the start, that bucket would be a whole one: 25 MB of
///   ResNet-50's 102 MB, a quarter of the all-reduce exposed after backward however fast
///   backward's other buckets went.
/// - the last buckets, reduced first, are small: kFirstBucketElements, then twice as many each,
///   up to the bucket size. The network starts on the last layer's gradients as soon as they are
///   in, not after a whole bucket's worth of backward, and each next bucket is ready by the time
///   the one before it has crossed wherever backward produces gradients at least twice as fast
///   as the network reduces them. PyTorch DDP's first bucket is 1 MiB, its next a whole one, and
///   its network waits for that: on four hosts at 200 Mbit/s, ResNet-50's first 25 MB took
///   backward 0.23 s, in which the link, the step's bottleneck there, had nothing to carry.
inline std::vector<BucketRange> cut_buckets(size_t elements, size_t bucket_elements) {
  bucket_elements = std::max<size_t>(bucket_elements, 1);
  std::vector<BucketRange> first_reduced;  // from the buffer's end
  size_t end = elements;
  for (size_t size = std::min(kFirstBucketElements, bucket_elements); size < bucket_elements && size < end;
       size = std::min(2 * size, bucket_elements)) {
    end -= size;
    first_reduced.push_back({end, size});
  }
  std::vector<BucketRange> out;
  const size_t remainder = end % bucket_elements;
  if (remainder > 0) out.push_back({0, remainder});
  for (size_t first = remainder; first < end; first += bucket_elements) out.push_back({first, bucket_elements});
  out.insert(out.end(), first_reduced.rbegin(), first_reduced.rend());
  return out;
}

/// The index of the bucket of `buckets` (cut_buckets' order) that holds element `e`.
inline size_t bucket_holding(const std::vector<BucketRange>& buckets, size_t e) {
  const auto after =
      std::upper_bound(buckets.begin(), buckets.end(), e, [](size_t x, const BucketRange& b) { return x < b.first; });
  return static_cast<size_t>(after - buckets.begin()) - 1;
}

}  // namespace dlscale
