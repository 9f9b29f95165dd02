// The 16-bit formats gradients may cross the network in (drivers/gradient_compression.h): every
// fp16 and bf16 value converts to float exactly and back to itself, and a float rounds to the
// nearest 16-bit value, ties to even, with fp16's overflow to infinity and its subnormals.
#include "drivers/gradient_compression.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "drivers/cpu/denormal_scope.h"
#include "suite/comm/wire_format.h"

namespace dlscale {
namespace {

bool is_nan16(uint16_t h, bool bf16) { return bf16 ? (h & 0x7fffu) > 0x7f80u : (h & 0x7fffu) > 0x7c00u; }

TEST(GradientCompression, NamesParseAndPrint) {
  for (GradCompression c : {GradCompression::kNone, GradCompression::kFp16, GradCompression::kBf16}) {
    EXPECT_EQ(parse_grad_compression(grad_compression_name(c)), c);
  }
  EXPECT_THROW(parse_grad_compression("fp8"), std::invalid_argument);
  EXPECT_EQ(wire_bytes(GradCompression::kNone), 4);
  EXPECT_EQ(wire_bytes(GradCompression::kFp16), 2);
}

TEST(GradientCompression, EverySixteenBitValueRoundTrips) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    if (is_nan16(bits, false)) {
      EXPECT_TRUE(std::isnan(from_fp16(bits)));
      EXPECT_TRUE(is_nan16(to_fp16(from_fp16(bits)), false));
    } else {
      EXPECT_EQ(to_fp16(from_fp16(bits)), bits) << std::hex << h;
    }
    if (is_nan16(bits, true)) {
      EXPECT_TRUE(is_nan16(to_bf16(from_bf16(bits)), true));
    } else {
      EXPECT_EQ(to_bf16(from_bf16(bits)), bits) << std::hex << h;
    }
  }
  EXPECT_EQ(from_fp16(0x3c00), 1.0f);
  EXPECT_EQ(from_fp16(0x7bff), 65504.0f);
  EXPECT_EQ(from_fp16(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(from_fp16(0x8400), -std::ldexp(1.0f, -14));
  EXPECT_EQ(from_bf16(0x3f80), 1.0f);
}

/// Between each two neighbouring finite non-negative 16-bit values: the midpoint goes to the even
/// one, anything above it to the upper, anything below to the lower.
template <class To, class From>
void expect_round_to_nearest_even(To to, From from, uint16_t last_finite) {
  for (uint16_t h = 0; h < last_finite; ++h) {
    const float lo = from(h), hi = from(static_cast<uint16_t>(h + 1));
    const float mid = lo + (hi - lo) / 2;  // exact: a float has the bits to spare
    const uint16_t even = (h & 1u) == 0 ? h : static_cast<uint16_t>(h + 1);
    ASSERT_EQ(to(mid), even) << h;
    ASSERT_EQ(to(std::nextafter(mid, hi)), h + 1) << h;
    ASSERT_EQ(to(std::nextafter(mid, lo)), h) << h;
    ASSERT_EQ(to(-mid), even | 0x8000u) << h;
  }
}

TEST(GradientCompression, FloatsRoundToNearestEven) {
  expect_round_to_nearest_even(to_fp16, from_fp16, 0x7bff);
  expect_round_to_nearest_even(to_bf16, from_bf16, 0x7f7f);
  // fp16's overflow: from half an ulp past the largest value, infinity.
  EXPECT_EQ(to_fp16(65519.99f), 0x7bff);
  EXPECT_EQ(to_fp16(65520.0f), 0x7c00);
  EXPECT_EQ(to_fp16(1e30f), 0x7c00);
  EXPECT_EQ(to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(to_fp16(std::ldexp(1.0f, -26)), 0);                   // under half the least subnormal
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to infinity
  EXPECT_TRUE(is_nan16(to_fp16(std::nanf("")), false));
  EXPECT_TRUE(is_nan16(to_bf16(std::nanf("")), true));
}

/// Every finite fp16 value and the midpoints, their neighbours and their negatives: what a float
/// can round to and from in fp16.
std::vector<float> fp16_probes() {
  std::vector<float> probes;
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    const float lo = from_fp16(h), hi = from_fp16(static_cast<uint16_t>(h + 1)), mid = lo + (hi - lo) / 2;
    for (float v : {lo, mid, std::nextafter(mid, hi), std::nextafter(mid, lo)}) {
      probes.push_back(v);
      probes.push_back(-v);
    }
  }
  for (float v : {65504.0f, 65519.99f, 65520.0f, 1e30f, std::numeric_limits<float>::infinity(), 1e-30f}) {
    probes.push_back(v);
    probes.push_back(-v);
  }
  return probes;
}

/// The buffer conversions (suite/comm/wire_format.h; F16C where the CPU has it) give the scalar
/// conversions' bits, also with the CPU flushing denormals (the harness's default on CPUs).
void expect_buffers_round_as_scalars(GradCompression c) {
  const std::vector<float> probes = fp16_probes();
  std::vector<uint16_t> wire(probes.size());
  compress(probes.data(), wire.data(), probes.size(), 1.0f, c);
  for (size_t i = 0; i < probes.size(); ++i) {
    ASSERT_EQ(wire[i], c == GradCompression::kFp16 ? to_fp16(probes[i]) : to_bf16(probes[i])) << probes[i];
  }
  std::vector<float> back(wire.size());
  widen(wire.data(), back.data(), wire.size(), c);
  for (size_t i = 0; i < wire.size(); ++i) {
    ASSERT_EQ(back[i], c == GradCompression::kFp16 ? from_fp16(wire[i]) : from_bf16(wire[i])) << wire[i];
  }
  std::vector<uint16_t> sum(wire.rbegin(), wire.rend());
  const std::vector<uint16_t> before = sum;
  add_in_format(wire.data(), sum.data(), sum.size(), c);
  for (size_t i = 0; i < sum.size(); ++i) {
    const uint16_t expected = c == GradCompression::kFp16 ? to_fp16(from_fp16(wire[i]) + from_fp16(before[i]))
                                                          : to_bf16(from_bf16(wire[i]) + from_bf16(before[i]));
    if (is_nan16(expected, c == GradCompression::kBf16)) {
      ASSERT_TRUE(is_nan16(sum[i], c == GradCompression::kBf16));
    } else {
      ASSERT_EQ(sum[i], expected) << wire[i] << " + " << before[i];
    }
  }
}

TEST(GradientCompression, BuffersRoundAsTheScalarConversions) {
  expect_buffers_round_as_scalars(GradCompression::kFp16);
  expect_buffers_round_as_scalars(GradCompression::kBf16);
  const DenormalScope flush(Denormals::kFlush, omp_get_max_threads());
  expect_buffers_round_as_scalars(GradCompression::kFp16);
  expect_buffers_round_as_scalars(GradCompression::kBf16);
}

}  // namespace
}  // namespace dlscale
