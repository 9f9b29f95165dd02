// Gradients sent in 16 bits, as PyTorch DDP's fp16_compress_hook and bf16_compress_hook send them:
// each value is divided by the ranks' count, rounded to fp16 or bf16, summed over the ranks in that
// format and widened back to fp32, where the mean is applied by the optimiser as before. Half the
// bytes cross the network; what is lost is the rounding of every partial sum to 16 bits. Declared
// once for every reducer that compresses (the harness's MPI ring; suite/comm/ring_allreduce.h).
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace dlscale {

enum class GradCompression { kNone, kFp16, kBf16 };

/// "none", "fp16", "bf16".
inline const char* grad_compression_name(GradCompression c) {
  switch (c) {
    case GradCompression::kFp16:
      return "fp16";
    case GradCompression::kBf16:
      return "bf16";
    case GradCompression::kNone:
      break;
  }
  return "none";
}

/// The compression named `name`; throws std::invalid_argument for anything else.
inline GradCompression parse_grad_compression(const std::string& name) {
  if (name == "none") return GradCompression::kNone;
  if (name == "fp16") return GradCompression::kFp16;
  if (name == "bf16") return GradCompression::kBf16;
  throw std::invalid_argument("unknown gradient compression '" + name + "' (expected none, fp16 or bf16)");
}

/// Bytes one gradient takes on the network.
inline int wire_bytes(GradCompression c) { return c == GradCompression::kNone ? 4 : 2; }

namespace half_bits {

inline uint32_t bits_of(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}

inline float float_of(uint32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}

}  // namespace half_bits

/// `f` rounded to IEEE binary16, to nearest with ties to even, as a CPU's or a GPU's conversion
/// does: beyond 65504 to infinity, below 2^-14 to a subnormal; NaN stays NaN.
inline uint16_t to_fp16(float f) {
  using half_bits::bits_of;
  using half_bits::float_of;
  uint32_t x = bits_of(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return static_cast<uint16_t>(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to 65520 or more
  if (x < 0x38800000u) {
    // Below fp16's least normal: adding 0.5 leaves the value's multiple of 2^-24 (the subnormal
    // step) in the float's low bits, rounded by the float addition itself.
    const uint32_t rounded = bits_of(float_of(x) + 0.5f) - 0x3f000000u;
    return static_cast<uint16_t>(sign | rounded);
  }
  // Rebias the exponent (127 -> 15) and round the 23-bit fraction to 10 bits, ties to even.
  const uint32_t odd = (x >> 13) & 1u;
  x += 0xc8000fffu + odd;
  return static_cast<uint16_t>(sign | (x >> 13));
}

/// The fp16 value `h`, exactly.
inline float from_fp16(uint16_t h) {
  using half_bits::float_of;
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t magnitude = h & 0x7fffu;
  if (magnitude >= 0x7c00u) return float_of(sign | 0x7f800000u | ((magnitude & 0x3ffu) << 13));
  if (magnitude >= 0x0400u) return float_of(sign | ((magnitude << 13) + 0x38000000u));
  const float subnormal = static_cast<float>(magnitude) * 5.9604644775390625e-8f;  // x 2^-24
  return sign != 0 ? -subnormal : subnormal;
}

/// `f` rounded to bfloat16 (float32's upper 16 bits), to nearest with ties to even; NaN stays NaN.
inline uint16_t to_bf16(float f) {
  const uint32_t x = half_bits::bits_of(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/// The bf16 value `h`, exactly.
inline float from_bf16(uint16_t h) { return half_bits::float_of(static_cast<uint32_t>(h) << 16); }

}  // namespace dlscale
