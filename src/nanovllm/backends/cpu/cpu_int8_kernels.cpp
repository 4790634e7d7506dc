// INT8 kernel variants (cpu_int8_kernels.h): one float recipe, three instruction sets.
#include "nanovllm/backends/cpu/cpu_int8_kernels.h"

#include <immintrin.h>

// GCC 12 flags the undefined vectors inside its own AVX-512 intrinsics (masked loads).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "nanovllm/backends/cpu/cpu_lane_sums.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::cpu {

namespace {

#define NANOVLLM_UNROLL _Pragma("GCC unroll 32")
#define NANOVLLM_AVX2 __attribute__((target("avx2,fma")))
#define NANOVLLM_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

constexpr int kMaxRows = 4;   // rows of x per pass over 4 weight rows (decode)
constexpr int kTileRows = 8;  // rows of x per pass over 2 weight rows (prefill)

// The scale of lane l's block in chunk k (0 past the row's last block).
inline float pair_scale(const float* xs, const float* ws, int64_t b, int64_t nb) {
  return b < nb ? xs[b] * ws[b] : 0.0f;
}

// ---- portable ----
float dot_portable(const int8_t* x, const float* xs, const int8_t* w, const float* ws, int64_t K) {
  const int64_t nb = q8_blocks(K);
  float acc[16] = {};
  for (int64_t k = 0; k < K; k += 64)
    for (int l = 0; l < 16; ++l) {
      int32_t s = 0;
      for (int64_t i = k + 4 * l; i < std::min(K, k + 4 * l + 4); ++i) s += int32_t(x[i]) * int32_t(w[i]);
      acc[l] = std::fma(float(s), pair_scale(xs, ws, k / 32 + l / 8, nb), acc[l]);
    }
  return lane_sum16(acc);
}

// ---- AVX2 ----
// 8 lanes of 4 products each: vpmaddubsw on |x| (<= 127) and w with x's sign (no saturation:
// 2 x 127 x 127 < 2^15), then pairs of 16-bit sums.
NANOVLLM_AVX2 inline __m256i dot4_avx2(__m256i x, __m256i w) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(w, x));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

NANOVLLM_AVX2 inline __m256i load32(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

NANOVLLM_AVX2 inline float reduce_halves(__m256 lo, __m256 hi) {
  const __m256 h = _mm256_add_ps(lo, hi);
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}

NANOVLLM_AVX2 float dot_avx2(const int8_t* x, const float* xs, const int8_t* w, const float* ws, int64_t K) {
  const int64_t nb = q8_blocks(K);
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  alignas(32) int8_t xt[64], wt[64];
  for (int64_t k = 0; k < K; k += 64) {
    const int8_t *xp = x + k, *wp = w + k;
    if (K - k < 64) {  // the short last chunk, zero-padded
      std::memset(xt, 0, 64), std::memset(wt, 0, 64);
      std::memcpy(xt, xp, size_t(K - k)), std::memcpy(wt, wp, size_t(K - k));
      xp = xt, wp = wt;
    }
    const __m256i i0 = dot4_avx2(load32(xp), load32(wp)), i1 = dot4_avx2(load32(xp + 32), load32(wp + 32));
    lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_set1_ps(pair_scale(xs, ws, k / 32, nb)), lo);
    hi = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), _mm256_set1_ps(pair_scale(xs, ws, k / 32 + 1, nb)), hi);
  }
  return reduce_halves(lo, hi);
}

// ---- AVX-512 VNNI ----
// NT rows of x against NR weight rows. vpdpbusd multiplies unsigned by signed bytes: x + 128 (u8)
// times w, started from -128 x (sum of w) per lane, is the exact signed sum.
template <int NT, int NR>
NANOVLLM_VNNI void tile_vnni(const int8_t* x, const float* xs, const int8_t* w, const float* ws, int64_t K, float* out,
                             int64_t ldo) {
  const int64_t nb = q8_blocks(K);
  const __m512i off = _mm512_set1_epi8(char(0x80)), zero = _mm512_setzero_si512();
  const __m512i pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);  // lanes 8-15: block 2c + 1
  __m512 acc[NT][NR];
  NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) NANOVLLM_UNROLL for (int r = 0; r < NR; ++r) acc[t][r] =
      _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 64) {
    const __mmask64 m = K - k >= 64 ? ~__mmask64(0) : (__mmask64(1) << (K - k)) - 1;
    const int64_t b = k / 32;
    const __mmask16 sm = nb - b >= 2 ? 3 : 1;
    __m512i wv[NR], wc[NR];
    __m512 wsv[NR];
    NANOVLLM_UNROLL for (int r = 0; r < NR; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(w + r * K + k) + 1024, _MM_HINT_T0);
      wv[r] = _mm512_maskz_loadu_epi8(m, w + r * K + k);
      wc[r] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, off, wv[r]));
      wsv[r] = _mm512_permutexvar_ps(pair, _mm512_maskz_loadu_ps(sm, ws + r * nb + b));
    }
    NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) {
      const __m512i xu = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, x + t * K + k), off);
      const __m512 xsv = _mm512_permutexvar_ps(pair, _mm512_maskz_loadu_ps(sm, xs + t * nb + b));
      NANOVLLM_UNROLL for (int r = 0; r < NR; ++r) {
        const __m512i s = _mm512_dpbusd_epi32(wc[r], xu, wv[r]);
        acc[t][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(xsv, wsv[r]), acc[t][r]);
      }
    }
  }
  NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) NANOVLLM_UNROLL for (int r = 0; r < NR; ++r) out[t * ldo + r] =
      lane_sum512(acc[t][r]);
}

