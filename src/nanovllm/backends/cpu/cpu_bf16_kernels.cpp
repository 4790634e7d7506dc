// BF16-weight GEMV variants (cpu_bf16_kernels.h). A BF16 value is the top half of an FP32 one, so
// widening is a zero-extend and a 16-bit shift; the products are those of the exact path.
#include "nanovllm/backends/cpu/cpu_bf16_kernels.h"

#include <immintrin.h>

// GCC 12 flags the undefined vectors inside its own AVX-512 intrinsics (_mm512_reduce_add_ps).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <string>

#include "nanovllm/utils/dtype.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::cpu {

namespace {

// Unrolls a loop over a template-constant count early enough that GCC keeps arrays of vector
// accumulators in registers (without it GCC 12 stores every accumulator to the stack on every
// iteration: the store port, not the multiply-adds, bounds the kernel).
#define NANOVLLM_UNROLL _Pragma("GCC unroll 32")

constexpr int kMaxRows = 4;   // rows of x per pass over a weight row (decode)
constexpr int kTileRows = 8;  // rows of x per pass in the prefill GEMM

// ---- portable ----
template <int NT>
void row_portable(const float* x, int64_t ldx, const uint16_t* w, int64_t K, float* out, int64_t ldo) {
  float acc[NT][4] = {};
  int64_t k = 0;
  for (; k + 4 <= K; k += 4) {
    NANOVLLM_UNROLL for (int l = 0; l < 4; ++l) {
      const float wv = bf16_to_f32(w[k + l]);
      NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) acc[t][l] += x[t * ldx + k + l] * wv;
    }
  }
  NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) {
    float s = (acc[t][0] + acc[t][1]) + (acc[t][2] + acc[t][3]);
    for (int64_t kk = k; kk < K; ++kk) s += x[t * ldx + kk] * bf16_to_f32(w[kk]);
    out[t * ldo] = s;
  }
}

// ---- AVX2 + FMA ----
__attribute__((target("avx2,fma"))) inline __m256 widen8(const uint16_t* p) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}

__attribute__((target("avx2,fma"))) inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <int NT>
__attribute__((target("avx2,fma"))) void row_avx2(const float* x, int64_t ldx, const uint16_t* w, int64_t K, float* out,
                                                  int64_t ldo) {
  __m256 acc[NT][2];
  NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m256 w0 = widen8(w + k), w1 = widen8(w + k + 8);
    NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) {
      acc[t][0] = _mm256_fmadd_ps(_mm256_loadu_ps(x + t * ldx + k), w0, acc[t][0]);
      acc[t][1] = _mm256_fmadd_ps(_mm256_loadu_ps(x + t * ldx + k + 8), w1, acc[t][1]);
    }
  }
  NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) {
    float s = hsum8(_mm256_add_ps(acc[t][0], acc[t][1]));
    for (int64_t kk = k; kk < K; ++kk) s += x[t * ldx + kk] * bf16_to_f32(w[kk]);
    out[t * ldo] = s;
  }
}

// ---- AVX-512 ----
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 widen16(__m256i v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

template <int NT>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void row_avx512(const float* x, int64_t ldx, const uint16_t* w,
                                                                     int64_t K, float* out, int64_t ldo) {
  __m512 acc[NT][2];
  NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    const __m512 w0 = widen16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k)));
    const __m512 w1 = widen16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k + 16)));
    NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) {
      acc[t][0] = _mm512_fmadd_ps(_mm512_loadu_ps(x + t * ldx + k), w0, acc[t][0]);
      acc[t][1] = _mm512_fmadd_ps(_mm512_loadu_ps(x + t * ldx + k + 16), w1, acc[t][1]);
    }
  }
  for (; k < K; k += 16) {  // masked tail, 16 at a time
    const __mmask16 m = K - k >= 16 ? __mmask16(0xffff) : __mmask16((1u << (K - k)) - 1);
    const __m512 w0 = widen16(_mm256_maskz_loadu_epi16(m, w + k));
    NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) acc[t][0] =
        _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + t * ldx + k), w0, acc[t][0]);
  }
  NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) out[t * ldo] = _mm512_reduce_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]));
}

