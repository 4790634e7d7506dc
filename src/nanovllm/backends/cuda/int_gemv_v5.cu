// The fifth INT4/INT8 GEMV (KernelOptions::int_gemv=v5): v4's product (int_gemv_v4.cu: out[M, N] =
// x[M, K] @ value[N, K]^T for 1 <= M <= 32 rows of BF16 x, group-quantized U4/U8 weights in
// int_layout.cuh's layout, BF16 or F32 out, the gated MLP's silu(gate) * up as its epilogue) on
// v4's persistent grid, with each warp's ring of tiles in shared memory. Semantics:
// backends/int_weights.h.
//
// Why: under ncu (bench/RESULTS.md, issue 45) v3 and v4 at T = 1 issue an instruction on 36% of
// the cycles with 0.55-0.6 eligible warps of the 3.6-3.8 each scheduler holds: latency-bound, with
// too few warps. Their rings live in registers (8 tiles x 6 words a lane), which caps a thread at
// 128 registers and an SM at 16 warps. Here the ring is in shared memory, filled by cp.async (each
// lane copies its own 16 bytes of codes and its {scale, zero} words, and reads only those back,
// so no barrier guards the ring): a thread holds ~64 registers and an SM runs 32 warps (16-warp
// CTAs where the accumulators allow: kernel_plan.h, int_gemv_v5_warps), with more bytes in flight.
//
// Mapping. A grid of R = int_gemv_v5_grid(row blocks, SMs) CTAs: CTA c owns row blocks c, c + R,
// ... (with silu: gate block b and up block b + I / 16). Within a row block the W warps split K
// (warp w: a contiguous run of n <= ceil(KT / W) tiles, the same run in every block). A warp's
// tiles form one stream across its CTA's row blocks (block after block, tile after tile); tile k
// of the stream sits in ring slot k % P, and the copies of one tile are one cp.async group, so
// when tile k is consumed, cp.async.wait_group(P - 1) says it has landed (every consumed tile
// commits one group, empty past the stream's end). Slot k % P is refilled with tile k + P right
// after tile k's mma read it (its data dependence orders the shared-memory read first). So the
// loads run on through a block's reduction and __syncthreads into the next block.
//
// Arithmetic per tile: v3's and v4's (int_gemv_tile.cuh: U4 codes as BF16 128 + q with one LOP3, the
// bias taken out through sums of x from an mma with an A of ones, F32 group scaling). Each warp's sums go
// through shared memory per row block (double-buffered where two fit), then 16 x M threads add the
// W warps' sums in warp order and store. Not bit-equal to v3 / v4 at 16 warps (other K runs per
// warp, so other F32 summation orders); at 8 warps (T > 8 with the gated MLP, T > 16) it is.
//
// Weights and scales of the first P tiles are copied before griddepcontrol.wait (the previous
// kernel cannot write them); x after it (x comes straight from global memory, as in v4).
#include <type_traits>

#include "nanovllm/backends/cuda/int_gemv_tile.cuh"
#include "nanovllm/backends/cuda/int_layout.cuh"
#include "nanovllm/backends/cuda/kernel_plan.h"
#include "nanovllm/backends/cuda/mma.cuh"

namespace nanovllm::cuda {
namespace {

// 4 bytes global -> shared (cp.async supports 4-byte copies only through L1: .ca).
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(smem)), "l"(gmem));
}

template <int kBits, bool kGeneral>
constexpr int v5_sg() {
  return kGeneral ? int_tile_k(kBits) / kIntStepK : 1;
}

