// The fourth INT4/INT8 GEMV (KernelOptions::int_gemv=v4): v3's product (int_gemv_v3.cu: out[M, N] =
// x[M, K] @ value[N, K]^T for 1 <= M <= 32 rows of BF16 x, group-quantized U4/U8 weights in
// int_layout.cuh's layout, BF16 or F32 out, the gated MLP's silu(gate) * up as its epilogue) on a
// persistent grid. Semantics: backends/int_weights.h.
//
// Arithmetic: v3's with one split, step for step: every tile is v3's code (int_gemv_tile.cuh: the
// same fragments, U4's bias of 128 taken out through sums of x, the same group scaling), each warp's
// tiles in the same order, the warps' sums added in the same order, so the outputs equal v3's
// (splits = 1) bit for bit.
//
// Mapping. A grid of R = int_gemv_v4_grid(row blocks, SMs) CTAs (kernel_plan.h: at most
// kIntGemvV4CtasPerSm per SM, one wave): CTA c owns row blocks c, c + R, c + 2R, ... (with silu:
// gate block b and up block b + I / 16 each). Strided rather than contiguous ranges: the counts
// are the same (they differ by at most one), and CTAs c and c + SMs, which usually share an SM,
// then get ceil and floor counts, so the SMs' loads differ by at most one block. Within a row
// block the 8 warps split K as v3 does (warp w: a contiguous run of n <= ceil(KT / 8) tiles).
//
// Why: v3 gives each CTA one row block, so at K = 4096 a warp walks 8 tiles: it fills its ring,
// waits one DRAM round trip, computes, the CTA reduces, stores and exits, and the grid runs 2-3
// such waves (Qwen3-8B gate_up: 768 CTAs on 264 slots) with DRAM idle in each wave's ramp. Here
// each warp's ring of P tiles runs on across its CTA's row blocks: ring slot u holds tiles u,
// u + P, u + 2P, ... of the warp's run, and once it has given the run's last of them it is
// refilled with tile u of the CTA's next row block. So when the warps reach a row block's end,
// all P slots already hold (or are loading) the next block's first tiles, and the reduction,
// __syncthreads and stores overlap those loads instead of an empty ring.
//
// Per row block the warps' sums go through shared memory (red, double-buffered where two fit in
// 48 KiB, so one __syncthreads per block; the gated MLP at four n-tiles keeps one buffer and a
// second barrier), then 16 x M threads add them in warp order and store; the warp that starts that
// reduction rotates with the block so no warp falls behind every time.
//
// Weights and scales of the first P tiles are loaded before griddepcontrol.wait (the previous
// kernel cannot write them); x after it.
//
// Registers (-Xptxas -v, sm_90a, nvcc 13.0; 128 a thread at most: two CTAs an SM): 95-128, U4 at
// one n-tile 110 (v3 95), its gated MLP 120 (v3 110); spills only in the U4 gated MLP at four
// n-tiles (T 17..32: 160 bytes, v3 152; general path 80, v3 64). The fast path's group index in
// F32 (below) instead of a cursor per refill stream saved the 18-33 registers that spilled at one
// n-tile. SASS of the main loop (U4, G 128, one n-tile, no silu; scripts/sass_loop_count.py): 737
// instructions a round of 8 tiles against v3's 700, both refill paths counted (one runs a tile).
#include <type_traits>

#include "nanovllm/backends/cuda/int_gemv_norm.cuh"
#include "nanovllm/backends/cuda/int_gemv_tile.cuh"
#include "nanovllm/backends/cuda/int_layout.cuh"
#include "nanovllm/backends/cuda/kernel_plan.h"
#include "nanovllm/backends/cuda/mma.cuh"