using TileFn = void (*)(const int8_t*, const float*, const int8_t*, const float*, int64_t, float*, int64_t);
using DotFn = float (*)(const int8_t*, const float*, const int8_t*, const float*, int64_t);

Int8Isa detect() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512vnni"))
    return Int8Isa::Avx512Vnni;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Int8Isa::Avx2;
  return Int8Isa::Portable;
}

}  // namespace

Int8Isa detected_int8_isa() {
  static const Int8Isa isa = detect();
  return isa;
}

const char* int8_isa_name(Int8Isa isa) {
  switch (isa) {
    case Int8Isa::Avx512Vnni: return "avx512_vnni";
    case Int8Isa::Avx2: return "avx2";
    case Int8Isa::Portable: break;
  }
  return "portable";
}

void quantize_q8_row(const float* x, int64_t K, int8_t* codes, float* scales) {
  for (int64_t k0 = 0, b = 0; k0 < K; k0 += kQ8Block, ++b) {
    const int64_t k1 = std::min(K, k0 + kQ8Block);
    float amax = 0.0f;
    for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(x[k]));
    const float scale = amax / 127.0f;
    scales[b] = scale;
    for (int64_t k = k0; k < k1; ++k) {
      // Round to nearest even by the 1.5 x 2^23 trick (|v| <= 127.5: exact, and it vectorizes).
      const float v = scale > 0.0f ? x[k] / scale : 0.0f;
      const float r = (v + 12582912.0f) - 12582912.0f;
      codes[k] = int8_t(std::clamp(r, -127.0f, 127.0f));
    }
  }
}

void gemm_q8(const int8_t* xq, const float* xs, int64_t T, const int8_t* w, const float* ws, int64_t K, int64_t n0,
             int64_t n1, float* out, int64_t ldo, Int8Isa isa) {
  if (int(isa) > int(detected_int8_isa()))
    throw Error(std::string("cpu int8 kernels: this CPU cannot run the ") + int8_isa_name(isa) + " variant (it has " +
                int8_isa_name(detected_int8_isa()) + ")");
  const int64_t nb = q8_blocks(K);
  constexpr int64_t kBlockRows = 96;  // weight rows per block (in L2), a multiple of 2 and 4
  if (isa != Int8Isa::Avx512Vnni) {
    const DotFn dot = isa == Int8Isa::Avx2 ? dot_avx2 : dot_portable;
    for (int64_t b0 = n0; b0 < n1; b0 += kBlockRows)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t n = b0; n < std::min(n1, b0 + kBlockRows); ++n)
          out[t * ldo + n] = dot(xq + t * K, xs + t * nb, w + n * K, ws + n * nb, K);
    return;
  }
  static const TileFn rows4[kMaxRows] = {tile_vnni<1, 4>, tile_vnni<2, 4>, tile_vnni<3, 4>, tile_vnni<4, 4>};
  static const TileFn rows2[kTileRows] = {tile_vnni<1, 2>, tile_vnni<2, 2>, tile_vnni<3, 2>, tile_vnni<4, 2>,
                                          tile_vnni<5, 2>, tile_vnni<6, 2>, tile_vnni<7, 2>, tile_vnni<8, 2>};
  static const TileFn rows1[kTileRows] = {tile_vnni<1, 1>, tile_vnni<2, 1>, tile_vnni<3, 1>, tile_vnni<4, 1>,
                                          tile_vnni<5, 1>, tile_vnni<6, 1>, tile_vnni<7, 1>, tile_vnni<8, 1>};
  const bool wide = T > kMaxRows;
  const int64_t step = wide ? kTileRows : kMaxRows, nr = wide ? 2 : 4;
  for (int64_t b0 = n0; b0 < n1; b0 += kBlockRows) {
    const int64_t b1 = std::min(n1, b0 + kBlockRows);
    for (int64_t t0 = 0; t0 < T; t0 += step) {
      const int nt = int(std::min<int64_t>(step, T - t0));
      const TileFn fn = wide ? rows2[nt - 1] : rows4[nt - 1];
      const int8_t* x = xq + t0 * K;
      const float* s = xs + t0 * nb;
      int64_t n = b0;
      for (; n + nr <= b1; n += nr) fn(x, s, w + n * K, ws + n * nb, K, out + t0 * ldo + n, ldo);
      for (; n < b1; ++n) rows1[nt - 1](x, s, w + n * K, ws + n * nb, K, out + t0 * ldo + n, ldo);
    }
  }
}

}  // namespace nanovllm::cpu
