// Element types and their conversions. BF16/F16 are stored as raw uint16_t bit patterns.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "nanovllm/utils/fp8.h"

namespace nanovllm {

// F8E4M3: one byte per element (the FP8 KV cache; utils/fp8.h converts). I8: signed 8-bit codes
// (--quantization int8 weights; their values need the scales beside them). U8 and U4: unsigned
// 8-bit and 4-bit codes of group-quantized integer weights (AWQ, GPTQ, compressed-tensors:
// backends/int_weights.h); U4 packs two codes per byte, element i in byte i / 2, the even element
// in the low nibble, so a U4 tensor's bytes are dtype_bytes(U4, numel) = ceil(numel / 2) and its
// rows (the last dimension) hold an even number of elements.
enum class DType : uint8_t { F32, BF16, F16, I32, I64, F8E4M3, I8, U8, U4 };

// Bytes of one element; 0 for U4 (half a byte: use dtype_bytes).

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
    case DType::I32: return 4;
    case DType::BF16:
    case DType::F16: return 2;
    case DType::I64: return 8;
    case DType::F8E4M3:
    case DType::I8:
    case DType::U8: return 1;
    case DType::U4: return 0;
  }
  return 0;
}

// Bytes of n elements of t (U4: two per byte, rounded up).
inline size_t dtype_bytes(DType t, size_t n) { return t == DType::U4 ? (n + 1) / 2 : n * dtype_size(t); }

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::F8E4M3: return "F8_E4M3";
    case DType::I8: return "I8";
    case DType::U8: return "U8";
    case DType::U4: return "U4";
  }
  return "?";
}

inline float bf16_to_f32(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round-to-nearest-even, NaN stays NaN (as torch does).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      u = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Converts n elements of a float-like dtype (F32/BF16/F16/F8E4M3) into float.
inline void convert_to_f32(const void* src, DType t, size_t n, float* dst) {
  if (n == 0) return;  // (an empty tensor's buffers may be null, which memcpy must not see)
  if (t == DType::F32) {
    std::memcpy(dst, src, n * 4);
  } else if (t == DType::BF16) {
    auto* s = static_cast<const uint16_t*>(src);
    for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
  } else if (t == DType::F16) {
    auto* s = static_cast<const uint16_t*>(src);
    for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
  } else if (t == DType::F8E4M3) {
    auto* s = static_cast<const uint8_t*>(src);
    for (size_t i = 0; i < n; ++i) dst[i] = e4m3_to_f32(s[i]);
  }
}

}  // namespace nanovllm
