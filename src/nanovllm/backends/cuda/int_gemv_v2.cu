// The second INT4/INT8 GEMV (KernelOptions::int_gemv=v2): out[M, N] = x[M, K] @ value[N, K]^T for
// 1 <= M <= 32 rows of BF16 x and group-quantized U4/U8 weights in int_layout.cuh's layout (the
// same prepared weights as int_linear.cu's v1, so the option switches at run time), BF16 or F32
// out, and the gated MLP's silu(gate) * up as its epilogue. Semantics: backends/int_weights.h.
//
// Mapping. A CTA of 8 warps owns one 16-row block of the weight (with silu: the gate block b and
// the up block b + I / 16, whose outputs meet in its epilogue) and all of K; warp w takes the
// block's K tiles w, w + 8, w + 16, ... (8 warps read 4 KB of adjacent codes per round). Each lane
// holds a ring of P tiles (P x 16 bytes of codes plus their {scale, zero} words, per row block):
// the ring is filled before griddepcontrol.wait (the weights are not written by the previous
// kernel), and each slot is refilled with the tile P rounds ahead as soon as it is consumed, so
// P tiles per warp stay in flight the whole time. A tile is dequantized in registers as in v1
// (int4_fragment / int8_fragment: q - z as exact BF16 integers) and multiplied on the tensor
// cores (mma.sync m16n8k16) with NT n-tiles of 8 rows of x each (NT = int_gemv_ntiles(M): 1, 2
// or 4), all sharing the dequantized A fragment: every M <= 32 is one pass over the codes. Each
// group's F32 partial sums are scaled by the group's F32 scale; the 8 warps' sums are added in
// shared memory at the end, with the epilogue (BF16 rounding, silu as gemv.cu rounds it).
//
// Why. v1 holds 4 tiles per warp and waits for all of them before it loads the next 4: 16 KB in
// flight per CTA, and a DRAM round trip per 4 tiles with nothing in flight in between; at 2 CTAs
// per SM that stays under what H200 DRAM needs in flight (~36 KB per SM), and T = 16 or 32 ran 2
// or 4 passes, each re-reading the codes. Here P = 8 slots (fewer where the registers run out:
// silu's two blocks, NT = 4, groups that split a tile) keep 32 KB per CTA in flight continuously,
// so at Qwen3-8B's shapes (64-192 tiles per row block) the whole block's codes are requested in
// one or a few overlapping rounds; and the codes are read once for T up to 32, their dequantization
// amortized over NT n-tiles. The cost of large T is x: each tile needs NT x 512 bytes of x (L1/L2
// hits; co-resident CTAs walk K in the same order), and the mma count grows with NT.
//
// x rows past M in the n-tiles read row M - 1 again (valid memory; their columns are dropped).
// Columns past K (the last tile's padding: code 0, not value 0) multiply zeros instead of x; a
// slot past the last tile loads nothing and carries scale 0 and x 0, so it adds exact zeros.
#include <type_traits>

#include "nanovllm/backends/cuda/int_layout.cuh"
#include "nanovllm/backends/cuda/kernel_plan.h"
#include "nanovllm/backends/cuda/mma.cuh"

namespace nanovllm::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;

// Ring slots per warp: 8 tiles of one row block at one n-tile, 6 at two, 4 at four (their x
// fragments and accumulators take the registers); halved for two row blocks (silu) and for
// per-k-step scales (groups that split a tile). The most that fit 128 registers without spills
// (__launch_bounds__(256, 2): two CTAs per SM).
constexpr int ring_slots(int RB, int NT, bool step_groups) {
  const int p = (NT == 1 ? 8 : NT == 2 ? 6 : 2) / RB / (step_groups ? 2 : 1);
  return p < 1 ? 1 : p;
}

