// FP32 vector helpers (cpu_vec.h).
#include "nanovllm/backends/cpu/cpu_vec.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "nanovllm/backends/cpu/cpu_bf16_kernels.h"

// GCC 12 flags the undefined vectors inside its own AVX-512 intrinsics (_mm512_reduce_add_ps).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace nanovllm::cpu {

namespace {

// Unrolled early so that GCC 12 keeps the arrays of accumulators in registers (as in
// cpu_bf16_kernels.cpp).
#define NANOVLLM_UNROLL _Pragma("GCC unroll 32")

__attribute__((target("avx512f,avx512bw,avx512vl"))) float dot_avx512(const float* a, const float* b, int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void axpy_avx512(float a, const float* x, float* y, int64_t n) {
  const __m512 av = _mm512_set1_ps(a);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m,
                          _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

// NQ queries (one or two) against four rows: every query's instructions are the same whatever NQ,
// so its sums are too; the rows are loaded once for both.
template <int NQ>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void dots4_avx512(const float* const* a, const float* const* rows,
                                                                       int64_t n, float* const* out) {
  __m512 s0[NQ][4], s1[NQ][4];
  NANOVLLM_UNROLL for (int q = 0; q < NQ; ++q) NANOVLLM_UNROLL for (int r = 0; r < 4; ++r) s0[q][r] = s1[q][r] =
      _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 a0[NQ], a1[NQ];
    NANOVLLM_UNROLL for (int q = 0; q < NQ; ++q) a0[q] = _mm512_loadu_ps(a[q] + i),
                                                 a1[q] = _mm512_loadu_ps(a[q] + i + 16);
    NANOVLLM_UNROLL for (int r = 0; r < 4; ++r) {
      const __m512 r0 = _mm512_loadu_ps(rows[r] + i), r1 = _mm512_loadu_ps(rows[r] + i + 16);
      NANOVLLM_UNROLL for (int q = 0; q < NQ; ++q) {
        s0[q][r] = _mm512_fmadd_ps(a0[q], r0, s0[q][r]);
        s1[q][r] = _mm512_fmadd_ps(a1[q], r1, s1[q][r]);
      }
    }
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    __m512 a0[NQ];
    NANOVLLM_UNROLL for (int q = 0; q < NQ; ++q) a0[q] = _mm512_maskz_loadu_ps(m, a[q] + i);
    NANOVLLM_UNROLL for (int r = 0; r < 4; ++r) {
      const __m512 r0 = _mm512_maskz_loadu_ps(m, rows[r] + i);
      NANOVLLM_UNROLL for (int q = 0; q < NQ; ++q) s0[q][r] = _mm512_fmadd_ps(a0[q], r0, s0[q][r]);
    }
  }
  // The four sums at once: pairs of lanes interleaved and added (4 rows x 4 lanes per 128-bit
  // block), then the four blocks added.
  NANOVLLM_UNROLL for (int q = 0; q < NQ; ++q) {
    __m512* s = s0[q];
    NANOVLLM_UNROLL for (int r = 0; r < 4; ++r) s[r] = _mm512_add_ps(s[r], s1[q][r]);
    const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(s[0], s[1]), _mm512_unpackhi_ps(s[0], s[1]));
    const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(s[2], s[3]), _mm512_unpackhi_ps(s[2], s[3]));
    const __m512 abcd = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))),
                                      _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))));
    const __m256 half = _mm256_add_ps(_mm512_castps512_ps256(abcd),
                                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(abcd), 1)));
    _mm_storeu_ps(out[q], _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1)));
  }
}

// y's 128-float chunks stay in eight registers (per query) while every row is added; each query's
// instructions are the same whatever NQ.
template <int NQ>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void weighted_sum_avx512(const float* const* p,
                                                                              const float* const* rows, int64_t count,
                                                                              int64_t n, float* const* y) {
  constexpr int kRegs = 8;
  for (int64_t d0 = 0; d0 < n; d0 += 16 * kRegs) {
    __mmask16 m[kRegs];
    __m512 acc[NQ][kRegs];
    NANOVLLM_UNROLL for (int c = 0; c < kRegs; ++c) {
      const int64_t left = n - d0 - 16 * c;
      m[c] = left >= 16 ? __mmask16(0xffff) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
      NANOVLLM_UNROLL for (int q = 0; q < NQ; ++q) acc[q][c] = _mm512_maskz_loadu_ps(m[c], y[q] + d0 + 16 * c);
    }
    for (int64_t j = 0; j < count; ++j) {
      const float* x = rows[j] + d0;
      __m512 pv[NQ];
      NANOVLLM_UNROLL for (int q = 0; q < NQ; ++q) pv[q] = _mm512_set1_ps(p[q][j]);
      NANOVLLM_UNROLL for (int c = 0; c < kRegs; ++c) {
        const __m512 xv = _mm512_maskz_loadu_ps(m[c], x + 16 * c);
        NANOVLLM_UNROLL for (int q = 0; q < NQ; ++q) acc[q][c] = _mm512_fmadd_ps(pv[q], xv, acc[q][c]);
      }
    }
    NANOVLLM_UNROLL for (int c = 0; c < kRegs; ++c) NANOVLLM_UNROLL for (int q = 0; q < NQ; ++q)
        _mm512_mask_storeu_ps(y[q] + d0 + 16 * c, m[c], acc[q][c]);
  }
}

