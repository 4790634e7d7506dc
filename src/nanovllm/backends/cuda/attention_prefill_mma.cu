// Prefill attention on tensor cores: flash-attention-2 (Dao, 2023) over the paged BF16 KV cache,
// FP32 online softmax in registers, writing nothing but O. Head dims 64 and 128.
//
// Work: a CTA per (sequence b, tile of kBM = 64 query rows, kv head h). The rows are packed GQA
// rows: row r is new token tok0 + r / G of query head h * G + r % G, so the G heads that share a
// kv head share every K/V tile (FlashInfer's layout; for Qwen3-8B, G = 4, a quarter of the K/V
// traffic of one CTA per query head). 64 / G tokens per tile; rows past the tile's tokens are
// padding (Q zero-filled, never written). The grid walks a sequence's tiles last-first, since the
// last rows see the most keys (causal), so the longest CTAs start first.
//
// Threads: 4 warps; warp w owns rows 16w..16w+15 for the whole kernel. Keys come in tiles of kBN =
// 64 through shared memory, double-buffered: the cp.async copies of tile t+1 (K and V rows gathered
// through the block table, 16 bytes per copy, zero-filled past the last key) are in flight while
// tile t is computed. Per tile and warp:
//   S (16 x 64) = Q K^T:  Q fragments stay in registers (loaded once by ldmatrix), K fragments by
//                         ldmatrix from shared memory, D/16 x 8 mma.m16n8k16;
//   causal mask:          only tiles that cross the diagonal of the CTA's first row (key index
//                         > ctx - qlen + row's token) are masked; tiles past the last row's limit
//                         are never loaded;
//   online softmax:       each lane holds 2 rows x 16 scores; row max/sum over the 4 lanes of a
//                         row (shuffles); the running O is rescaled by 2^(m_old - m_new);
//   O (16 x D) += P V:    P rounded to BF16 straight from the S accumulators (their layout is the
//                         A fragment's), V fragments by ldmatrix.trans.
// Shared memory rows are D BF16; the 16-byte chunk c of row r is stored at chunk c ^ (r % 8), so
// the 8 row addresses of each ldmatrix phase fall in 8 different bank groups (no conflicts).
// Shared memory per CTA: (64 + 4 x 64) rows x D x 2 bytes = 80 KiB at D = 128 (two CTAs per SM on
// an H100), 40 KiB at D = 64.
//
// The FP8 KV cache (F8: E4M3 codes, --kv-cache-dtype fp8): tiles are staged through registers
// instead of cp.async. The loads of tile t+1 (8 codes = 8 bytes per chunk) are issued before tile
// t is computed and are converted (code x scale -> BF16) and stored into the other buffer after it,
// so the global latency still overlaps the math; the shared-memory tiles and everything after them
// are the BF16 kernel's.
#include <cfloat>

#include "nanovllm/backends/cuda/attention_prefill.cuh"
#include "nanovllm/backends/cuda/attention_prefill_tile.cuh"
#include "nanovllm/backends/cuda/fp8.cuh"
#include "nanovllm/backends/cuda/mma.cuh"

