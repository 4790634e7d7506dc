// Prefill attention on Hopper in FlashAttention-3's structure (sm_90a): the wgmma products and
// online softmax of attention_prefill_wgmma.cu, fed by a producer warp through the tensor memory
// accelerator, with the two consumer warpgroups taking turns on the tensor cores.
//
// Why: the two-warpgroup kernel of attention_prefill_wgmma.cu does not overlap its loads, softmax
// and MMAs: without its K/V loads, or without its softmax, it ran far faster, and faster still
// without both (bench/RESULTS.md: "What limits the wgmma prefill kernel"). This kernel overlaps
// them and runs near PyTorch's SDPA at 8K-32K tokens (bench/RESULTS.md:
// "128-key tiles (3 stages)"). Here
//  * warpgroup 0 is the producer: one thread walks the block table and issues TMA copies (one 2D
//    box per tile half and block) into a ring of K and V stages, K and V each guarded by a
//    full/empty mbarrier pair (tma.cuh); the warpgroup gives its registers to the consumers
//    (setmaxnreg);
//  * warpgroups 1 and 2 each own 64 query rows (128 packed GQA rows per CTA, as the other kernel);
//    per 128-key tile t a consumer issues S_t = Q K_t^T and P_{t-1} V_{t-1} together, runs the
//    softmax of S_t while P V is on the tensor cores, then rescales O (intra-warpgroup overlap),
//    and the two consumers hand the tensor cores to each other with named barriers ("ping-pong"):
//    one issues its products while the other runs its softmax.
// What made the difference: P converted to BF16 before the wgmma fence (RS wgmma whose P fragments
// are written after the fence are serialized by ptxas: warnings C7519/C7520), a warp-uniform
// producer branch, separate K and V barriers, and 128-key tiles (fewer stages fit, but the per-tile
// softmax and barrier costs halve) (bench/RESULTS.md: "TMA kernel fixed and made auto").
// The paged cache is read as a 2D tensor [slots][Hkv x D]: the keys of head h are the 64-column
// boxes (128 bytes, swizzled as wgmma.cuh's tiles) at columns h D + 64 half; a tile's rows are
// boxes of tma_box_rows(block_size) slots (kernel_plan.h: the largest power of two dividing the
// block size and the tile), so a box never crosses a block. Keys past the sequence: slots of its
// last block (stale but finite: the KV cache is zeroed when allocated) or coordinates below 0
// (table padding: TMA reads zeros); their scores are masked, so their P is 0.
#include <cuda.h>

#include <algorithm>
#include <cfloat>
#include <string>

#include "nanovllm/backends/cuda/attention_prefill.cuh"
#include "nanovllm/backends/cuda/attention_prefill_tile.cuh"
#include "nanovllm/backends/cuda/kernel_plan.h"  // tma_block_size_ok
#include "nanovllm/backends/cuda/tma.cuh"
#include "nanovllm/backends/cuda/wgmma.cuh"

