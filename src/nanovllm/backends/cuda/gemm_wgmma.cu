// Our own Hopper BF16 GEMM: out[T, N] = x[T, K] @ w[N, K]^T, BF16 in and out, FP32 accumulation
// (what CudaBackend::linear runs through cuBLASLt). gemm_wgmma.h says why it exists: an epilogue
// we own, for the fusions cuBLASLt has no epilogue for.
//
// Shapes. A CTA owns 128 rows of x (t0 ..) x kCols weight rows (n0 ..), over all of K in stages of
// 64 columns. x and w are read by TMA in boxes [64 columns][128 rows] and [64][kCols] with the
// 128-byte swizzle (wgmma.cuh: K-major operands, 8-row groups 1024 bytes apart); coordinates past T,
// N or K read as zeros, so tails need no code.
//
// Threads. 9 warps: warpgroups 0 and 1 compute (warpgroup g: x rows t0 + 64 g .. + 63 against all
// kCols weight rows, 4 wgmma.m64n{kCols}k16 a stage with A = x and B = w from shared memory), warp 8
// is the producer: its lane 0 fills a ring of kStages stages, each once the products of the slot's
// previous stage are done ("empty" barrier: one arrival per compute warp), the copies completing
// the slot's "full" barrier. The compute warps keep one stage's products in flight (wait_group 1)
// and free the slot of the stage before. The qkv form has 12 warps: the producer's warpgroup hands
// its registers to the compute warpgroups (setmaxnreg), whose epilogue needs more than 168.
//
// Epilogue. The accumulators straight to out (store_direct): a thread holds rows 16 w + g and + 8 of
// its warpgroup's 64 (g = lane / 4), weight columns 8 j + 2 (lane % 4) + {0, 1}: one BF16 pair a
// store, a quad's four stores 16 contiguous bytes. Or (the TMA-store form) through two 64 x 64
// swizzled boxes a warpgroup and TMA stores that run on under the next tile's products (store_tma).
// The GateUpSilu form is that one on the gated MLP: a tile's 256 weight rows are 128 gate rows and
// the matching up rows (two TMA boxes a stage), so a thread holds gate and up of the same outputs
// (acc[j], acc[j + 16]) and stores silu(gate) * up, rounded as linear + silu_and_mul round it. The
// qkv form (gemm_wgmma_rope) does qk_norm_rope_store's work on its two heads a tile (rope_epilogue)
// and stores q heads into qkv by TMA, k and v heads into the caches by 16-byte stores (store_rope).
// Or (the epilogue-warp forms) the compute warps stage the whole tile's BF16 outputs in shared memory
// and go on to the next tile at once, and a tenth warp issues its TMA stores and frees the staging
// boxes ("staged" / "drained" barriers): the compute warps no longer wait for the stores' reads of
// their boxes. The staging takes 64 KiB for 256 outputs a tile (a ring of 3 stages), 32 KiB for the
// gated form's 128 (4 stages).
//
// Grid. Tiles are numbered in groups of kGroup weight-row tiles, the x tiles fastest within a
// group, so that the CTAs resident at once share a few weight tiles and x tiles through L2. A CTA
// takes one tile, or (persistent forms) one wave of CTAs walks every gridDim.x-th tile, the
// producer's ring running on into the CTA's next tile while the compute warps store this one.
// Pairs (kPair, KernelOptions::gemm_pair): thread-block clusters of two CTAs walk tiles of twice a
// CTA tile's x rows together, rank r on the rows from t0 + r x (the CTA tile's rows), on the same
// weight rows: each CTA's producer
// loads its own x box and half of the weight box, multicast into both CTAs' slots, and each compute
// warp frees a slot on both CTAs' "empty" barriers (gemm_wgmma.cuh). The arrivals must release at
// CTA scope: a cluster-scope release waited for the next stage's products in flight and cost 40%
// (bench/RESULTS.md: "CTA pairs").
// Ping-pong (kPingPong, KernelOptions::gemm_pingpong): CTA tiles of 64 rows, the two compute
// warpgroups taking the CTA's tiles in turn, each on a whole tile (a stage: x [64][64], w [256][64];
// 4 stages), so that one warpgroup's epilogue runs while the other's products keep the tensor cores
// busy. Turns (named barriers kBarTurn + wg) let one warpgroup at a time wait on the ring, handed on
// once a warpgroup has issued its tile's last products. Its mainloop is slower than the two
// warpgroups on one 128-row tile (one warpgroup's products in flight), so it pays only for the qkv
// form's long epilogue (bench/RESULTS.md: "ping-pong").
//
// Measured (bench/gemm_bench.cpp, H200, bench/RESULTS.md 2026-12-01), TFLOP/s of 128x256 persistent
// against cuBLASLt's heuristic algorithm: Qwen3-8B's layers at 4,096-16,384 rows 653-780 against
// 739-828 (88-98%); Qwen3-0.6B's (K 1,024-3,072) at 16,384 rows 548-700 against 729-786 (75-89%):
// with one tile's products at a time, each tile's epilogue stalls the tensor cores, which short K
// exposes. At 256 rows 128x128 is the better tile and still 0.55-0.7x cuBLASLt. Outputs equal
// cuBLASLt's bit for bit at nearly every shape. The TMA-store form (its stores run on under the
// next tile's products) reaches cuBLASLt: 0.97-1.04x from 4,096 rows on both models' shapes. The
// fused epilogues still stall the tensor cores while they run: gate_up + SiLU 1.08-1.10x cuBLASLt +
// silu_and_mul at K 1,024 (1.10x with the epilogue warp, which the backend runs), the qkv form ~1.03x
// cuBLASLt + the RoPE kernel. The plain epilogue-warp form loses 3-9% to its 3-stage ring; the qkv
// form's norm + RoPE on three epilogue warps (a warp a row and head) took 38 us a tile against the
// compute warps' 12 us of products: measured, not kept (bench/RESULTS.md, "epilogue warps").
#include <cuda.h>

