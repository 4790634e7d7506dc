// INT4 x INT8 kernel variants (cpu_int4_kernels.h): one float recipe, portable and AVX-512 VNNI.
#include "nanovllm/backends/cpu/cpu_int4_kernels.h"

#include <immintrin.h>

// GCC 12 flags the undefined vectors inside its own AVX-512 intrinsics (masked loads).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cmath>
#include <string>

#include "nanovllm/backends/cpu/cpu_int8_kernels.h"
#include "nanovllm/backends/cpu/cpu_lane_sums.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::cpu {

namespace {

#define NANOVLLM_UNROLL _Pragma("GCC unroll 32")
#define NANOVLLM_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

constexpr int kLanes = 16, kLaneK = 8;

// ---- portable: the recipe, element by element ----
float dot_portable(const Q4Activations& a, const uint8_t* w, const float* ws, const uint8_t* wz, int64_t K, int64_t G) {
  float acc[kLanes] = {};
  for (int64_t c = 0; c < a.chunks; ++c)
    for (int l = 0; l < kLanes; ++l) {
      const int64_t k0 = c * kQ4Chunk + kLaneK * l;
      if (k0 >= K) continue;  // the vector variant adds fma(0, 0, acc): acc unchanged
      int32_t d = 0;
      for (int i = 0; i < 4; ++i) {
        const uint8_t b = w[(k0 >> 1) + i];  // codes k0 + 2i (low nibble) and k0 + 2i + 1 (high)
        d += int32_t(a.codes[size_t(c * kQ4Chunk + 4 * l + i)]) * int32_t(b & 15);
        d += int32_t(a.codes[size_t(c * kQ4Chunk + 64 + 4 * l + i)]) * int32_t(b >> 4);
      }
      const int64_t g = k0 / G;
      const int32_t z = wz ? int32_t(wz[g]) : 8;
      const int32_t v = d - z * a.sums[size_t(c * kLanes + l)];
      acc[l] = std::fma(float(v), a.scale[size_t(c * kLanes + l)] * ws[g], acc[l]);
    }
  return lane_sum16(acc);
}

// ---- AVX-512 VNNI ----
// The lanes' group values of chunk c: G % 128 == 0 -> one broadcast; G 32 / 64 -> 4 / 2 groups
// spread over the lanes (lane l takes group 8l / G of the chunk's), 0 past the row's groups.
struct GroupSpread {
  int64_t G, groups;
  __m512i idx;
  NANOVLLM_VNNI explicit GroupSpread(int64_t g, int64_t K) : G(g), groups(K / g) {
    alignas(64) int32_t ix[kLanes];
    for (int l = 0; l < kLanes; ++l) ix[l] = G < kQ4Chunk ? int32_t(kLaneK * l / G) : 0;
    idx = _mm512_load_si512(ix);
  }
  NANOVLLM_VNNI __m512 load(const float* row, int64_t c) const {
    const int64_t g0 = c * kQ4Chunk / G;
    if (G >= kQ4Chunk) return _mm512_set1_ps(row[g0]);
    const int64_t n = std::min<int64_t>(kQ4Chunk / G, groups - g0);
    return _mm512_permutexvar_ps(idx, _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), row + g0));
  }
  NANOVLLM_VNNI __m512i load(const uint8_t* row, int64_t c) const {  // bytes widened to 32 bits
    const int64_t g0 = c * kQ4Chunk / G;
    if (G >= kQ4Chunk) return _mm512_set1_epi32(row[g0]);
    const int64_t n = std::min<int64_t>(kQ4Chunk / G, groups - g0);
    return _mm512_permutexvar_epi32(idx,
                                    _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(__mmask16((1u << n) - 1), row + g0)));
  }
};

// NT activation rows against NR weight rows (row r's codes at w + r * K / 2). One row of x (decode)
// takes 8 weight rows at a time with the next 8 prefetched into L2 (the GEMVs' GB/s at Qwen3-0.6B's
// shapes, bench/cpu_int4_bench.cpp: 26-37 against 14-28 with 4 rows and L1 prefetches); the tile
// changes loads, not sums.
template <int NT, int NR>
NANOVLLM_VNNI void tile_vnni(const Q4Activations* x, const uint8_t* w, const float* ws, const uint8_t* wz, int64_t K,
                             int64_t G, float* out, int64_t ldo) {
  const GroupSpread spread(G, K);
  const int64_t groups = K / G, chunks = x[0].chunks;
  const __m512i nib = _mm512_set1_epi8(0x0F), zero = _mm512_setzero_si512(), mid = _mm512_set1_epi32(8);
  __m512 acc[NT][NR];
  NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) NANOVLLM_UNROLL for (int r = 0; r < NR; ++r) acc[t][r] =
      _mm512_setzero_ps();
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t bytes = std::min<int64_t>(64, (K - c * kQ4Chunk) / 2);
    const __mmask64 m = bytes == 64 ? ~__mmask64(0) : (__mmask64(1) << bytes) - 1;
    __m512i lo[NR], hi[NR], zv[NR];
    __m512 sv[NR];
    if constexpr (NR == 8) {
      // One row of x (decode): the next 8 rows' codes (contiguous) into L2 as fast as these are
      // read, as the BF16 GEMV does (cpu_bf16_kernels.cpp): more lines in flight than L1's fill
      // buffers allow.
      const char* next = reinterpret_cast<const char*>(w + NR * (K / 2)) + NR * 64 * c;
      NANOVLLM_UNROLL for (int l = 0; l < NR; ++l) _mm_prefetch(next + 64 * l, _MM_HINT_T1);
    }
    NANOVLLM_UNROLL for (int r = 0; r < NR; ++r) {
      const uint8_t* p = w + r * (K / 2) + c * 64;
      if constexpr (NR != 8) _mm_prefetch(reinterpret_cast<const char*>(p) + 1024, _MM_HINT_T0);
      const __m512i v = _mm512_maskz_loadu_epi8(m, p);
      lo[r] = _mm512_and_si512(v, nib);
      hi[r] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
      sv[r] = spread.load(ws + r * groups, c);
      zv[r] = wz ? spread.load(wz + r * groups, c) : mid;
    }
    NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) {
      const int8_t* xc = x[t].codes.data() + c * kQ4Chunk;
      const __m512i xe = _mm512_loadu_si512(xc), xo = _mm512_loadu_si512(xc + 64);
      const __m512i sums = _mm512_loadu_si512(x[t].sums.data() + c * kLanes);
      const __m512 xs = _mm512_loadu_ps(x[t].scale.data() + c * kLanes);
      NANOVLLM_UNROLL for (int r = 0; r < NR; ++r) {
        const __m512i d = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, lo[r], xe), hi[r], xo);
        const __m512i v = _mm512_sub_epi32(d, _mm512_mullo_epi32(zv[r], sums));
        acc[t][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_mul_ps(xs, sv[r]), acc[t][r]);
      }
    }
  }
  NANOVLLM_UNROLL for (int t = 0; t < NT; ++t) NANOVLLM_UNROLL for (int r = 0; r < NR; ++r) out[t * ldo + r] =
      lane_sum512(acc[t][r]);
}

