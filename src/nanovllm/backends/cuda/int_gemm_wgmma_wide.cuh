// The wide Hopper W4A16 GEMMs' shared parts (kernel_plan.h: int_gemm_wgmma_wide): a CTA owns BM =
// 128 weight rows x two column tiles of x (128 rows) over stages of 64 columns, the weights
// dequantized in registers (int_gemm_wgmma_wide.cu) or through shared memory
// (int_gemm_wgmma_ss.cu). A stage: x's two 64 x 64 boxes (128-byte swizzle, K-major B operand),
// the 8 row blocks' 512-byte code tiles (silu: 4 gate and 4 up blocks) and their {scale, zero}
// rows of the stage's group; here its copies, and the descriptors of the codes and scales.
#pragma once
#include <cuda.h>

#include <string>

#include "nanovllm/backends/cuda/int_gemm.cuh"
#include "nanovllm/backends/cuda/tma.cuh"

namespace nanovllm::cuda::intgemm {

constexpr int kWideTK = 64;                      // columns of a code tile (U4) and of a stage
constexpr int kWideXBox = BN * kWideTK * 2;      // one TMA box of x: 64 rows x 128 bytes
constexpr int kWideXStageBytes = 2 * kWideXBox;  // 128 rows
constexpr int kWideCodeRow = 512;                // a row block's code tile
constexpr int kWideCodeStageBytes = 8 * kWideCodeRow;
constexpr int kWideScaleRow = 16 * 4;  // a row block's {scale, zero} row of the stage's group
constexpr int kWideScaleStageBytes = 8 * kWideScaleRow;

// Stage kt (columns 64 kt ..) of CTA (rt, cw) into xs (x), cs (codes), ss (scales): one arrival
// on `bar` expecting all its bytes, whose copies complete it. xmap: make_int_gemm_x_tma(x, M, K,
// 1); cmap, smap: wide_tmas.
__device__ __forceinline__ void wide_stage_copy(const GemmParams& p, const CUtensorMap* xmap, const CUtensorMap* cmap,
                                                const CUtensorMap* smap, int kt, int rt, int cw, unsigned char* xs,
                                                unsigned char* cs, unsigned char* ss, uint64_t* bar) {
  const int gi = kt * kWideTK / p.G;
  const int r0 = p.silu ? 4 * rt : 8 * rt, r1 = p.up_block + 4 * rt;  // first row block (silu: gate, up)
  mbar_arrive_expect_tx(bar, uint32_t(kWideXStageBytes + kWideCodeStageBytes + kWideScaleStageBytes));
  tma_load_2d(xs, xmap, kt * kWideTK, 2 * cw * BN, bar);
  tma_load_2d(xs + kWideXBox, xmap, kt * kWideTK, 2 * cw * BN + BN, bar);
  tma_load_2d(cs, cmap, kt * 128, r0, bar);
  tma_load_2d(ss, smap, gi * 16, r0, bar);
  if (p.silu) {
    tma_load_2d(cs + 4 * kWideCodeRow, cmap, kt * 128, r1, bar);
    tma_load_2d(ss + 4 * kWideScaleRow, smap, gi * 16, r1, bar);
  }
}

// The epilogue of CTA (rt, cw, split) from red[x row][weight row] (x rows 0..127: both column
// tiles; int_gemm_wgmma.cuh: store_acc), after a barrier: int_gemm.cuh's gemm_finish per tile (the
// second skipped past CT).
__device__ __forceinline__ void wide_finish(const GemmParams& p, const float* red, int rt, int cw, int split) {
  gemm_finish(p, red, rt, 2 * cw, split);
  gemm_finish(p, red + BN * kRedPitch, rt, 2 * cw + 1, split);
}

// The codes as 32-bit words [NB][KT * 128] in boxes of 128 words x 8 row blocks (silu: 4), the
// {scale, zero} words [NB][NG * 16] in boxes of 16 words x 8 row blocks (silu: 4). Throws Error
// naming `what` where p is outside the wide kernels' limits (kernel_plan.h: int_gemm_wgmma_applies).
struct WideTmas {
  TmaDesc codes, scales;
};
inline WideTmas wide_tmas(const GemmParams& p, const std::string& what) {
  if (!int_gemm_wgmma_applies(4, p.K, p.G, true) || p.K / kWideTK < p.splits)
    throw Error(what + ": K " + std::to_string(p.K) + ", group " + std::to_string(p.G) + ", " +
                std::to_string(p.splits) +
                " splits is outside the kernel's limits (kernel_plan.h: int_gemm_wgmma_applies)");
  const int64_t KT = p.K / kWideTK, NG = p.K / p.G;
  const unsigned rows = p.silu ? 4 : 8;
  return {make_tma_2d(p.codes, false, KT * 128, p.NB, KT * 512, 128, rows, false, (what + " codes").c_str()),
          make_tma_2d(p.sz, false, NG * 16, p.NB, NG * 64, 16, rows, false, (what + " scales").c_str())};
}

}  // namespace nanovllm::cuda::intgemm