#include <algorithm>
#include <string>

#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/gemm_wgmma.cuh"
#include "nanovllm/backends/cuda/gemm_wgmma.h"
#include "nanovllm/backends/cuda/tma.cuh"
#include "nanovllm/backends/cuda/tma_desc.h"
#include "nanovllm/backends/cuda/wgmma.cuh"

namespace nanovllm::cuda {
namespace {

using namespace gemm_tile;  // kRows, kTK, kGroup, kEpiBox; the ring's loops, write_pass

constexpr int kThreads = 9 * 32;      // 2 compute warpgroups + the producer warp
constexpr int kThreadsEpi = 10 * 32;  // + the epilogue warp (a warp scheduler holds 3 warps either way)
// The qkv form: the producer warp in a warpgroup of its own, which gives its registers to the compute
// warpgroups (setmaxnreg), whose epilogue holds more than 168 registers a thread.
constexpr int kThreadsRope = 12 * 32;
constexpr int kProducerRegs = 40, kComputeRegs = 232;
static_assert(128 * kProducerRegs + 256 * kComputeRegs <= 65536, "the register file");
// The ring's stages, then the epilogue's boxes (kEpiBoxes of kEpiBox: two a compute warpgroup for
// the TMA-store epilogue, or a whole tile's outputs staged for the epilogue warps), then the
// barriers (full and empty a stage, staged and drained).
template <int kCols, int kStages, int kEpiBoxes, int kTileRows = kRows>
struct GemmSmem {
  static constexpr int kXBytes = kTileRows * kTK * 2, kWBytes = kCols * kTK * 2;
  static constexpr int kStageBytes = kXBytes + kWBytes;
  static constexpr int kEpiOff = kStages * kStageBytes;
  static constexpr int kBarOff = kEpiOff + kEpiBoxes * kEpiBox;
  static constexpr int kBytes = kBarOff + (2 * kStages + 2) * 8 + 1024;  // + slack to align the base to 1024
  static_assert(kBytes + 1024 <= 227 * 1024, "one CTA an SM (and 1 KiB of static shared memory)");
};

// The epilogue, straight from the accumulators: rows r0 and r0 + 8 of out (r0 = the thread's first
// row, rows past T skipped), weight columns n0 + 8 j + 2 (lane % 4) + {0, 1}.
template <int kCols>
__device__ __forceinline__ void store_direct(const float (&acc)[kCols / 8][4], __nv_bfloat16* out, int T, int N, int r0,
                                             int n0, int q) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = r0 + 8 * h;
    if (r >= T) continue;
    __nv_bfloat16* row = out + int64_t(r) * N;
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) {
      const int col = n0 + 8 * j + 2 * q;
      const __nv_bfloat162 v = __floats2bfloat162_rn(acc[j][2 * h], acc[j][2 * h + 1]);
      if (col + 1 < N)
        *reinterpret_cast<__nv_bfloat162*>(row + col) = v;
      else if (col < N)
        row[col] = v.x;
    }
  }
}

// The epilogue through shared memory: warpgroup wg's 64 rows (row0 ..) x 128 kPasses columns (n0 ..)
// in passes of 128 columns, each written as two 64 x 64 boxes of `epi` (wgmma.cuh: sw128_offset;
// thread (g, q) writes 4 bytes at chunk jj ^ g of row r = 16 w + g (+ 8), r % 8 = g: 32 distinct
// banks a store; write_pass), then one TMA store a box by the warpgroup's first thread, which TMA
// clips to T x N. The stores run on while the warpgroup starts its next tile; a pass first waits
// until the previous pass's stores have read the boxes (named barrier 1 + wg over the warpgroup).
// pair(j, h): the BF16 pair word of the outputs whose accumulator slots are acc[j][2 h] and
// acc[j][2 h + 1] (columns 8 j + 2 (lane % 4) + {0, 1}, row + 8 h).
template <int kPasses, class Pair>
__device__ __forceinline__ void store_tma(const Pair& pair, const CUtensorMap* omap, unsigned char* epi, int wg,
                                          int warp, int g, int q, int row0, int n0) {
  const bool leader = (threadIdx.x & 127) == 0;
#pragma unroll
  for (int p = 0; p < kPasses; ++p) {
    if (leader) tma_store_wait_read<0>();
    named_sync(1 + wg, 128);
    write_pass(pair, p, epi, warp, g, q);
    fence_proxy_async_smem();  // the generic-proxy writes, read next by the TMA store
    named_sync(1 + wg, 128);
    if (leader) {
      tma_store_2d(omap, epi, n0 + 128 * p, row0);
      tma_store_2d(omap, epi + kEpiBox, n0 + 128 * p + 64, row0);
      tma_store_commit();
    }
  }
}

// silu(gate) * up as the unfused path computes it (CudaBackend::linear, then silu_and_mul): each
// product rounded to BF16, silu(gate) rounded to BF16 before the product.
__device__ __forceinline__ float silu_mul(float gate, float up) { return silu_bf16(bf16_round(gate)) * bf16_round(up); }

