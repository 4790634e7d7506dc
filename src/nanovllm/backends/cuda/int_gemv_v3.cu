// The third INT4/INT8 GEMV (KernelOptions::int_gemv=v3): out[M, N] = x[M, K] @ value[N, K]^T for
// 1 <= M <= 32 rows of BF16 x and group-quantized U4/U8 weights in int_layout.cuh's layout (the
// same prepared weights and IntGemvArgs as v1/v2, so the option switches at run time), BF16 or F32
// out, and the gated MLP's silu(gate) * up as its epilogue. Semantics: backends/int_weights.h.
//
// Mapping. Grid (S, row blocks): CTA (s, b) of 8 warps owns row block b (with silu: the gate block
// b and the up block b + I / 16) and split s of its K tiles (S = int_gemv_v3_splits, kernel_plan.h);
// warp w takes a contiguous run of the split's tiles, through a ring of P tiles per warp as in v2
// (filled before griddepcontrol.wait, each slot refilled P tiles ahead once consumed). The 8 warps'
// sums are added in shared memory; with S > 1 the S CTAs of a row block are one thread-block cluster
// and add their sums through distributed shared memory in a fixed order (deterministic, no
// workspace, nothing allocated: graph-safe), each CTA finishing 1/S of the outputs.
//
// What changed from v2, and why (v2: ~146 SASS instructions per 512-byte tile at T = 1, the SM
// issue-bound well below DRAM speed; and a partial second wave on qkv):
//  * U4 codes become the BF16 integers 128 + q with one LOP3 (+ a shift) per register: no HSUB2
//    of the zero per pair. The zero is taken out per tile and row instead: sum_k (q_k - z) x_k =
//    sum_k (128 + q_k) x_k - (128 + z) sum_k x_k, where sum_k x_k comes from one more mma of x with
//    an A of ones (the same for every row, shared by the gated MLP's two blocks). Both sums are of
//    exact products (8-bit by 8-bit significands) in F32; the difference is then scaled in F32.
//  * The fast path (G a multiple of the tile's TK columns and K a multiple of TK: every real
//    checkpoint's shapes) reads one {scale, zero} pair per tile and row, with the group index
//    tracked incrementally (warps walk contiguous tiles: no integer division per tile), and x
//    without per-step bounds checks. The general path (groups that split a tile, K padded) keeps
//    v2's per-step scales and bounds.
//  * Slots past a warp's run are skipped (warp-uniform branch), not computed on zeros.
//  * S > 1 splits K when it fills the last wave better (qkv: 384 row blocks on 264 slots).
//  * The partial-sum reduction reads shared memory row-contiguously (v2's had 4-way bank conflicts).
//
// SASS instructions of the main loop per 512-byte tile (U4, G 128, one n-tile, no silu, BF16 out;
// sm_90a, nvcc 13.0), counted by scripts/sass_loop_count.py (the loop found by its backward branch
// in the cubin, its length divided by the 8 tiles of a ring round): v2 1,169 / 8 = 146, v3 700 / 8
// = 88 (LOP3 32 -> 16, HADD2 20 -> 4, the group index's division gone, code and x pointers advanced
// per tile; HMMA 4 -> 8, FFMA 4 -> 8). Registers (-Xptxas -v): 79-128; spills only in the U4 gated
// MLP at four n-tiles (T 17..32: 64-152 bytes).
//
// x rows past M in the n-tiles read row M - 1 again (valid memory; their columns are dropped).
// Columns past K (the last tile's padding: code 0, not value 0) multiply zeros instead of x.
#include <cooperative_groups.h>

#include <type_traits>

#include "nanovllm/backends/cuda/int_gemv_norm.cuh"
#include "nanovllm/backends/cuda/int_gemv_tile.cuh"
#include "nanovllm/backends/cuda/int_layout.cuh"
#include "nanovllm/backends/cuda/kernel_plan.h"
#include "nanovllm/backends/cuda/mma.cuh"

