// The Hopper W4A16 GEMM (KernelOptions::int_gemm wgmma, or auto where kernel_plan.h picks it):
// out[T, N] = x[T, K] @ value[N, K]^T for kIntGemvMaxT < T <= kIntGemmMaxT rows of BF16 x over U4
// codes in int_layout.cuh's prepared layout (the GEMVs': nothing is re-laid out), F32 accumulation,
// BF16 or F32 out, the gated MLP's silu(gate) * up as an epilogue. Semantics: backends/int_weights.h.
// The tile, the split-K partials and the epilogue are the mma.sync GEMM's (int_gemm.cuh).
//
// Mapping. A CTA owns the tile of BM = 128 weight rows (8 row blocks of 16; with silu 4 gate blocks
// and their 4 up blocks I / 16 further) x BN = 64 rows of x, over one of `splits` ranges of stages
// of 128 columns (two code tiles). It has three roles:
//  * a producer warp (warp 8), whose one thread fills a ring of kStages shared-memory stages by TMA,
//    4 to 6 boxes a stage: x's two 64 x 64 BF16 boxes (128-byte swizzle: wgmma's K-major B tiles;
//    rows past T read as zeros), the 8 row blocks' two 512-byte code tiles (the codes seen as a 2D
//    tensor of row blocks; with silu a box of 4 gate and one of 4 up blocks), and their {scale,
//    zero} rows of the stage's one or two groups. Blocks past the weight's end read as zeros. An
//    mbarrier per stage counts the bytes in ("full"); the consumers' warps arrive on another when
//    done with it ("empty").
//  * clusters (KernelOptions::int_gemm_cluster CR x CC, kernel_plan.h: plan_int_gemm_cluster): a
//    cluster's CTAs own CR consecutive row tiles by CC consecutive column tiles. The CR CTAs of a
//    column tile need the same x: each copies its BN / CR rows of both x boxes into all of them by
//    TMA multicast; the CC CTAs of a row tile need the same codes and scales: each copies its share
//    of the row blocks into all of them. Each "full" barrier still counts the whole stage, and every
//    consumer warp frees a stage in every CTA of the cluster (each "empty" barrier counts CR CC x 8
//    arrivals), since a producer may refill a stage only once no CTA it copies into reads it. The
//    stages come from L2, whose bandwidth bounds the kernel at T > 64 by our estimate (a 64-row
//    column tile moves ~290 MB of a Qwen3-8B layer into shared memory in ~63 us: ~4.6 TB/s), and x
//    is two thirds of a stage's bytes (BF16 against 4-bit codes) while the codes are read once per
//    column tile: so CR first, then CC at the larger T.
//  * two consumer warpgroups: warpgroup w owns weight rows 64w .. 64w + 63 (row blocks 4w ..
//    4w + 3; warp i of all 8 owns block i). Per code tile a lane reads its 16 bytes (exactly its
//    wgmma A fragments for the tile's 4 k-steps: the mma.sync A fragment, int_layout.cuh) and its
//    rows' {scale, zero}, dequantizes in registers into BF16 (q - z) * s rounded once, as the
//    dequantize path (int_linear.cu) rounds the weight (so no per-group F32 partials: one
//    accumulator of 32 registers), and issues 4 wgmma.m64n64k16 with A from registers and B from
//    the stage. The second tile's dequantization overlaps the first tile's products; then the
//    warpgroup waits for both (their A registers are kept until then) and frees the stage. Both
//    warpgroups, and the second CTA of the SM, keep the tensor cores busy meanwhile.
//  * Dequantization: int_gemm_wgmma.cuh (shared with the wide form, int_gemm_wgmma_wide.cu).
//  * x's k order: the layout's A fragments hold, at mma k indices 2t, 2t + 1, 2t + 8, 2t + 9 of a
//    step, the columns 4t .. 4t + 3 (mma.sync's GEMV loads x's B fragment as one 8-byte load so).
//    wgmma reads B in its own k order from shared memory, so x is copied first with each step's
//    BF16 pairs reordered 0, 2, 4, 6, 1, 3, 5, 7 (int_gemm_permute_x: T x K x 4 bytes, ~1-3 us).
// The epilogue: the accumulators (wgmma's m64n64 layout: mma.sync's C fragments per warp) into the
// free stages as the F32 tile int_gemm.cuh's gemm_finish reads.
//
// Why. The mma.sync GEMM (int_gemm.cu) runs 143-219 TFLOP/s at T 64..256 and loses to BF16
// cuBLASLt's wgmma at every T >= 64 (bench/RESULTS.md, issue 45): per-group F32 partials double its
// accumulators, so 8 warps an SM with 2 tiles of codes in flight each. Here 16 warps an SM
// dequantize and issue wgmma, whose 64 x 64 x 16 product is 4x an mma.sync's per instruction,
// fed by a 4-stage ring of 25 KB stages. The first form of this kernel (64-column stages, the codes
// and scales as 16 one-dimensional bulk copies a stage) was 1.2-1.3x slower than the mma.sync GEMM:
// ~1.5 us a stage, bound by the TMA requests; with 4-6 2D boxes per 128 columns it runs at 1.5-1.8x
// its speed (Qwen3-8B layers on an H200, bench/RESULTS.md).
#include <cuda.h>