// The qkv projection's epilogue (kRope): on a 128 x 256 tile's accumulators, which are two whole
// heads of qkv (D = 128; acc[16 p + jj][c]: head p, value i = 8 (jj % 8) + 2 q + c % 2 of its first
// half (jj < 8) or i + 64 of its second, row r0 + 8 (c / 2)), what qk_norm_rope_store does to them
// after the GEMM rounds them to BF16, bit for bit (qk_norm_rope.cu gives the arithmetic), into y:
// y[j][h], the BF16 pair word of acc[j][2 h] and acc[j][2 h + 1] after it.
//  * q and k heads: RMSNorm with the head kernel's sum of squares, whose warp tree is rebuilt here
//    (the head kernel's lane l holds i = l and l + 32, and adds fma(b, b, a a) of each in turn;
//    here l = 8 jj + 2 q + e for jj < 4, so its two terms are this thread's jj and jj + 4, the
//    butterfly's levels 16 and 8 are sums over jj inside the thread, 4 and 2 are xor shuffles of
//    lanes 2 and 1 of the quad, and level 1 sums e = 0 and 1), then RoPE with the cos/sin of the
//    row's position (rope.cos_sin: BF16 (cos, sin) pairs, rope_cos_sin's values): x inv in float,
//    the rest on BF16 pairs (bf2_mul ...);
//  * v heads: as they are.
// store_rope then writes q heads into qkv and k and v heads into the caches.
// The table rows and norm weights come from shared memory (the epilogue stalls the tensor cores, so
// it must not wait on global loads): cs, the warpgroup's 64 table rows (256 bytes each, 16-byte
// chunk c of row r at chunk c ^ (r % 8): a quad's 8 rows read distinct banks) copied in while the
// tile's products ran (load_rope_table); nw, the q then k norm weights as BF16 pair words (64 each:
// word i / 2 holds i and i + 1). rl: the thread's first row within the 64. All lanes run the
// shuffles; rows past T compute what they compute and are not stored.
__device__ __forceinline__ void rope_epilogue(const float (&acc)[32][4], uint32_t (&y)[32][2],
                                              const GemmRopeEpilogue& r, const uint32_t* nw,
                                              const unsigned char* cs_tab, int T, int r0, int rl, int n0, int q) {
  constexpr int D = 128;
  const int Hq = r.num_heads, Hkv = r.num_kv_heads;
  const bool norm = r.q_norm != nullptr;
#pragma unroll
  for (int j = 0; j < 32; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) y[j][h] = bf2_pack(acc[j][2 * h], acc[j][2 * h + 1]);  // the GEMM's output
  // The norm's 1 / rms of head p at row + 8 h (q and k heads).
  float inv[2][2] = {{1.f, 1.f}, {1.f, 1.f}};
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    if (!norm || n0 / D + p >= Hq + Hkv) continue;  // warp-uniform
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float s[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        auto val = [&](int j) { return e ? bf2_hi(y[16 * p + j][h]) : bf2_lo(y[16 * p + j][h]); };
        float pl[4];
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          auto term = [&](int j) {
            const float a = val(j), b = val(j + 8);
            return __fmaf_rn(b, b, __fmul_rn(a, a));
          };
          pl[jj] = __fadd_rn(term(jj), term(jj + 4));
        }
        s[e] = __fadd_rn(__fadd_rn(pl[0], pl[2]), __fadd_rn(pl[1], pl[3]));
        s[e] = __fadd_rn(s[e], __shfl_xor_sync(0xffffffffu, s[e], 2));
        s[e] = __fadd_rn(s[e], __shfl_xor_sync(0xffffffffu, s[e], 1));
      }
      inv[p][h] = 1.0f / sqrtf(__fadd_rn(s[0], s[1]) / float(D) + r.eps);
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (r0 + 8 * h >= T) continue;
    const unsigned char* row = cs_tab + (rl + 8 * h) * 256;
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      const int i = 8 * jj + 2 * q;
      // (cos, sin) at i and i + 1: chunk 2 jj + q / 2 of the row, half q % 2 of it.
      const uint2 cs = *reinterpret_cast<const uint2*>(row + (((2 * jj + (q >> 1)) ^ (rl & 7)) << 4) + (q & 1) * 8);
      const uint32_t co = __byte_perm(cs.x, cs.y, 0x5410), si = __byte_perm(cs.x, cs.y, 0x7632);
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const int hd = n0 / D + p;
        if (hd >= Hq + Hkv) continue;  // a v head, or past N
        const uint32_t* w = nw + (hd < Hq ? 0 : D / 2);
        uint32_t& ya = y[16 * p + jj][h];
        uint32_t& yb = y[16 * p + jj + 8][h];
        const float f = inv[p][h];
        const uint32_t xa = bf2_mul(bf2_pack(bf2_lo(ya) * f, bf2_hi(ya) * f), w[i / 2]);
        const uint32_t xb = bf2_mul(bf2_pack(bf2_lo(yb) * f, bf2_hi(yb) * f), w[D / 4 + i / 2]);
        ya = bf2_sub(bf2_mul(xa, co), bf2_mul(xb, si));
        yb = bf2_add(bf2_mul(xb, co), bf2_mul(xa, si));
      }
    }
  }
}

// kRope: the tile's two heads out of y, a pass each through the warpgroup's two swizzled boxes
// (write_pass): a q head by TMA stores into qkv; a k or v head copied from the boxes into its cache
// rows (the head's 256 contiguous bytes of the cache row at the token's slot) by 16-byte stores,
// 16 threads a row, which write whole sectors where 4-byte stores from the accumulator layout wrote
// halves of them (those cost ~15% of the form's time). The k and v columns of qkv are not written:
// the attention reads k and v from the caches (Backend::add_rms_norm_linear_rope). Thread lt copies
// chunk lt % 16 of rows lt / 16 + 8 k (k < 8), whose slots rope_slots read while the tile's products
// ran; rows past T and slots -1 store nothing.
__device__ __forceinline__ void rope_slots(const GemmRopeEpilogue& r, int (&slot)[8], int T, int row0) {
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int t = row0 + int(threadIdx.x & 127) / 16 + 8 * k;
    slot[k] = r.slots && t < T ? r.slots[t] : -1;
  }
}