namespace nanovllm::cuda {
namespace {

constexpr int kBN = 64;  // keys per tile
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

// MT: 16-row m-tiles per warp; a CTA has kWarps * 16 * MT query rows.
template <int MT>
constexpr int rows_per_cta() {
  return kWarps * 16 * MT;
}
template <int D, int MT>
constexpr size_t smem_bytes() {
  return size_t(rows_per_cta<MT>() + 4 * kBN) * D * sizeof(bf16);
}

// Element offset of 16-byte chunk c of row r in a [rows][D] tile, swizzled.
template <int D>
__device__ __forceinline__ int swz(int r, int c) {
  return r * D + ((c ^ (r & 7)) << 3);
}

template <int D, int MT, bool F8>
__global__ void __launch_bounds__(kThreads) prefill_attn_mma_kernel(const PrefillAttnArgs P, int G, int tiles_per_seq) {
  constexpr int kBM = rows_per_cta<MT>();
  constexpr int CH = D / 8;           // 16-byte chunks per row
  constexpr int KS = D / 16;          // k-steps of Q K^T
  constexpr int NT = kBN / 8;         // 8-key column tiles of S
  constexpr int DT = D / 8;           // 8-dim column tiles of O
  constexpr bool kQInRegs = MT == 1;  // else Q fragments are re-read from shared memory (registers)
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* qs = reinterpret_cast<bf16*>(smem_raw);  // [kBM][D]
  bf16* ks = qs + kBM * D;                       // [2][kBN][D]
  bf16* vs = ks + 2 * kBN * D;                   // [2][kBN][D]
  pdl_begin();

  const int h = blockIdx.y;
  const int b = blockIdx.x / tiles_per_seq;
  const int tile = tiles_per_seq - 1 - blockIdx.x % tiles_per_seq;
  const int q0 = P.cu_q[b], qlen = P.cu_q[b + 1] - q0;
  const int TQ = kBM / G;  // tokens per tile
  const int tok0 = tile * TQ;
  if (tok0 >= qlen) return;
  const int rows = min(TQ, qlen - tok0) * G;
  const int past = P.ctx_lens[b] - qlen;    // keys before the first new token
  const int kmax = past + tok0 + rows / G;  // keys seen by the tile's last token
  const int kfull = past + tok0 + 1;        // keys [0, kfull) are seen by every row (without a window)
  // Sliding window W: the first row reads from key past + tok0 - W + 1 on; key tiles before the one
  // holding it are skipped, and keys before a row's window are masked where a tile reaches below
  // the last row's window (kt < kmax - W).
  const int kt0 = P.window > 0 ? max(0, past + tok0 - P.window + 1) / kBN * kBN : 0;
  const int32_t* table = P.block_tables + int64_t(b) * P.max_blocks;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  for (int idx = tid; idx < kBM * CH; idx += kThreads) {
    const int r = idx / CH, c = idx % CH;
    const bool ok = r < rows;
    const bf16* src = ok ? P.qkv + int64_t(q0 + tok0 + r / G) * P.W + int64_t(h * G + r % G) * D + c * 8 : P.qkv;
    cp_async16(qs + swz<D>(r, c), src, ok ? 16 : 0);
  }
  // Tile kt's K and V rows into buffer `buf`. A thread copies chunk tid % CH of keys
  // tid / CH + i * (kThreads / CH); a tile inside one cache block (block size a multiple of 64) has
  // consecutive slots, else each key looks up its block.
  auto load_kv = [&](int buf, int kt) {
    bf16* kd = ks + buf * kBN * D;
    bf16* vd = vs + buf * kBN * D;
    const int c = tid % CH;
    const bool one_block = kt / P.bs == (kt + kBN - 1) / P.bs;
    const int64_t base = one_block ? int64_t(table[kt / P.bs]) * P.bs + kt % P.bs : 0;
#pragma unroll
    for (int key = tid / CH; key < kBN; key += kThreads / CH) {
      const int j = kt + key;
      const bool ok = j < kmax;
      int64_t off = 0;
      if (ok) {
        const int64_t slot = one_block ? base + key : int64_t(table[j / P.bs]) * P.bs + j % P.bs;
        off = (slot * P.Hkv + h) * D + c * 8;
      }
      cp_async16(kd + swz<D>(key, c), P.kc + off, ok ? 16 : 0);
      cp_async16(vd + swz<D>(key, c), P.vc + off, ok ? 16 : 0);
    }
  };
  // F8: a thread's chunks of a tile in registers (fetch_kv), then converted into buffer `buf` (put_kv).
  constexpr int kChunks = F8 ? kBN * CH / kThreads : 1;
  uint2 k8[kChunks], v8[kChunks];
  auto fetch_kv = [&](int kt) {
    const int c = tid % CH;
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int key = tid / CH + i * (kThreads / CH), j = kt + key;
      k8[i] = v8[i] = make_uint2(0, 0);
      if (j < kmax) {
        const int64_t off = ((int64_t(table[j / P.bs]) * P.bs + j % P.bs) * P.Hkv + h) * D + c * 8;
        k8[i] = *reinterpret_cast<const uint2*>(P.kc8 + off);
        v8[i] = *reinterpret_cast<const uint2*>(P.vc8 + off);
      }
    }
  };
  auto put_kv = [&](int buf) {
    const int c = tid % CH;
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int key = tid / CH + i * (kThreads / CH);
      float f[8];
      unpack8_e4m3(k8[i], f);
#pragma unroll
      for (int e = 0; e < 8; ++e) f[e] *= P.k_scale;
      *reinterpret_cast<uint4*>(ks + buf * kBN * D + swz<D>(key, c)) = pack8(f);
      unpack8_e4m3(v8[i], f);
#pragma unroll
      for (int e = 0; e < 8; ++e) f[e] *= P.v_scale;
      *reinterpret_cast<uint4*>(vs + buf * kBN * D + swz<D>(key, c)) = pack8(f);
    }
  };
  if constexpr (F8) {
    fetch_kv(kt0);
    put_kv(0);
  } else {
    load_kv(0, kt0);
  }
  cp_async_commit();

  // This lane's rows: g and g + 8 of each of the warp's m-tiles, and the last key each may see.
  int lim[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = (warp * MT + mt) * 16 + (lane >> 2) + 8 * hf;
      lim[mt][hf] = r < rows ? past + tok0 + r / G : kmax - 1;
    }
  const float sl2 = P.scale_log2;

