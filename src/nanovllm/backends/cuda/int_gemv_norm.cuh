// The decoder layer's add + RMSNorm as the prologue of the INT GEMVs v3 and v4 (int_gemv_v3.cu,
// int_gemv_v4.cu; the plan: kernel_plan.h, int_gemv_norm_fuses): for the M <= 8 rows of x
//   h = bf16(x + residual),  xn = bf16(bf16(h / rms(h)) * norm_w),
// xn into the CTA's shared memory as [M][ld] BF16 (ld = int_gemv_norm_ld(K): K + 16, so the B
// fragments of 8 rows, 8 bytes a lane at row g and column 4t, fall in 32 distinct banks a half
// warp), and h into residual_out, each 16-byte chunk by one CTA of the grid (every CTA reads the
// residual: none may overwrite it). The rounding is add_rms_norm's and gemv.cu's GemvNorm's; the
// sum of squares goes in another order (per thread, then warps), so 1 / rms may differ in its last
// bit from the separate kernel's.
//
// Why: at batch-1 decode the separate add_rms_norm kernel costs ~3 us of a ~2.3 ms step, twice a
// layer; here every CTA pays 4MK bytes of L2 reads (x and residual) and two barriers, while its
// ring of codes, loaded before griddepcontrol.wait, streams from DRAM.
//
// Threads: the CTA's kThreads stride each row's K / 8 chunks of 8 values; a warp's sums of squares
// meet in shared memory. Call after pdl_begin() (x and the residual are the previous kernels').
#pragma once
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/int_layout.cuh"
#include "nanovllm/backends/cuda/kernel_plan.h"

namespace nanovllm::cuda {

// Whether a v3 / v4 call can run the prologue (the kernels' check; the plan's rule is
// int_gemv_norm_fuses): the shapes it takes (int_gemv_norm_fits), every operand present and
// 16-byte aligned.
inline bool int_gemv_norm_ok(const IntGemvArgs& a) {
  return int_gemv_norm_fits(a.M, a.K, a.G, a.bits) && a.norm.residual_out && a.norm.norm_w &&
         aligned16({a.x, a.norm.residual, a.norm.residual_out, a.norm.norm_w});
}

// x: [M, K] BF16 (16-byte aligned, K % 8 == 0), nrm: the residual [M, K], residual_out [M, K] and
// norm_w [K]; xs: the CTA's shared memory, M x int_gemv_norm_ld(K) BF16; cta / ctas: this CTA's
// index in the grid and the grid's size. Ends with a barrier: xs is complete.
template <int kThreads>
__device__ __forceinline__ void int_gemv_norm_prologue(const bf16* __restrict__ x, const GemvNorm& nrm, int M, int K,
                                                       bf16* xs, int cta, int ctas) {
  constexpr int kWarps = kThreads / 32;
  __shared__ float ss_red[kIntGemvNormMaxT][kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int KC = K / 8, LC = int(int_gemv_norm_ld(K)) / 8;  // 16-byte chunks of a row: global, shared
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  const uint4* rv = reinterpret_cast<const uint4*>(nrm.residual);
  const uint4* nv = reinterpret_cast<const uint4*>(nrm.norm_w);
  uint4* ro = reinterpret_cast<uint4*>(nrm.residual_out);
  uint4* xsv = reinterpret_cast<uint4*>(xs);
  for (int m = 0; m < M; ++m) {
    float ss = 0.f;
    for (int c = threadIdx.x; c < KC; c += kThreads) {
      const uint4 h = add8_sumsq(xv[int64_t(m) * KC + c], rv[int64_t(m) * KC + c], ss);
      xsv[m * LC + c] = h;
      if ((m * KC + c) % ctas == cta) ro[int64_t(m) * KC + c] = h;
    }
    ss = warp_sum(ss);
    if (lane == 0) ss_red[m][warp] = ss;
  }
  __syncthreads();
  for (int m = 0; m < M; ++m) {
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += ss_red[m][w];
    const float inv = 1.0f / sqrtf(total / float(K) + nrm.eps);
    for (int c = threadIdx.x; c < KC; c += kThreads)  // the chunks this thread wrote above
      xsv[m * LC + c] = rms_scale8(xsv[m * LC + c], __ldg(nv + c), inv);
  }
  __syncthreads();
}

}  // namespace nanovllm::cuda
