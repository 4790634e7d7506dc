// A row-parallel projection with the decoder layer's residual add and RMSNorm in its epilogue
// (sm_90a): residual += x w^T (the product rounded to BF16 first, then the sum rounded, as linear +
// add_rms_norm round them), out = rms_norm(residual) * norm_w (x * rsqrt(mean(x^2) + eps) rounded
// to BF16 before the weight multiplies it, as add_rms_norm's kernel and Qwen3RMSNorm in BF16).
//
// Why: o_proj and down_proj are followed by the add + RMSNorm kernel, which reads the product and
// the residual and writes both back (four passes over [T, H]; 38.8 us a call, two a layer, 7% of a
// Qwen3-0.6B embedding forward: bench/RESULTS.md). Here the product never goes to memory: the
// epilogue reads the residual tile (TMA, under the tile's products), writes the sum and the normed
// stream, and the norm's kernel is gone. Measured slower than cuBLASLt + add_rms_norm on an H200
// (bench/RESULTS.md: "add + RMSNorm epilogue"; the products' tiles wait on the epilogue, and clusters
// of 4 use 120 of 132 SMs), so it runs only under the kernel option gemm_norm=on.
//
// Shapes: x [T, K], w [H, K], residual [T, H] (updated in place), norm_w [H], out [T, H], BF16;
// H = 256 C with C <= 8. The norm needs whole rows: a thread-block cluster of C CTAs owns 128 rows
// (CTA rank r: columns 256 r .. + 255, gemm_wgmma.cuh's ring and products for a 128 x 256 tile),
// and the clusters walk the row tiles (persistent: as many clusters as fit at once).
//
// Threads: gemm_wgmma.cu's 9 warps (warp 8 the TMA producer; warpgroups 0 and 1 rows 64 wg ..).
// Epilogue of warpgroup wg, on its 64 rows x 256 columns in four swizzled 64 x 64 boxes:
//  1. at the tile's start its first thread loads the residual into the boxes (once the previous
//     tile's stores have read them), a transaction on res_full[wg];
//  2. each thread adds its products (rounded) to the residual words it holds in the accumulator
//     layout (write_pass's addresses), writes the sums back in place and sums their squares; the
//     sums go to `residual` by TMA stores;
//  3. each quad's row sums of squares (256 columns) go to every CTA of the cluster (st.shared::
//     cluster into part[tile % 2][rank][row], then an arrival on that CTA's part_full[tile % 2]:
//     64 C arrivals a phase); each CTA adds the C partial sums in rank order, so all compute the
//     same 1 / rms;
//  4. once the sums' stores have read the boxes, each thread normalizes its words in place, and
//     the normed rows go to `out` by TMA stores.
// The squares are summed in another order than add_rms_norm's block sum: out may differ from the
// two-kernel path by a BF16 rounding where 1 / rms differs in its last float bits; residual is
// equal bit for bit to linear (gemm_wgmma's plain form) + add_rms_norm.
#include <cuda.h>

#include <algorithm>
#include <string>

#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/gemm_wgmma.cuh"
#include "nanovllm/backends/cuda/gemm_wgmma.h"
#include "nanovllm/backends/cuda/tma_desc.h"

