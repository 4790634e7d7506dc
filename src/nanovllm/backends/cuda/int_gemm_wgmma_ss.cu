// The Hopper W4A16 GEMM with the dequantization out of the MMA warps (KernelOptions::int_gemm
// wgmma_ss; kernel_plan.h: int_gemm_wgmma_wide, int_gemm_wgmma_ss): the wide form's tile, product,
// semantics and epilogue (int_gemm_wgmma_wide.cu: BM = 128 weight rows x 2 BN = 128 rows of x a
// CTA, x in the mma's k order), but the weights reach the tensor cores through shared memory.
//
// Why. The register forms (int_gemm_wgmma.cu, int_gemm_wgmma_wide.cu) dequantize in the warps that
// issue the products, and ncu finds them latency-bound (~1 eligible warp a scheduler, tensor pipe
// ~30% busy at T 256); more products per dequantized fragment (four column tiles), clusters, a
// producer warp and products in flight across stages were all measured slower or no faster
// (bench/RESULTS.md, issue 45). Here, as in Hopper's BF16 GEMMs, the MMA warps only wait and issue
// SS wgmma; two more warpgroups turn each stage's codes into the BF16 A tile they read.
//
// Mapping. Grid (RT * CW, 1, splits), CW = ceil(CT / 2): CTA (rt, cw) owns column tiles 2 cw,
// 2 cw + 1 (the second past CT is padding: x rows read as zeros, nothing written), over one of
// `splits` ranges of stages of 64 columns (one code tile). 17 warps, one CTA an SM (its shared
// memory: kStages stages of 36.5 KB):
//  * warp 16, the producer: its lane 0 fills a ring of kStages stages by TMA, each once the
//    products of the slot's previous stage are done (x's two 64 x 64 boxes with 128-byte swizzle,
//    the 8 row blocks' code tiles and their {scale, zero} rows: the wide form's boxes).
//  * warpgroups 2 and 3 (warps 8-15), the transform: per stage, warp 8 + rb takes row block rb:
//    each lane dequantizes its 16 bytes of codes exactly as the register forms do
//    (int_gemm_wgmma.cuh: u4_weights, the mma A fragments of 4 k-steps) and stores the fragments
//    where a K-major 128-byte-swizzled A tile [128 rows][64] holds them (the fragment's k order is
//    the layout's, matched by x's permutation: the products equal the register forms'); then
//    fence.proxy.async and an arrival on the stage's "A ready" barrier.
//  * warpgroups 0 and 1 (warps 0-7), the products: warpgroup w waits for the stage's copies and
//    its A tile, issues 4 wgmma.m64n128k16 with A (its 64 rows) and B (x) from shared memory, one
//    commit group a stage, and keeps one group in flight: once the previous stage's group is done
//    its slot is freed (predicated arrivals: no branch between products, ptxas C7518).
// Measured (bench/RESULTS.md, issue 45, H200): correct, and slower than the register forms. With
// one transform warpgroup and the copies issued from it, a Qwen3-8B layer's linears took 451.5 us
// at T 256 (wide 285.6); with two and a producer warp 317.6 (wide 286.4, 64-row 292.0), bench.py
// 0.86x BF16 (auto 0.90x). Kept opt-in as the base of a 128 x 256 tile / setmaxnreg form.
// The A tile's stores: lanes (g, t) of a fragment register write row 16 rb + g (+ 8), 4 bytes at
// chunk (2 j + h) ^ g of the 128-byte row: 32 distinct banks a store.
// The epilogue: the accumulators into the free x and A stages as two [64][kRedPitch] F32 tiles
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

