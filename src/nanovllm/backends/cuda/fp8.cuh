// E4M3 (OCP FP8) conversions on the device for the FP8 KV cache: float -> code rounds to nearest
// even and saturates to +-448 (cvt.rn.satfinite, as utils/fp8.h on the host); code -> value through
// the hardware's e4m3x2 -> f16x2 conversion (exact: every E4M3 value is an FP16 value).
#pragma once
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace nanovllm::cuda {

__device__ __forceinline__ uint8_t float_to_e4m3(float x) {
  return uint8_t(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

// 8 codes (8 bytes, the first in the lowest byte) -> 8 floats.
__device__ __forceinline__ void unpack8_e4m3(const uint2& u, float* f) {
  const __nv_fp8x2_storage_t* p = reinterpret_cast<const __nv_fp8x2_storage_t*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(p[i], __NV_E4M3)));
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

// 16 codes (one 16-byte load) -> 16 floats.
__device__ __forceinline__ void unpack16_e4m3(const uint4& u, float* f) {
  unpack8_e4m3(make_uint2(u.x, u.y), f);
  unpack8_e4m3(make_uint2(u.z, u.w), f + 8);
}

// 8 floats x s -> 8 codes.
__device__ __forceinline__ uint2 pack8_e4m3(const float* f, float s) {
  uint2 u;
  __nv_fp8x2_storage_t* p = reinterpret_cast<__nv_fp8x2_storage_t*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    p[i] = __nv_cvt_float2_to_fp8x2(make_float2(f[2 * i] * s, f[2 * i + 1] * s), __NV_SATFINITE, __NV_E4M3);
  return u;
}

}  // namespace nanovllm::cuda