#include <string>

#include "nanovllm/backends/cuda/int_gemm.cuh"
#include "nanovllm/backends/cuda/int_gemm_wgmma.cuh"
#include "nanovllm/backends/cuda/tma.cuh"

namespace nanovllm::cuda {
namespace {

using namespace intgemm;

constexpr int kTK = 64;                              // columns of a code tile (U4)
constexpr int kSK = 2 * kTK;                         // columns of a stage: two tiles
constexpr int kStages = 4;                           // ring stages
constexpr int kConsumerWarps = 8;                    // two warpgroups
constexpr int kThreads = (kConsumerWarps + 1) * 32;  // + the producer warp
constexpr int kXBox = BN * kTK * 2;                  // one TMA box of x: 64 rows x 128 bytes
constexpr int kXStageBytes = 2 * kXBox;
constexpr int kCodeRow = 2 * 512;  // a row block's two code tiles
constexpr int kCodeStageBytes = 8 * kCodeRow;
constexpr int kScaleRowMax = 2 * 16 * 4;  // a row block's {scale, zero} rows of <= 2 groups
constexpr int kScaleStageBytes = 8 * kScaleRowMax;
constexpr int kCodeOff = kStages * kXStageBytes;  // x stages first (1024-byte aligned each)
constexpr int kScaleOff = kCodeOff + kStages * kCodeStageBytes;
constexpr int kBarOff = kScaleOff + kStages * kScaleStageBytes;
constexpr int kSmemBytes = kBarOff + 2 * kStages * 8 + 1024;  // + slack to align the base to 1024
static_assert(BM == 128 && BN == 64, "two warpgroups of 64 weight rows x 64 rows of x");
static_assert(BN * kRedPitch * 4 <= kCodeOff, "the epilogue tile fits the x stages");
static_assert(kIntGemmCtasPerSm == 2 && 2 * (kSmemBytes + 1024) <= 228 * 1024, "two CTAs an SM");

// A box into this CTA's shared memory, or with kMulticast into every CTA of `mask` at the same offset.
template <bool kMulticast>
__device__ __forceinline__ void tma_copy(void* dst, const CUtensorMap* map, int x, int y, uint64_t* bar,
                                         uint16_t mask) {
  if constexpr (kMulticast)
    tma_load_2d_multicast(dst, map, x, y, bar, mask);
  else
    tma_load_2d(dst, map, x, y, bar);
}

// Grid: (RTc * CTc, 1, splits) with RTc, CTc = RT, CT rounded up to CR, CC; clusters of CR x CC CTAs
// along x (none for 1 x 1): CR consecutive row tiles by CC consecutive column tiles, cluster rank
// cr + CR cc, the clusters in row-tile-major order (1 x 1: blockIdx.x = rt * CT + ct as the mma.sync
// kernel's). The padded tiles read zeros and write nothing. xmap: boxes of 64 columns x BN / CR rows
// of x. cmap: the codes as 32-bit words [NB][KT * 128], boxes of 256 words (two tiles) x 8 / CC row
// blocks (silu: 4 / CC); smap: the {scale, zero} words [NB][NG * 16], boxes of 16 words per group of
// the stage (1, or 2 when G = 64) x 8 / CC (silu: 4 / CC) row blocks.
template <int CR, int CC>
__global__ void __launch_bounds__(kThreads, kIntGemmCtasPerSm)
    int_gemm_wgmma_kernel(const GemmParams p, const __grid_constant__ CUtensorMap xmap,
                          const __grid_constant__ CUtensorMap cmap, const __grid_constant__ CUtensorMap smap) {
  constexpr int kCluster = CR * CC;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - smem_addr(smem_raw) % 1024) % 1024);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kBarOff);
  uint64_t* empty = full + kStages;
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const IntGemmClusterTile tile = int_gemm_cluster_tile(int(blockIdx.x), {CR, CC}, p.CT, p.silu);
  const int rt = tile.rt, ct = tile.ct, split = int(blockIdx.z);
  const int KS = p.K / kSK;
  const int ks_begin = int(int64_t(split) * KS / p.splits), ks_end = int(int64_t(split + 1) * KS / p.splits);
  const int n = ks_end - ks_begin;
  const int gw = p.G == kTK ? 32 : 16;  // {scale, zero} words of a row block in a stage

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kCluster * kConsumerWarps);  // every CTA of the cluster frees each stage
    }
    mbar_fence_init();
  }
  // Clusters wait on barriers other CTAs complete: a protocol error fails the launch, not hangs it.
  auto wait = [](uint64_t* bar, uint32_t parity) {
    if constexpr (kCluster > 1)
      mbar_wait_or_trap(bar, parity);
    else
      mbar_wait(bar, parity);
  };
  if constexpr (kCluster > 1) {  // the peers' barriers exist before any copy or arrival reaches them
    cluster_arrive();
    cluster_wait();
  } else {
    __syncthreads();
  }
  pdl_begin();  // x is the previous kernel's output; the workspace and out may be read by it

  if (warp == kConsumerWarps) {  // the producer
    if (lane == 0) {
      const uint32_t bytes = uint32_t(kXStageBytes + kCodeStageBytes + 8 * gw * 4);
      const int r0 = p.silu ? 4 * rt : 8 * rt, r1 = p.up_block + 4 * rt;  // first row block (silu: gate, up)
      // x: this CTA's share of the rows of both boxes (whole 1024-byte swizzle atoms), into the CTAs
      // of its column tile; codes and scales: its share of the row blocks, into those of its row tile.
      const int y = ct * BN + tile.x_row0, xoff = tile.x_row0 * kTK * 2, b0 = tile.block0;
      const uint16_t xmask = uint16_t(tile.xmask), cmask = uint16_t(tile.cmask);
      for (int i = 0; i < n; ++i) {
        const int s = i % kStages, kt = 2 * (ks_begin + i), gi = kt * kTK / p.G;
        if (i >= kStages) wait(&empty[s], uint32_t((i / kStages) - 1) & 1u);
        mbar_arrive_expect_tx(&full[s], bytes);  // the whole stage, whichever CTA copies it
        unsigned char* xs = smem + s * kXStageBytes;
        tma_copy<(CR > 1)>(xs + xoff, &xmap, kt * kTK, y, &full[s], xmask);
        tma_copy<(CR > 1)>(xs + kXBox + xoff, &xmap, kt * kTK + kTK, y, &full[s], xmask);
        unsigned char* cs = smem + kCodeOff + s * kCodeStageBytes;
        unsigned char* ss = smem + kScaleOff + s * kScaleStageBytes;
        tma_copy<(CC > 1)>(cs + b0 * kCodeRow, &cmap, kt * 128, r0 + b0, &full[s], cmask);
        tma_copy<(CC > 1)>(ss + b0 * gw * 4, &smap, gi * 16, r0 + b0, &full[s], cmask);
        if (p.silu) {
          tma_copy<(CC > 1)>(cs + (4 + b0) * kCodeRow, &cmap, kt * 128, r1 + b0, &full[s], cmask);
          tma_copy<(CC > 1)>(ss + (4 + b0) * gw * 4, &smap, gi * 16, r1 + b0, &full[s], cmask);
        }
      }
    }
  } else {  // the consumers: warp w owns local row block w
    const int g = lane >> 2;
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[j][c] = 0.f;
    for (int i = 0; i < n; ++i) {
      const int s = i % kStages;
      wait(&full[s], uint32_t(i / kStages) & 1u);
      const unsigned char* cs = smem + kCodeOff + s * kCodeStageBytes + warp * kCodeRow + lane * 16;
      const uint32_t* sw = reinterpret_cast<const uint32_t*>(smem + kScaleOff + s * kScaleStageBytes) + warp * gw;
      const unsigned char* xs = smem + s * kXStageBytes;
      uint32_t a0[4][4], a1[4][4];
      tile_weights(*reinterpret_cast<const uint4*>(cs), sw, g, a0);
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < 4; ++j) wgmma_m64n64k16_rs<0>(acc, a0[j], wgmma_desc_sw128(xs + 32 * j, 16, 1024));
      wgmma_commit();
      // The second tile's weights while the first tile's products run.
      tile_weights(*reinterpret_cast<const uint4*>(cs + 512), sw + (gw == 32 ? 16 : 0), g, a1);
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < 4; ++j) wgmma_m64n64k16_rs<0>(acc, a1[j], wgmma_desc_sw128(xs + kXBox + 32 * j, 16, 1024));
      wgmma_commit();
      wgmma_wait<0>();
      keep(a0);
      keep(a1);
      __syncwarp();
      if constexpr (kCluster == 1) {
        if (lane == 0) mbar_arrive(&empty[s]);
      } else if (lane < kCluster) {  // the stage came from the cluster's CTAs: free it in each
        mbar_arrive_cluster(&empty[s], uint32_t(lane));
      }
    }
    // Into red[x row][weight row] once every warp is done with the stages (the barrier below).
    named_sync(1, kConsumerWarps * 32);
    store_acc(reinterpret_cast<float*>(smem), acc, warp, lane);
  }
  // Clusters: the peers may still arrive on this CTA's barriers (never on the stages, whose copies
  // have all landed), so no CTA leaves before every CTA is past its loop.
  if constexpr (kCluster > 1) cluster_arrive();
  __syncthreads();
  gemm_finish(p, reinterpret_cast<const float*>(smem), rt, ct, split);
  if constexpr (kCluster > 1) cluster_wait();
}

