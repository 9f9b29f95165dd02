// A counter-based random source: value i of stream s is a pure function of (seed, s, i), so
// any element can be generated independently (in parallel, on any rank) and the sequence never
// depends on the standard library's distribution implementations, which differ across vendors.
#pragma once

#include <cmath>
#include <cstdint>

namespace dlscale {

/// splitmix64's finaliser: a strong 64-bit mixing function.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class CounterRng {
 public:
  CounterRng(uint64_t seed, uint64_t stream) : key_(mix64(mix64(seed) ^ (stream * 0xd1b54a32d192ed03ULL))) {}

  uint64_t bits(uint64_t i) const { return mix64(key_ ^ mix64(i)); }

  /// Uniform in [0, 1) with 53 random bits.
  double uniform(uint64_t i) const { return static_cast<double>(bits(i) >> 11) * 0x1.0p-53; }

  /// Standard normal by Box-Muller on draws 2i and 2i+1.
  double normal(uint64_t i) const {
    const double u1 = 1.0 - uniform(2 * i);  // in (0, 1]: log is finite
    const double u2 = uniform(2 * i + 1);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

  /// Uniform integer in [0, n) for 0 < n < 2^32 (multiply-shift on the top 32 bits).
  int64_t below(uint64_t i, int64_t n) const {
    return static_cast<int64_t>(((bits(i) >> 32) * static_cast<uint64_t>(n)) >> 32);
  }

 private:
  uint64_t key_;
};

}  // namespace dlscale