namespace nanovllm::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kWarps = kIntGemvV3Warps;
constexpr int kThreads = kWarps * 32;
// x: [M, K] BF16; codes / sz: int_layout.cuh; out: [M, N] with N the outputs (kSilu: I; the gate
// block of row CTA b is b, its up block b + up_block). kGeneral: per-k-step scales and bounds.
// tiles_per_warp: the length of each warp's run of K tiles (the split's tiles / 8, rounded up).
// kNorm: x is the layer's output and the product takes rms_norm(x + residual) from the CTA's shared
// memory (int_gemv_norm.cuh; nrm).
template <int kBits, bool kSilu, bool kGeneral, int NT, bool kWide, bool kNorm, class OutT>
__global__ void __launch_bounds__(kThreads, int_gemv_v3_ctas_per_sm(kWide))
    int_gemv_v3_kernel(const bf16* __restrict__ x, const uint4* __restrict__ codes, const uint32_t* __restrict__ sz,
                       OutT* __restrict__ out, int M, int N, int K, int G, int up_block, int tiles_per_split,
                       GemvNorm nrm) {
  constexpr int TK = int_tile_k(kBits), S = TK / kIntStepK;     // columns and k-steps of a tile
  constexpr int RB = kSilu ? 2 : 1;                             // row blocks of the CTA
  constexpr int SG = kGeneral ? S : 1;                          // scale words per tile and row
  constexpr int P = int_gemv_v3_ring(RB, NT, kGeneral, kWide);  // tiles in flight per warp and row block
  constexpr int C = 8 * NT;                                     // rows of x (output columns) of the CTA
  __shared__ float red[kWarps][RB][C][17];                      // [warp][block][x row][weight row], padded
  __shared__ float csum[RB][C][16];                             // the CTA's sums (read by its cluster)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int KT = (K + TK - 1) / TK, NG = K / G;
  const int split = blockIdx.x, splits = gridDim.x, blk = blockIdx.y;
  const int per_warp = (tiles_per_split + kWarps - 1) / kWarps;
  const int c1 = min(KT, (split + 1) * tiles_per_split);
  const int w0 = split * tiles_per_split + warp * per_warp;  // the warp's run: tiles w0 .. w0 + n - 1
  const int n = max(0, min(per_warp, c1 - w0));
  const uint4* cb[RB];
  const uint32_t* sb[RB];
#pragma unroll
  for (int r = 0; r < RB; ++r) {
    int_block_ptrs(codes, sz, int64_t(blk) + (r ? up_block : 0), KT, NG, lane, cb[r], sb[r]);
    cb[r] += int64_t(w0) * 32;  // the next tile to load (loads go in order: advanced by one tile each)
  }

  uint4 wq[P][RB];
  uint32_t ws[P][RB][SG][2];  // {scale, zero} words of rows g and g + 8
  // The fast path's group cursor: group gl and column cl within it of the next tile loaded (tiles
  // are loaded in order; G is a multiple of TK there).
  int gl = kGeneral ? 0 : w0 * TK / G, cl = kGeneral ? 0 : w0 * TK - gl * G;
  // Slot u <- the warp's tile i (nothing when i >= n: the slot is skipped).
  auto load_slot = [&](int u, int i) {
    if (i >= n) return;
#pragma unroll
    for (int r = 0; r < RB; ++r) {
      wq[u][r] = load_codes(cb[r]);
      cb[r] += 32;
      if constexpr (kGeneral) {
        int_tile_scales<TK, SG>(sb[r], w0 + i, true, G, NG, ws[u][r]);
      } else {
        ws[u][r][0][0] = __ldg(sb[r] + gl * 16);
        ws[u][r][0][1] = __ldg(sb[r] + gl * 16 + 8);
      }
    }
    if constexpr (!kGeneral) {
      cl += TK;
      if (cl == G) cl = 0, ++gl;
    }
  };
#pragma unroll
  for (int u = 0; u < P; ++u) load_slot(u, u);
  pdl_begin();  // x is the previous kernel's output
  extern __shared__ uint4 norm_smem[];  // kNorm: the normalized x, M x int_gemv_norm_ld(K) BF16
  if constexpr (kNorm)
    int_gemv_norm_prologue<kThreads>(x, nrm, M, K, reinterpret_cast<bf16*>(norm_smem), blk * splits + split,
                                     splits * int(gridDim.y));
  const bf16* xbase = kNorm ? reinterpret_cast<const bf16*>(norm_smem) : x;
  const int ldx = kNorm ? int(int_gemv_norm_ld(K)) : K;

  float acc[RB][NT][4];
#pragma unroll
  for (int r = 0; r < RB; ++r)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[r][nt][c] = 0.f;
  // Lane's row of x in n-tile nt (B fragment column g), at its 4 columns of the next tile's first
  // k-step (advanced by one tile each).
  const bf16* xr[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) xr[nt] = xbase + int64_t(min(8 * nt + g, M - 1)) * ldx + 4 * t + w0 * TK;

  for (int i0 = 0; i0 < n; i0 += P) {
#pragma unroll
    for (int u = 0; u < P; ++u) {
      const int i = i0 + u;
      if (i >= n) break;  // warp-uniform: the run's last round
      // Tile i (xr points at it: it = 0), then x moved on to the next one.
      int_gemv_tile<kBits, kGeneral, NT, RB, SG, kNorm>(xr, 0, (w0 + i) * TK, K, wq[u], ws[u], acc);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) xr[nt] += TK;
      load_slot(u, i + P);  // the slot's next tile, P ahead in the warp's run
    }
  }

  // C fragment of n-tile nt: c0, c1 = (row g, x rows 8nt + 2t, + 1); c2, c3 = (row g + 8, the same).
