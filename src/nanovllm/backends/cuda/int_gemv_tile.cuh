// One tile of the INT4/INT8 GEMVs v3, v4 and v5 (int_gemv_v3.cu, int_gemv_v4.cu, int_gemv_v5.cu): a warp's product of
// one K tile (TK = int_tile_k(kBits) columns, S = TK / 16 mma k-steps) of RB 16-row weight blocks
// (the gated MLP's gate and up blocks) with NT n-tiles of 8 rows of x, added to F32 accumulators:
//   acc[r][nt] += sum over the tile's groups of scale * sum_k (q_k - z) x_k.
//
// Fragments (mma.sync m16n8k16, int_layout.cuh's layout; lane = 4g + t):
//  * wq[r]: the lane's 16 bytes of codes of the tile (U4: word j is k-step j; U8: words 2j, 2j + 1);
//    ws[r][s]: the {scale, zero} words of rows g and g + 8 (SG = 1: the tile's one group; kGeneral:
//    SG = S, one per k-step).
//  * xt[nt] + it * TK: the lane's row of x in n-tile nt (B fragment column g) at its 4 columns of the
//    tile's first k-step; step j's B fragment is the 8 bytes 16 j columns on. kSharedX: x is the
//    normalized copy in shared memory (int_gemv_norm.cuh), else global memory read through __ldg. v3 advances its
//    pointers per tile (it = 0), v4 keeps the run's first and passes the tile's index in the run.
//  * acc[r][nt]: an mma C fragment (c0, c1: row g, x rows 8 nt + 2t, + 1; c2, c3: row g + 8).
// U4 codes become the BF16 integers 128 + q and the zero comes out through sum_k x_k (one more mma
// with an A of ones); U8 subtracts its zero in the fragment. kGeneral (groups that split a tile, K
// not a multiple of TK): scaled per k-step, and x past K (k0: the tile's first column) reads as
// zeros.
//
// Why one function: v4 is v3's arithmetic on a persistent grid, held to v3's outputs bit for bit
// (CudaIntWeights.V4EqualsV3BitForBit). Both kernels run this code for every tile, so their outputs
// are equal by construction and the arithmetic is changed in one place.
#pragma once
#include "nanovllm/backends/cuda/int_layout.cuh"
#include "nanovllm/backends/cuda/kernel_plan.h"
#include "nanovllm/backends/cuda/mma.cuh"

namespace nanovllm::cuda {

template <int kBits, bool kGeneral, int NT, int RB, int SG, bool kSharedX = false>
__device__ __forceinline__ void int_gemv_tile(const bf16* const (&xt)[NT], int it, int k0, int K, const uint4 (&wq)[RB],
                                              const uint32_t (&ws)[RB][SG][2], float (&acc)[RB][NT][4]) {
  constexpr int TK = int_tile_k(kBits), S = TK / kIntStepK;  // columns and k-steps of a tile
  constexpr bool kBias = kBits == 4;                         // codes as 128 + q, zero taken out by x sums
  static_assert(SG == (kGeneral ? S : 1), "scale words per tile and row: one per k-step or one a tile");
  const uint32_t ones[4] = {kBf16Ones, kBf16Ones, kBf16Ones, kBf16Ones};
  uint32_t magic = 0x43004300u;  // BF16 pair 128.0 (int4_fragment_biased)
  float part[RB][NT][4], xs[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      xs[nt][c] = 0.f;
#pragma unroll
      for (int r = 0; r < RB; ++r) part[r][nt][c] = 0.f;
    }
#pragma unroll
  for (int j = 0; j < S; ++j) {
    const int k = k0 + kIntStepK * j;
    uint2 xb[NT];  // general path: zeros past K (the last tile's padding)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const uint2* xp = reinterpret_cast<const uint2*>(xt[nt] + it * TK + kIntStepK * j);
      xb[nt] = (!kGeneral || k < K) ? (kSharedX ? *xp : __ldg(xp)) : make_uint2(0, 0);
    }
    if constexpr (kBias) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mma_bf16_16816(xs[nt], ones, xb[nt].x, xb[nt].y);
    }
#pragma unroll
    for (int r = 0; r < RB; ++r) {
      const uint32_t wv[4] = {wq[r].x, wq[r].y, wq[r].z, wq[r].w};
      const int sj = kGeneral ? j : 0;
      const float2 sz0 = int_scale_zero(ws[r][sj][0]), sz1 = int_scale_zero(ws[r][sj][1]);
      uint32_t a[4];
      if constexpr (kBias)
        int4_fragment_biased(wv[j], magic, a);
      else
        int8_fragment(wv[2 * j], wv[2 * j + 1], 8388608.f + sz0.y, 8388608.f + sz1.y, a);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mma_bf16_16816(part[r][nt], a, xb[nt].x, xb[nt].y);
      if (kGeneral || j == S - 1) {  // the group's sums, scaled per row (c0, c1: row g; c2, c3: g + 8)
        const float zz0 = kBias ? 128.f + sz0.y : 0.f, zz1 = kBias ? 128.f + sz1.y : 0.f;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
          int_scale_partials_biased(acc[r][nt], part[r][nt], xs[nt], sz0.x, zz0, sz1.x, zz1);
      }
    }
    if (kGeneral || j == S - 1) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) xs[nt][c] = 0.f;
    }
  }
}

// A row block's outputs from the W warps' F32 accumulators (the persistent GEMVs v4 and v5, one
// call per row block of the CTA's): each warp leaves its C fragments in rd (n-tile nt: c0, c1 =
// (row g, x rows 8 nt + 2t, + 1); c2, c3 = (row g + 8, the same)) and zeroes them, then after a
// barrier 16 x M threads add the W warps' sums in warp order and store out[m][blk * 16 + i]
// (kSilu: silu(gate) * up of the block's two row blocks). Warp jb % W starts the stores, so the
// warp that does them rotates with the block (the others go on with the next block's tiles). The
// caller guards rd's reuse (a barrier before the writes when it is not double-buffered).
template <int W, int RB, int NT, bool kSilu, class OutT>
__device__ __forceinline__ void int_gemv_block_sums(float (&rd)[W][RB][8 * NT][17], float (&acc)[RB][NT][4], int jb,
                                                    int M, int N, int blk, OutT* __restrict__ out) {
  constexpr int kThreads = W * 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int r = 0; r < RB; ++r)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      rd[warp][r][8 * nt + 2 * t][g] = acc[r][nt][0];
      rd[warp][r][8 * nt + 2 * t + 1][g] = acc[r][nt][1];
      rd[warp][r][8 * nt + 2 * t][g + 8] = acc[r][nt][2];
      rd[warp][r][8 * nt + 2 * t + 1][g + 8] = acc[r][nt][3];
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[r][nt][c] = 0.f;
    }
  __syncthreads();
  for (int e = (threadIdx.x + kThreads - 32 * (jb % W)) % kThreads; e < 16 * M; e += kThreads) {
    const int m = e / 16, i = e % 16, nrow = blk * 16 + i;
    if (nrow >= N) continue;
    float s = 0.f, v = 0.f;
#pragma unroll
    for (int wi = 0; wi < W; ++wi) {
      s += rd[wi][0][m][i];
      if constexpr (kSilu) v += rd[wi][RB - 1][m][i];
    }
    int_gemv_store<kSilu>(s, v, out + int64_t(m) * N + nrow);
  }
}

}  // namespace nanovllm::cuda
