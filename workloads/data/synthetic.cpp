#include "workloads/data/synthetic.h"

#include "workloads/random.h"

namespace dlscale {

namespace {
// Streams of the data generator, kept apart from the parameter streams (one per tensor).
constexpr uint64_t kFeatureStream = 1ULL << 40;
constexpr uint64_t kLabelStream = (1ULL << 40) + 1;
}  // namespace

Batch synthetic_batch(const Workload& w, int64_t batch_size, uint64_t seed, int rank) {
  Batch b;
  b.size = batch_size;
  b.sample_shape = w.input_shape;
  const uint64_t rank_seed = mix64(seed ^ (0x5851f42d4c957f2dULL * (static_cast<uint64_t>(rank) + 1)));
  const CounterRng features(rank_seed, kFeatureStream), labels(rank_seed, kLabelStream);
  const int64_t n = batch_size * w.input_size();
  b.features.resize(static_cast<size_t>(n));
  float* dst = b.features.data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(features.normal(static_cast<uint64_t>(i)));
  b.labels.resize(static_cast<size_t>(batch_size));
  for (int64_t i = 0; i < batch_size; ++i) {
    b.labels[static_cast<size_t>(i)] = labels.below(static_cast<uint64_t>(i), w.num_classes);
  }
  return b;
}

}  // namespace dlscale