constexpr int kTK = kWideTK;         // columns of a code tile (U4) and of a stage
constexpr int kStages = 5;           // ring stages
constexpr int kMmaWarps = 8;         // warpgroups 0 and 1
constexpr int kTransformWarps = 8;   // warpgroups 2 and 3: one row block each
constexpr int kProducer = kMmaWarps + kTransformWarps;  // the warp whose lane 0 issues the copies
constexpr int kThreads = (kProducer + 1) * 32;
constexpr int kXStageBytes = kWideXStageBytes, kCodeRow = kWideCodeRow, kCodeStageBytes = kWideCodeStageBytes;
constexpr int kScaleRow = kWideScaleRow, kScaleStageBytes = kWideScaleStageBytes;
constexpr int kAStageBytes = BM * kTK * 2;
constexpr int kAOff = kStages * kXStageBytes;  // x stages, then A tiles (1024-byte aligned each)
constexpr int kCodeOff = kAOff + kStages * kAStageBytes;
constexpr int kScaleOff = kCodeOff + kStages * kCodeStageBytes;
constexpr int kBarOff = kScaleOff + kStages * kScaleStageBytes;
constexpr int kSmemBytes = kBarOff + 3 * kStages * 8 + 1024;  // + slack to align the base to 1024
static_assert(BM == 128 && BN == 64, "two warpgroups of 64 weight rows x 2 BN rows of x");
static_assert(2 * BN * kRedPitch * 4 <= kCodeOff, "the two epilogue tiles fit the x and A stages");
static_assert(kIntGemmSsCtasPerSm == 1 && kSmemBytes + 1024 <= 228 * 1024, "one CTA an SM");

// A fragment register (two BF16 of row r, the 16-byte chunk `chunk` of the tile's 128-byte row r,
// byte `off` in it) into the 128-byte-swizzled A tile.
__device__ __forceinline__ void store_a(unsigned char* a_tile, int r, int chunk, int off, uint32_t v) {
  *reinterpret_cast<uint32_t*>(a_tile + sw128_offset(r, chunk) + off) = v;
}