// exp(x) for x <= 0 (softmax: x = score - max; clamped at -110, whose exp is 0 in FP32 as 2^-159
// rounds to 0): x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts), exp(r) by Cephes' expf
// polynomial, then scaled by 2^n.
__attribute__((target("avx512f"))) __m512 exp_nonpositive(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-110.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  for (float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

__attribute__((target("avx512f"))) void softmax_avx512(float* s, int64_t n, float scale) {
  const __m512 sc = _mm512_set1_ps(scale);
  __m512 mv = _mm512_set1_ps(-INFINITY);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + j), sc);
    _mm512_mask_storeu_ps(s + j, m, v);
    mv = _mm512_mask_max_ps(mv, m, mv, v);
  }
  const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(mv));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + j), mx));
    _mm512_mask_storeu_ps(s + j, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    _mm512_mask_storeu_ps(s + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + j), inv));
  }
}

bool has_avx512() { return detected_isa() >= Isa::Avx512; }

}  // namespace

float dot_f32(const float* a, const float* b, int64_t n) {
  if (has_avx512()) return dot_avx512(a, b, n);
  float s[4] = {};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int l = 0; l < 4; ++l) s[l] += a[i + l] * b[i + l];
  for (; i < n; ++i) s[0] += a[i] * b[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

void axpy_f32(float a, const float* x, float* y, int64_t n) {
  if (has_avx512()) return axpy_avx512(a, x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

namespace {

// dots_f32 for NQ queries (the AVX-512 path).
template <int NQ>
void dots_avx512(const float* const* q, const float* const* rows, int64_t count, int64_t n, float* const* out) {
  int64_t j = 0;
  for (; j + 4 <= count; j += 4) {
    float* o[NQ];
    for (int i = 0; i < NQ; ++i) o[i] = out[i] + j;
    dots4_avx512<NQ>(q, rows + j, n, o);
  }
  if (j == count) return;
  // The last 1-3 rows in a group of four (the last row repeated): every row's sum the same way.
  const float* tail[4];
  float sums[NQ][4];
  float* o[NQ];
  for (int i = 0; i < NQ; ++i) o[i] = sums[i];
  for (int r = 0; r < 4; ++r) tail[r] = rows[std::min<int64_t>(j + r, count - 1)];
  dots4_avx512<NQ>(q, tail, n, o);
  for (int i = 0; i < NQ; ++i)
    for (int64_t r = 0; j + r < count; ++r) out[i][j + r] = sums[i][r];
}

}  // namespace

void dots_f32(const float* q, const float* const* rows, int64_t count, int64_t n, float* out) {
  if (!has_avx512()) {
    for (int64_t j = 0; j < count; ++j) out[j] = dot_f32(q, rows[j], n);
    return;
  }
  dots_avx512<1>(&q, rows, count, n, &out);
}

void dots2_f32(const float* q0, const float* q1, const float* const* rows, int64_t count, int64_t n, float* out0,
               float* out1) {
  if (!has_avx512()) {
    dots_f32(q0, rows, count, n, out0);
    dots_f32(q1, rows, count, n, out1);
    return;
  }
  const float* q[2] = {q0, q1};
  float* out[2] = {out0, out1};
  dots_avx512<2>(q, rows, count, n, out);
}

void weighted_sum_f32(const float* p, const float* const* rows, int64_t count, int64_t n, float* y) {
  if (has_avx512()) return weighted_sum_avx512<1>(&p, rows, count, n, &y);
  for (int64_t j = 0; j < count; ++j) axpy_f32(p[j], rows[j], y, n);
}

void weighted_sum2_f32(const float* p0, const float* p1, const float* const* rows, int64_t count, int64_t n, float* y0,
                       float* y1) {
  if (!has_avx512()) {
    weighted_sum_f32(p0, rows, count, n, y0);
    weighted_sum_f32(p1, rows, count, n, y1);
    return;
  }
  const float* p[2] = {p0, p1};
  float* y[2] = {y0, y1};
  weighted_sum_avx512<2>(p, rows, count, n, y);
}

void softmax_exact(float* scores, int64_t n, float scale) {
  float m = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    scores[j] *= scale;
    m = std::max(m, scores[j]);
  }
  double denom = 0;
  for (int64_t j = 0; j < n; ++j) {
    scores[j] = std::exp(scores[j] - m);
    denom += scores[j];
  }
  for (int64_t j = 0; j < n; ++j) scores[j] = float(scores[j] / denom);
}

void softmax_fast(float* scores, int64_t n, float scale) {
  if (has_avx512()) return softmax_avx512(scores, n, scale);
  softmax_exact(scores, n, scale);
}

}  // namespace nanovllm::cpu
