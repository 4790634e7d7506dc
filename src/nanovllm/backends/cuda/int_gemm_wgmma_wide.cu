// The Hopper W4A16 GEMM's wide form (KernelOptions::int_gemm wgmma_wide past one column tile;
// kernel_plan.h: int_gemm_wgmma_wide): int_gemm_wgmma.cu's product, semantics and epilogue, but a CTA owns two column
// tiles, BM = 128 weight rows x 2 BN = 128 rows of x, so each dequantized A fragment feeds an
// m64n128k16 product instead of an m64n64k16.
//
// Why. ncu on the 64-row form (qkv of Qwen3-8B at T 256, bench/RESULTS.md, issue 45, 2026-11-30):
// tensor pipe 27% of peak, issue slots 40%, L2 23%: latency- and issue-bound, the in-register
// dequantization costing more issue slots than the products it feeds keep the tensor pipe busy
// (multicasting x and codes across clusters, which cuts L2 bytes, was slower). Here a stage's 8
// row blocks x 64 columns are dequantized once for twice the products: ~100 warp instructions per
// 256 tensor cycles instead of ~200.
//
// Mapping. Grid (RT * CW, 1, splits), CW = ceil(CT / 2); CTA (rt, cw) owns column tiles 2cw and
// 2cw + 1 (the second past CT is padding: x rows read as zeros, nothing written), over one of
// `splits` ranges of stages of 64 columns (one code tile). Two warpgroups, no producer warp:
//  * thread 0 fills a ring of kStages stages by TMA, kAhead stages ahead, 4 boxes a stage (6 with
//    silu): x's two 64 x 64 boxes of the tile's columns (rows 128 cw .. 128 cw + 127: 16 KB, one
//    128-row K-major B operand with 128-byte swizzle), the 8 row blocks' 512-byte code tiles (4 KB;
//    silu: 4 gate and 4 up blocks) and their {scale, zero} rows of the stage's group. It refills
//    the slot of the stage two behind the one it consumes, so warp 0 waits only for warps a stage
//    behind it.
//  * warpgroup w owns weight rows 64w .. 64w + 63 (warp i, row block i). Per stage a warp
//    dequantizes its 16 bytes of codes into A registers (int_gemm_wgmma.cuh), issues 4
//    wgmma.m64n128k16 (64 accumulators a thread), waits for them and frees the stage. Two sets of
//    A registers (k-steps alternate between them): a step's dequantization overlaps the previous
//    step's product; the SM's other three warpgroups fill the rest.
// Registers: 2 CTAs of 8 warps put 4 warps on each SM sub-partition: 128 registers a thread. (A
// ninth, producer warp, as int_gemm_wgmma.cu has, puts 5 on one: 96 registers, under which ptxas
// serializes the products (C7512: the loop needs 102); a first form with 16 A registers ran at 112
// registers, one CTA an SM, no faster than the 64-row form: bench/RESULTS.md.)
// The epilogue: the accumulators into the free x stages as two [64][kRedPitch] F32 tiles
// (int_gemm.cuh: gemm_finish, once per column tile).
#include <cuda.h>

#include <string>

#include "nanovllm/backends/cuda/int_gemm.cuh"
#include "nanovllm/backends/cuda/int_gemm_wgmma.cuh"
#include "nanovllm/backends/cuda/int_gemm_wgmma_wide.cuh"
#include "nanovllm/backends/cuda/tma.cuh"