using TileFn = void (*)(const Q4Activations*, const uint8_t*, const float*, const uint8_t*, int64_t, int64_t, float*,
                        int64_t);

}  // namespace

bool q4_kernel_fits(int64_t K, int64_t G) {
  return K > 0 && K % 32 == 0 && G > 0 && K % G == 0 && (G == 32 || G == 64 || G % kQ4Chunk == 0);
}

bool q4_zero_points(const float* z, int64_t n, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float c = std::min(std::max(z[i], 0.0f), 255.0f);  // NaN stays NaN: unequal below
    if (!(c == z[i] && float(int32_t(c)) == c)) return false;
    out[i] = uint8_t(c);
  }
  return true;
}

void quantize_q4_activations(const float* x, int64_t K, Q4Activations& a) {
  a.K = K;
  a.chunks = (K + kQ4Chunk - 1) / kQ4Chunk;
  std::vector<int8_t> q(static_cast<size_t>(K));
  std::vector<float> s(size_t(q8_blocks(K)));
  quantize_q8_row(x, K, q.data(), s.data());
  a.codes.assign(size_t(a.chunks * kQ4Chunk), 0);
  a.scale.assign(size_t(a.chunks * kLanes), 0.0f);
  a.sums.assign(size_t(a.chunks * kLanes), 0);
  for (int64_t k = 0; k < K; ++k) {
    const int64_t c = k / kQ4Chunk, j = k % kQ4Chunk;
    a.codes[size_t(c * kQ4Chunk + (j & 1) * 64 + j / 2)] = q[size_t(k)];
    a.sums[size_t(c * kLanes + j / kLaneK)] += q[size_t(k)];
    a.scale[size_t(c * kLanes + j / kLaneK)] = s[size_t(k / kQ8Block)];
  }
}

void gemm_q4(const Q4Activations* x, int64_t T, const uint8_t* codes, const float* scale, const uint8_t* zero,
             int64_t K, int64_t G, int64_t n0, int64_t n1, float* out, int64_t ldo, bool vnni) {
  if (!q4_kernel_fits(K, G))
    throw Error("cpu int4 kernel: K " + std::to_string(K) + " and group " + std::to_string(G) + " do not fit");
  if (vnni && detected_int8_isa() != Int8Isa::Avx512Vnni)
    throw Error("cpu int4 kernel: this CPU cannot run the avx512_vnni variant");
  const int64_t groups = K / G, row = K / 2;
  if (!vnni) {
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = n0; n < n1; ++n)
        out[t * ldo + n] =
            dot_portable(x[t], codes + n * row, scale + n * groups, zero ? zero + n * groups : nullptr, K, G);
    return;
  }
  static const TileFn rows4[4] = {tile_vnni<1, 4>, tile_vnni<2, 4>, tile_vnni<3, 4>, tile_vnni<4, 4>};
  static const TileFn rows1[4] = {tile_vnni<1, 1>, tile_vnni<2, 1>, tile_vnni<3, 1>, tile_vnni<4, 1>};
  for (int64_t t0 = 0; t0 < T; t0 += 4) {
    const int64_t nt = std::min<int64_t>(4, T - t0);
    int64_t n = n0;
    if (T == 1)
      for (; n + 8 <= n1; n += 8)
        tile_vnni<1, 8>(x, codes + n * row, scale + n * groups, zero ? zero + n * groups : nullptr, K, G, out + n, ldo);
    for (; n + 4 <= n1; n += 4)
      rows4[nt - 1](x + t0, codes + n * row, scale + n * groups, zero ? zero + n * groups : nullptr, K, G,
                    out + t0 * ldo + n, ldo);
    for (; n < n1; ++n)
      rows1[nt - 1](x + t0, codes + n * row, scale + n * groups, zero ? zero + n * groups : nullptr, K, G,
                    out + t0 * ldo + n, ldo);
  }
}

}  // namespace nanovllm::cpu