// NT rows of x against NR weight rows at once (decode: 8 or 4 weight rows, as many streams from
// memory in flight, software-prefetched ahead; prefill: 8 x 3 tiles, each widened weight used 8 times).
// Every output is the same 16-lane chain over K then one reduction, whatever NT and NR.
template <int NT, int NR>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void rows_avx512(const float* x, int64_t ldx, const uint16_t* w,
                                                                      int64_t K, float* out, int64_t ldo) {
  __m512 acc[NT][NR];
  NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) NANOVLLM_UNROLL for (int r = 0; r < NR; ++r) acc[t][r] =
      _mm512_setzero_ps();
  int64_t k = 0;
  for (; k < K; k += 16) {
    const __mmask16 m = K - k >= 16 ? __mmask16(0xffff) : __mmask16((1u << (K - k)) - 1);
    __m512 wv[NR];
    if constexpr (NR == 8) {
      // Decode: the next 8 rows (contiguous, 16 K bytes at K = 1024) into L2 as fast as these are
      // read (16 bytes of them per element of k), so each core keeps more lines in flight than its
      // L1 fill buffers allow (dev VM: ~10% more read bandwidth than L1 prefetches 512 bytes ahead).
      const char* next = reinterpret_cast<const char*>(w + 8 * K) + 16 * k;
      NANOVLLM_UNROLL for (int l = 0; l < 4; ++l) _mm_prefetch(next + 64 * l, _MM_HINT_T1);
    }
    NANOVLLM_UNROLL for (int r = 0; r < NR; ++r) {
      if constexpr (NR != 8) _mm_prefetch(reinterpret_cast<const char*>(w + r * K + k) + 512, _MM_HINT_T0);
      wv[r] = widen16(_mm256_maskz_loadu_epi16(m, w + r * K + k));
    }
    NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + t * ldx + k);
      NANOVLLM_UNROLL for (int r = 0; r < NR; ++r) acc[t][r] = _mm512_fmadd_ps(xv, wv[r], acc[t][r]);
    }
  }
  NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) NANOVLLM_UNROLL for (int r = 0; r < NR; ++r) out[t * ldo + r] =
      _mm512_reduce_add_ps(acc[t][r]);
}

#define NANOVLLM_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// NT rows of BF16 x against NR BF16 weight rows: 32 elements per vdpbf16ps. Every output is the
// same 16-lane chain over K then one reduction, whatever NT and NR: the tile changes loads, not sums.
template <int NT, int NR>
NANOVLLM_BF16_TARGET void rows_dp(const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t K, float* out,
                                  int64_t ldo) {
  __m512 acc[NT][NR];
  NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) NANOVLLM_UNROLL for (int r = 0; r < NR; ++r) acc[t][r] =
      _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 32) {
    const int64_t pairs = (K - k) / 2;
    const __mmask16 m = pairs >= 16 ? __mmask16(0xffff) : __mmask16((1u << pairs) - 1);
    __m512bh wv[NR];
    NANOVLLM_UNROLL for (int r = 0; r < NR; ++r) wv[r] = (__m512bh)_mm512_maskz_loadu_epi32(m, w + r * K + k);
    NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) {
      const __m512bh xv = (__m512bh)_mm512_maskz_loadu_epi32(m, x + t * ldx + k);
      NANOVLLM_UNROLL for (int r = 0; r < NR; ++r) acc[t][r] = _mm512_dpbf16_ps(acc[t][r], xv, wv[r]);
    }
  }
  NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) NANOVLLM_UNROLL for (int r = 0; r < NR; ++r) out[t * ldo + r] =
      _mm512_reduce_add_ps(acc[t][r]);
}

// One weight row (the rows left over by the 4-row blocks).
NANOVLLM_BF16_TARGET void row_dp(const uint16_t* x, int64_t ldx, int64_t nt, const uint16_t* w, int64_t K, float* out,
                                 int64_t ldo) {
  for (int64_t t = 0; t < nt; ++t) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 32) {
      const int64_t pairs = (K - k) / 2;
      const __mmask16 m = pairs >= 16 ? __mmask16(0xffff) : __mmask16((1u << pairs) - 1);
      acc = _mm512_dpbf16_ps(acc, (__m512bh)_mm512_maskz_loadu_epi32(m, x + t * ldx + k),
                             (__m512bh)_mm512_maskz_loadu_epi32(m, w + k));
    }
    out[t * ldo] = _mm512_reduce_add_ps(acc);
  }
}