__device__ __forceinline__ void store_rope(const uint32_t (&y)[32][2], const int (&slot)[8], const GemmRopeEpilogue& r,
                                           const CUtensorMap* omap, unsigned char* epi, int wg, int warp, int g, int q,
                                           int row0, int n0) {
  constexpr int D = 128;
  const int Hq = r.num_heads, Hkv = r.num_kv_heads, lt = int(threadIdx.x & 127), c = lt & 15;
  const int64_t kv_row = int64_t(Hkv) * D;
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    const int hd = n0 / D + p;
    if (lt == 0) tma_store_wait_read<0>();
    named_sync(1 + wg, 128);
    write_pass([&](int j, int h) { return y[j][h]; }, p, epi, warp, g, q);
    if (hd < Hq) {
      fence_proxy_async_smem();  // the generic-proxy writes, read next by the TMA store
      named_sync(1 + wg, 128);
      if (lt == 0) {
        tma_store_2d(omap, epi, n0 + D * p, row0);
        tma_store_2d(omap, epi + kEpiBox, n0 + D * p + 64, row0);
        tma_store_commit();
      }
    } else if (hd < Hq + 2 * Hkv) {
      named_sync(1 + wg, 128);
      const bool is_k = hd < Hq + Hkv;
      bf16* head = static_cast<bf16*>(is_k ? r.k_cache : r.v_cache) + int64_t(hd - Hq - (is_k ? 0 : Hkv)) * D + 8 * c;
#pragma unroll
      for (int k = 0; k < 8; ++k)
        if (slot[k] >= 0)
          *reinterpret_cast<uint4*>(head + slot[k] * kv_row) =
              *reinterpret_cast<const uint4*>(epi + (c >> 3) * kEpiBox + sw128_offset((lt >> 4) + 8 * k, c & 7));
    }
  }
}

// kRope: warpgroup wg's 64 rows of the cos/sin table (row0 ..; rows past T zeros) into its
// two epilogue boxes (rope_epilogue's layout), by cp.async, once the previous tile's TMA stores have
// read the boxes; the epilogue waits for the copies.
__device__ __forceinline__ void load_rope_table(const GemmRopeEpilogue& r, unsigned char* cs_tab, int wg, int T,
                                                int row0) {
  const int lt = int(threadIdx.x & 127);
  if (lt == 0) tma_store_wait_read<0>();
  named_sync(1 + wg, 128);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int idx = lt + 128 * k, row = idx >> 4, c = idx & 15, t = row0 + row;
    cp_async16(cs_tab + row * 256 + ((c ^ (row & 7)) << 4), r.cos_sin + int64_t(t < T ? t : 0) * 64 + 4 * c,
               t < T ? 16 : 0);
  }
  cp_async_commit();
}

// What the epilogue computes: the product (kPlain), silu(gate) * up (kSilu), or the q/k RMSNorm +
// RoPE + KV-cache store of the attention's qkv (kRope; rope_epilogue).
enum Epi { kPlain, kSilu, kRope };

// xmap: x [T][K] in boxes of 64 x 128; wmap: w [N][K] in boxes of 64 x kCols (kSilu: w [2 N][K],
// gate rows then up rows, in boxes of 64 x kCols / 2); omap (kTmaStore): out [T][N] in boxes of
// 64 x 64 (all 128B-swizzled). kSilu (with kTmaStore): a tile's kCols weight rows are kCols / 2
// gate rows and the up rows of the same outputs, and out = silu(x gate^T) * (x up^T).
// The shared-memory boxes of the epilogue: two a compute warpgroup (TMA-store), a whole tile's
// outputs (epilogue warps: 2 x kOutCols / 64), or none (direct stores).
template <int kOutCols, bool kTmaStore, bool kWarpEpi>
constexpr int epi_boxes() {
  return kWarpEpi ? 2 * (kOutCols / 64) : kTmaStore ? 4 : 0;
}

template <int kEpi, bool kWarpEpi>
constexpr int threads_of() {
  return kWarpEpi ? kThreadsEpi : kEpi == kRope ? kThreadsRope : kThreads;
}

// Rows of x a CTA tile: 128 (the two compute warpgroups' 64 each), or 64 (ping-pong: a warpgroup's tile).
constexpr int tile_rows(bool ping_pong) { return ping_pong ? 64 : kRows; }
// Named barriers: 1 + wg, a compute warpgroup's epilogue; kBarTurn + wg, its turn on the ring (ping-pong).
constexpr int kBarTurn = 3;