namespace nanovllm::cuda {
namespace {

static_assert(tma_block_size_ok(64) && tma_block_size_ok(8) && !tma_block_size_ok(1), "kernel_plan.h's rule");
static_assert(tma_box_rows(256) == 128 && tma_box_rows(192) == 64 && tma_box_rows(16) == 16, "kernel_plan.h's rule");
constexpr int kBM = 128;                // packed query rows per CTA: 2 consumer warpgroups x 64
constexpr int kBN = int(kTmaTileKeys);  // keys per tile (64 or 128; kernel_plan.h)
// K/V ring depth: as many stages as shared memory holds next to the Q tile, at most 8 (a stage is
// one K tile and one V tile: 64 KiB at D = 128 and 128-key tiles, so 3 stages + Q = 224 KiB).
template <int D>
constexpr int stages() {
  constexpr int budget = 227 * 1024 - 1024 - 64 * 8 - kBM * D * 2;
  constexpr int n = budget / (2 * kBN * D * 2);
  return n > 8 ? 8 : n;
}
// Registers: the producer warpgroup keeps few, the consumers take the rest (64 K regs / 384 threads).
constexpr int kProducerRegs = kBN == 128 ? 24 : 40;
constexpr int kConsumerRegs = kBN == 128 ? 240 : 232;
constexpr int kThreads = 384;  // warpgroup 0 produces, 1 and 2 consume
constexpr int kConsumers = 256;
// Named barriers (0 is __syncthreads): each consumer's turn, then each consumer warpgroup's Q rows.
constexpr int kBarTurn0 = 2, kBarQ0 = 4;

// S (+)= Q K^T over one k-step for a 64- or 128-key tile.
template <int NT>
__device__ __forceinline__ void wgmma_ss(float (&d)[NT][4], uint64_t da, uint64_t db, int acc) {
  static_assert(NT == 8 || NT == 16, "64- or 128-key tiles");
  if constexpr (NT == 16)
    wgmma_m64n128k16_ss(d, da, db, acc);
  else
    wgmma_m64n64k16_ss(d, da, db, acc);
}

template <int D>
constexpr size_t tma_smem_bytes() {
  return size_t(kBM + 2 * stages<D>() * kBN) * D * sizeof(bf16) + 4 * stages<D>() * sizeof(uint64_t) + 1024;
}
static_assert(tma_smem_bytes<128>() <= 227 * 1024 && tma_smem_bytes<64>() <= 227 * 1024, "fits an SM");

// One work item: 128 packed query rows (TQ = kBM / G tokens x G heads) of sequence b and KV head h.
// Items are numbered tile-major (item i: tile_rev = i / (B Hkv), then b, then h), the tiles of a
// sequence from its last (the most keys under the causal mask) down, so item i + 1 never has more
// keys than item i of the same length of sequence.
struct Item {
  int b, h, tok0, rows, q0, past, kmax, kfull, ntiles;
};
__device__ __forceinline__ bool item_at(const PrefillAttnArgs& P, int i, int G, int tiles_per_seq, Item& it) {
  const int per_tile = P.B * P.Hkv;
  const int tile = tiles_per_seq - 1 - i / per_tile;
  it.b = (i % per_tile) / P.Hkv;
  it.h = i % P.Hkv;
  it.q0 = P.cu_q[it.b];
  const int qlen = P.cu_q[it.b + 1] - it.q0;
  const int TQ = kBM / G;
  it.tok0 = tile * TQ;
  if (it.tok0 >= qlen) return false;
  it.rows = min(TQ, qlen - it.tok0) * G;
  it.past = P.ctx_lens[it.b] - qlen;
  it.kmax = it.past + it.tok0 + it.rows / G;
  it.kfull = it.past + it.tok0 + 1;
  it.ntiles = (it.kmax + kBN - 1) / kBN;
  return true;
}

// A persistent grid (gridDim.x <= items, at most one CTA per SM): CTA c takes items in rounds, item
// k grid + c in even rounds and k grid + grid - 1 - c in odd ones (a snake, so the CTA that took the
// longest item of a round takes the shortest of the next). The producer streams every item's K/V
// tiles through one ring (its stage and parity count tiles across items), so a CTA's next item has
// its first tiles in shared memory when the consumers reach it, and each consumer warpgroup loads
// its 64 rows of the next item's Q as soon as its last Q K^T product of the current item is done
// (under the softmax, the last P V and the output stores). With gridDim.x = items it is one item a
// CTA (set_prefill_attention_persistent(false): the A/B of bench/prefill_bench.cpp).
template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_attn_wgmma_tma_kernel(const PrefillAttnArgs P, const __grid_constant__ CUtensorMap kmap,
                                  const __grid_constant__ CUtensorMap vmap, int G, int tiles_per_seq, int items) {
  constexpr int CH = D / 8;   // 16-byte chunks per row
  constexpr int KS = D / 16;  // k-steps of Q K^T
  constexpr int NT = kBN / 8;
  constexpr int DT = D / 8;
  constexpr int kStages = stages<D>();
  extern __shared__ unsigned char smem_raw[];
  bf16* qs = reinterpret_cast<bf16*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  bf16* ks = qs + kBM * D;            // [kStages][kBN][D], as D/64 swizzled [kBN][64] halves
  bf16* vs = ks + kStages * kBN * D;  // [kStages][kBN][D]
  // K and V have their own full/empty barriers: S_t = Q K_t^T starts once K_t has landed, and K_t's
  // stage is refilled once S_t is done, while V_t is still to be used by the next tile's P V.
  uint64_t* kfull_bar = reinterpret_cast<uint64_t*>(vs + kStages * kBN * D);
  uint64_t* vfull_bar = kfull_bar + kStages;
  uint64_t* kempty_bar = vfull_bar + kStages;
  uint64_t* vempty_bar = kempty_bar + kStages;
  pdl_begin();

  // The CTA's item of round k, and the first round from k on with a non-empty item (-1: none).
  const int grid = int(gridDim.x), c = int(blockIdx.x);
  auto index = [&](int k) { return k * grid + ((k & 1) ? grid - 1 - c : c); };
  auto next = [&](int k) {
    for (Item x;; ++k) {
      if (index(k) >= items) return -1;
      if (item_at(P, index(k), G, tiles_per_seq, x)) return k;
    }
  };
  int k = next(0);
  if (k < 0) return;
  Item it;
  item_at(P, index(k), G, tiles_per_seq, it);
  const int tid = threadIdx.x, lane = tid & 31;

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&kfull_bar[s], 1);
      mbar_init(&vfull_bar[s], 1);
      mbar_init(&kempty_bar[s], kConsumers / 32);  // one arrival per consumer warp
      mbar_init(&vempty_bar[s], kConsumers / 32);
    }
    mbar_fence_init();
  }
  __syncthreads();

  // The warpgroup index through a shuffle, so the compiler sees it is warp-uniform: without it the
  // consumers' wgmma sit in a "divergent path" and ptxas serializes them (warning C7520).
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);
  if (wg == 0) {  // ---- producer
    regs_dec<kProducerRegs>();
    if (tid != 0) return;
    const int R = int(tma_box_rows(P.bs));  // rows per box: a block's slots are contiguous
    // Tile t of the item (the ring's g-th) of K (kv = 0) or V (kv = 1) into stage g % kStages, once
    // the consumers released it.
    auto load = [&](const Item& x, int t, int g, int kv) {
      const int s = g % kStages;
      uint64_t* full = kv ? &vfull_bar[s] : &kfull_bar[s];
      if (g >= kStages) mbar_wait(kv ? &vempty_bar[s] : &kempty_bar[s], ((g / kStages) - 1) & 1);
      mbar_arrive_expect_tx(full, kBN * D * sizeof(bf16));
      const int32_t* table = P.block_tables + int64_t(x.b) * P.max_blocks;
      for (int r0 = 0; r0 < kBN; r0 += R) {
        const int j = t * kBN + r0;
        const int blk = j < x.kmax ? table[j / P.bs] : -1;  // past the sequence: rows below 0 read as zeros
        const int y = blk * P.bs + j % P.bs;
#pragma unroll
        for (int hf = 0; hf < D / 64; ++hf)
          tma_load_2d((kv ? vs : ks) + (s * kBN * D) + hf * kBN * 64 + r0 * 64, kv ? &vmap : &kmap, x.h * D + hf * 64,
                      y, full);
      }
    };
    for (int g = 0; k >= 0; k = next(k + 1)) {
      item_at(P, index(k), G, tiles_per_seq, it);
      for (int t = 0; t < it.ntiles; ++t, ++g) {
        load(it, t, g, 0);
        load(it, t, g, 1);
      }
    }
    return;
  }

  // ---- consumers: warpgroup cg = 0 or 1, warp w = 0..7 of the 8 consumer warps
  regs_inc<kConsumerRegs>();
  const int ct = tid - 128, w = ct >> 5, cg = w >> 2;
  // This warpgroup's 64 rows of an item's Q tile (cp.async; q_ready() waits for them).
  auto load_q = [&](const Item& x) {
    for (int idx = ct & 127; idx < 64 * CH; idx += 128) {
      const int r = cg * 64 + idx / CH, c = idx % CH;
      const bool ok = r < x.rows;
      const bf16* src =
          ok ? P.qkv + int64_t(x.q0 + x.tok0 + r / G) * P.W + int64_t(x.h * G + r % G) * D + c * 8 : P.qkv;
      cp_async16(qs + (c >> 3) * kBM * 64 + r * 64 + (((c & 7) ^ (r & 7)) << 3), src, ok ? 16 : 0);
    }
    cp_async_commit();
  };
  auto q_ready = [&] {
    cp_async_wait<0>();
    fence_proxy_async_smem();
    named_sync(kBarQ0 + cg, 128);
  };
  load_q(it);
  q_ready();

  const bf16* q_wg = qs + cg * 64 * 64;  // the warpgroup's 64 rows in each half
  auto qk = [&](float(&acc)[NT][4], const bf16* kb) {
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      const int half = kk >> 2, koff = (kk & 3) * 16;
      const uint64_t da = wgmma_desc_sw128(q_wg + half * kBM * 64 + koff, 16, 1024);
      const uint64_t db = wgmma_desc_sw128(kb + half * kBN * 64 + koff, 16, 1024);
      wgmma_ss(acc, da, db, kk > 0);
    }
  };
  float o[DT][4];
  auto pv = [&](uint32_t(&pf)[kBN / 16][4], const bf16* vb) {
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      const uint64_t dv = wgmma_desc_sw128(vb + kk * 16 * 64, kBN * 128, 1024);
      if constexpr (D == 128)
        wgmma_m64n128k16_rs_t(o, pf[kk], dv);
      else
        wgmma_m64n64k16_rs_t(o, pf[kk], dv);
    }
  };
  // Turns: consumer cg issues its products between named_sync(its barrier) and named_arrive(the
  // other's); consumer 0 starts. Each consumer takes ntiles + 1 turns an item, so every sync meets
  // one arrive (consumer 1 skips the arrive of its very last turn and makes one at the start instead).
  const int mine = kBarTurn0 + cg, other = kBarTurn0 + 1 - cg;
  auto turn_end = [&](bool last) {
    if (!(last && cg == 1)) named_arrive(other, kConsumers);
  };
  if (cg == 1) named_arrive(other, kConsumers);

  // A warp's release of a stage: every lane has waited for the products that read it.
  auto release = [&](uint64_t* bar) {
    __syncwarp();
    if (lane == 0) mbar_arrive(bar);
  };
  // The next item's Q rows (round kn), once this warpgroup's products have all read the current ones.
  auto prefetch_q = [&](int kn) {
    if (kn < 0) return;
    Item x;
    item_at(P, index(kn), G, tiles_per_seq, x);
    named_sync(kBarQ0 + cg, 128);
    load_q(x);
  };
  for (int g0 = 0;;) {
    const int kn = next(k + 1);
    int lim[2];
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = w * 16 + (lane >> 2) + 8 * hf;
      lim[hf] = r < it.rows ? it.past + it.tok0 + r / G : it.kmax - 1;
    }
