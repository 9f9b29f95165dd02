// How an accuracy run divides its data (docs/running.md, "Accuracy runs"): the held-out
// validation set, each epoch's shuffled order, each rank's slice of a global batch, each rank's
// shard of an evaluated set. Pure functions of sizes and seeds, the same on every rank, so that
// the ranks agree on every sample without exchanging indices.
#pragma once

#include <cstdint>
#include <vector>

namespace dlscale {

/// The training set of N samples split into what is trained on and what is held out.
struct TrainValidationSplit {
  std::vector<int64_t> train;       ///< sample indices trained on
  std::vector<int64_t> validation;  ///< the last round(fraction x N) samples of the permutation
};

/// How many of `n` samples `fraction` holds out: round(fraction x n), halves away from zero.
int64_t validation_count(int64_t n, double fraction);

/// A permutation of 0..n-1 drawn from `seed` (Fisher-Yates over splitmix64 draws: the same on
/// every platform and standard library).
std::vector<int64_t> permutation(int64_t n, uint64_t seed);

/// The split of a training set of `n` samples: a permutation drawn from `seed` (the case seed,
/// the same for every repeat, as Keras's fixed validation_split), its last
/// validation_count(n, fraction) samples held out.
TrainValidationSplit split_training_set(int64_t n, double fraction, uint64_t seed);

/// The order of the training samples in `epoch` (1-based) of the repeat seeded `seed`.
std::vector<int64_t> epoch_order(const std::vector<int64_t>& train, uint64_t seed, int epoch);

/// Rank `rank`'s contiguous shard [first, first + count) of `n` samples over `ranks` ranks: the
/// first n % ranks ranks take one sample more.
struct Shard {
  int64_t first = 0, count = 0;
};
Shard shard_of(int64_t n, int rank, int ranks);

}  // namespace dlscale
