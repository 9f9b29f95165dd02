// The CPU's own ceiling for bf16 against fp32: how many floating-point operations one core
// retires per second with its fp32 FMA (VFMADD231PS) and with its bf16 dot product (VDPBF16PS,
// AVX512-BF16), on registers only, so that no library, layout or memory traffic is measured.
//
//   build/current/bench/bench_cpu_bf16_ceiling [--seconds S]
//
// A bf16 matrix product cannot beat fp32 by more than this ratio on CPUs whose bf16 goes through
// VDPBF16PS (every AVX512-BF16 CPU without AMX): where it prints about 0.5, no bf16 product,
// however it is written, runs at more than about half the fp32 rate. AMX tiles are not measured here;
// `dlscale peak --precision fp32,bf16` measures oneDNN's matmul, which uses them where present.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <vector>

#include <immintrin.h>

namespace {

constexpr int kChains = 16;  // independent accumulators: more than latency × ports of either unit
constexpr long kRounds = 1 << 20;

// The sum of the accumulators' lanes (through memory: GCC 12's _mm512_reduce_add_ps warns).
__attribute__((target("avx512f"))) float lane_sum(const __m512* acc) {
  __m512 sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return std::accumulate(lanes, lanes + 16, 0.0f);
}

// Each round issues kChains instructions; the accumulators stay in registers (16 of 32 zmm).
__attribute__((target("avx512f"))) float fp32_fma_rounds(long rounds) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  __m512 x = _mm512_set1_ps(1.0f);
  const __m512 y = _mm512_set1_ps(1e-8f);
  for (long r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(x, y, acc[i]);
    __asm__ volatile("" : "+v"(x));  // keeps the loop from being folded
  }
  return lane_sum(acc);
}

__attribute__((target("avx512f,avx512bf16"))) float bf16_dot_rounds(long rounds) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1.0f), _mm512_set1_ps(1.0f));
  const __m512bh y = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-8f), _mm512_set1_ps(1e-8f));
  for (long r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], x, y);
    __asm__ volatile("" : "+v"(x));
  }
  return lane_sum(acc);
}

/// Median GFLOP/s over `repeats` runs of about `seconds` each; `flops_per_instruction` counts a
/// multiply and an add per product: 16 lanes × 2 for VFMADD231PS zmm, 16 lanes × 2 pairs × 2 for
/// VDPBF16PS zmm.
template <class Kernel>
double gflops(Kernel kernel, double flops_per_instruction, double seconds, int repeats) {
  using clock = std::chrono::steady_clock;
  volatile float sink = kernel(kRounds / 16);  // warm the unit up (AVX-512 frequency licence)
  long rounds = kRounds;
  for (;;) {  // size the run to about `seconds`
    const auto t0 = clock::now();
    sink = kernel(rounds);
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    if (s >= seconds / 4) {
      rounds = std::max(rounds, static_cast<long>(static_cast<double>(rounds) * seconds / s));
      break;
    }
    rounds *= 4;
  }
  std::vector<double> rates;
  for (int k = 0; k < repeats; ++k) {
    const auto t0 = clock::now();
    sink = kernel(rounds);
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    rates.push_back(static_cast<double>(rounds) * kChains * flops_per_instruction / s * 1e-9);
  }
  (void)sink;
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One core's fp32 FMA rate against its AVX512-BF16 dot-product rate"};
  double seconds = 0.5;
  int repeats = 5;
  app.add_option("--seconds", seconds, "length of one timed run")->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "timed runs per instruction (the median is printed)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  if (!__builtin_cpu_supports("avx512f")) {
    fmt::print(
        "no AVX-512 on this CPU: no bf16 dot-product instruction to compare (oneDNN 2.6 has no bf16 "
        "kernels below AVX-512)\n");
    return 0;
  }
  const double fp32 = gflops(fp32_fma_rounds, 32.0, seconds, repeats);
  fmt::print("fp32 VFMADD231PS zmm: {:8.1f} GFLOP/s on one core\n", fp32);
  if (!__builtin_cpu_supports("avx512bf16")) {
    fmt::print("no AVX512-BF16 on this CPU: oneDNN emulates bf16 with fp32 instructions\n");
    return 0;
  }
  const double bf16 = gflops(bf16_dot_rounds, 64.0, seconds, repeats);
  fmt::print("bf16 VDPBF16PS  zmm: {:8.1f} GFLOP/s on one core\n", bf16);
  fmt::print("bf16 / fp32: {:.2f} (the most a bf16 product can gain without AMX)\n", bf16 / fp32);
  return 0;
}