#pragma unroll
    for (int i = 0; i < DT; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    float s[NT][4];
    const int ntiles = it.ntiles;
    mbar_wait(&kfull_bar[g0 % kStages], (g0 / kStages) & 1);
    named_sync(mine, kConsumers);
    wgmma_fence();
    qk(s, ks + (g0 % kStages) * kBN * D);
    wgmma_commit();
    turn_end(false);
    wgmma_wait<0>();
    release(&kempty_bar[g0 % kStages]);
    if (ntiles == 1) prefetch_q(kn);
    softmax_tile(s, o, m, l, lim, 0, it.kfull, P.scale_log2, lane);
    for (int t = 1; t < ntiles; ++t) {
      const int g = g0 + t, st = g % kStages, prev = (g - 1) % kStages;
      mbar_wait(&kfull_bar[st], (g / kStages) & 1);
      mbar_wait(&vfull_bar[prev], ((g - 1) / kStages) & 1);
      float sn[NT][4];
      uint32_t pf[kBN / 16][4];
      probs_fragments(s, pf);  // before the fence (attention_prefill_tile.cuh)
      named_sync(mine, kConsumers);
      wgmma_fence();
      qk(sn, ks + st * kBN * D);
      wgmma_commit();
      pv(pf, vs + prev * kBN * D);
      wgmma_commit();
      turn_end(false);
      wgmma_wait<1>();  // S_t; P_{t-1} V_{t-1} may still run
      release(&kempty_bar[st]);
      if (t == ntiles - 1) prefetch_q(kn);
      float corr[2];
      softmax_scores(sn, m, l, corr, lim, t * kBN, it.kfull, P.scale_log2, lane);
      wgmma_wait<0>();
      release(&vempty_bar[prev]);
      rescale_rows(o, corr);
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[j][e] = sn[j][e];
    }
    const int g = g0 + ntiles - 1;
    mbar_wait(&vfull_bar[g % kStages], (g / kStages) & 1);
    uint32_t pf[kBN / 16][4];
    probs_fragments(s, pf);  // before the fence (attention_prefill_tile.cuh)
    named_sync(mine, kConsumers);
    wgmma_fence();
    pv(pf, vs + (g % kStages) * kBN * D);
    wgmma_commit();
    turn_end(kn < 0);
    wgmma_wait<0>();
    release(&vempty_bar[g % kStages]);
    store_rows(o, l, w * 16, it.rows, G, it.h, it.q0 + it.tok0, int64_t(P.Hq) * D, P.out, lane);
    if (kn < 0) return;
    g0 += ntiles;
    k = kn;
    item_at(P, index(k), G, tiles_per_seq, it);
    q_ready();
  }
}

