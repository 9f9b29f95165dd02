#include "workloads/data/synthetic.h"

#include "workloads/random.h"

namespace dlscale {

namespace {
// Streams of the data generator, kept apart from the parameter streams (one per tensor).
constexpr uint64_t kInputStream = 1ULL << 40;
constexpr uint64_t kLabelStream = (1ULL << 40) + 1;
}  // namespace

Batch synthetic_batch(const Workload& w, int64_t batch_size, uint64_t seed, int rank) {
  Batch b;
  b.size = batch_size;
  const uint64_t rank_seed = mix64(seed ^ (0x5851f42d4c957f2dULL * (static_cast<uint64_t>(rank) + 1)));
  const CounterRng inputs(rank_seed, kInputStream), labels(rank_seed, kLabelStream);
  const int64_t n = batch_size * w.input_size();
  if (w.input_kind == InputKind::kTokens) {
    b.tokens.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) b.tokens[static_cast<size_t>(i)] = inputs.below(static_cast<uint64_t>(i), w.vocab);
  } else {
    b.features.resize(static_cast<size_t>(n));
    float* dst = b.features.data();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(inputs.normal(static_cast<uint64_t>(i)));
  }
  const int64_t classes = w.loss == LossKind::kSigmoidBinaryCrossEntropy ? 2 : w.num_classes;
  b.labels.resize(static_cast<size_t>(batch_size * w.labels_per_sample()));
  for (size_t i = 0; i < b.labels.size(); ++i) b.labels[i] = labels.below(i, classes);
  return b;
}

}  // namespace dlscale