__global__ void __launch_bounds__(256)
    int_gemm_permute_x_kernel(const uint4* __restrict__ x, uint4* __restrict__ out, int64_t steps) {
  pdl_begin();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // one 16-column step (32 bytes)
  if (i >= steps) return;
  const uint4 a = x[2 * i], b = x[2 * i + 1];  // BF16 pairs 0..3, 4..7
  out[2 * i] = make_uint4(a.x, a.z, b.x, b.z);
  out[2 * i + 1] = make_uint4(a.y, a.w, b.y, b.w);
}

// The kernel of each cluster shape int_gemm_cluster_ok takes.
using WgmmaKernel = void (*)(const GemmParams, const CUtensorMap, const CUtensorMap, const CUtensorMap);
constexpr struct {
  int rows, cols;
  WgmmaKernel kernel;
} kKernels[] = {{1, 1, int_gemm_wgmma_kernel<1, 1>}, {2, 1, int_gemm_wgmma_kernel<2, 1>},
                {4, 1, int_gemm_wgmma_kernel<4, 1>}, {1, 2, int_gemm_wgmma_kernel<1, 2>},
                {2, 2, int_gemm_wgmma_kernel<2, 2>}, {4, 2, int_gemm_wgmma_kernel<4, 2>},
                {1, 4, int_gemm_wgmma_kernel<1, 4>}, {2, 4, int_gemm_wgmma_kernel<2, 4>}};

}  // namespace