template <int D>
void launch_tma(const PrefillAttnArgs& a, const TmaDesc& k, const TmaDesc& v, int persistent_ctas, Stream st) {
  const int G = a.Hq / a.Hkv, TQ = kBM / G;
  const int tiles = (a.max_q + TQ - 1) / TQ;
  if (tiles == 0) return;
  const int items = a.B * tiles * a.Hkv;
  const int grid = persistent_ctas > 0 ? std::min(items, persistent_ctas) : items;
  launch(prefill_attn_wgmma_tma_kernel<D>, dim3(unsigned(grid)), dim3(kThreads), tma_smem_bytes<D>(), st, a,
         *reinterpret_cast<const CUtensorMap*>(k.bytes), *reinterpret_cast<const CUtensorMap*>(v.bytes), G, tiles,
         items);
}

}  // namespace

TmaDesc make_cache_tma(const void* cache, int64_t slots, int64_t row_elems, int64_t block_size) {
  return make_tma_2d(cache, true, row_elems, slots, row_elems * int64_t(sizeof(bf16)), 64,
                     unsigned(tma_box_rows(block_size)), true, "prefill attention's cache");
}

void prefill_attention_wgmma_tma(const PrefillAttnArgs& a, const TmaDesc& k, const TmaDesc& v, int persistent_ctas,
                                 Stream st) {
  if (a.D == 64)
    launch_tma<64>(a, k, v, persistent_ctas, st);
  else
    launch_tma<128>(a, k, v, persistent_ctas, st);
}

void prefill_attention_wgmma_tma_init() {
  NV_CUDA_CHECK(cudaFuncSetAttribute(prefill_attn_wgmma_tma_kernel<64>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(tma_smem_bytes<64>())));
  NV_CUDA_CHECK(cudaFuncSetAttribute(prefill_attn_wgmma_tma_kernel<128>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(tma_smem_bytes<128>())));
}

}  // namespace nanovllm::cuda
