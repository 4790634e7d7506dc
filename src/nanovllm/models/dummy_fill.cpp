// Dummy weight values (dummy_fill.h). Start-up of `--load-format dummy` draws every weight here
// (~600 M values for Qwen3-0.6B): the AVX-512 variant runs both splitmix64 rounds on 8 counters at
// once and the float steps of sampling_uniform in the same order, so its values are the portable
// loop's bit for bit. Chosen with __builtin_cpu_supports, not an ifunc (target_clones' resolver runs
// before the sanitizers' runtimes are up).
#include "nanovllm/models/dummy_fill.h"

#include <immintrin.h>

#include "nanovllm/backends/sampling_noise.h"

// GCC 12 flags the undefined vectors inside its own AVX-512 intrinsics (_mm512_cvtepi64_epi32).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace nanovllm {

namespace {

void fill_portable(uint64_t seed, uint64_t base, int64_t cols, float a, float* dst) {
  for (int64_t c = 0; c < cols; ++c) dst[c] = (2.0f * sampling_uniform(seed, 0, base + uint64_t(c)) - 1.0f) * a;
}

#if defined(__x86_64__)
#define NANOVLLM_DQ_TARGET __attribute__((target("avx512f,avx512dq,avx512vl")))

NANOVLLM_DQ_TARGET inline __m512i splitmix64_x8(__m512i x) {
  x = _mm512_add_epi64(x, _mm512_set1_epi64(int64_t(0x9e3779b97f4a7c15ull)));
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 30)),
                         _mm512_set1_epi64(int64_t(0xbf58476d1ce4e5b9ull)));
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 27)),
                         _mm512_set1_epi64(int64_t(0x94d049bb133111ebull)));
  return _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
}

// The top 24 bits of sampling_uniform's hash for the 8 counters in `index` (position 0), in
// the low half of each 64-bit lane.
NANOVLLM_DQ_TARGET inline __m512i bits24_x8(__m512i seed, __m512i index) {
  return _mm512_srli_epi64(splitmix64_x8(_mm512_xor_si512(seed, splitmix64_x8(index))), 40);
}

// 16 values a pass: sampling_uniform's float steps then (2u - 1) * a, in the scalar code's order
// (the 24 bits are exact in a float; +0.5 rounds alike; 2u is exact, so a fused 2u - 1 is too).
NANOVLLM_DQ_TARGET void fill_avx512(uint64_t seed, uint64_t base, int64_t cols, float a, float* dst) {
  const __m512i s = _mm512_set1_epi64(int64_t(seed)), sixteen = _mm512_set1_epi64(16);
  const __m512 av = _mm512_set1_ps(a), half = _mm512_set1_ps(0.5f), scale = _mm512_set1_ps(1.0f / 16777216.0f);
  __m512i lo = _mm512_add_epi64(_mm512_set1_epi64(int64_t(base)), _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
  __m512i hi = _mm512_add_epi64(lo, _mm512_set1_epi64(8));
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  int64_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    const __m512i bits = _mm512_permutex2var_epi32(bits24_x8(s, lo), evens, bits24_x8(s, hi));
    const __m512 u = _mm512_mul_ps(_mm512_add_ps(_mm512_cvtepi32_ps(bits), half), scale);  // 24 bits: exact
    _mm512_storeu_ps(dst + c, _mm512_mul_ps(_mm512_sub_ps(_mm512_add_ps(u, u), _mm512_set1_ps(1.0f)), av));
    lo = _mm512_add_epi64(lo, sixteen);
    hi = _mm512_add_epi64(hi, sixteen);
  }
  fill_portable(seed, base + uint64_t(c), cols - c, a, dst + c);
}

bool has_avx512dq() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}
#endif

}  // namespace

void fill_uniform(uint64_t seed, uint64_t base, int64_t cols, float a, float* dst, bool vectorized) {
#if defined(__x86_64__)
  static const bool dq = has_avx512dq();
  if (vectorized && dq) return fill_avx512(seed, base, cols, a, dst);
#endif
  fill_portable(seed, base, cols, a, dst);
}

}  // namespace nanovllm