// f32_to_bf16 on 16 lanes at once, bit for bit (denormals kept, NaNs made quiet): not
// vcvtne2ps2bf16, which flushes denormals to zero.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void round_avx512(const float* src, int64_t n, uint16_t* dst) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x400000);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(src + i));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    const __m512i r = _mm512_mask_or_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, odd)), nan, u, quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
  }
  for (; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

using DpFn = void (*)(const uint16_t*, int64_t, const uint16_t*, int64_t, float*, int64_t);

using RowsFn = void (*)(const float*, int64_t, const uint16_t*, int64_t, float*, int64_t);

using RowFn = void (*)(const float*, int64_t, const uint16_t*, int64_t, float*, int64_t);

RowFn row_fn(Isa isa, int nt) {
  static const RowFn portable[kMaxRows] = {row_portable<1>, row_portable<2>, row_portable<3>, row_portable<4>};
  static const RowFn avx2[kMaxRows] = {row_avx2<1>, row_avx2<2>, row_avx2<3>, row_avx2<4>};
  static const RowFn avx512[kMaxRows] = {row_avx512<1>, row_avx512<2>, row_avx512<3>, row_avx512<4>};
  switch (isa) {
    case Isa::Avx512Bf16:
    case Isa::Avx512: return avx512[nt - 1];
    case Isa::Avx2: return avx2[nt - 1];
    case Isa::Portable: break;
  }
  return portable[nt - 1];
}

Isa detect() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bf16"))
    return Isa::Avx512Bf16;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
  return Isa::Portable;
}

void check_isa(Isa isa) {
  if (int(isa) > int(detected_isa()))
    throw Error(std::string("cpu kernels: this CPU cannot run the ") + isa_name(isa) + " variant (it has " +
                isa_name(detected_isa()) + ")");
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void widen_avx512(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, widen16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

}  // namespace

Isa detected_isa() {
  static const Isa isa = detect();
  return isa;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512Bf16: return "avx512_bf16";
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    case Isa::Portable: break;
  }
  return "portable";
}

// Blocks of kBlockRows weight rows (64 x K BF16: in L2) against every 4 rows of x in turn, so
// weights come from memory once however many rows x has.
void gemv_bf16(const float* x, int64_t ldx, int64_t T, const uint16_t* w, int64_t K, int64_t n0, int64_t n1, float* out,
               int64_t ldo, Isa isa) {
  check_isa(isa);
  if (isa < Isa::Avx512) {
    constexpr int64_t kBlockRows = 64;
    for (int64_t b0 = n0; b0 < n1; b0 += kBlockRows) {
      const int64_t b1 = std::min(n1, b0 + kBlockRows);
      for (int64_t t0 = 0; t0 < T; t0 += kMaxRows) {
        const int nt = int(std::min<int64_t>(kMaxRows, T - t0));
        const RowFn fn = row_fn(isa, nt);
        for (int64_t n = b0; n < b1; ++n) fn(x + t0 * ldx, ldx, w + n * K, K, out + t0 * ldo + n, ldo);
      }
    }
    return;
  }
  static const RowsFn rows4[kMaxRows] = {rows_avx512<1, 4>, rows_avx512<2, 4>, rows_avx512<3, 4>, rows_avx512<4, 4>};
  static const RowsFn rows3[kTileRows] = {rows_avx512<1, 3>, rows_avx512<2, 3>, rows_avx512<3, 3>, rows_avx512<4, 3>,
                                          rows_avx512<5, 3>, rows_avx512<6, 3>, rows_avx512<7, 3>, rows_avx512<8, 3>};
  static const RowsFn rows1[kTileRows] = {rows_avx512<1, 1>, rows_avx512<2, 1>, rows_avx512<3, 1>, rows_avx512<4, 1>,
                                          rows_avx512<5, 1>, rows_avx512<6, 1>, rows_avx512<7, 1>, rows_avx512<8, 1>};
  // One or two rows of x (decode at batch 1-2): 8 weight rows at once, eight streams from memory in
  // flight, which reach the dev VM's copy bandwidth (bench/RESULTS.md:
  // "8 weight rows at once for 1-2 rows of x"); more rows of x keep 4 (their accumulators fill the
  // registers).
  static const RowsFn rows8[2] = {rows_avx512<1, 8>, rows_avx512<2, 8>};
  const bool wide = T > kMaxRows, narrow = T <= 2;
  const int64_t step = wide ? kTileRows : kMaxRows, nr = wide ? 3 : narrow ? 8 : 4;
  constexpr int64_t kBlockRows = 96;  // weight rows per block (in L2), a multiple of 3, 4 and 8
  for (int64_t b0 = n0; b0 < n1; b0 += kBlockRows) {
    const int64_t b1 = std::min(n1, b0 + kBlockRows);
    for (int64_t t0 = 0; t0 < T; t0 += step) {
      const int nt = int(std::min<int64_t>(step, T - t0));
      const RowsFn fn = wide ? rows3[nt - 1] : narrow ? rows8[nt - 1] : rows4[nt - 1];
      int64_t n = b0;
      for (; n + nr <= b1; n += nr) fn(x + t0 * ldx, ldx, w + n * K, K, out + t0 * ldo + n, ldo);
      for (; n < b1; ++n) rows1[nt - 1](x + t0 * ldx, ldx, w + n * K, K, out + t0 * ldo + n, ldo);
    }
  }
}