#pragma unroll
  for (int r = 0; r < RB; ++r)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      red[warp][r][8 * nt + 2 * t][g] = acc[r][nt][0];
      red[warp][r][8 * nt + 2 * t + 1][g] = acc[r][nt][1];
      red[warp][r][8 * nt + 2 * t][g + 8] = acc[r][nt][2];
      red[warp][r][8 * nt + 2 * t + 1][g + 8] = acc[r][nt][3];
    }
  __syncthreads();
  // Element e of a block's outputs: weight row i = e % 16 of x row m = e / 16 (adjacent threads,
  // adjacent words).
  for (int e = threadIdx.x; e < RB * 16 * C; e += kThreads) {
    const int r = e / (16 * C), m = (e / 16) % C, i = e % 16;
    float s = 0.f;
#pragma unroll
    for (int wi = 0; wi < kWarps; ++wi) s += red[wi][r][m][i];
    csum[r][m][i] = s;
  }
  __syncthreads();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cg::cluster_group cl_group = cg::this_cluster();
  if (splits > 1) cl_group.sync();  // every CTA's csum visible to the cluster (release / acquire)
#endif
  for (int e = threadIdx.x; e < 16 * C; e += kThreads) {
    const int m = e / 16, i = e % 16, nrow = blk * 16 + i;
    if (m >= M || nrow >= N || e % splits != split) continue;
    float s = csum[0][m][i], u = csum[RB - 1][m][i];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (splits > 1) {  // the splits' sums in split order, whichever CTA adds them
      s = 0.f, u = 0.f;
      for (int q = 0; q < splits; ++q) {
        s += *cl_group.map_shared_rank(&csum[0][m][i], q);
        if constexpr (kSilu) u += *cl_group.map_shared_rank(&csum[RB - 1][m][i], q);
      }
    }
#endif
    int_gemv_store<kSilu>(s, u, out + int64_t(m) * N + nrow);
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (splits > 1) cl_group.sync();  // the others may still read this CTA's csum
#endif
}

