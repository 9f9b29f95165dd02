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

/// `elements` cut into contiguous buckets of `bucket_elements` (at least 1), counted from the end
/// of the buffer, in buffer order. Backward produces the last layers' gradients first and the
/// buckets are reduced from the last to the first, so the first bucket, the one reduced after all
/// of backward, holds the remainder: only the first layers' gradients are left to reduce when
/// backward ends (as PyTorch DDP fills its buckets from the last parameter). Cut from the start,
/// that bucket would be a whole one: 25 MB of ResNet-50's 102 MB, a quarter of the all-reduce
/// exposed after backward however fast backward's other buckets went.
inline std::vector<BucketRange> cut_buckets(size_t elements, size_t bucket_elements) {
  bucket_elements = std::max<size_t>(bucket_elements, 1);
  std::vector<BucketRange> out;
  const size_t remainder = elements % bucket_elements;
  if (remainder > 0) out.push_back({0, remainder});
  for (size_t first = remainder; first < elements; first += bucket_elements) out.push_back({first, bucket_elements});
  return out;
}

/// The index of the bucket of `buckets` (cut_buckets' order) that holds element `e`.
inline size_t bucket_holding(const std::vector<BucketRange>& buckets, size_t e) {
  const auto after =
      std::upper_bound(buckets.begin(), buckets.end(), e, [](size_t x, const BucketRange& b) { return x < b.first; });
  return static_cast<size_t>(after - buckets.begin()) - 1;
}

}  // namespace dlscale
