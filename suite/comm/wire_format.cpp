#include "suite/comm/wire_format.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define DLSCALE_F16C 1
#endif

namespace dlscale {

namespace {

/// Runs kernel(first, count) over [0, n) in blocks, on the calling thread's OpenMP team.
template <class Kernel>
void by_blocks(size_t n, Kernel kernel) {
  constexpr size_t kBlock = size_t{1} << 14;
  const auto blocks = static_cast<int64_t>((n + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const size_t first = static_cast<size_t>(b) * kBlock;
    kernel(first, std::min(kBlock, n - first));
  }
}

#ifdef DLSCALE_F16C
__attribute__((target("avx,f16c"))) void to_fp16_f16c(const float* in, uint16_t* out, size_t n, float scale) {
  const __m256 s = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(in + i), s);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) out[i] = to_fp16(in[i] * scale);
}

__attribute__((target("avx,f16c"))) void from_fp16_f16c(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  }
  for (; i < n; ++i) out[i] = from_fp16(in[i]);
}

__attribute__((target("avx,f16c"))) void add_fp16_f16c(const uint16_t* in, uint16_t* sum, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    const __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sum + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(sum + i),
                     _mm256_cvtps_ph(_mm256_add_ps(a, b), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) sum[i] = to_fp16(from_fp16(in[i]) + from_fp16(sum[i]));
}
#endif

}  // namespace

bool fp16_in_hardware() {
#ifdef DLSCALE_F16C
  // CPUID leaf 1 (clang 14 knows no "f16c" for __builtin_cpu_supports): F16C and AVX, and the
  // operating system saving the AVX registers (OSXSAVE, then XCR0's SSE and AVX state bits).
  static const bool f16c = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
    if ((c & bit_F16C) == 0 || (c & bit_AVX) == 0 || (c & bit_OSXSAVE) == 0) return false;
    unsigned low = 0, high = 0;
    __asm__("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
    return (low & 6u) == 6u;
  }();
  return f16c;
#else
  return false;
#endif
}

void compress(const float* data, uint16_t* wire, size_t n, float scale, GradCompression c) {
  by_blocks(n, [&](size_t first, size_t count) {
    const float* in = data + first;
    uint16_t* out = wire + first;
#ifdef DLSCALE_F16C
    if (c == GradCompression::kFp16 && fp16_in_hardware()) {
      to_fp16_f16c(in, out, count, scale);
      return;
    }
#endif
    if (c == GradCompression::kFp16) {
      for (size_t i = 0; i < count; ++i) out[i] = to_fp16(in[i] * scale);
    } else {
      for (size_t i = 0; i < count; ++i) out[i] = to_bf16(in[i] * scale);
    }
  });
}

void widen(const uint16_t* wire, float* data, size_t n, GradCompression c) {
  by_blocks(n, [&](size_t first, size_t count) {
    const uint16_t* in = wire + first;
    float* out = data + first;
#ifdef DLSCALE_F16C
    if (c == GradCompression::kFp16 && fp16_in_hardware()) {
      from_fp16_f16c(in, out, count);
      return;
    }
#endif
    if (c == GradCompression::kFp16) {
      for (size_t i = 0; i < count; ++i) out[i] = from_fp16(in[i]);
    } else {
      for (size_t i = 0; i < count; ++i) out[i] = from_bf16(in[i]);
    }
  });
}

void add_in_format(const uint16_t* in, uint16_t* sum, size_t n, GradCompression c) {
#ifdef DLSCALE_F16C
  if (c == GradCompression::kFp16 && fp16_in_hardware()) {
    add_fp16_f16c(in, sum, n);
    return;
  }
#endif
  if (c == GradCompression::kFp16) {
    for (size_t i = 0; i < n; ++i) sum[i] = to_fp16(from_fp16(in[i]) + from_fp16(sum[i]));
  } else {
    for (size_t i = 0; i < n; ++i) sum[i] = to_bf16(from_bf16(in[i]) + from_bf16(sum[i]));
  }
}

}  // namespace dlscale
