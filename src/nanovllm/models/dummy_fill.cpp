// Dummy weight values (dummy_fill.h). Start-up of `--load-format dummy` draws every weight here
// (~600 M values for Qwen3-0.6B): the AVX-512 variant runs both splitmix64 rounds on 8 counters at
// once and the float steps of sampling_uniform in the same order, so its values are the portable
// loop's bit for bit. Chosen with __builtin_cpu_supports, not an ifunc (target_clones' resolver runs
// before the sanitizers' runtimes are up).
#include "nanovllm/models/dummy_fill.h"

#include <immintrin.h>

#include "nanovllm/ops/sampling_noise.h"

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
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 30)), _mm512_set1_epi64(int64_t(0xbf58476d1ce4e5b9ull)));
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 27)), _mm512_set1_epi64(int64_t(0x94d049bb133111ebull)));
  return _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
}

// sampling_uniform(seed, 0, index) then (2u - 1) * a for the 8 counters in `index`: the same
// float operations as the scalar code (u's 24 bits are exact in a float; +0.5 rounds alike).
NANOVLLM_DQ_TARGET inline __m256 uniform_x8(__m512i seed, __m512i index, __m256 a) {
  const __m512i h = splitmix64_x8(_mm512_xor_si512(seed, splitmix64_x8(index)));
  const __m256 f = _mm256_cvtepi32_ps(_mm512_cvtepi64_epi32(_mm512_srli_epi64(h, 40)));
  const __m256 u = _mm256_mul_ps(_mm256_add_ps(f, _mm256_set1_ps(0.5f)), _mm256_set1_ps(1.0f / 16777216.0f));
  return _mm256_mul_ps(_mm256_sub_ps(_mm256_add_ps(u, u), _mm256_set1_ps(1.0f)), a);
}

NANOVLLM_DQ_TARGET void fill_avx512(uint64_t seed, uint64_t base, int64_t cols, float a, float* dst) {
  const __m512i s = _mm512_set1_epi64(int64_t(seed)), eight = _mm512_set1_epi64(8);
  const __m256 av = _mm256_set1_ps(a);
  __m512i index = _mm512_add_epi64(_mm512_set1_epi64(int64_t(base)), _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
  int64_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    _mm256_storeu_ps(dst + c, uniform_x8(s, index, av));
    index = _mm512_add_epi64(index, eight);
  }
  fill_portable(seed, base + uint64_t(c), cols - c, a, dst + c);
}

bool has_avx512dq() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                             __builtin_cpu_supports("avx512vl"); }
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