namespace nanovllm::cuda {
namespace {

using namespace gemm_tile;

constexpr int kCols = 256;        // weight rows (output columns) a CTA
constexpr int kStages = 3;        // the boxes take the fourth stage's room
constexpr int kThreads = 9 * 32;  // 2 compute warpgroups + the producer warp
constexpr int kMaxCluster = 8;    // H <= 2,048 (a portable cluster size)
constexpr int kXBytes = kRows * kTK * 2, kStageBytes = kXBytes + kCols * kTK * 2;
constexpr int kBoxOff = kStages * kStageBytes;                      // 8 boxes: 4 a warpgroup
constexpr int kPartOff = kBoxOff + 8 * kEpiBox;                     // float part[2][kMaxCluster][kRows]
constexpr int kNormOff = kPartOff + 2 * kMaxCluster * kRows * 4;    // the CTA's 256 norm weights
constexpr int kBarOff = kNormOff + kCols * 2;                       // full, empty [kStages]; res_full, part_full [2]
constexpr int kSmemBytes = kBarOff + (2 * kStages + 4) * 8 + 1024;  // + slack to align the base
static_assert(kSmemBytes + 1024 <= 227 * 1024, "one CTA an SM");

// xmap: x [T][K], boxes 64 x 128; wmap: w [H][K], 64 x 256; rmap, omap: residual and out [T][H],
// 64 x 64 (all 128B-swizzled).
__global__ void __launch_bounds__(kThreads, 1)
    gemm_wgmma_add_norm_kernel(const __grid_constant__ CUtensorMap xmap, const __grid_constant__ CUtensorMap wmap,
                               const __grid_constant__ CUtensorMap rmap, const __grid_constant__ CUtensorMap omap,
                               const __nv_bfloat16* __restrict__ norm_w, float eps, int T, int H, int K) {
#ifndef NANOVLLM_WGMMA
  __trap();  // no sm_90a code: fail the launch rather than write zeros (CudaBackend::wgmma())
#endif
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - smem_addr(smem_raw) % 1024) % 1024);
  unsigned char* boxes = smem + kBoxOff;
  float* part = reinterpret_cast<float*>(smem + kPartOff);
  uint32_t* nw = reinterpret_cast<uint32_t*>(smem + kNormOff);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kBarOff);
  uint64_t* empty = full + kStages;
  uint64_t* res_full = empty + kStages;  // [2]: a warpgroup's residual tile has landed
  uint64_t* part_full = res_full + 2;    // [2]: the cluster's row sums of a tile (by parity) are in
  const int C = H / kCols, rank = int(blockIdx.x) % C, cluster = int(blockIdx.x) / C;
  const int clusters = int(gridDim.x) / C, n0 = rank * kCols;
  const int tiles = (T + kRows - 1) / kRows, n = (K + kTK - 1) / kTK;
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);

  // The norm weights of the CTA's columns as BF16 pair words (never written by the previous kernel).
  for (int i = int(threadIdx.x); i < kCols / 2; i += kThreads)
    nw[i] = reinterpret_cast<const uint32_t*>(norm_w)[n0 / 2 + i];
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 8);
    }
    for (int i = 0; i < 2; ++i) {
      mbar_init(&res_full[i], 1);
      mbar_init(&part_full[i], 64 * C);  // 8 quad leaders x 8 warps of each CTA
    }
    mbar_fence_init();
  }
  cluster_arrive();  // the peers' barriers exist before any arrival reaches them
  cluster_wait();
  pdl_begin();  // x and the residual are the previous kernels' outputs

  if (warp == 8) {  // the producer
    if (lane == 0) {
      int c = 0;
      for (int b = cluster; b < tiles; b += clusters)
        load_stages<kStages, kStageBytes, kXBytes, false>(&xmap, &wmap, smem, full, empty, b * kRows, n0, 0, n, c);
    }
  } else {
    const int wg = warp >> 2, g = lane >> 2, q = lane & 3, lt = int(threadIdx.x & 127);
    const int rc = 64 * wg + 16 * (warp & 3) + g;  // the thread's first row in the tile (and rc + 8)
    unsigned char* box = boxes + wg * 4 * kEpiBox;
    // The word of columns 8 j + 2 q + {0, 1} of row rc + 8 h in the warpgroup's boxes.
    auto word = [&](int j, int h) {
      return reinterpret_cast<uint32_t*>(box + (j >> 3) * kEpiBox + sw128_offset(rc - 64 * wg + 8 * h, j & 7) + 4 * q);
    };
    auto store_boxes = [&](const CUtensorMap* map, int row0) {
      fence_proxy_async_smem();  // the generic-proxy writes, read next by the TMA stores
      named_sync(1 + wg, 128);
      if (lt == 0) {
#pragma unroll
        for (int bx = 0; bx < 4; ++bx) tma_store_2d(map, box + bx * kEpiBox, n0 + 64 * bx, row0);
        tma_store_commit();
      }
    };
    int c = 0, k = 0;
    for (int b = cluster; b < tiles; b += clusters, ++k) {
      const int row0 = b * kRows + 64 * wg;
      if (lt == 0) {  // 1. the residual tile, once the previous tile's stores have read the boxes
        tma_store_wait_read<0>();
        mbar_arrive_expect_tx(&res_full[wg], 4 * kEpiBox);
#pragma unroll
        for (int bx = 0; bx < 4; ++bx) tma_load_2d(box + bx * kEpiBox, &rmap, n0 + 64 * bx, row0, &res_full[wg]);
      }
      float acc[kCols / 8][4];
      mma_stages<kCols, kStages, kStageBytes, kXBytes>(acc, smem, full, empty, wg, lane, n, c);
      mbar_wait(&res_full[wg], uint32_t(k) & 1u);
      float ss[2] = {0.f, 0.f};  // 2. the sums, and their squares
#pragma unroll
      for (int j = 0; j < kCols / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t* wp = word(j, h);
          const uint32_t s = bf2_add(bf2_pack(acc[j][2 * h], acc[j][2 * h + 1]), *wp);
          *wp = s;
          ss[h] = __fmaf_rn(bf2_lo(s), bf2_lo(s), ss[h]);
          ss[h] = __fmaf_rn(bf2_hi(s), bf2_hi(s), ss[h]);
        }
      store_boxes(&rmap, row0);
      float* pb = part + (k & 1) * kMaxCluster * kRows;  // 3. the row sums across the cluster
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        ss[h] += __shfl_xor_sync(0xffffffffu, ss[h], 1);
        ss[h] += __shfl_xor_sync(0xffffffffu, ss[h], 2);
      }
      if (q == 0)
        for (int d = 0; d < C; ++d) {
          st_cluster_f32(pb + rank * kRows + rc, uint32_t(d), ss[0]);
          st_cluster_f32(pb + rank * kRows + rc + 8, uint32_t(d), ss[1]);
          mbar_arrive_cluster(&part_full[k & 1], uint32_t(d));
        }
      mbar_wait_or_trap<true>(&part_full[k & 1], uint32_t(k >> 1) & 1u);
      float inv[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float tot = 0.f;
        for (int r = 0; r < C; ++r) tot += pb[r * kRows + rc + 8 * h];
        inv[h] = 1.0f / sqrtf(tot / float(H) + eps);
      }
      if (lt == 0) tma_store_wait_read<0>();  // 4. the sums' stores have read the boxes
      named_sync(1 + wg, 128);
#pragma unroll
      for (int j = 0; j < kCols / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t* wp = word(j, h);
          const uint32_t s = *wp, w = nw[4 * j + q];
          *wp = bf2_pack(bf16_round(bf2_lo(s) * inv[h]) * bf2_lo(w), bf16_round(bf2_hi(s) * inv[h]) * bf2_hi(w));
        }
      store_boxes(&omap, row0);
    }
    if (lt == 0) tma_store_wait<0>();  // before the CTA's shared memory goes
  }
  cluster_arrive();  // no CTA leaves while its peers may still write into its shared memory
  cluster_wait();
}

}  // namespace

