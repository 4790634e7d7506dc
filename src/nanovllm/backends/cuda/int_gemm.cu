// The mma.sync W4A16 / W8A16 GEMM (KernelOptions::int_gemm=mma, or auto where the Hopper kernel of
// int_gemm_wgmma.cu does not apply, up to kIntGemmMmaMaxT rows) for kIntGemvMaxT < T <= kIntGemmMaxT
// rows of BF16 x, and the entry point of both GEMMs (int_gemm): out[T, N] = x[T, K] @ value[N, K]^T
// over group-quantized U4/U8 codes in int_layout.cuh's prepared layout (the GEMV's: nothing is
// re-laid out), F32 accumulation, BF16 or F32 out, the gated MLP's silu(gate) * up as an epilogue.
// Semantics: backends/int_weights.h.
//
// Mapping. The weight is the mma's M side and x its N side, as in the GEMV: a CTA of 4 warps owns
// a tile of kIntGemmRows = 128 weight rows (8 row blocks of 16; with silu 4 gate blocks and the 4
// up blocks I / 16 further, so both halves of its 64 outputs meet in its epilogue) x kIntGemmCols
// = 64 rows of x, over a range of K tiles (all of K, or one of `splits` equal ranges). Warp w owns
// row blocks 2w and 2w + 1 (two m16 tiles) x all 64 rows of x (eight n8 tiles): per k-step 16
// mma.sync m16n8k16 on 2 A fragments (4 + 4 registers) and 8 B fragments (16 registers).
//  * A (weights): a lane's one 16-byte load per row block and tile is its A fragments for the
//    tile's 4 (U4) or 2 (U8) k-steps (int_layout.cuh); loaded straight from global memory into a
//    ring of kRing tiles per warp (each slot refilled with the tile kRing ahead as soon as it is
//    used), with the tile's {scale, zero} words; dequantized in registers (int4_fragment /
//    int8_fragment: q - z as exact BF16 integers). The codes of a tile are read by the CTAs of its
//    T / 64 column tiles only (adjacent in the grid: L2 hits after the first).
//  * B (x): the CTA's 64 x TK slice of x for a tile is staged in shared memory by cp.async, in
//    kStages stages (tiles kStages - 1 ahead in flight), rows past T and columns past K
//    zero-filled. The layout's k order (lane t's columns 4t..4t+3 of a step are the mma's k 2t,
//    2t+1, 2t+8, 2t+9) makes lane (g, t)'s B fragment of n-tile n the 8 bytes x[8n + g][16j + 4t ..
//    + 3]: one 8-byte shared load, no ldmatrix, no conversion. Rows of a stage are padded to a
//    pitch of an odd multiple of 32 bytes, so a half-warp's 16 loads (rows g 0..3, columns t) hit 32 distinct
//    banks.
//  * Groups: each group's F32 partial sums (part) are scaled by the rows' F32 scales into acc
//    when the group ends (or the split's K range does): the weight is never rounded, as in the
//    GEMV (a split that ends mid-group scales its share; the sum is the same).
//  * Epilogue: the accumulators go through shared memory (the stages, now free) as a [64][128]
//    F32 tile, then out (coalesced along N; silu(gate) * up with gemv.cu's rounding) or, when K is
//    split, the whole tile as F32 into the split's slice of the workspace; int_gemm_reduce_kernel
//    then adds a tile's splits in a fixed order (deterministic: a graph replay equals the eager
//    run) and applies the same epilogue.
//
// Why. At T 33..256 the dequantize path writes and reads 2 bytes per weight on top of cuBLASLt's
// GEMM, ~4x the bytes of the codes; here the codes (half a byte per weight, plus the 4-byte
// {scale, zero} pair per row and group) are the only weight traffic. The tile: 128 x 64 per 4
// warps gives each dequantized A fragment 8 mma (the dequantization, ~3 instructions per BF16
// pair, is then ~1.5 issue slots per mma, against ~6 cycles per mma per SM sub-partition) and
// each B fragment 2 (~85 bytes of shared memory per mma cycle-equivalent, under the SM's 128
// bytes per clock); 32 + 32 F32 registers per m/n-tile pair for acc and part fit two CTAs per SM
// (__launch_bounds__(128, 2)). Qwen3-8B's layers give 32-192 tiles at T 64..256, fewer than the
// 264 CTA slots of an H200, so K is split (kernel_plan.h: int_gemm_splits) until one wave is full.
// Past 256 rows (prefill) the work is compute-bound and cuBLASLt's wgmma beats mma.sync.
//
// PDL: the first kRing tiles' codes and scales are loaded before griddepcontrol.wait (weights are
// not written by the previous kernel); x and the workspace only after it.
#include <string>