  uint32_t qf[kQInRegs ? KS : 1][4];
  float o[MT][DT][4];
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int i = 0; i < DT; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.f;
  }

  const int ntiles = (kmax - kt0 + kBN - 1) / kBN;
  for (int t = 0; t < ntiles; ++t) {
    const int kt = kt0 + t * kBN;
    cp_async_wait<0>();
    __syncthreads();  // tile t landed for every thread; tile t - 1's buffer is free
    if constexpr (F8) {
      if (t + 1 < ntiles) fetch_kv(kt + kBN);  // converted into the other buffer after this tile
    } else {
      if (t + 1 < ntiles) load_kv((t + 1) & 1, kt + kBN);
    }
    cp_async_commit();
    if constexpr (kQInRegs) {
      if (t == 0) {
#pragma unroll
        for (int kk = 0; kk < KS; ++kk) ldmatrix_x4(qf[kk], qs + swz<D>(warp * 16 + (lane & 15), 2 * kk + (lane >> 4)));
      }
    }
    const bf16* kb = ks + (t & 1) * kBN * D;
    const bf16* vb = vs + (t & 1) * kBN * D;

    float s[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int j = 0; j < NT; ++j) s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      uint32_t a[MT][4];
      if constexpr (kQInRegs) {
#pragma unroll
        for (int e = 0; e < 4; ++e) a[0][e] = qf[kk][e];
      } else {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          ldmatrix_x4(a[mt], qs + swz<D>((warp * MT + mt) * 16 + (lane & 15), 2 * kk + (lane >> 4)));
      }
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        uint32_t kf[4];
        ldmatrix_x4(kf, kb + swz<D>(np * 16 + (lane & 7) + ((lane >> 4) << 3), 2 * kk + ((lane >> 3) & 1)));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_bf16_16816(s[mt][2 * np], a[mt], kf[0], kf[1]);
          mma_bf16_16816(s[mt][2 * np + 1], a[mt], kf[2], kf[3]);
        }
      }
    }

    if (P.window > 0 && kt < kmax - P.window) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) mask_window(s[mt], lim[mt], kt, P.window, lane);
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      softmax_tile</*kMaybeEmpty=*/true>(s[mt], o[mt], m[mt], l[mt], lim[mt], kt, kfull, sl2, lane);

      // O += P V: P straight from the S accumulators, V fragments shared by the m-tiles.
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      uint32_t pf[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) probs_fragment(s[mt], kk, pf[mt]);
#pragma unroll
      for (int dp = 0; dp < DT / 2; ++dp) {
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, vb + swz<D>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), 2 * dp + (lane >> 4)));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_bf16_16816(o[mt][2 * dp], pf[mt], vf[0], vf[1]);
          mma_bf16_16816(o[mt][2 * dp + 1], pf[mt], vf[2], vf[3]);
        }
      }
    }
    if constexpr (F8) {
      if (t + 1 < ntiles) put_kv((t + 1) & 1);  // that buffer's last reader was tile t - 1 (synced above)
    }
  }

#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
    store_rows(o[mt], l[mt], (warp * MT + mt) * 16, rows, G, h, q0 + tok0, int64_t(P.Hq) * D, P.out, lane);
}

template <int D, int MT, bool F8>
void launch_mma(const PrefillAttnArgs& a, Stream st) {
  const int G = a.Hq / a.Hkv, TQ = rows_per_cta<MT>() / G;
  const int tiles = (a.max_q + TQ - 1) / TQ;
  if (tiles == 0) return;
  launch(prefill_attn_mma_kernel<D, MT, F8>, dim3(unsigned(a.B) * unsigned(tiles), unsigned(a.Hkv)), dim3(kThreads),
         smem_bytes<D, MT>(), st, a, G, tiles);
}

template <int D, int MT, bool F8>
void set_smem_limit() {
  NV_CUDA_CHECK(cudaFuncSetAttribute(prefill_attn_mma_kernel<D, MT, F8>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(smem_bytes<D, MT>())));
}

}  // namespace

void prefill_attention_mma(const PrefillAttnArgs& a, Stream st, int rows_per_warp) {
  const bool two = rows_per_warp == 32;
  if (a.kc8) {  // FP8 at D = 128: 16 rows per warp (32 spill: the staging registers on top of O)
    if (a.D == 64)
      two ? launch_mma<64, 2, true>(a, st) : launch_mma<64, 1, true>(a, st);
    else
      launch_mma<128, 1, true>(a, st);
  } else if (a.D == 64) {
    two ? launch_mma<64, 2, false>(a, st) : launch_mma<64, 1, false>(a, st);
  } else {
    two ? launch_mma<128, 2, false>(a, st) : launch_mma<128, 1, false>(a, st);
  }
}

void prefill_attention_mma_init() {
  set_smem_limit<64, 1, false>();
  set_smem_limit<64, 2, false>();
  set_smem_limit<128, 1, false>();
  set_smem_limit<128, 2, false>();
  set_smem_limit<64, 1, true>();
  set_smem_limit<64, 2, true>();
  set_smem_limit<128, 1, true>();
}

}  // namespace nanovllm::cuda