bool gemm_wgmma_add_rms_norm_fits(int64_t T, int64_t H, int64_t K) {
  return T >= 1 && T <= (int64_t(1) << 30) && H % kCols == 0 && H >= kCols && H <= kMaxCluster * kCols && K >= 8 &&
         K % 8 == 0 && K <= (int64_t(1) << 30);
}

int gemm_wgmma_add_rms_norm_max_clusters(int64_t H) {
  if (!gemm_wgmma_add_rms_norm_fits(1, H, 8)) return 0;
  return max_active_clusters(gemm_wgmma_add_norm_kernel, unsigned(H / kCols), kThreads, kSmemBytes);
}

void gemm_wgmma_add_rms_norm_init() {
  NV_CUDA_CHECK(
      cudaFuncSetAttribute(gemm_wgmma_add_norm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
}

void gemm_wgmma_add_rms_norm(const void* x, const void* w, void* residual, const void* norm_w, float eps, void* out,
                             int64_t T, int64_t H, int64_t K, int max_clusters, void* stream) {
  if (!gemm_wgmma_add_rms_norm_fits(T, H, K) || max_clusters < 1)
    throw Error("gemm_wgmma_add_rms_norm: [" + std::to_string(T) + ", " + std::to_string(K) + "] x [" +
                std::to_string(H) + ", " + std::to_string(K) +
                "]^T is outside the kernel's limits (T >= 1; H a multiple of 256 up to 2,048; K >= 8, a multiple of "
                "8; at least one cluster resident)");
  if (!aligned16({x, w, residual, norm_w, out}))
    throw Error("gemm_wgmma_add_rms_norm: operands must be 16-byte aligned");
  const TmaDesc xmap = make_tma_2d(x, true, K, T, K * 2, kTK, kRows, true, "gemm_wgmma_add_rms_norm x");
  const TmaDesc wmap = make_tma_2d(w, true, K, H, K * 2, kTK, kCols, true, "gemm_wgmma_add_rms_norm w");
  const TmaDesc rmap = make_tma_2d(residual, true, H, T, H * 2, 64, 64, true, "gemm_wgmma_add_rms_norm residual");
  const TmaDesc omap = make_tma_2d(out, true, H, T, H * 2, 64, 64, true, "gemm_wgmma_add_rms_norm out");
  const int64_t C = H / kCols, clusters = std::min<int64_t>((T + kRows - 1) / kRows, max_clusters);
  launch_clustered(gemm_wgmma_add_norm_kernel, dim3(unsigned(clusters * C)), dim3(kThreads), kSmemBytes,
                   Stream{static_cast<cudaStream_t>(stream), false}, dim3(unsigned(C), 1, 1),
                   *reinterpret_cast<const CUtensorMap*>(xmap.bytes), *reinterpret_cast<const CUtensorMap*>(wmap.bytes),
                   *reinterpret_cast<const CUtensorMap*>(rmap.bytes), *reinterpret_cast<const CUtensorMap*>(omap.bytes),
                   static_cast<const __nv_bfloat16*>(norm_w), eps, int(T), int(H), int(K));
  NV_LAUNCH_CHECK();
}

}  // namespace nanovllm::cuda