template <int kCols, int kStages, bool kPersistent, bool kTmaStore, int kEpi, bool kWarpEpi, bool kPair, bool kPingPong>
__global__ void __launch_bounds__(threads_of<kEpi, kWarpEpi>(), 1)
    gemm_wgmma_kernel(const __grid_constant__ CUtensorMap xmap, const __grid_constant__ CUtensorMap wmap,
                      const __grid_constant__ CUtensorMap omap, __nv_bfloat16* __restrict__ out, int T, int N, int K,
                      const GemmRopeEpilogue rope, const float* __restrict__ row_scale) {
  constexpr bool kGated = kEpi == kSilu;
  constexpr int kOutCols = kGated ? kCols / 2 : kCols;  // outputs a tile
  constexpr int kPasses = kOutCols / 128;               // 128-column passes of a warpgroup's epilogue
  constexpr int kTileRows = tile_rows(kPingPong);
  using S = GemmSmem<kCols, kStages, epi_boxes<kOutCols, kTmaStore, kWarpEpi>(), kTileRows>;
  static_assert(kEpi == kPlain || (kTmaStore && kCols == 256), "the fused epilogues are the TMA-store form's");
  static_assert(kEpi != kRope || !kWarpEpi, "the qkv form's epilogue runs on the compute warps");
  static_assert(!kWarpEpi || (kTmaStore && kPersistent), "the epilogue warps store by TMA, tile after tile");
  static_assert(!kPair || (kTmaStore && kPersistent), "pairs walk tiles together and store by TMA (clipped rows)");
  static_assert(!kPingPong || (kTmaStore && kPersistent && !kWarpEpi), "ping-pong: tile after tile, TMA stores");
  constexpr int kAll = threads_of<kEpi, kWarpEpi>();
#ifndef NANOVLLM_WGMMA
  __trap();  // no sm_90a code: fail the launch rather than write zeros (CudaBackend::wgmma())
#endif
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - smem_addr(smem_raw) % 1024) % 1024);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + S::kBarOff);
  uint64_t* empty = full + kStages;
  uint64_t* staged = empty + kStages;  // kWarpEpi: the compute warps staged a tile (8 arrivals)
  uint64_t* drained = staged + 1;      // kWarpEpi: the staging boxes are free again (the TMA stores read them)
  unsigned char* stage = smem + S::kEpiOff;
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  // kPair: the cluster's two CTAs (consecutive blockIdx.x) take the same tiles of 2 kTileRows x rows,
  // rank r the rows from t0 + kTileRows r; a CTA whose rows all lie past T still runs the tile (its x reads
  // as zeros, its stores are clipped) so that both walk the same ring.
  constexpr int kUnit = kPair ? 2 * kTileRows : kTileRows;  // x rows of a (pair's) tile
  const int rank = kPair ? int(blockIdx.x & 1) : 0;
  const int TT = (T + kUnit - 1) / kUnit, NT = (N + kOutCols - 1) / kOutCols, tiles = TT * NT;
  const int n = (K + kTK - 1) / kTK;
  // Tile b's first x row and weight row: groups of kGroup weight-row tiles, x tiles fastest within
  // a group.
  auto origin = [&](int b, int& t0, int& n0) {
    const int per_group = kGroup * TT, group = b / per_group, in_group = b % per_group;
    const int group_size = min(kGroup, NT - group * kGroup);
    n0 = (group * kGroup + in_group % group_size) * kOutCols;
    t0 = (in_group / group_size) * kUnit + kTileRows * rank;
  };
  // A CTA's tiles: its own (one a CTA), or every gridDim.x-th from blockIdx.x (persistent; pairs:
  // every (gridDim.x / 2)-th from the cluster's index).
  const int first = int(blockIdx.x) / (kPair ? 2 : 1);
  const int step = kPersistent ? int(gridDim.x) / (kPair ? 2 : 1) : tiles;

  // kRope: the q then k norm weights as BF16 pair words (1 where there is no norm), read by the
  // epilogue.
  __shared__ uint32_t norm_w[kEpi == kRope ? 128 : 1];
  if constexpr (kEpi == kRope)
    for (int i = int(threadIdx.x); i < 128; i += kAll) {
      const uint32_t* src = static_cast<const uint32_t*>(i < 64 ? rope.q_norm : rope.k_norm);
      norm_w[i] = src ? src[i & 63] : 0x3f803f80u;  // BF16 1.0 twice
    }
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], (kPingPong ? 4 : 8) * (kPair ? 2 : 1));  // the warps that read a stage
    }
    mbar_init(staged, 8);
    mbar_init(drained, 1);
    mbar_fence_init();
  }
  if constexpr (kPair) {
    cluster_arrive();  // the peer's barriers exist before its multicasts and arrivals reach them
    cluster_wait();
  } else {
    __syncthreads();
  }
  pdl_begin();  // x is the previous kernel's output

  // The producer: stage c of the CTA's sequence into slot c % kStages.
  auto produce = [&] {
    if constexpr (kEpi == kRope) regs_dec<kProducerRegs>();
    if (warp == 8 && lane == 0) {
      int c = 0;
      for (int b = first; b < tiles; b += step) {
        int t0, n0;
        origin(b, t0, n0);
        load_stages<kStages, S::kStageBytes, S::kXBytes, kGated, kPair>(&xmap, &wmap, smem, full, empty, t0, n0, N, n,
                                                                        c, rank);
      }
    }
  };
  // The epilogue warp: tile k's TMA stores once the compute warps staged it.
  auto store_staged = [&] {
    if (lane != 0) return;
    int k = 0;
    for (int b = first; b < tiles; b += step, ++k) {
      int t0, n0;
      origin(b, t0, n0);
      mbar_wait(staged, uint32_t(k) & 1u);
#pragma unroll
      for (int hr = 0; hr < 2; ++hr)
#pragma unroll
        for (int cb = 0; cb < kOutCols / 64; ++cb)
          tma_store_2d(&omap, stage + (hr * (kOutCols / 64) + cb) * kEpiBox, n0 + 64 * cb, t0 + 64 * hr);
      tma_store_commit();
      tma_store_wait_read<0>();
      mbar_arrive(drained);
    }
    tma_store_wait<0>();  // before the CTA's shared memory goes
  };
  auto compute = [&] {
    const int wg = warp >> 2, g = lane >> 2, q = lane & 3;
    if constexpr (kEpi == kRope) regs_inc<kComputeRegs>();
    // Ping-pong turns: warpgroup wg waits on kBarTurn + wg before its tile's products and hands the
    // turn on once it has waited for the tile's last stage and issued its products (mma_stages'
    // hook), so that one warpgroup waits on the ring's stages at a time (a warpgroup that skipped the
    // other's stages could otherwise wait on a slot two fills ahead of its barrier, whose parity
    // reads as done) and the other's products queue behind these. Warpgroup 1 gives warpgroup 0 its
    // first turn; every sync meets one arrival: after the CTA's last tile, the warpgroup whose turn
    // was handed on without a tile takes it (below).
    if (kPingPong && wg == 1 && first < tiles) named_arrive(kBarTurn, 256);
    auto hand_on = [&] {
      if constexpr (kPingPong) named_arrive(kBarTurn + 1 - wg, 256);
    };
    int k = 0;
    for (int b = first; b < tiles; b += step, ++k) {
      if (kPingPong && (k & 1) != wg) continue;  // ping-pong: the other warpgroup's tile
      int t0, n0;
      origin(b, t0, n0);
      const int row0 = t0 + (kPingPong ? 0 : 64 * wg);  // the warpgroup's first row
      unsigned char* epi = smem + S::kEpiOff + wg * 2 * kEpiBox;
      int slot[kEpi == kRope ? 8 : 1];  // kRope: store_rope's rows' cache slots, read under the products
      if constexpr (kEpi == kRope) {
        load_rope_table(rope, epi, wg, T, row0);
        rope_slots(rope, slot, T, row0);
      }
      // row_scale (the folded RMSNorm's 1 / rms, models/norm_fold.h): the thread's rows' factors,
      // read while the products run (the previous kernel wrote them: after pdl_begin).
      float rs[2] = {1.f, 1.f};
      if (row_scale) {
        const int r = row0 + 16 * (warp & 3) + g;
        rs[0] = r < T ? row_scale[r] : 0.f;
        rs[1] = r + 8 < T ? row_scale[r + 8] : 0.f;
      }
      float acc[kCols / 8][4];
      int c = k * n;  // the tile's first stage in the ring
      if (kPingPong) named_sync(kBarTurn + wg, 256);
      mma_stages<kCols, kStages, S::kStageBytes, S::kXBytes, kPair>(acc, smem, full, empty, kPingPong ? 0 : wg, lane, n,
                                                                    c, hand_on);
      if (row_scale) {  // before any epilogue: its outputs are those of the scaled rows
#pragma unroll
        for (int j = 0; j < kCols / 8; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[j][e] *= rs[e >> 1];
      }

      if constexpr (kWarpEpi) {  // stage the tile's BF16 outputs for the epilogue warps
        auto val = [&](int j, int c) { return kGated ? silu_mul(acc[j][c], acc[j + 16][c]) : acc[j][c]; };
        auto pair = [&](int j, int h) { return bf2_pack(val(j, 2 * h), val(j, 2 * h + 1)); };
        if (k > 0) mbar_wait(drained, uint32_t(k - 1) & 1u);
#pragma unroll
        for (int p = 0; p < kPasses; ++p) write_pass(pair, p, stage + (wg * 2 * kPasses + 2 * p) * kEpiBox, warp, g, q);
        fence_proxy_async_smem();  // the generic-proxy writes, read by the TMA stores
        __syncwarp();
        mbar_arrive_if(staged, lane == 0);
      } else if constexpr (kEpi == kRope) {
        cp_async_wait<0>();
        named_sync(1 + wg, 128);  // every thread's table copies have landed
        const int rl = 16 * (warp & 3) + g;
        uint32_t y[32][2];
        rope_epilogue(acc, y, rope, norm_w, epi, T, row0 + rl, rl, n0, q);
        store_rope(y, slot, rope, &omap, epi, wg, warp, g, q, row0, n0);
      } else if constexpr (kGated)
        store_tma<1>(
            [&](int j, int h) {
              return bf2_pack(silu_mul(acc[j][2 * h], acc[j + 16][2 * h]),
                              silu_mul(acc[j][2 * h + 1], acc[j + 16][2 * h + 1]));
            },
            &omap, epi, wg, warp, g, q, row0, n0);
      else if constexpr (kTmaStore)
        store_tma<kCols / 128>([&](int j, int h) { return bf2_pack(acc[j][2 * h], acc[j][2 * h + 1]); }, &omap, epi, wg,
                               warp, g, q, row0, n0);
      else
        store_direct<kCols>(acc, out, T, N, row0 + 16 * (warp & 3) + g, n0, q);
    }
    if (kPingPong && k > 0 && (k & 1) == wg) named_sync(kBarTurn + wg, 256);      // the last turn handed on
    if (kTmaStore && !kWarpEpi && (threadIdx.x & 127) == 0) tma_store_wait<0>();  // before the smem goes
  };

  if (warp == 8 || (kEpi == kRope && warp > 8))
    produce();
  else if (kWarpEpi && warp == 9)
    store_staged();
  else
    compute();
  if constexpr (kPair) {
    cluster_arrive();  // no CTA leaves while its peer may still multicast or arrive into its shared memory
    cluster_wait();
  }
}

