// The Hopper W4A16 GEMMs' in-register dequantization (int_gemm_wgmma.cu: 64 rows of x a CTA;
// int_gemm_wgmma_wide.cu: 128): a warp's 16 bytes of a code tile (int_layout.cuh: exactly its
// mma.sync / wgmma A fragments for the tile's 4 k-steps of 16) and its two rows' {scale, zero} words
// into BF16 A registers (q - z) * s, each rounded once as the dequantize path (int_linear.cu) rounds
// the weight; and the accumulators into the epilogue's tile.
//  * Per BF16 pair: one LOP3 (128 + q, BF16's exact magic-number form), HSUB2 minus 128 + z (exact),
//    then with s = hi + lo split into BF16 halves (F16 s has 11 significant bits: lo has at most 4,
//    so (q - z) lo is exact) HMUL2 and HFMA2: (q - z) hi + (q - z) lo rounded once.
#pragma once
#include "nanovllm/backends/cuda/int_gemm.cuh"
#include "nanovllm/backends/cuda/int_layout.cuh"

namespace nanovllm::cuda::intgemm {

// One row's dequantization constants: 128 + z and the scale as hi + lo, BF16 pairs.
struct U4Scale {
  uint32_t z2, hi2, lo2;
};
__device__ __forceinline__ U4Scale u4_scale(uint32_t word) {
  const float2 sz = int_scale_zero(word);  // {scale, zero}
  const bf16 hi = __float2bfloat16_rn(sz.x);
  const bf162 z2 = __float2bfloat162_rn(128.f + sz.y);
  const bf162 hi2 = __halves2bfloat162(hi, hi);
  const bf162 lo2 = __float2bfloat162_rn(sz.x - __bfloat162float(hi));
  return {*reinterpret_cast<const uint32_t*>(&z2), *reinterpret_cast<const uint32_t*>(&hi2),
          *reinterpret_cast<const uint32_t*>(&lo2)};
}

// The A registers of k-step word w (int_layout.cuh: register s holds rows r0 (s even) / r1 (odd)):
// BF16 pairs (q - z) * s, each rounded once.
__device__ __forceinline__ void u4_weights(uint32_t w, const U4Scale& r0, const U4Scale& r1, uint32_t (&a)[4]) {
  uint32_t v[4];
  int4_fragment_biased(w, 0x43004300u, v);
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const U4Scale& r = (s & 1) ? r1 : r0;
    const bf162 d = __hsub2(*reinterpret_cast<const bf162*>(&v[s]), *reinterpret_cast<const bf162*>(&r.z2));
    const bf162 lo = __hmul2(d, *reinterpret_cast<const bf162*>(&r.lo2));
    const bf162 o = __hfma2(d, *reinterpret_cast<const bf162*>(&r.hi2), lo);
    a[s] = *reinterpret_cast<const uint32_t*>(&o);
  }
}

// Keeps the A registers of a wgmma group allocated (the compiler cannot see the asynchronous read)
// until the group has been waited for.
__device__ __forceinline__ void keep(const uint32_t (&a)[4]) {
  asm volatile("" ::"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]));
}
__device__ __forceinline__ void keep(const uint32_t (&a)[4][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) keep(a[j]);
}

// The warp's A registers of code tile `c` (its 16 bytes) with the {scale, zero} words sw[g], sw[g + 8].
__device__ __forceinline__ void tile_weights(const uint4& c, const uint32_t* sw, int g, uint32_t (&a)[4][4]) {
  const U4Scale r0 = u4_scale(sw[g]), r1 = u4_scale(sw[g + 8]);
  u4_weights(c.x, r0, r1, a[0]);
  u4_weights(c.y, r0, r1, a[1]);
  u4_weights(c.z, r0, r1, a[2]);
  u4_weights(c.w, r0, r1, a[3]);
}

// A warp's wgmma accumulators (m64nN: mma.sync's C fragments of its 16 weight rows, N = 8 NJ rows
// of x) into the epilogue tile red[x row * kRedPitch + weight row] (int_gemm.cuh: gemm_finish).
template <int NJ>
__device__ __forceinline__ void store_acc(float* red, const float (&acc)[NJ][4], int warp, int lane) {
  const int row = 16 * warp + (lane >> 2), t = lane & 3;
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const int col = 8 * j + 2 * t;
    red[col * kRedPitch + row] = acc[j][0];
    red[(col + 1) * kRedPitch + row] = acc[j][1];
    red[col * kRedPitch + row + 8] = acc[j][2];
    red[(col + 1) * kRedPitch + row + 8] = acc[j][3];
  }
}

}  // namespace nanovllm::cuda::intgemm