void gemm_bf16_dp(const uint16_t* xb, int64_t ldx, int64_t T, const uint16_t* w, int64_t K, int64_t n0, int64_t n1,
                  float* out, int64_t ldo) {
  check_isa(Isa::Avx512Bf16);
  if (K % 2 != 0) throw Error("gemm_bf16_dp: K must be even (got " + std::to_string(K) + ")");
  // Few rows of x (decode): 4 weight rows at once, four streams from memory. Many (prefill): tiles
  // of 8 rows of x by 3 weight rows (24 accumulators), each weight load used 8 times.
  static const DpFn rows4[kMaxRows] = {rows_dp<1, 4>, rows_dp<2, 4>, rows_dp<3, 4>, rows_dp<4, 4>};
  static const DpFn rows3[kTileRows] = {rows_dp<1, 3>, rows_dp<2, 3>, rows_dp<3, 3>, rows_dp<4, 3>,
                                        rows_dp<5, 3>, rows_dp<6, 3>, rows_dp<7, 3>, rows_dp<8, 3>};
  const bool wide = T > kMaxRows;
  const int64_t step = wide ? kTileRows : kMaxRows, nr = wide ? 3 : 4;
  constexpr int64_t kBlockRows = 96;  // weight rows per block (in L2), a multiple of 3 and 4
  for (int64_t b0 = n0; b0 < n1; b0 += kBlockRows) {
    const int64_t b1 = std::min(n1, b0 + kBlockRows);
    for (int64_t t0 = 0; t0 < T; t0 += step) {
      const int nt = int(std::min<int64_t>(step, T - t0));
      const DpFn fn = wide ? rows3[nt - 1] : rows4[nt - 1];
      int64_t n = b0;
      for (; n + nr <= b1; n += nr) fn(xb + t0 * ldx, ldx, w + n * K, K, out + t0 * ldo + n, ldo);
      for (; n < b1; ++n) row_dp(xb + t0 * ldx, ldx, nt, w + n * K, K, out + t0 * ldo + n, ldo);
    }
  }
}

void round_to_bf16(const float* src, int64_t n, uint16_t* dst) {
  if (detected_isa() >= Isa::Avx512) return round_avx512(src, n, dst);
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

void widen_bf16(const uint16_t* src, int64_t n, float* dst, Isa isa) {
  check_isa(isa);
  if (isa >= Isa::Avx512) return widen_avx512(src, n, dst);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

}  // namespace nanovllm::cpu
