#include "workloads/data/synthetic.h"

#include <stdexcept>

#include <fmt/format.h>

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

void check_batch(const Workload& w, const Batch& batch, const std::string& who) {
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("{}: workload {}: {}", who, w.name, why));
  };
  if (batch.size < 1) fail("empty batch");
  const auto inputs = static_cast<size_t>(batch.size * w.input_size());
  if (w.input_kind == InputKind::kTokens) {
    if (batch.tokens.size() != inputs) fail(fmt::format("expected {} tokens, got {}", inputs, batch.tokens.size()));
    for (int64_t t : batch.tokens) {
      if (t < 0 || t >= w.vocab) fail(fmt::format("token {} outside [0, {})", t, w.vocab));
    }
  } else if (batch.features.size() != inputs) {
    fail(fmt::format("expected {} features, got {}", inputs, batch.features.size()));
  }
  if (batch.labels.size() != static_cast<size_t>(batch.size * w.labels_per_sample())) {
    fail(fmt::format("expected {} labels, got {}", batch.size * w.labels_per_sample(), batch.labels.size()));
  }
  const int64_t classes = w.loss == LossKind::kSigmoidBinaryCrossEntropy ? 2 : w.num_classes;
  for (int64_t label : batch.labels) {
    if (label < 0 || label >= classes) fail(fmt::format("label {} outside [0, {})", label, classes));
  }
}

}  // namespace dlscale