void int_gemm_wgmma_init() {
  for (const auto& k : kKernels)
    NV_CUDA_CHECK(cudaFuncSetAttribute(k.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
}

void int_gemm_wgmma_launch(const GemmParams& p, IntGemmCluster cl, const TmaDesc& xmap, Stream st) {
  if (!int_gemm_wgmma_applies(4, p.K, p.G, true) || p.K / kSK < p.splits || !int_gemm_cluster_ok(cl, p.silu))
    throw Error("int_gemm_wgmma: K " + std::to_string(p.K) + ", group " + std::to_string(p.G) + ", " +
                std::to_string(p.splits) + " splits, clusters of " + std::to_string(cl.rows) + " x " +
                std::to_string(cl.cols) + (p.silu ? " (silu)" : "") +
                " is outside the kernel's limits (kernel_plan.h: int_gemm_wgmma_applies, int_gemm_cluster_ok)");
  const int64_t KT = p.K / kTK, NG = p.K / p.G;
  const unsigned rows = unsigned((p.silu ? 4 : 8) / cl.cols), gw = p.G == kTK ? 32 : 16;
  const TmaDesc cmap = make_tma_2d(p.codes, false, KT * 128, p.NB, KT * 512, 256, rows, false, "int_gemm_wgmma codes");
  const TmaDesc smap = make_tma_2d(p.sz, false, NG * 16, p.NB, NG * 64, gw, rows, false, "int_gemm_wgmma scales");
  const int64_t RTc = (p.RT + cl.rows - 1) / cl.rows * cl.rows, CTc = (p.CT + cl.cols - 1) / cl.cols * cl.cols;
  WgmmaKernel kernel = nullptr;
  for (const auto& k : kKernels)
    if (k.rows == cl.rows && k.cols == cl.cols) kernel = k.kernel;
  launch_clustered(kernel, dim3(unsigned(RTc * CTc), 1, unsigned(p.splits)), dim3(kThreads), kSmemBytes, st,
                   dim3(unsigned(cl.rows * cl.cols), 1, 1), p, *reinterpret_cast<const CUtensorMap*>(xmap.bytes),
                   *reinterpret_cast<const CUtensorMap*>(cmap.bytes),
                   *reinterpret_cast<const CUtensorMap*>(smap.bytes));
  NV_LAUNCH_CHECK();
}

void int_gemm_permute_x(const bf16* x, bf16* out, int64_t M, int64_t K, Stream st) {
  if (K % kIntStepK != 0 || !aligned16({x, out}))
    throw Error("int_gemm_permute_x: K " + std::to_string(K) + " is not a multiple of 16 or x is unaligned");
  const int64_t steps = M * K / kIntStepK;
  if (steps == 0) return;
  launch(int_gemm_permute_x_kernel, dim3(unsigned(ceil_div(steps, 256))), dim3(256), 0, st,
         reinterpret_cast<const uint4*>(x), reinterpret_cast<uint4*>(out), steps);
  NV_LAUNCH_CHECK();
}

TmaDesc make_int_gemm_x_tma(const bf16* x, int64_t M, int64_t K, int cluster_rows) {
  // Rows of `K` BF16, boxes of 64 columns x BN / cluster_rows rows (each CTA of a cluster's column
  // tile copies its share of the tile to all), 128-byte swizzle; with one CTA make_cache_tma's
  // descriptor (attention_prefill.cuh).
  return make_tma_2d(x, true, K, M, K * int64_t(sizeof(bf16)), kTK, unsigned(BN / cluster_rows), true,
                     "int_gemm_wgmma x");
}

}  // namespace nanovllm::cuda