// x: [M, K] BF16; codes / sz: int_layout.cuh; out: [M, N] with N the outputs (kSilu: I; the gate
// block of CTA b is b, its up block b + up_block).
template <int kBits, bool kSilu, bool kStepGroups, int NT, class OutT>
__global__ void __launch_bounds__(kThreads, 2)
    int_gemv_v2_kernel(const bf16* __restrict__ x, const uint4* __restrict__ codes, const uint32_t* __restrict__ sz,
                       OutT* __restrict__ out, int M, int N, int K, int G, int up_block) {
  constexpr int TK = int_tile_k(kBits), S = TK / kIntStepK;  // columns and k-steps of a tile
  constexpr int RB = kSilu ? 2 : 1;                          // row blocks of the CTA
  constexpr int SG = kStepGroups ? S : 1;                    // scale words per tile and row
  constexpr int P = ring_slots(RB, NT, kStepGroups);         // tiles in flight per warp and row block
  constexpr int C = 8 * NT;                                  // rows of x (output columns) of the CTA
  __shared__ float red[kWarps][RB][16][C];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int KT = (K + TK - 1) / TK, NG = K / G;
  const uint4* cb[RB];
  const uint32_t* sb[RB];
#pragma unroll
  for (int r = 0; r < RB; ++r)
    int_block_ptrs(codes, sz, int64_t(blockIdx.x) + (r ? up_block : 0), KT, NG, lane, cb[r], sb[r]);

  uint4 wq[P][RB];
  uint32_t ws[P][RB][SG][2];  // {scale, zero} words of rows g and g + 8
  // Slot u <- tile kt (nothing loaded, zeros, past the last tile).
  auto load_slot = [&](int u, int kt) {
    const bool ok = kt < KT;
#pragma unroll
    for (int r = 0; r < RB; ++r) {
      wq[u][r] = ok ? load_codes(cb[r] + int64_t(kt) * 32) : make_uint4(0, 0, 0, 0);
      int_tile_scales<TK, SG>(sb[r], kt, ok, G, NG, ws[u][r]);
    }
  };
#pragma unroll
  for (int u = 0; u < P; ++u) load_slot(u, warp + u * kWarps);
  pdl_begin();  // x is the previous kernel's output

  float acc[RB][NT][4];
#pragma unroll
  for (int r = 0; r < RB; ++r)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[r][n][c] = 0.f;
  const bf16* xr[NT];  // lane's row of x in n-tile n (B fragment column g), at its 4 columns of a step
#pragma unroll
  for (int n = 0; n < NT; ++n) xr[n] = x + int64_t(min(8 * n + g, M - 1)) * K + 4 * t;

  const int tiles = warp < KT ? (KT - warp + kWarps - 1) / kWarps : 0;  // this warp's tiles
  for (int round = 0; round * P < tiles; ++round) {
#pragma unroll
    for (int u = 0; u < P; ++u) {
      const int kt = warp + (round * P + u) * kWarps;
#pragma unroll
      for (int r = 0; r < RB; ++r) {
        const uint32_t wv[4] = {wq[u][r].x, wq[u][r].y, wq[u][r].z, wq[u][r].w};
        float part[NT][4];
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
          for (int c = 0; c < 4; ++c) part[n][c] = 0.f;
        float2 sz0 = int_scale_zero(ws[u][r][0][0]), sz1 = int_scale_zero(ws[u][r][0][1]);
#pragma unroll
        for (int j = 0; j < S; ++j) {
          if constexpr (kStepGroups) {
            sz0 = int_scale_zero(ws[u][r][j][0]);
            sz1 = int_scale_zero(ws[u][r][j][1]);
          }
          const int k = kt * TK + kIntStepK * j;
          uint2 xb[NT];  // zeros past K (padding, or a slot past the last tile); L1 hits for r = 1
#pragma unroll
          for (int n = 0; n < NT; ++n)
            xb[n] = k < K ? __ldg(reinterpret_cast<const uint2*>(xr[n] + k)) : make_uint2(0, 0);
          uint32_t a[4];
          int_fragment<kBits>(wv, j, sz0, sz1, a);
#pragma unroll
          for (int n = 0; n < NT; ++n) mma_bf16_16816(part[n], a, xb[n].x, xb[n].y);
          if (kStepGroups || j == S - 1) {  // the group's partial sums, scaled per row (c0, c1: row g)
#pragma unroll
            for (int n = 0; n < NT; ++n) int_scale_partials(acc[r][n], part[n], sz0.x, sz1.x);
          }
        }
      }
      load_slot(u, kt + P * kWarps);  // the slot's next tile, P rounds of 8 warps ahead
    }
  }
  // C fragment of n-tile n: c0, c1 = (row g, x rows 8n + 2t, + 1); c2, c3 = (row g + 8, the same).
#pragma unroll
  for (int r = 0; r < RB; ++r)
#pragma unroll
    for (int n = 0; n < NT; ++n)  // n-tile n: columns 8n ..
      int_store_fragment<C>(reinterpret_cast<float(*)[C]>(&red[warp][r][0][8 * n]), lane, acc[r][n]);
  __syncthreads();
  for (int e = threadIdx.x; e < 16 * C; e += kThreads) {
    const int i = e & 15, m = e >> 4;  // 16 adjacent outputs of one row of x per 16 threads
    const int n = blockIdx.x * 16 + i;
    if (m >= M || n >= N) continue;
    float s = 0.f, u = 0.f;
#pragma unroll
    for (int wi = 0; wi < kWarps; ++wi) {
      s += red[wi][0][i][m];
      if constexpr (kSilu) u += red[wi][RB - 1][i][m];
    }
    int_gemv_store<kSilu>(s, u, out + int64_t(m) * N + n);
  }
}

