#include "suite/data/accuracy_data.h"

#include <cmath>
#include <utility>

namespace dlscale {

namespace {

/// splitmix64 (Steele, Lea, Flood 2014): a well-mixed 64-bit stream from any seed.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

int64_t validation_count(int64_t n, double fraction) { return std::llround(fraction * static_cast<double>(n)); }

std::vector<int64_t> permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
  uint64_t state = seed;
  // The modulo's bias is below n / 2^64: nothing a data set of any size could show.
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(i + 1));
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(j)]);
  }
  return p;
}

TrainValidationSplit split_training_set(int64_t n, double fraction, uint64_t seed) {
  const std::vector<int64_t> p = permutation(n, seed);
  const int64_t held = validation_count(n, fraction);
  TrainValidationSplit s;
  s.train.assign(p.begin(), p.end() - held);
  s.validation.assign(p.end() - held, p.end());
  return s;
}

std::vector<int64_t> epoch_order(const std::vector<int64_t>& train, uint64_t seed, int epoch) {
  // A stream of its own per (seed, epoch): mixing both through splitmix64 keeps neighbouring
  // seeds and epochs apart.
  uint64_t state = seed;
  state = splitmix64(state) ^ static_cast<uint64_t>(epoch);
  const std::vector<int64_t> p = permutation(static_cast<int64_t>(train.size()), splitmix64(state));
  std::vector<int64_t> order(train.size());
  for (size_t i = 0; i < p.size(); ++i) order[i] = train[static_cast<size_t>(p[i])];
  return order;
}

Shard shard_of(int64_t n, int rank, int ranks) {
  const int64_t base = n / ranks, extra = n % ranks;
  Shard s;
  s.count = base + (rank < extra ? 1 : 0);
  s.first = rank * base + (rank < extra ? rank : extra);
  return s;
}

}  // namespace dlscale