// xmap: make_int_gemm_x_tma(x, M, K, 1); cmap, smap: int_gemm_wgmma_wide.cuh's wide_tmas.
__global__ void __launch_bounds__(kThreads, kIntGemmSsCtasPerSm)
    int_gemm_wgmma_ss_kernel(const GemmParams p, const __grid_constant__ CUtensorMap xmap,
                             const __grid_constant__ CUtensorMap cmap, const __grid_constant__ CUtensorMap smap) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - smem_addr(smem_raw) % 1024) % 1024);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kBarOff);  // the stage's copies landed
  uint64_t* ready = full + kStages;                              // its A tile is written
  uint64_t* empty = ready + kStages;                             // its products are done
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const int CW = (p.CT + 1) / 2, rt = int(blockIdx.x) / CW, cw = int(blockIdx.x) % CW, split = int(blockIdx.z);
  const int KS = p.K / kTK;
  const int ks_begin = int(int64_t(split) * KS / p.splits), ks_end = int(int64_t(split + 1) * KS / p.splits);
  const int n = ks_end - ks_begin;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&ready[s], kTransformWarps);
      mbar_init(&empty[s], kMmaWarps);
    }
    mbar_fence_init();
  }
  __syncthreads();
  pdl_begin();  // x is the previous kernel's output; the workspace and out may be read by it

  float acc[16][4];
  if (warp == kProducer) {  // stage j into slot j % kStages once its previous stage's products are done
    if (lane == 0)
      for (int j = 0; j < n; ++j) {
        const int s = j % kStages;
        if (j >= kStages) mbar_wait(&empty[s], uint32_t((j / kStages) - 1) & 1u);
        wide_stage_copy(p, &xmap, &cmap, &smap, ks_begin + j, rt, cw, smem + s * kXStageBytes,
                        smem + kCodeOff + s * kCodeStageBytes, smem + kScaleOff + s * kScaleStageBytes, &full[s]);
      }
  } else if (warp >= kMmaWarps) {  // the transform: warp 8 + rb dequantizes row block rb
    const int rb = warp - kMmaWarps, g = lane >> 2, t = lane & 3;
    for (int i = 0; i < n; ++i) {
      const int s = i % kStages;
      mbar_wait(&full[s], uint32_t(i / kStages) & 1u);
      unsigned char* a_tile = smem + kAOff + s * kAStageBytes;
      const uint4 c =
          *reinterpret_cast<const uint4*>(smem + kCodeOff + s * kCodeStageBytes + rb * kCodeRow + lane * 16);
      const uint32_t* sw = reinterpret_cast<const uint32_t*>(smem + kScaleOff + s * kScaleStageBytes + rb * kScaleRow);
      const U4Scale q0 = u4_scale(sw[g]), q1 = u4_scale(sw[g + 8]);
      const uint32_t words[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {  // k-step j: 16 columns, bytes 32 j .. 32 j + 31 of a row
        uint32_t a[4];
        u4_weights(words[j], q0, q1, a);
        // The mma A fragment: a[0] row g, k 2t, 2t + 1; a[1] row g + 8; a[2], a[3] k 2t + 8, 2t + 9.
        store_a(a_tile, 16 * rb + g, 2 * j, 4 * t, a[0]);
        store_a(a_tile, 16 * rb + g + 8, 2 * j, 4 * t, a[1]);
        store_a(a_tile, 16 * rb + g, 2 * j + 1, 4 * t, a[2]);
        store_a(a_tile, 16 * rb + g + 8, 2 * j + 1, 4 * t, a[3]);
      }
      fence_proxy_async_smem();  // the generic-proxy stores, read next by wgmma
      __syncwarp();
      if (lane == 0) mbar_arrive(&ready[s]);
    }
  } else {  // warpgroup wg: weight rows 64 wg .. 64 wg + 63 of the tile
    const int wg = warp >> 2;
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[j][c] = 0.f;
    for (int i = 0; i < n; ++i) {
      const int s = i % kStages;
      mbar_wait(&full[s], uint32_t(i / kStages) & 1u);
      mbar_wait(&ready[s], uint32_t(i / kStages) & 1u);
      const unsigned char* xs = smem + s * kXStageBytes;
      const unsigned char* as = smem + kAOff + s * kAStageBytes + wg * 64 * 128;
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < 4; ++j)
        wgmma_m64n128k16_ss(acc, wgmma_desc_sw128(as + 32 * j, 16, 1024), wgmma_desc_sw128(xs + 32 * j, 16, 1024), 1);
      wgmma_commit();
      wgmma_wait<1>();  // the previous stage's products are done: free its slot
      __syncwarp();
      mbar_arrive_if(&empty[(i + kStages - 1) % kStages], lane == 0 && i > 0);
    }
    wgmma_wait<0>();
    __syncwarp();
    mbar_arrive_if(&empty[(n + kStages - 1) % kStages], lane == 0 && n > 0);
  }
  // Into red[x row][weight row] (x rows 0..127: both column tiles) once every warp is done with the
  // stages.
  __syncthreads();
  if (warp < kMmaWarps) store_acc(reinterpret_cast<float*>(smem), acc, warp, lane);
  __syncthreads();
  wide_finish(p, reinterpret_cast<const float*>(smem), rt, cw, split);
}

}  // namespace

void int_gemm_wgmma_ss_init() {
  NV_CUDA_CHECK(
      cudaFuncSetAttribute(int_gemm_wgmma_ss_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
}

void int_gemm_wgmma_ss_launch(const GemmParams& p, const TmaDesc& xmap, Stream st) {
  const WideTmas t = wide_tmas(p, "int_gemm_wgmma_ss");
  const int64_t CW = (p.CT + 1) / 2;
  launch(int_gemm_wgmma_ss_kernel, dim3(unsigned(p.RT * CW), 1, unsigned(p.splits)), dim3(kThreads), kSmemBytes, st, p,
         *reinterpret_cast<const CUtensorMap*>(xmap.bytes), *reinterpret_cast<const CUtensorMap*>(t.codes.bytes),
         *reinterpret_cast<const CUtensorMap*>(t.scales.bytes));
  NV_LAUNCH_CHECK();
}

}  // namespace nanovllm::cuda
