// The one reduction order of the CPU's integer kernels (cpu_int8_kernels.cpp, cpu_int4_kernels.cpp):
// 16 F32 lanes summed 8 + 8, 4 + 4, 2 + 2, 1 + 1, element by element (portable variants) and in an
// AVX-512 register (vector variants), so that every variant of a kernel agrees bit for bit.
#pragma once
#include <immintrin.h>

namespace nanovllm::cpu {

inline float lane_sum16(const float* a) {
  float h[8], q[4];
  for (int i = 0; i < 8; ++i) h[i] = a[i] + a[i + 8];
  for (int i = 0; i < 4; ++i) q[i] = h[i] + h[i + 4];
  const float d0 = q[0] + q[2], d1 = q[1] + q[3];
  return d0 + d1;
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) inline float lane_sum512(__m512 a) {
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a), hi);
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}

}  // namespace nanovllm::cpu