namespace nanovllm::cuda {
namespace {

constexpr int kWarps = kIntGemvV4Warps;
constexpr int kThreads = kWarps * 32;
// x: [M, K] BF16; codes / sz: int_layout.cuh; out: [M, N] (kSilu: N = I; gate block b, up block
// b + up_block); rows: the row blocks (kSilu: gate blocks). kGeneral: per-k-step scales and bounds.
// kNorm: x is the layer's output and the product takes rms_norm(x + residual) from the CTA's shared
// memory (int_gemv_norm.cuh; nrm).
template <int kBits, bool kSilu, bool kGeneral, int NT, bool kNorm, class OutT>
__global__ void __launch_bounds__(kThreads, kIntGemvV4CtasPerSm)
    int_gemv_v4_kernel(const bf16* __restrict__ x, const uint4* __restrict__ codes, const uint32_t* __restrict__ sz,
                       OutT* __restrict__ out, int M, int N, int K, int G, int up_block, int rows, GemvNorm nrm) {
  constexpr int TK = int_tile_k(kBits), S = TK / kIntStepK;  // columns and k-steps of a tile
  constexpr int RB = kSilu ? 2 : 1;                          // row blocks of a step
  constexpr int SG = kGeneral ? S : 1;                       // scale words per tile and row
  constexpr int P = int_gemv_v4_ring(RB, NT, kGeneral);      // the ring: tiles in flight per warp
  constexpr int C = 8 * NT;                                  // rows of x (output columns)
  constexpr int kRedBytes = kWarps * RB * C * 17 * 4;
  constexpr int kRedBufs = 2 * kRedBytes <= 48 * 1024 ? 2 : 1;
  __shared__ float red[kRedBufs][kWarps][RB][C][17];  // [buffer][warp][block][x row][weight row], padded
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int KT = (K + TK - 1) / TK, NG = K / G;
  const int per_warp = (KT + kWarps - 1) / kWarps;
  const int w0 = warp * per_warp;  // the warp's run in every row block: tiles w0 .. w0 + n - 1
  const int n = max(0, min(per_warp, KT - w0));
  const int stride = gridDim.x;
  int blk = blockIdx.x;
  // The warp's run in the current row block (cw: tile i at cw + 32 i; sw: its scale words) and the
  // step to the CTA's next one.
  const uint4* cw[RB];
  const uint32_t* sw[RB];
#pragma unroll
  for (int r = 0; r < RB; ++r) {
    int_block_ptrs(codes, sz, int64_t(blk) + (r ? up_block : 0), KT, NG, lane, cw[r], sw[r]);
    cw[r] += int64_t(w0) * 32;
  }
  const int64_t cstep = int64_t(stride) * KT * 32, sstep = int64_t(stride) * NG * 16;

  uint4 wq[P][RB];
  uint32_t ws[P][RB][SG][2];  // {scale, zero} words of rows g and g + 8
  // Fast path (G a multiple of TK, TPG = G / TK tiles a group): sw is moved to the group of the
  // run's first tile, whose place in its group is c0; tile i of the run is then in group
  // floor((c0 + i + 1/2) / TPG) after it, computed in F32 as trunc(i * inv + fb) (inv = 1 / TPG,
  // fb = (c0 + 1/2) inv, rounded): the exact quotient is at least 1 / (2 TPG) from an integer and
  // the F32 one within 2^-22 of it relatively, which holds while KT < 2^20 (int_gemv_v4 checks).
  // Two registers instead of a group cursor per refill stream: slot u's refills jump from the
  // block's tile u + kP back to the next block's tile u.
  float inv = 0.f, fb = 0.f;
  if constexpr (!kGeneral) {
    const int tpg = G / TK, gl0 = w0 / tpg;
    inv = __frcp_rn(float(tpg));
    fb = (float(w0 - gl0 * tpg) + 0.5f) * inv;
#pragma unroll
    for (int r = 0; r < RB; ++r) sw[r] += gl0 * 16;
  }
  // The word offset of tile i's group (fast path): base = fb + i0 inv for tile i0 + d.
  auto group_words = [&](float base, int d) { return __float2int_rz(fmaf(float(d), inv, base)) * 16; };
  // Slot u <- tile i of the run whose codes start at c and scale words at s (fast path: the
  // group's words at s + so).
  auto load = [&](int u, const uint4* const(&c)[RB], const uint32_t* const(&s)[RB], int i, int so) {
#pragma unroll
    for (int r = 0; r < RB; ++r) {
      wq[u][r] = load_codes(c[r] + i * 32);
      if constexpr (kGeneral) {
        int_tile_scales<TK, SG>(s[r], w0 + i, true, G, NG, ws[u][r]);
      } else {
        ws[u][r][0][0] = __ldg(s[r] + so);
        ws[u][r][0][1] = __ldg(s[r] + so + 8);
      }
    }
  };
#pragma unroll
  for (int u = 0; u < P; ++u)
    if (u < n) load(u, cw, sw, u, kGeneral ? 0 : group_words(fb, u));
  pdl_begin();  // x is the previous kernel's output
  extern __shared__ uint4 norm_smem[];  // kNorm: the normalized x, M x int_gemv_norm_ld(K) BF16
  if constexpr (kNorm)
    int_gemv_norm_prologue<kThreads>(x, nrm, M, K, reinterpret_cast<bf16*>(norm_smem), blockIdx.x, stride);
  const bf16* xbase = kNorm ? reinterpret_cast<const bf16*>(norm_smem) : x;
  const int ldx = kNorm ? int(int_gemv_norm_ld(K)) : K;

  float acc[RB][NT][4];
#pragma unroll
  for (int r = 0; r < RB; ++r)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[r][nt][c] = 0.f;
  // Lane's row of x in n-tile nt (B fragment column g) at its 4 columns of the run's first k-step.
  const bf16* xr[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) xr[nt] = xbase + int64_t(min(8 * nt + g, M - 1)) * ldx + 4 * t + w0 * TK;

  for (int jb = 0; blk < rows; ++jb, blk += stride) {
    const bool more = blk + stride < rows;
    const uint4* cn[RB];  // the next row block's run
    const uint32_t* sn[RB];
#pragma unroll
    for (int r = 0; r < RB; ++r) cn[r] = cw[r] + cstep, sn[r] = sw[r] + sstep;
    for (int i0 = 0; i0 < n; i0 += P) {
      // Per round, so the compiler cannot keep the P next-block offsets live across the loop.
      float fbr = fb;
      asm volatile("" : "+f"(fbr));
      const float fi = fmaf(float(i0), inv, fbr);  // tile i0's base for group_words
#pragma unroll
      for (int u = 0; u < P; ++u) {
        const int i = i0 + u;
        if (i >= n) break;  // warp-uniform: the run's last round
        int_gemv_tile<kBits, kGeneral, NT, RB, SG, kNorm>(xr, i, (w0 + i) * TK, K, wq[u], ws[u], acc);  // tile i
        // Refill slot u: its next tile in this block, else tile u of the CTA's next block.
        if (i + P < n)
          load(u, cw, sw, i + P, kGeneral ? 0 : group_words(fi, u + P));
        else if (more)
          load(u, cn, sn, u, kGeneral ? 0 : group_words(fbr, u));
      }
    }

    // The row block's outputs (int_gemv_tile.cuh), the warps' sums added in v3's order.
    if (kRedBufs == 1 && jb > 0) __syncthreads();  // every thread done reading the previous block's
    auto& rd = red[kRedBufs == 1 ? 0 : jb & 1];
    int_gemv_block_sums<kWarps, RB, NT, kSilu>(rd, acc, jb, M, N, blk, out);
#pragma unroll
    for (int r = 0; r < RB; ++r) cw[r] = cn[r], sw[r] = sn[r];
  }
}

template <int kBits, bool kSilu, bool kGeneral, int NT, bool kNorm = false>
void launch_v4(const IntGemvArgs& a, int num_sms, Stream st) {
  const int64_t rows = int_gemv_row_blocks(a.outs, kSilu);
  const int up_block = kSilu ? int(a.outs / kIntRowBlock) : 0;
  const int M = int(a.M), N = int(a.outs), K = int(a.K), G = int(a.G);
  const dim3 grid{unsigned(int_gemv_v4_grid(rows, num_sms)), 1u, 1u};
  const size_t smem = kNorm ? size_t(int_gemv_norm_smem(M, K)) : 0;
  if constexpr (!kSilu) {
    if (a.f32_out) {
      launch(int_gemv_v4_kernel<kBits, kSilu, kGeneral, NT, kNorm, float>, grid, dim3(kThreads), smem, st, a.x, a.codes,
             a.sz, static_cast<float*>(a.out), M, N, K, G, up_block, int(rows), a.norm);
      NV_LAUNCH_CHECK();
      return;
    }
  }
  launch(int_gemv_v4_kernel<kBits, kSilu, kGeneral, NT, kNorm, bf16>, grid, dim3(kThreads), smem, st, a.x, a.codes,
         a.sz, static_cast<bf16*>(a.out), M, N, K, G, up_block, int(rows), a.norm);
  NV_LAUNCH_CHECK();
}

template <int kBits, bool kSilu, bool kGeneral>
void dispatch_ntiles(const IntGemvArgs& a, int num_sms, Stream st) {
  switch (int_gemv_ntiles(a.M)) {
    case 1:
      if constexpr (!kGeneral) {  // the norm prologue: one n-tile, the fast path (int_gemv_v4 checks)
        if (a.norm.residual) return launch_v4<kBits, kSilu, kGeneral, 1, true>(a, num_sms, st);
      }
      return launch_v4<kBits, kSilu, kGeneral, 1>(a, num_sms, st);
    case 2: return launch_v4<kBits, kSilu, kGeneral, 2>(a, num_sms, st);
    default: return launch_v4<kBits, kSilu, kGeneral, 4>(a, num_sms, st);
  }
}

template <int kBits>
void dispatch_bits(const IntGemvArgs& a, int num_sms, Stream st) {
  const bool general = a.G % int_tile_k(kBits) != 0 || a.K % int_tile_k(kBits) != 0;
  if (a.silu)
    general ? dispatch_ntiles<kBits, true, true>(a, num_sms, st) : dispatch_ntiles<kBits, true, false>(a, num_sms, st);
  else
    general ? dispatch_ntiles<kBits, false, true>(a, num_sms, st)
            : dispatch_ntiles<kBits, false, false>(a, num_sms, st);
}

}  // namespace

void int_gemv_v4(const IntGemvArgs& a, int num_sms, Stream st) {
  const int64_t rows = int_gemv_row_blocks(a.outs, a.silu);
  if (a.M < 1 || a.M > kIntGemvMaxT || a.outs < 1 || (a.silu && (a.f32_out || a.outs % kIntRowBlock != 0)) ||
      (a.bits != 4 && a.bits != 8) || !int_layout_supports(a.bits, a.K, a.G) || num_sms < 1 ||
      rows > (int64_t(1) << 26) || a.K / int_tile_k(a.bits) >= (int64_t(1) << 20) ||
      (a.norm.residual && !int_gemv_norm_ok(a)))
    throw Error("int_gemv_v4: M " + std::to_string(a.M) + ", outputs " + std::to_string(a.outs) + ", K " +
                std::to_string(a.K) + ", group " + std::to_string(a.G) + ", " + std::to_string(a.bits) + " bits" +
                (a.silu ? ", silu" : "") + (a.f32_out ? ", F32 out" : "") +
                (a.norm.residual ? ", the norm prologue" : "") + " on " + std::to_string(num_sms) +
                " SMs is outside the kernel's limits (kernel_plan.h: plan_int_linear)");
  if (a.bits == 4)
    dispatch_bits<4>(a, num_sms, st);
  else
    dispatch_bits<8>(a, num_sms, st);
}

}  // namespace nanovllm::cuda