// x: [M, K] BF16; codes / sz: int_layout.cuh; out: [M, N] (kSilu: N = I; gate block b, up block
// b + up_block); rows: the row blocks (kSilu: gate blocks). kGeneral: per-k-step scales and bounds.
template <int kBits, bool kSilu, bool kGeneral, int NT, class OutT>
__global__ void __launch_bounds__(int_gemv_v5_warps(kSilu ? 2 : 1, NT) * 32, kIntGemvV5CtasPerSm)
    int_gemv_v5_kernel(const bf16* __restrict__ x, const uint4* __restrict__ codes, const uint32_t* __restrict__ sz,
                       OutT* __restrict__ out, int M, int N, int K, int G, int up_block, int rows) {
  constexpr int TK = int_tile_k(kBits);         // columns of a tile
  constexpr int RB = kSilu ? 2 : 1;             // row blocks of a step
  constexpr int SG = v5_sg<kBits, kGeneral>();  // scale word pairs per tile and row
  constexpr int W = int_gemv_v5_warps(RB, NT);
  constexpr int P = int_gemv_v5_ring(RB, NT, SG);  // ring slots per warp
  constexpr int C = 8 * NT;                        // rows of x (output columns)
  constexpr int kRedBufs = int_gemv_v5_red_bufs(RB, NT);
  extern __shared__ uint4 smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  // The ring: codes [W][P][RB][32 lanes] uint4, then scale words [W][P][RB][SG][2][32] uint32, then
  // the reduction's floats [bufs][W][RB][C][17]. A lane's words are 32 apart: no bank conflicts.
  uint4* rc = smem + warp * (P * RB * 32) + lane;
  uint32_t* rs = reinterpret_cast<uint32_t*>(smem + W * P * RB * 32) + warp * (P * RB * SG * 2 * 32) + lane;
  using RedBuf = float[W][RB][C][17];
  RedBuf* red =
      reinterpret_cast<RedBuf*>(reinterpret_cast<uint32_t*>(smem + W * P * RB * 32) + W * P * RB * SG * 2 * 32);

  const int KT = (K + TK - 1) / TK, NG = K / G;
  const int per_warp = (KT + W - 1) / W;
  const int w0 = warp * per_warp;  // the warp's run in every row block: tiles w0 .. w0 + n - 1
  const int n = max(0, min(per_warp, KT - w0));
  const int stride = gridDim.x;

  // The load cursor: tile li of the warp's run in row block lb (codes at lc, the block's scale
  // words at ls; fast path: the tile's group lg and its column lcol within the group).
  int lb = blockIdx.x, li = 0, lg = 0, lcol = 0;
  const uint4* lc[RB];
  const uint32_t* ls[RB];
  auto seek_block = [&]() {
#pragma unroll
    for (int r = 0; r < RB; ++r) {
      int_block_ptrs(codes, sz, int64_t(lb) + (r ? up_block : 0), KT, NG, lane, lc[r], ls[r]);
      lc[r] += int64_t(w0) * 32;
    }
    if constexpr (!kGeneral) {
      lg = w0 * TK / G;
      lcol = w0 * TK - lg * G;
    }
  };
  if (n > 0 && lb < rows) seek_block();
  // Copies the stream's next tile into slot u and commits its group (empty past the stream's end).
  auto load_next = [&](int u) {
    if (n > 0 && lb < rows) {
#pragma unroll
      for (int r = 0; r < RB; ++r) {
        cp_async16(rc + (u * RB + r) * 32, lc[r], 16);
        lc[r] += 32;
        uint32_t* s = rs + (u * RB + r) * (SG * 2 * 32);
        if constexpr (kGeneral) {
#pragma unroll
          for (int q = 0; q < SG; ++q) {
            const int gi = int_tile_group<TK>(w0 + li, q, G, NG);
            cp_async4(s + (2 * q) * 32, ls[r] + gi * 16);
            cp_async4(s + (2 * q + 1) * 32, ls[r] + gi * 16 + 8);
          }
        } else {
          cp_async4(s, ls[r] + lg * 16);
          cp_async4(s + 32, ls[r] + lg * 16 + 8);
        }
      }
      if constexpr (!kGeneral) {
        lcol += TK;
        if (lcol == G) lcol = 0, ++lg;
      }
      if (++li == n) {
        li = 0;
        lb += stride;
        if (lb < rows) seek_block();
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int u = 0; u < P; ++u) load_next(u);
  pdl_begin();  // x is the previous kernel's output

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
  for (int nt = 0; nt < NT; ++nt) xr[nt] = x + int64_t(min(8 * nt + g, M - 1)) * K + 4 * t + w0 * TK;
  int u = 0;  // the ring slot of the stream's next tile
  for (int jb = 0, blk = blockIdx.x; blk < rows; ++jb, blk += stride) {
    for (int i = 0; i < n; ++i) {
      cp_async_wait<P - 1>();  // this tile's group has landed
      const int k0 = (w0 + i) * TK;
      uint4 wq[RB];
      uint32_t ws[RB][SG][2];
#pragma unroll
      for (int r = 0; r < RB; ++r) {
        wq[r] = rc[(u * RB + r) * 32];
        const uint32_t* s = rs + (u * RB + r) * (SG * 2 * 32);
#pragma unroll
        for (int q = 0; q < SG; ++q) ws[r][q][0] = s[(2 * q) * 32], ws[r][q][1] = s[(2 * q + 1) * 32];
      }
      int_gemv_tile<kBits, kGeneral, NT, RB, SG>(xr, i, k0, K, wq, ws, acc);
      load_next(u);  // slot u <- the stream's tile P ahead (wq and ws were read above)
      if (++u == P) u = 0;
    }

    // The row block's outputs (int_gemv_tile.cuh), the warps' sums added in v3's order.
    if (kRedBufs == 1 && jb > 0) __syncthreads();  // every thread done reading the previous block's
    RedBuf& rd = red[kRedBufs == 1 ? 0 : jb & 1];
    int_gemv_block_sums<W, RB, NT, kSilu>(rd, acc, jb, M, N, blk, out);
  }
  cp_async_wait<0>();  // no copy outlives the CTA's shared memory
}

template <int kBits, bool kSilu, bool kGeneral, int NT, class OutT>
void launch_v5_out(const IntGemvArgs& a, int num_sms, Stream st, OutT* out) {
  constexpr int RB = kSilu ? 2 : 1, SG = v5_sg<kBits, kGeneral>();
  constexpr int smem = int_gemv_v5_smem(RB, NT, SG);
  static_assert(kIntGemvV5CtasPerSm * (smem + 1024) <= 228 * 1024, "two CTAs an SM");
  const int64_t rows = int_gemv_row_blocks(a.outs, kSilu);
  const int up_block = kSilu ? int(a.outs / kIntRowBlock) : 0;
  const dim3 grid{unsigned(int_gemv_v5_grid(rows, num_sms)), 1u, 1u};
  launch(int_gemv_v5_kernel<kBits, kSilu, kGeneral, NT, OutT>, grid, dim3(int_gemv_v5_warps(RB, NT) * 32), size_t(smem),
         st, a.x, a.codes, a.sz, out, int(a.M), int(a.outs), int(a.K), int(a.G), up_block, int(rows));
  NV_LAUNCH_CHECK();
}

// Lets an instantiation take its shared memory (above the 48 KiB default).
template <int kBits, bool kSilu, bool kGeneral, int NT, class OutT>
void set_smem_limit() {
  NV_CUDA_CHECK(cudaFuncSetAttribute(int_gemv_v5_kernel<kBits, kSilu, kGeneral, NT, OutT>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int_gemv_v5_smem(kSilu ? 2 : 1, NT, v5_sg<kBits, kGeneral>())));
}
template <int kBits, bool kGeneral, int NT>
void set_smem_limits() {
  set_smem_limit<kBits, false, kGeneral, NT, bf16>();
  set_smem_limit<kBits, false, kGeneral, NT, float>();
  set_smem_limit<kBits, true, kGeneral, NT, bf16>();
}
template <int kBits, bool kGeneral>
void set_smem_limits_nt() {
  set_smem_limits<kBits, kGeneral, 1>();
  set_smem_limits<kBits, kGeneral, 2>();
  set_smem_limits<kBits, kGeneral, 4>();
}

template <int kBits, bool kSilu, bool kGeneral, int NT>
void launch_v5(const IntGemvArgs& a, int num_sms, Stream st) {
  if constexpr (!kSilu) {
    if (a.f32_out) return launch_v5_out<kBits, kSilu, kGeneral, NT>(a, num_sms, st, static_cast<float*>(a.out));
  }
  launch_v5_out<kBits, kSilu, kGeneral, NT>(a, num_sms, st, static_cast<bf16*>(a.out));
}

template <int kBits, bool kSilu, bool kGeneral>
void dispatch_ntiles(const IntGemvArgs& a, int num_sms, Stream st) {
  switch (int_gemv_ntiles(a.M)) {
    case 1: return launch_v5<kBits, kSilu, kGeneral, 1>(a, num_sms, st);
    case 2: return launch_v5<kBits, kSilu, kGeneral, 2>(a, num_sms, st);
    default: return launch_v5<kBits, kSilu, kGeneral, 4>(a, num_sms, st);
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

void int_gemv_v5_init() {
  set_smem_limits_nt<4, false>();
  set_smem_limits_nt<4, true>();
  set_smem_limits_nt<8, false>();
  set_smem_limits_nt<8, true>();
}

void int_gemv_v5(const IntGemvArgs& a, int num_sms, Stream st) {
  const int64_t rows = int_gemv_row_blocks(a.outs, a.silu);
  if (a.M < 1 || a.M > kIntGemvMaxT || a.outs < 1 || (a.silu && (a.f32_out || a.outs % kIntRowBlock != 0)) ||
      (a.bits != 4 && a.bits != 8) || !int_layout_supports(a.bits, a.K, a.G) || num_sms < 1 ||
      rows > (int64_t(1) << 26))
    throw Error("int_gemv_v5: M " + std::to_string(a.M) + ", outputs " + std::to_string(a.outs) + ", K " +
                std::to_string(a.K) + ", group " + std::to_string(a.G) + ", " + std::to_string(a.bits) + " bits" +
                (a.silu ? ", silu" : "") + (a.f32_out ? ", F32 out" : "") + " on " + std::to_string(num_sms) +
                " SMs is outside the kernel's limits (kernel_plan.h: plan_int_linear)");
  if (a.bits == 4)
    dispatch_bits<4>(a, num_sms, st);
  else
    dispatch_bits<8>(a, num_sms, st);
}

}  // namespace nanovllm::cuda
