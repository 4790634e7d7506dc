// FP8 E4M3 conversions (utils/fp8.h) against an independent reference: every code's value from the
// format's definition in double, and value -> code as the nearest of all 254 finite codes (ties to
// the even code), as CUDA's cvt.rn.satfinite does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "nanovllm/utils/dtype.h"
#include "nanovllm/utils/fp8.h"

namespace nanovllm {
namespace {

// The value of code c by the definition: (-1)^s x 2^(e-7) x (1 + m/8), subnormal 2^-6 x m/8.
double reference_value(int c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

bool is_nan_code(int c) { return (c & 0x7f) == 0x7f; }

// Nearest finite code by exhaustive search; ties to the even code (mantissa LSB 0); beyond 448
// saturates to +-448. Zero keeps its sign.
uint8_t reference_encode(float x) {
  if (std::isnan(x)) return 0x7f;
  int best = -1;
  double best_d = INFINITY;
  for (int c = 0; c < 256; ++c) {
    if (is_nan_code(c) || (std::signbit(x) != bool(c & 0x80))) continue;
    const double d = std::fabs(double(x) - reference_value(c));
    if (d < best_d || (d == best_d && (c & 1) == 0)) best = c, best_d = d;
  }
  return uint8_t(best);
}

TEST(Fp8E4M3, EveryCodeDecodesToItsDefinedValue) {
  int finite = 0;
  for (int c = 0; c < 256; ++c) {
    const float v = e4m3_to_f32(uint8_t(c));
    if (is_nan_code(c)) {
      EXPECT_TRUE(std::isnan(v)) << c;
      continue;
    }
    ++finite;
    EXPECT_EQ(double(v), reference_value(c)) << c;
    EXPECT_EQ(f32_to_e4m3(v), uint8_t(c)) << "round trip of code " << c;  // -0 too: 0x80
  }
  EXPECT_EQ(finite, 254);
}

TEST(Fp8E4M3, KnownCodes) {
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_f32(0xb8), -1.0f);
  EXPECT_EQ(e4m3_to_f32(0x40), 2.0f);
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x08), 0.015625f);         // smallest normal 2^-6
  EXPECT_EQ(e4m3_to_f32(0x01), 0.001953125f);      // smallest subnormal 2^-9
  EXPECT_EQ(e4m3_to_f32(0x07), 7 * 0.001953125f);  // largest subnormal
  EXPECT_EQ(f32_to_e4m3(0.3f), 0x2a);              // 0.3 -> 0.3125 (2^-2 x 1.25)
}

TEST(Fp8E4M3, SaturatesAndKeepsNaN) {
  for (float x : {448.0f, 449.0f, 464.0f, 480.0f, 1e6f, std::numeric_limits<float>::max(), INFINITY})
    EXPECT_EQ(f32_to_e4m3(x), 0x7e) << x;
  for (float x : {-448.0f, -500.0f, -INFINITY}) EXPECT_EQ(f32_to_e4m3(x), 0xfe) << x;
  EXPECT_EQ(f32_to_e4m3(NAN), 0x7f);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xff)));
  EXPECT_EQ(f32_to_e4m3(0.0f), 0x00);
  EXPECT_EQ(f32_to_e4m3(-0.0f), 0x80);
  EXPECT_EQ(f32_to_e4m3(1e-30f), 0x00);  // underflow to zero
  EXPECT_EQ(f32_to_e4m3(-1e-30f), 0x80);
}

TEST(Fp8E4M3, RoundsToNearestEvenLikeExhaustiveSearch) {
  // Every midpoint between neighbouring codes (the ties), points just beside them, and random values.
  for (int c = 0; c < 0x7e; ++c) {
    const double lo = reference_value(c), hi = reference_value(c + 1), mid = (lo + hi) / 2;
    for (double x : {mid, std::nextafter(mid, lo), std::nextafter(mid, hi), lo, hi}) {
      const float f = float(x);
      EXPECT_EQ(f32_to_e4m3(f), reference_encode(f)) << "x=" << x << " between codes " << c << ", " << c + 1;
      EXPECT_EQ(f32_to_e4m3(-f), reference_encode(-f)) << "x=" << -x;
    }
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> expo(-12, 9.5f), sign(-1, 1);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::copysign(std::exp2(expo(rng)), sign(rng));
    ASSERT_EQ(f32_to_e4m3(x), reference_encode(x)) << x;
  }
}

TEST(Fp8E4M3, DTypeAndConversion) {
  EXPECT_EQ(dtype_size(DType::F8E4M3), 1u);
  EXPECT_STREQ(dtype_name(DType::F8E4M3), "F8_E4M3");
  const uint8_t codes[3] = {0x38, 0xc0, 0x7e};
  float out[3];
  convert_to_f32(codes, DType::F8E4M3, 3, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 448.0f);
}

}  // namespace
}  // namespace nanovllm