template <int kCols, int kStages, bool kPersistent, bool kTmaStore = false, int kEpi = kPlain, bool kWarpEpi = false,
          bool kPair = false, bool kPingPong = false>
constexpr auto kernel_of = gemm_wgmma_kernel<kCols, kStages, kPersistent, kTmaStore, kEpi, kWarpEpi, kPair, kPingPong>;

template <int kCols, int kStages, bool kTmaStore, int kEpi, bool kWarpEpi, bool kPingPong>
constexpr int smem_bytes() {
  constexpr int out_cols = kEpi == kSilu ? kCols / 2 : kCols;
  return GemmSmem<kCols, kStages, epi_boxes<out_cols, kTmaStore, kWarpEpi>(), tile_rows(kPingPong)>::kBytes;
}

template <int kCols, int kStages, bool kPersistent, bool kTmaStore = false, int kEpi = kPlain, bool kWarpEpi = false,
          bool kPair = false, bool kPingPong = false>
void allow_smem() {
  NV_CUDA_CHECK(cudaFuncSetAttribute(
      kernel_of<kCols, kStages, kPersistent, kTmaStore, kEpi, kWarpEpi, kPair, kPingPong>,
      cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes<kCols, kStages, kTmaStore, kEpi, kWarpEpi, kPingPong>()));
}