namespace nanovllm::cuda {
namespace {

using namespace intgemm;

constexpr int kStages = 5;           // ring stages
constexpr int kAhead = kStages - 1;  // stages in flight ahead of consumption, the consumed one included
constexpr int kWarps = 8;            // two warpgroups
constexpr int kThreads = kWarps * 32;
constexpr int kXStageBytes = kWideXStageBytes, kCodeRow = kWideCodeRow, kCodeStageBytes = kWideCodeStageBytes;
constexpr int kScaleRow = kWideScaleRow, kScaleStageBytes = kWideScaleStageBytes;
constexpr int kCodeOff = kStages * kXStageBytes;  // x stages first (1024-byte aligned each)
constexpr int kScaleOff = kCodeOff + kStages * kCodeStageBytes;
constexpr int kBarOff = kScaleOff + kStages * kScaleStageBytes;
constexpr int kSmemBytes = kBarOff + 2 * kStages * 8 + 1024;  // + slack to align the base to 1024
static_assert(BM == 128 && BN == 64, "two warpgroups of 64 weight rows x 2 BN rows of x");
static_assert(2 * BN * kRedPitch * 4 <= kCodeOff, "the two epilogue tiles fit the x stages");
static_assert(kIntGemmCtasPerSm == 2 && 2 * (kSmemBytes + 1024) <= 228 * 1024, "two CTAs an SM");

// xmap: make_int_gemm_x_tma(x, M, K, 1); cmap, smap: int_gemm_wgmma_wide.cuh's wide_tmas.
__global__ void __launch_bounds__(kThreads, kIntGemmCtasPerSm)
    int_gemm_wgmma_wide_kernel(const GemmParams p, const __grid_constant__ CUtensorMap xmap,
                               const __grid_constant__ CUtensorMap cmap, const __grid_constant__ CUtensorMap smap) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - smem_addr(smem_raw) % 1024) % 1024);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kBarOff);
  uint64_t* empty = full + kStages;
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const int CW = (p.CT + 1) / 2, rt = int(blockIdx.x) / CW, cw = int(blockIdx.x) % CW, split = int(blockIdx.z);
  const int KS = p.K / kWideTK;
  const int ks_begin = int(int64_t(split) * KS / p.splits), ks_end = int(int64_t(split + 1) * KS / p.splits);
  const int n = ks_end - ks_begin;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kWarps);
    }
    mbar_fence_init();
  }
  __syncthreads();
  pdl_begin();  // x is the previous kernel's output; the workspace and out may be read by it

  // Thread 0 loads stage j of the run into slot j % kStages once every warp freed the slot's
  // previous stage (j - kStages). The waits trap after seconds (tma.cuh: mbar_wait_or_trap): until
  // this ring has run on a GPU, a protocol error fails a test instead of hanging it.
  auto load = [&](int j) {
    const int s = j % kStages;
    if (j >= kStages) mbar_wait_or_trap(&empty[s], uint32_t((j / kStages) - 1) & 1u);
    wide_stage_copy(p, &xmap, &cmap, &smap, ks_begin + j, rt, cw, smem + s * kXStageBytes,
                    smem + kCodeOff + s * kCodeStageBytes, smem + kScaleOff + s * kScaleStageBytes, &full[s]);
  };
  if (threadIdx.x == 0)
    for (int j = 0; j < kAhead - 1 && j < n; ++j) load(j);
  {  // warp w owns local row block w
    const int g = lane >> 2;
    float acc[16][4];
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[j][c] = 0.f;
    for (int i = 0; i < n; ++i) {
      // Stage i + kAhead - 1 into the slot of stage i - 2 (kStages = kAhead + 1): warp 0 waits only
      // for warps a stage behind it, never for its own warpgroup's current stage.
      if (threadIdx.x == 0 && i + kAhead - 1 < n) load(i + kAhead - 1);
      __syncwarp();
      const int s = i % kStages;
      mbar_wait_or_trap(&full[s], uint32_t(i / kStages) & 1u);
      const uint4 c =
          *reinterpret_cast<const uint4*>(smem + kCodeOff + s * kCodeStageBytes + warp * kCodeRow + lane * 16);
      const uint32_t* sw =
          reinterpret_cast<const uint32_t*>(smem + kScaleOff + s * kScaleStageBytes + warp * kScaleRow);
      const unsigned char* xs = smem + s * kXStageBytes;
      const U4Scale q0 = u4_scale(sw[g]), q1 = u4_scale(sw[g + 8]);
      // k-step j's A registers in a[j % 2]: each set is rewritten only once the product reading it
      // is done (wait<1>: all but the latest), and each step's dequantization overlaps the
      // previous step's product.
      uint32_t a[2][4];
      const uint32_t words[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (j >= 2) {  // the product of step j - 2, which read a[j % 2], is done
          wgmma_wait<1>();
          keep(a[j % 2]);
        }
        u4_weights(words[j], q0, q1, a[j % 2]);
        wgmma_fence();
        wgmma_m64n128k16_rs<0>(acc, a[j % 2], wgmma_desc_sw128(xs + 32 * j, 16, 1024));
        wgmma_commit();
      }
      wgmma_wait<0>();
      keep(a[0]);
      keep(a[1]);
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s]);
    }
    // Into red[x row][weight row] (x rows 0..127: both column tiles) once every warp is done with
    // the stages (the barrier below).
    __syncthreads();
    store_acc(reinterpret_cast<float*>(smem), acc, warp, lane);
  }
  __syncthreads();
  wide_finish(p, reinterpret_cast<const float*>(smem), rt, cw, split);
}

}  // namespace

void int_gemm_wgmma_wide_init() {
  NV_CUDA_CHECK(
      cudaFuncSetAttribute(int_gemm_wgmma_wide_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
}

void int_gemm_wgmma_wide_launch(const GemmParams& p, const TmaDesc& xmap, Stream st) {
  const WideTmas t = wide_tmas(p, "int_gemm_wgmma_wide");
  const int64_t CW = (p.CT + 1) / 2;
  launch(int_gemm_wgmma_wide_kernel, dim3(unsigned(p.RT * CW), 1, unsigned(p.splits)), dim3(kThreads), kSmemBytes, st,
         p, *reinterpret_cast<const CUtensorMap*>(xmap.bytes), *reinterpret_cast<const CUtensorMap*>(t.codes.bytes),
         *reinterpret_cast<const CUtensorMap*>(t.scales.bytes));
  NV_LAUNCH_CHECK();
}

}  // namespace nanovllm::cuda