template <int kBits, bool kSilu, bool kStepGroups, int NT>
void launch_v2(const IntGemvArgs& a, Stream st) {
  const unsigned grid = ceil_div(a.outs, kIntRowBlock);
  const int up_block = kSilu ? int(a.outs / kIntRowBlock) : 0;
  const int M = int(a.M), N = int(a.outs), K = int(a.K), G = int(a.G);
  if (a.f32_out)
    launch(int_gemv_v2_kernel<kBits, kSilu, kStepGroups, NT, float>, grid, kThreads, 0, st, a.x, a.codes, a.sz,
           static_cast<float*>(a.out), M, N, K, G, up_block);
  else
    launch(int_gemv_v2_kernel<kBits, kSilu, kStepGroups, NT, bf16>, grid, kThreads, 0, st, a.x, a.codes, a.sz,
           static_cast<bf16*>(a.out), M, N, K, G, up_block);
  NV_LAUNCH_CHECK();
}

template <int kBits, bool kSilu, bool kStepGroups>
void dispatch_ntiles(const IntGemvArgs& a, Stream st) {
  switch (int_gemv_ntiles(a.M)) {
    case 1: return launch_v2<kBits, kSilu, kStepGroups, 1>(a, st);
    case 2: return launch_v2<kBits, kSilu, kStepGroups, 2>(a, st);
    default: return launch_v2<kBits, kSilu, kStepGroups, 4>(a, st);
  }
}

template <int kBits>
void dispatch_bits(const IntGemvArgs& a, Stream st) {
  const bool step_groups = a.G % int_tile_k(kBits) != 0;  // a tile may straddle two groups
  if (a.silu)
    step_groups ? dispatch_ntiles<kBits, true, true>(a, st) : dispatch_ntiles<kBits, true, false>(a, st);
  else
    step_groups ? dispatch_ntiles<kBits, false, true>(a, st) : dispatch_ntiles<kBits, false, false>(a, st);
}

}  // namespace

void int_gemv_v2(const IntGemvArgs& a, Stream st) {
  if (a.M < 1 || a.M > kIntGemvMaxT || a.outs < 1 || (a.silu && (a.f32_out || a.outs % kIntRowBlock != 0)) ||
      (a.bits != 4 && a.bits != 8) || !int_layout_supports(a.bits, a.K, a.G))
    throw Error("int_gemv_v2: M " + std::to_string(a.M) + ", outputs " + std::to_string(a.outs) + ", K " +
                std::to_string(a.K) + ", group " + std::to_string(a.G) + ", " + std::to_string(a.bits) + " bits" +
                (a.silu ? ", silu" : "") + (a.f32_out ? ", F32 out" : "") +
                " is outside the kernel's limits (kernel_plan.h: plan_int_linear)");
  if (a.bits == 4)
    dispatch_bits<4>(a, st);
  else
    dispatch_bits<8>(a, st);
}

}  // namespace nanovllm::cuda