// resident: the CTAs the persistent grid may hold (the SMs; pairs: twice gemm_wgmma_max_pairs()).
template <int kCols, int kStages, bool kPersistent, bool kTmaStore = false, int kEpi = kPlain, bool kWarpEpi = false,
          bool kPair = false, bool kPingPong = false>
void run_form(const void* x, const void* w, void* out, int64_t T, int64_t N, int64_t K, int resident,
              cudaStream_t stream, const GemmRopeEpilogue& rope = {}, const float* row_scale = nullptr) {
  constexpr bool kGated = kEpi == kSilu;
  constexpr int kOutCols = kGated ? kCols / 2 : kCols;
  constexpr int kTileRows = tile_rows(kPingPong), kUnit = kPair ? 2 * kTileRows : kTileRows;
  const TmaDesc xmap = make_tma_2d(x, true, K, T, K * 2, kTK, kTileRows, true, "gemm_wgmma x");
  // The weight box: a tile's weight rows, or half of them (the gated form's gate or up rows; a pair's
  // CTA multicasts one half).
  const TmaDesc wmap = make_tma_2d(w, true, K, kGated ? 2 * N : N, K * 2, kTK, kGated || kPair ? kCols / 2 : kCols,
                                   true, "gemm_wgmma w");
  if (kTmaStore && (N % 8 != 0 || !aligned16({out})))
    throw Error("gemm_wgmma: the TMA-store epilogue needs N % 8 == 0 and out 16-byte aligned (N " + std::to_string(N) +
                ")");
  const TmaDesc omap = kTmaStore ? make_tma_2d(out, true, N, T, N * 2, 64, 64, true, "gemm_wgmma out") : wmap;
  int64_t grid = ((T + kUnit - 1) / kUnit) * ((N + kOutCols - 1) / kOutCols) * (kPair ? 2 : 1);
  if (kPersistent) grid = std::min<int64_t>(grid, int64_t(resident) / (kPair ? 2 : 1) * (kPair ? 2 : 1));
  if (grid < 1) throw Error("gemm_wgmma: no CTA pair fits this device at once");
  launch_clustered(kernel_of<kCols, kStages, kPersistent, kTmaStore, kEpi, kWarpEpi, kPair, kPingPong>,
                   dim3(unsigned(grid)), dim3(threads_of<kEpi, kWarpEpi>()),
                   smem_bytes<kCols, kStages, kTmaStore, kEpi, kWarpEpi, kPingPong>(), Stream{stream, false},
                   dim3(kPair ? 2 : 1, 1, 1), *reinterpret_cast<const CUtensorMap*>(xmap.bytes),
                   *reinterpret_cast<const CUtensorMap*>(wmap.bytes), *reinterpret_cast<const CUtensorMap*>(omap.bytes),
                   static_cast<__nv_bfloat16*>(out), int(T), int(N), int(K), rope, row_scale);
  NV_LAUNCH_CHECK();
}

}  // namespace

const char* gemm_wgmma_form_name(GemmWgmmaForm form) {
  switch (form) {
    case GemmWgmmaForm::Cols256Stages4: return "128x256_s4";
    case GemmWgmmaForm::Cols256Stages4Persistent: return "128x256_s4_persistent";
    case GemmWgmmaForm::Cols256Stages4PersistentTmaStore: return "128x256_s4_persistent_tma_store";
    case GemmWgmmaForm::GateUpSilu: return "gate_up_silu";
    case GemmWgmmaForm::Cols256Stages3EpiWarps: return "128x256_s3_epilogue_warps";
    case GemmWgmmaForm::GateUpSiluEpiWarps: return "gate_up_silu_epilogue_warps";
    case GemmWgmmaForm::Cols128Stages6: return "128x128_s6";
    case GemmWgmmaForm::Cols256Stages4PersistentTmaStorePair: return "128x256_s4_persistent_tma_store_pair";
    case GemmWgmmaForm::GateUpSiluEpiWarpsPair: return "gate_up_silu_epilogue_warps_pair";
    case GemmWgmmaForm::Cols256PingPong: return "64x256_s4_ping_pong";
    case GemmWgmmaForm::Cols256PingPongPair: return "64x256_s4_ping_pong_pair";
    case GemmWgmmaForm::GateUpSiluPingPong: return "gate_up_silu_ping_pong";
    case GemmWgmmaForm::GateUpSiluPingPongPair: return "gate_up_silu_ping_pong_pair";
  }
  return "?";
}

void gemm_wgmma_init() {
  allow_smem<256, 4, false>();
  allow_smem<256, 4, true>();
  allow_smem<256, 4, true, true>();
  allow_smem<256, 4, true, true, kSilu>();
  allow_smem<256, 3, true, true, kPlain, true>();
  allow_smem<256, 4, true, true, kSilu, true>();
  allow_smem<256, 4, true, true, kRope>();
  allow_smem<128, 6, false>();
  allow_smem<256, 4, true, true, kPlain, false, true>();
  allow_smem<256, 4, true, true, kSilu, true, true>();
  allow_smem<256, 4, true, true, kRope, false, true>();
  allow_smem<256, 4, true, true, kPlain, false, false, true>();
  allow_smem<256, 4, true, true, kPlain, false, true, true>();
  allow_smem<256, 4, true, true, kSilu, false, false, true>();
  allow_smem<256, 4, true, true, kSilu, false, true, true>();
  allow_smem<256, 4, true, true, kRope, false, false, true>();
  allow_smem<256, 4, true, true, kRope, false, true, true>();
}

int gemm_wgmma_max_pairs() {
  // Every form runs one CTA an SM, so the pairs that fit at once depend on the device only: asked of
  // the gated pair form.
  return max_active_clusters(kernel_of<256, 4, true, true, kSilu, true, true>, 2, threads_of<kSilu, true>(),
                             smem_bytes<256, 4, true, kSilu, true, false>());
}