template <int kBits, bool kSilu, bool kGeneral, int NT, bool kWide, bool kNorm = false>
void launch_v3(const IntGemvArgs& a, int splits, Stream st) {
  const int64_t TK = int_tile_k(kBits), KT = (a.K + TK - 1) / TK;
  const int64_t rows = int_gemv_row_blocks(a.outs, kSilu);
  const int up_block = kSilu ? int(a.outs / kIntRowBlock) : 0;
  const int M = int(a.M), N = int(a.outs), K = int(a.K), G = int(a.G), per_split = int((KT + splits - 1) / splits);
  const dim3 grid{unsigned(splits), unsigned(rows), 1u}, cluster{unsigned(splits), 1u, 1u};
  const size_t smem = kNorm ? size_t(int_gemv_norm_smem(M, K)) : 0;
  if (a.f32_out)
    launch_clustered(int_gemv_v3_kernel<kBits, kSilu, kGeneral, NT, kWide, kNorm, float>, grid, dim3(kThreads), smem,
                     st, cluster, a.x, a.codes, a.sz, static_cast<float*>(a.out), M, N, K, G, up_block, per_split,
                     a.norm);
  else
    launch_clustered(int_gemv_v3_kernel<kBits, kSilu, kGeneral, NT, kWide, kNorm, bf16>, grid, dim3(kThreads), smem, st,
                     cluster, a.x, a.codes, a.sz, static_cast<bf16*>(a.out), M, N, K, G, up_block, per_split, a.norm);
  NV_LAUNCH_CHECK();
}

template <int kBits, bool kSilu, bool kGeneral>
void dispatch_ntiles(const IntGemvArgs& a, int splits, bool wide, Stream st) {
  switch (int_gemv_ntiles(a.M)) {
    case 1:
      if constexpr (!kGeneral) {  // the norm prologue: one n-tile, the fast path (int_gemv_v3 checks)
        if (a.norm.residual) {
          if constexpr (!kSilu) {
            if (wide) return launch_v3<kBits, kSilu, kGeneral, 1, true, true>(a, splits, st);
          }
          return launch_v3<kBits, kSilu, kGeneral, 1, false, true>(a, splits, st);
        }
      }
      if constexpr (!kSilu) {
        if (wide) return launch_v3<kBits, kSilu, kGeneral, 1, true>(a, splits, st);
      }
      return launch_v3<kBits, kSilu, kGeneral, 1, false>(a, splits, st);
    case 2: return launch_v3<kBits, kSilu, kGeneral, 2, false>(a, splits, st);
    default: return launch_v3<kBits, kSilu, kGeneral, 4, false>(a, splits, st);
  }
}

template <int kBits>
void dispatch_bits(const IntGemvArgs& a, int splits, bool wide, Stream st) {
  const bool general = a.G % int_tile_k(kBits) != 0 || a.K % int_tile_k(kBits) != 0;
  if (a.silu)
    general ? dispatch_ntiles<kBits, true, true>(a, splits, wide, st)
            : dispatch_ntiles<kBits, true, false>(a, splits, wide, st);
  else
    general ? dispatch_ntiles<kBits, false, true>(a, splits, wide, st)
            : dispatch_ntiles<kBits, false, false>(a, splits, wide, st);
}

}  // namespace

void int_gemv_v3(const IntGemvArgs& a, int splits, bool wide, Stream st) {
  const int64_t rows = int_gemv_row_blocks(a.outs, a.silu);
  if (a.M < 1 || a.M > kIntGemvMaxT || a.outs < 1 || (a.silu && (a.f32_out || a.outs % kIntRowBlock != 0)) ||
      (a.bits != 4 && a.bits != 8) || !int_layout_supports(a.bits, a.K, a.G) || splits < 1 ||
      splits > kIntGemvV3MaxSplits || rows > 65535 || (a.norm.residual && !int_gemv_norm_ok(a)))
    throw Error("int_gemv_v3: M " + std::to_string(a.M) + ", outputs " + std::to_string(a.outs) + ", K " +
                std::to_string(a.K) + ", group " + std::to_string(a.G) + ", " + std::to_string(a.bits) + " bits, " +
                std::to_string(splits) + " splits" + (a.silu ? ", silu" : "") + (a.f32_out ? ", F32 out" : "") +
                (a.norm.residual ? ", the norm prologue" : "") +
                " is outside the kernel's limits (kernel_plan.h: plan_int_linear, int_gemv_v3_splits)");
  if (a.bits == 4)
    dispatch_bits<4>(a, splits, wide, st);
  else
    dispatch_bits<8>(a, splits, wide, st);
}

}  // namespace nanovllm::cuda