#include "nanovllm/backends/cuda/int_gemm.cuh"
#include "nanovllm/backends/cuda/int_layout.cuh"
#include "nanovllm/backends/cuda/kernel_plan.h"
#include "nanovllm/backends/cuda/mma.cuh"

namespace nanovllm::cuda {
namespace {

using namespace intgemm;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kMTiles = BM / kWarps / 16;  // m16 tiles (row blocks) per warp: 2
constexpr int kNTiles = BN / 8;            // n8 tiles per warp: 8
constexpr int kStages = 4;                 // x stages in shared memory
constexpr int kRing = 2;                   // code tiles in flight per warp (registers)
static_assert(kMTiles == 2 && kNTiles == 8, "the warp tile is 32 weight rows x 64 rows of x");
static_assert(kIntGemmCtasPerSm == 2, "__launch_bounds__ below");

// Shared memory of the kernel for kBits: the x stages, reused by the epilogue tile.
template <int kBits>
struct GemmSmem {
  static constexpr int TK = int(int_tile_k(kBits));
  static constexpr int kPitch = TK * 2 + 32;  // bytes per staged row of x: 160 (U4) or 96 (U8)
  static constexpr int kStageBytes = BN * kPitch;
  static constexpr int kRedBytes = BN * kRedPitch * 4;
  static constexpr int kBytes = kStages * kStageBytes > kRedBytes ? kStages* kStageBytes : kRedBytes;
  // An odd multiple of 32 bytes: rows g 0..3 of a half-warp start in distinct 32-byte quarters of the
  // 128 banked bytes, and lanes t fill each quarter: conflict-free 8-byte loads; 16-byte cp.async.
  static_assert(kPitch % 32 == 0 && (kPitch / 32) % 2 == 1, "bank-conflict-free rows of x");
  static_assert(kBytes <= 48 * 1024, "static shared memory");
  static_assert((kRedPitch * 4) % 16 == 0, "float4 rows of the epilogue tile");
};

// Grid: (CT * RT, 1, splits); blockIdx.x = rt * CT + ct (the column tiles of a row tile adjacent:
// they read the same codes). kStepGroups: G is not a multiple of the tile's TK columns (a scale per
// k-step; K may end inside the last tile).
template <int kBits, bool kStepGroups>
__global__ void __launch_bounds__(kThreads, kIntGemmCtasPerSm) int_gemm_kernel(const GemmParams p) {
  using Smem = GemmSmem<kBits>;
  constexpr int TK = Smem::TK, S = TK / kIntStepK;  // columns and k-steps of a tile
  constexpr int SG = kStepGroups ? S : 1;           // scale words per tile and row
  constexpr int kChunks = BN * TK / 8;              // 16-byte chunks of x per stage
  static_assert(kChunks % kThreads == 0, "whole rounds of cp.async");
  __shared__ __align__(16) unsigned char smem[Smem::kBytes];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int ct = int(blockIdx.x % unsigned(p.CT)), rt = int(blockIdx.x / unsigned(p.CT)), split = int(blockIdx.z);
  const int K = p.K, G = p.G, KT = (K + TK - 1) / TK, NG = K / G;
  const int kt_begin = int(int64_t(split) * KT / p.splits), kt_end = int(int64_t(split + 1) * KT / p.splits);

  // The warp's row blocks: local blocks 2w, 2w + 1 of the tile's 8 (silu: 0..3 gate, 4..7 up).
  const uint4* cb[kMTiles];
  const uint32_t* sb[kMTiles];
  bool has[kMTiles];  // the block exists (the last row tile may pass the weight's last block)
#pragma unroll
  for (int mi = 0; mi < kMTiles; ++mi) {
    const int lb = kMTiles * warp + mi;
    const int64_t gb =
        p.silu ? (lb < 4 ? 4 * int64_t(rt) + lb : p.up_block + 4 * int64_t(rt) + lb - 4) : 8 * int64_t(rt) + lb;
    has[mi] = gb < p.NB;
    int_block_ptrs(p.codes, p.sz, has[mi] ? gb : 0, KT, NG, lane, cb[mi], sb[mi]);
  }

  uint4 wq[kRing][kMTiles];
  uint32_t ws[kRing][kMTiles][SG][2];    // {scale, zero} words of rows g and g + 8
  auto load_slot = [&](int u, int kt) {  // slot u <- tile kt (zeros past the split's range)
#pragma unroll
    for (int mi = 0; mi < kMTiles; ++mi) {
      const bool ok = kt < kt_end && has[mi];
      wq[u][mi] = ok ? load_codes(cb[mi] + int64_t(kt) * 32) : make_uint4(0, 0, 0, 0);
      int_tile_scales<TK, SG>(sb[mi], kt, ok, G, NG, ws[u][mi]);
    }
  };
#pragma unroll
  for (int u = 0; u < kRing; ++u) load_slot(u, kt_begin + u);
  pdl_begin();  // x is the previous kernel's output; the workspace may be read by it

  const int m0 = ct * BN;
  auto stage = [&](int kt) { return smem + (kt % kStages) * Smem::kStageBytes; };
  auto load_x = [&](int kt) {  // tile kt's x into its stage; always one commit group
    if (kt < kt_end) {
      unsigned char* st = stage(kt);
#pragma unroll
      for (int r = 0; r < kChunks / kThreads; ++r) {
        const int c = r * kThreads + int(threadIdx.x);
        const int row = c / (TK / 8), ch = c % (TK / 8);
        const int m = m0 + row, k = kt * TK + ch * 8;
        const bool ok = m < p.M && k < K;  // K % 16 == 0: a chunk is wholly inside or past K
        cp_async16(st + row * Smem::kPitch + ch * 16, ok ? p.x + int64_t(m) * K + k : p.x, ok ? 16 : 0);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) load_x(kt_begin + s);

  float acc[kMTiles][kNTiles][4], part[kMTiles][kNTiles][4];
#pragma unroll
  for (int mi = 0; mi < kMTiles; ++mi)
#pragma unroll
    for (int n = 0; n < kNTiles; ++n)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[mi][n][c] = part[mi][n][c] = 0.f;

  for (int kt0 = kt_begin; kt0 < kt_end; kt0 += kRing) {
#pragma unroll
    for (int u = 0; u < kRing; ++u) {
      const int kt = kt0 + u;
      if (kt >= kt_end) break;       // CTA-uniform
      cp_async_wait<kStages - 2>();  // this thread's copies of tile kt have landed
      __syncthreads();               // everyone's; and every warp is done with tile kt - 1's stage
      load_x(kt + kStages - 1);      // into tile kt - 1's stage
      const unsigned char* xs = stage(kt) + g * Smem::kPitch + 8 * t;  // lane's row g, columns 4t..
      const uint32_t wv[kMTiles][4] = {{wq[u][0].x, wq[u][0].y, wq[u][0].z, wq[u][0].w},
                                       {wq[u][1].x, wq[u][1].y, wq[u][1].z, wq[u][1].w}};
      float2 sz0[kMTiles] = {}, sz1[kMTiles] = {};  // {scale, zero} of rows g, g + 8 (set at j = 0)
#pragma unroll
      for (int j = 0; j < S; ++j) {
        const int k = kt * TK + kIntStepK * j;
        if (kStepGroups && k >= K) break;  // the last tile's padding (CTA-uniform)
        uint2 b[kNTiles];                  // n-tile n: x row 8n + g, columns 16j + 4t .. + 3
#pragma unroll
        for (int n = 0; n < kNTiles; ++n) b[n] = *reinterpret_cast<const uint2*>(xs + 8 * n * Smem::kPitch + 32 * j);
#pragma unroll
        for (int mi = 0; mi < kMTiles; ++mi) {
          if (kStepGroups || j == 0) {
            sz0[mi] = int_scale_zero(ws[u][mi][kStepGroups ? j : 0][0]);
            sz1[mi] = int_scale_zero(ws[u][mi][kStepGroups ? j : 0][1]);
          }
          uint32_t a[4];
          int_fragment<kBits>(wv[mi], j, sz0[mi], sz1[mi], a);
#pragma unroll
          for (int n = 0; n < kNTiles; ++n) mma_bf16_16816(part[mi][n], a, b[n].x, b[n].y);
        }
        // The group ends after this step (K % G == 0: K's end is one), or the split's range does.
        const bool last_of_split = j == S - 1 && kt + 1 == kt_end;
        const bool flush = kStepGroups ? ((k + kIntStepK) % G == 0 || last_of_split)
                                       : (j == S - 1 && (((kt + 1) * TK) % G == 0 || kt + 1 == kt_end));
        if (flush) {  // CTA-uniform
#pragma unroll
          for (int mi = 0; mi < kMTiles; ++mi)
#pragma unroll
            for (int n = 0; n < kNTiles; ++n) int_scale_partials(acc[mi][n], part[mi][n], sz0[mi].x, sz1[mi].x);
        }
      }
      load_slot(u, kt + kRing);
    }
  }

  // The accumulators as red[x row][weight row] F32 (the stages are free once every copy landed
  // and every warp left the loop). C fragment of (mi, n): c0, c1 = (weight row 16 mi + g, x rows
  // 8n + 2t, + 1); c2, c3 = weight row + 8.
  cp_async_wait<0>();
  __syncthreads();
  float* red = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int mi = 0; mi < kMTiles; ++mi)
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) {
      const int row = 32 * warp + 16 * mi + g, col = 8 * n + 2 * t;
      red[col * kRedPitch + row] = acc[mi][n][0];
      red[(col + 1) * kRedPitch + row] = acc[mi][n][1];
      red[col * kRedPitch + row + 8] = acc[mi][n][2];
      red[(col + 1) * kRedPitch + row + 8] = acc[mi][n][3];
    }
  __syncthreads();
  gemm_finish(p, red, rt, ct, split);
}

// out of tile (rt, ct) = blockIdx.x as in the GEMM, rows kReduceRows * blockIdx.y .. of x: the sum of
// its splits' partials, split 0 first. Small CTAs, many of them: a tile's 8192 sums spread over 16
// CTAs, so that enough loads of the partials (L2 hits) are in flight.
constexpr int kReduceRows = 4;
static_assert(BN % kReduceRows == 0, "whole row groups");
__global__ void __launch_bounds__(256) int_gemm_reduce_kernel(const GemmParams p) {
  pdl_begin();
  const int ct = int(blockIdx.x % unsigned(p.CT)), rt = int(blockIdx.x / unsigned(p.CT));
  const int64_t stride = int64_t(p.RT) * p.CT * (BN * BM);  // between splits
  const float* base = p.ws + (int64_t(rt) * p.CT + ct) * (BN * BM);
  gemm_epilogue(p, rt, ct, kReduceRows * int(blockIdx.y), kReduceRows, [&](int m, int i) {
    float s = 0.f;
#pragma unroll 4
    for (int sp = 0; sp < p.splits; ++sp) s += __ldg(base + sp * stride + m * BM + i);
    return s;
  });
}

// The mma.sync kernel over p's grid: (RT * CT, 1, splits).
void launch_mma(const GemmParams& p, int bits, Stream st) {
  const dim3 grid(unsigned(p.RT * p.CT), 1, unsigned(p.splits));
  const bool step_groups = p.G % int_tile_k(bits) != 0;  // a tile may straddle groups
  if (bits == 4)
    launch(step_groups ? int_gemm_kernel<4, true> : int_gemm_kernel<4, false>, grid, dim3(kThreads), 0, st, p);
  else
    launch(step_groups ? int_gemm_kernel<8, true> : int_gemm_kernel<8, false>, grid, dim3(kThreads), 0, st, p);
  NV_LAUNCH_CHECK();
}

}  // namespace

void int_gemm(const IntGemmArgs& a, Stream st) {
  const int64_t TK = int_tile_k(a.bits), KT = a.K > 0 ? (a.K + TK - 1) / TK : 0;
  const int64_t RT = int_gemm_row_tiles(a.outs, a.silu), CT = (a.M + kIntGemmCols - 1) / kIntGemmCols;
  const bool bad_silu = a.silu && (a.f32_out || !int_gemm_fuses_silu(a.outs));
  const bool bad_split =
      a.splits < 1 || a.splits > kIntGemmMaxSplits || a.splits > KT ||
      (a.splits > 1 && (!a.workspace || a.splits * RT * CT * kIntGemmRows * kIntGemmCols > a.workspace_floats));
  const bool bad_wgmma = a.wgmma ? !int_gemm_wgmma_applies(a.bits, a.K, a.G, true) || !a.x_perm ||
                                       !int_gemm_cluster_ok(a.cluster, a.silu) ||
                                       (a.wide && a.cluster.rows * a.cluster.cols != 1) || (a.ss && !a.wide)
                                 : a.cluster.rows * a.cluster.cols != 1 || a.wide || a.ss;
  if (a.M < 1 || a.M > kIntGemmMaxT || a.outs < 1 || bad_silu || (a.bits != 4 && a.bits != 8) ||
      !int_layout_supports(a.bits, a.K, a.G) || bad_split || bad_wgmma || RT * CT > (int64_t(1) << 31) - 1)
    throw Error("int_gemm: M " + std::to_string(a.M) + ", outputs " + std::to_string(a.outs) + ", K " +
                std::to_string(a.K) + ", group " + std::to_string(a.G) + ", " + std::to_string(a.bits) + " bits, " +
                std::to_string(a.splits) + " splits" + (a.silu ? ", silu" : "") + (a.f32_out ? ", F32 out" : "") +
                (a.wgmma ? ", wgmma" : "") + (a.wide ? " wide" : "") + (a.ss ? " ss" : "") +
                (a.cluster.rows * a.cluster.cols != 1
                     ? ", clusters of " + std::to_string(a.cluster.rows) + " x " + std::to_string(a.cluster.cols)
                     : "") +
                " is outside the kernel's limits (kernel_plan.h: plan_int_linear, int_gemm_splits)");
  GemmParams p;
  p.x = a.x, p.codes = a.codes, p.sz = a.sz, p.out = a.out, p.ws = a.workspace;
  p.M = int(a.M), p.N = int(a.outs), p.K = int(a.K), p.G = int(a.G);
  const int64_t rows = a.silu ? 2 * a.outs : a.outs;  // of the weight
  p.NB = int((rows + kIntRowBlock - 1) / kIntRowBlock);
  p.up_block = a.silu ? int(a.outs / kIntRowBlock) : 0;
  p.RT = int(RT), p.CT = int(CT), p.splits = a.splits;
  p.silu = a.silu, p.f32_out = a.f32_out;
  if (a.wgmma) {
    int_gemm_permute_x(a.x, a.x_perm, a.M, a.K, st);
    p.x = a.x_perm;
    if (a.ss)
      int_gemm_wgmma_ss_launch(p, make_int_gemm_x_tma(a.x_perm, a.M, a.K, 1), st);
    else if (a.wide)
      int_gemm_wgmma_wide_launch(p, make_int_gemm_x_tma(a.x_perm, a.M, a.K, 1), st);
    else
      int_gemm_wgmma_launch(p, a.cluster, make_int_gemm_x_tma(a.x_perm, a.M, a.K, a.cluster.rows), st);
  } else {
    launch_mma(p, a.bits, st);
  }
  if (a.splits > 1) {
    launch(int_gemm_reduce_kernel, dim3(unsigned(RT * CT), BN / kReduceRows), dim3(256), 0, st, p);
    NV_LAUNCH_CHECK();
  }
}

}  // namespace nanovllm::cuda
