// The parts of our Hopper BF16 GEMM that its kernels share (gemm_wgmma.cu: the plain, SiLU and qkv
// forms; gemm_wgmma_norm.cu: the form with the residual add + RMSNorm in its epilogue): the ring of
// TMA stages that the producer fills and the compute warpgroups consume, and the epilogue's
// swizzled store boxes. gemm_wgmma.cu's opening comment describes the design.
//
// A stage: x [128 rows][64 columns of K] (kXBytes), then w [kCols rows][64] (two boxes of kCols / 2
// rows for the gated form: gate rows, then the matching up rows), 128-byte swizzled (wgmma.cuh).
// Compute warpgroup wg multiplies x rows 64 wg .. + 63 of each stage by all kCols weight rows.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>

#include "nanovllm/backends/cuda/tma.cuh"
#include "nanovllm/backends/cuda/wgmma.cuh"

namespace nanovllm::cuda::gemm_tile {

constexpr int kRows = 128;            // rows of x a CTA tile
constexpr int kTK = 64;               // columns of K a stage (128 bytes of BF16: one swizzle row)
constexpr int kGroup = 8;             // weight-row tiles a raster group
constexpr int kEpiBox = 64 * 64 * 2;  // one TMA-store box: 64 rows x 64 columns of out, 128B-swizzled

// The BF16 pair (low half first) of two floats rounded to nearest, as one 32-bit word.
__device__ __forceinline__ uint32_t bf2_pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// BF16 pair arithmetic (sm_90 mul / add / sub.rn.bf16x2): two values an instruction, each result
// rounded once to nearest. A float product, sum or difference of two BF16 values rounded to BF16
// has the same bits (float's 24 bits hold 2 x 8 + 2, so its rounding before the one to BF16 is
// innocuous), so these reproduce the float steps of qk_norm_rope bit for bit; the explicit .rn
// keeps ptxas from fusing a product into the sum after it. Other targets: no code (kernel traps).
__device__ __forceinline__ uint32_t bf2_mul(uint32_t a, uint32_t b) {
  uint32_t d = 0;
#ifdef NANOVLLM_WGMMA
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
#endif
  return d;
}
__device__ __forceinline__ uint32_t bf2_add(uint32_t a, uint32_t b) {
  uint32_t d = 0;
#ifdef NANOVLLM_WGMMA
  asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
#endif
  return d;
}
__device__ __forceinline__ uint32_t bf2_sub(uint32_t a, uint32_t b) {
  uint32_t d = 0;
#ifdef NANOVLLM_WGMMA
  asm("sub.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
#endif
  return d;
}
// The low / high BF16 of a pair word as a float (exact).
__device__ __forceinline__ float bf2_lo(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float bf2_hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

// Pass p's 128 columns of the warpgroup's 64 rows into two swizzled 64 x 64 boxes at `boxes`.
// pair(j, h): the BF16 pair word of accumulator slots acc[j][2 h] and acc[j][2 h + 1] (thread
// (g, q) of warp w: row 16 (w % 4) + g + 8 h, columns 8 j + 2 q + {0, 1}); it lands at chunk jj ^ g
// of its row (jj = j % 8): a store's 32 lanes hit 32 distinct banks.
template <class Pair>
__device__ __forceinline__ void write_pass(const Pair& pair, int p, unsigned char* boxes, int warp, int g, int q) {
#pragma unroll
  for (int hb = 0; hb < 2; ++hb)
#pragma unroll
    for (int jj = 0; jj < 8; ++jj)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int j = 16 * p + 8 * hb + jj, r = 16 * (warp & 3) + g + 8 * h;
        *reinterpret_cast<uint32_t*>(boxes + hb * kEpiBox + sw128_offset(r, jj) + 4 * q) = pair(j, h);
      }
}

template <int kCols>
__device__ __forceinline__ void wgmma_tile(float (&acc)[kCols / 8][4], uint64_t da, uint64_t db) {
  if constexpr (kCols == 256)
    wgmma_m64n256k16_ss(acc, da, db, 1);
  else
    wgmma_m64n128k16_ss(acc, da, db, 1);
}

// The producer (one thread): the n stages of the tile at x row t0, weight row n0 into the ring at
// `ring` (kStages slots of kStageBytes), slot c % kStages for the ring's c-th stage (c runs on
// across tiles), each once the products of the slot's previous stage are done (`empty`), the
// copies completing the slot's `full` barrier. kGated: the up rows of the same outputs are the
// weight rows from up_row0 + n0, in the slot's second half of the weight box.
// kPair (a cluster of two CTAs on the same weight rows, x rows a CTA tile apart): each CTA loads its own x
// box and one half of the weight box (rank 0 the first kCols / 2 rows, or the gate rows; rank 1 the
// rest, or the up rows), multicast into both CTAs' slots, so the pair reads the weights from L2 once.
// Both CTAs' `full` then count the whole stage's bytes, and `empty` the compute warps of both CTAs
// (mma_stages): a slot is refilled once both CTAs are done with it.
template <int kStages, int kStageBytes, int kXBytes, bool kGated, bool kPair = false>
__device__ __forceinline__ void load_stages(const CUtensorMap* xmap, const CUtensorMap* wmap, unsigned char* ring,
                                            uint64_t* full, uint64_t* empty, int t0, int n0, int up_row0, int n, int& c,
                                            int rank = 0) {
  constexpr int kHalf = (kStageBytes - kXBytes) / 2;  // one half of the weight box
  for (int i = 0; i < n; ++i, ++c) {
    const int s = c % kStages;
    if (c >= kStages) mbar_wait(&empty[s], uint32_t(c / kStages - 1) & 1u);
    unsigned char* xs = ring + s * kStageBytes;
    mbar_arrive_expect_tx(&full[s], uint32_t(kStageBytes));
    tma_load_2d(xs, xmap, i * kTK, t0, &full[s]);
    if constexpr (kPair) {
      const int row = rank == 0 ? n0 : (kGated ? up_row0 + n0 : n0 + kHalf / (kTK * 2));
      tma_load_2d_multicast(xs + kXBytes + rank * kHalf, wmap, i * kTK, row, &full[s], 3);
    } else {
      tma_load_2d(xs + kXBytes, wmap, i * kTK, n0, &full[s]);
      if (kGated) tma_load_2d(xs + kXBytes + kHalf, wmap, i * kTK, up_row0 + n0, &full[s]);
    }
  }
}

struct NoHook {
  __device__ void operator()() const {}
};

// A compute warpgroup's products of one tile (n stages from the ring's c-th) into acc, zeroed
// first. It keeps one stage's products in flight (wait_group 1) and frees the slot of the stage
// before (one arrival a warp on `empty`, whose count is the 8 compute warps; kPair: on both CTAs'
// `empty`, whose count is the pair's 16). issued(): once the tile's last products are issued (its
// stages all waited for), while they run.
template <int kCols, int kStages, int kStageBytes, int kXBytes, bool kPair = false, class Hook = NoHook>
__device__ __forceinline__ void mma_stages(float (&acc)[kCols / 8][4], const unsigned char* ring, uint64_t* full,
                                           uint64_t* empty, int wg, int lane, int n, int& c,
                                           const Hook& issued = Hook{}) {
  auto release = [&](uint64_t* bar, bool pred) {
    if constexpr (kPair) {
      mbar_arrive_cluster_if(bar, 0, pred);
      mbar_arrive_cluster_if(bar, 1, pred);
    } else {
      mbar_arrive_if(bar, pred);
    }
  };
#pragma unroll
  for (int j = 0; j < kCols / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
  for (int i = 0; i < n; ++i, ++c) {
    const int s = c % kStages;
    mbar_wait(&full[s], uint32_t(c / kStages) & 1u);
    const unsigned char* xs = ring + s * kStageBytes + wg * 64 * 128;
    const unsigned char* ws = ring + s * kStageBytes + kXBytes;
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < 4; ++j)
      wgmma_tile<kCols>(acc, wgmma_desc_sw128(xs + 32 * j, 16, 1024), wgmma_desc_sw128(ws + 32 * j, 16, 1024));
    wgmma_commit();
    wgmma_wait<1>();  // the previous stage's products are done: free its slot
    __syncwarp();
    release(&empty[(c + kStages - 1) % kStages], lane == 0 && i > 0);
  }
  issued();
  wgmma_wait<0>();
  __syncwarp();
  release(&empty[(c + kStages - 1) % kStages], lane == 0);  // the tile's last stage
}

}  // namespace nanovllm::cuda::gemm_tile
