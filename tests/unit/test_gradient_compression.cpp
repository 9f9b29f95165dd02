// The 16-bit formats gradients may cross the network in (drivers/gradient_compression.h): every
// fp16 and bf16 value converts to float exactly and back to itself, and a float rounds to the
// nearest 16-bit value, ties to even, with fp16's overflow to infinity and its subnormals.
#include "drivers/gradient_compression.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

namespace dlscale {
namespace {

bool is_nan16(uint16_t h, bool bf16) {
  return bf16 ? (h & 0x7fffu) > 0x7f80u : (h & 0x7fffu) > 0x7c00u;
}

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
  EXPECT_EQ(to_fp16(std::ldexp(1.0f, -26)), 0);  // under half the least subnormal
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to infinity
  EXPECT_TRUE(is_nan16(to_fp16(std::nanf("")), false));
  EXPECT_TRUE(is_nan16(to_bf16(std::nanf("")), true));
}

}  // namespace
}  // namespace dlscale
