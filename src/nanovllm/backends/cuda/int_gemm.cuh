// The W4A16 / W8A16 tensor-core GEMMs' shared pieces (int_gemm.cu: the mma.sync kernel, the split
// reduction and the host entry; int_gemm_wgmma.cu: the Hopper kernel): the CTA tile, the kernels'
// parameters, and the epilogue that turns a tile's F32 sums (red: [BN][kRedPitch], x rows by weight
// rows, in shared memory) into outputs or a split's partials.
#pragma once
#include "nanovllm/backends/cuda/int_layout.cuh"
#include "nanovllm/backends/cuda/kernel_plan.h"
#include "nanovllm/backends/cuda/tma_desc.h"

namespace nanovllm::cuda {
namespace intgemm {

constexpr int BM = int(kIntGemmRows);  // weight rows of a CTA tile
constexpr int BN = int(kIntGemmCols);  // rows of x of a CTA tile
constexpr int kRedPitch = BM + 4;      // floats per row of the epilogue tile (2t * 132 % 32 = 8t: no conflicts)

struct GemmParams {
  const bf16* x;       // [M, K]
  const uint4* codes;  // int_layout.cuh
  const uint32_t* sz;  // int_layout.cuh
  void* out;           // [M, N] BF16 (or F32: f32_out)
  float* ws;           // splits > 1: [splits][RT][CT][BN][BM] F32 partials
  int M, N, K, G;      // N: outputs (silu: I)
  int NB;              // row blocks of the weight (silu: 2I / 16)
  int up_block;        // silu: I / 16, the first up block
  int RT, CT, splits;  // row tiles, column tiles (of x), K splits
  bool silu, f32_out;
};

// The outputs of rows m0 .. m0 + rows - 1 of x of tile (rt, ct) from get(m, i): the F32 sum of
// local x row m and local weight row i (i < BM; with silu the gate rows are i < BM / 2 and their up
// rows i + BM / 2). The CTA's threads stride the outputs, adjacent threads adjacent outputs of a row.
template <class Get>
__device__ __forceinline__ void gemm_epilogue(const GemmParams& p, int rt, int ct, int m0, int rows, Get get) {
  const int per = p.silu ? BM / 2 : BM;  // outputs of the tile per row of x
  for (int e = threadIdx.x; e < rows * per; e += blockDim.x) {
    const int m = m0 + e / per, i = e % per;
    const int row = ct * BN + m;
    const int64_t n = int64_t(rt) * per + i;
    if (row >= p.M || n >= p.N) continue;
    const int64_t o = int64_t(row) * p.N + n;
    if (p.silu)
      int_gemv_store<true>(get(m, i), get(m, i + BM / 2), static_cast<bf16*>(p.out) + o);
    else if (p.f32_out)
      int_gemv_store<false>(get(m, i), 0.f, static_cast<float*>(p.out) + o);
    else
      int_gemv_store<false>(get(m, i), 0.f, static_cast<bf16*>(p.out) + o);
  }
}

// The tile's sums red[m * kRedPitch + i] (every thread of the CTA calls this after a barrier that
// follows the last write to red): with splits, the whole tile as F32 into the split's slice of the
// workspace ([BN][BM]; int_gemm_reduce_kernel adds them), else the outputs.
__device__ __forceinline__ void gemm_finish(const GemmParams& p, const float* red, int rt, int ct, int split) {
  if (rt >= p.RT || ct >= p.CT) return;  // a padding tile (int_gemm_wgmma.cu's clusters, the wide form's)
  if (p.splits > 1) {
    float4* dst = reinterpret_cast<float4*>(p.ws + ((int64_t(split) * p.RT + rt) * p.CT + ct) * (BN * BM));
    for (int e = threadIdx.x; e < BN * BM / 4; e += blockDim.x) {
      const int m = e / (BM / 4), i4 = e % (BM / 4);
      dst[e] = *reinterpret_cast<const float4*>(red + m * kRedPitch + 4 * i4);
    }
    return;
  }
  gemm_epilogue(p, rt, ct, 0, BN, [&](int m, int i) { return red[m * kRedPitch + i]; });
}

}  // namespace intgemm

// The Hopper kernel (int_gemm_wgmma.cu) where kernel_plan.h's int_gemm_wgmma_applies: p as the
// mma.sync kernel's, except that p.x is x with each 16-column step's columns in the mma's k order
// (int_gemm_permute_x) and xmap its TMA descriptor (make_int_gemm_x_tma with the cluster's rows), in
// thread-block clusters of `cluster` (int_gemm_cluster_ok). Needs sm_90a.
void int_gemm_wgmma_launch(const intgemm::GemmParams& p, IntGemmCluster cluster, const TmaDesc& xmap, Stream st);
// Its wide form (int_gemm_wgmma_wide.cu: two column tiles a CTA, no clusters), p and xmap as above
// with one CTA a cluster.
void int_gemm_wgmma_wide_launch(const intgemm::GemmParams& p, const TmaDesc& xmap, Stream st);
// The wide form's tiles with the weights dequantized into shared memory by two more warpgroups and SS
// products (int_gemm_wgmma_ss.cu; one CTA an SM), p and xmap as above.
void int_gemm_wgmma_ss_launch(const intgemm::GemmParams& p, const TmaDesc& xmap, Stream st);
// Their shared-memory limits (once, by the backend's constructor, where sm_90a code exists).
void int_gemm_wgmma_init();
void int_gemm_wgmma_wide_init();
void int_gemm_wgmma_ss_init();
// out[m][16j + kk] = x[m][16j + c(kk)] with c the layout's column of mma k index kk (int_layout.cuh:
// BF16 pairs 0, 2, 4, 6, 1, 3, 5, 7 of each 16-column step); x, out [M, K], K % 16 == 0.
void int_gemm_permute_x(const bf16* x, bf16* out, int64_t M, int64_t K, Stream st);
// The TMA descriptor of a permuted x [M, K] for clusters of `cluster_rows` row tiles: boxes of 64
// columns x kIntGemmCols / cluster_rows rows, 128-byte swizzle.
TmaDesc make_int_gemm_x_tma(const bf16* x, int64_t M, int64_t K, int cluster_rows);

}  // namespace nanovllm::cuda