void gemm_wgmma(const void* x, const void* w, void* out, int64_t T, int64_t N, int64_t K, GemmWgmmaForm form,
                int num_sms, void* stream, const float* row_scale) {
  if (T < 1 || N < 1 || K < 8 || K % 8 != 0 || T > (int64_t(1) << 30) || N > (int64_t(1) << 30) ||
      K > (int64_t(1) << 30))
    throw Error("gemm_wgmma: [" + std::to_string(T) + ", " + std::to_string(K) + "] x [" + std::to_string(N) + ", " +
                std::to_string(K) + "]^T is outside the kernel's limits (T, N >= 1; K >= 8, a multiple of 8)");
  if (!aligned16({x, w}) || reinterpret_cast<uintptr_t>(out) % 4 != 0)
    throw Error("gemm_wgmma: x and w must be 16-byte aligned, out 4-byte aligned");
  const auto st = static_cast<cudaStream_t>(stream);
  const float* rs = row_scale;
  const GemmRopeEpilogue none{};
  switch (form) {
    case GemmWgmmaForm::Cols256Stages4: return run_form<256, 4, false>(x, w, out, T, N, K, num_sms, st, none, rs);
    case GemmWgmmaForm::Cols256Stages4Persistent:
      return run_form<256, 4, true>(x, w, out, T, N, K, num_sms, st, none, rs);
    case GemmWgmmaForm::Cols256Stages4PersistentTmaStore:
      return run_form<256, 4, true, true>(x, w, out, T, N, K, num_sms, st, none, rs);
    case GemmWgmmaForm::GateUpSilu:
      return run_form<256, 4, true, true, kSilu>(x, w, out, T, N, K, num_sms, st, none, rs);
    case GemmWgmmaForm::Cols256Stages3EpiWarps:
      return run_form<256, 3, true, true, kPlain, true>(x, w, out, T, N, K, num_sms, st, none, rs);
    case GemmWgmmaForm::GateUpSiluEpiWarps:
      return run_form<256, 4, true, true, kSilu, true>(x, w, out, T, N, K, num_sms, st, none, rs);
    case GemmWgmmaForm::Cols128Stages6: return run_form<128, 6, false>(x, w, out, T, N, K, num_sms, st, none, rs);
    case GemmWgmmaForm::Cols256Stages4PersistentTmaStorePair:
      return run_form<256, 4, true, true, kPlain, false, true>(x, w, out, T, N, K, num_sms, st, none, rs);
    case GemmWgmmaForm::GateUpSiluEpiWarpsPair:
      return run_form<256, 4, true, true, kSilu, true, true>(x, w, out, T, N, K, num_sms, st, none, rs);
    case GemmWgmmaForm::Cols256PingPong:
      return run_form<256, 4, true, true, kPlain, false, false, true>(x, w, out, T, N, K, num_sms, st, none, rs);
    case GemmWgmmaForm::Cols256PingPongPair:
      return run_form<256, 4, true, true, kPlain, false, true, true>(x, w, out, T, N, K, num_sms, st, none, rs);
    case GemmWgmmaForm::GateUpSiluPingPong:
      return run_form<256, 4, true, true, kSilu, false, false, true>(x, w, out, T, N, K, num_sms, st, none, rs);
    case GemmWgmmaForm::GateUpSiluPingPongPair:
      return run_form<256, 4, true, true, kSilu, false, true, true>(x, w, out, T, N, K, num_sms, st, none, rs);
  }
}

void gemm_wgmma_rope(const void* x, const void* w, void* qkv, int64_t T, int64_t K, const GemmRopeEpilogue& rope,
                     int num_sms, void* stream, bool pair, bool ping_pong, const float* row_scale) {
  const int64_t N = (int64_t(rope.num_heads) + 2 * rope.num_kv_heads) * 128;
  if (T < 1 || K < 8 || K % 8 != 0 || T > (int64_t(1) << 30) || K > (int64_t(1) << 30) || rope.num_heads < 1 ||
      rope.num_kv_heads < 1 || N % 256 != 0 || !rope.cos_sin || (!rope.q_norm) != (!rope.k_norm) ||
      (rope.slots && (!rope.k_cache || !rope.v_cache)))
    throw Error("gemm_wgmma_rope: [" + std::to_string(T) + ", " + std::to_string(K) + "] x " +
                std::to_string(rope.num_heads) + " + 2 x " + std::to_string(rope.num_kv_heads) +
                " heads of 128 is outside the kernel's limits (T >= 1; K >= 8, a multiple of 8; an even count of "
                "heads; a cos/sin table; both norm weights or neither; both caches with slots)");
  if (!aligned16({x, w, qkv, rope.cos_sin, rope.k_cache, rope.v_cache}) ||
      reinterpret_cast<uintptr_t>(rope.q_norm) % 4 != 0 || reinterpret_cast<uintptr_t>(rope.k_norm) % 4 != 0)
    throw Error("gemm_wgmma_rope: x, w, qkv, the table and the caches must be 16-byte aligned, the weights 4-byte");
  const auto st = static_cast<cudaStream_t>(stream);
  if (ping_pong && pair)
    run_form<256, 4, true, true, kRope, false, true, true>(x, w, qkv, T, N, K, num_sms, st, rope, row_scale);
  else if (ping_pong)
    run_form<256, 4, true, true, kRope, false, false, true>(x, w, qkv, T, N, K, num_sms, st, rope, row_scale);
  else if (pair)
    run_form<256, 4, true, true, kRope, false, true>(x, w, qkv, T, N, K, num_sms, st, rope, row_scale);
  else
    run_form<256, 4, true, true, kRope>(x, w, qkv, T, N, K, num_sms, st, rope, row_scale);
}

}  // namespace nanovllm::cuda
