// FP8 E4M3 (OCP "E4M3FN", as torch.float8_e4m3fn and CUDA's __nv_fp8_e4m3): sign, 4 exponent bits
// (bias 7), 3 mantissa bits; no infinities; S.1111.111 is NaN; the largest finite value is 448,
// the smallest subnormal 2^-9. The host reference of the FP8 KV cache (the CUDA kernels convert
// with the hardware's cvt.rn.satfinite, which these functions match).
#pragma once
#include <cmath>
#include <cstdint>

namespace nanovllm {

constexpr float kFp8E4M3Max = 448.0f;

// code -> value (NaN codes 0x7f / 0xff -> NaN).
inline float e4m3_to_f32(uint8_t c) {
  const int e = (c >> 3) & 15, m = c & 7;
  float a;
  if (e == 15 && m == 7)
    a = NAN;
  else if (e == 0)
    a = std::ldexp(float(m), -9);  // subnormal: m x 2^-9
  else
    a = std::ldexp(float(8 + m), e - 10);  // (1 + m/8) x 2^(e-7)
  return (c & 0x80) ? -a : a;
}

// value -> code: round to nearest even, saturating (|x| beyond 448, infinities included, gives
// +-448: __NV_SATFINITE); NaN gives 0x7f.
inline uint8_t f32_to_e4m3(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::fabs(x);
  if (a >= kFp8E4M3Max) return sign | 0x7e;
  if (a < 0.015625f)  // below 2^-6, the smallest normal: multiples of 2^-9 (8 rounds up to 2^-6 = code 8)
    return sign | uint8_t(std::nearbyint(a * 512.0f));
  int E = 0;
  const float f = std::frexp(a, &E);  // a = f x 2^E, f in [0.5, 1)
  int e = E - 1 + 7, m = int(std::nearbyint(16.0f * f - 8.0f));
  if (m == 8) m = 0, ++e;  // rounded up to the next power of two (below 448: e stays <= 15, m <= 6)
  return sign | uint8_t(e << 3) | uint8_t(m);
}

}  // namespace nanovllm
