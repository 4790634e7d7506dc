// Paged causal attention on BF16 caches [num_blocks, block_size, Hkv, D] with FP32 softmax.
// Sequence b computes the q tokens cu_seqlens_q[b]..cu_seqlens_q[b+1]), the last of its
// context_lens[b] keys; its new token i sees keys [0, ctx - qlen + i]. Every key is read from the
// paged cache through the block table (prefix-cache hits and earlier prefill chunks included).
//
// Two kernels:
//  * attn_tiled_kernel (prefill, and decode for head dims the decode kernel lacks): flash-attention
//    style on CUDA cores. A CTA takes (sequence, tile of TQ new tokens, kv head): its rows are the
//    TQ x G (query token, GQA head) pairs, at most 16, 4 per warp. Keys come in tiles of 32 through
//    shared memory (K transposed as float, V as BF16); lane j scores key j for the warp's 4 rows,
//    online softmax {m, l, o} per row, o spread over lanes (2 dims per lane per 64).
//  * attn_decode_kernel (one new token per sequence, D = 64/128): a CTA per (sequence, kv head,
//    KV split); the GQA group shares every K/V load; head_dim across D/8 lanes with 16-byte loads,
//    each warp walking its own keys with an online softmax state per group head; states merged
//    across lanes, warps, and (split-KV) across CTAs by log-sum-exp: the last CTA of a (sequence,
//    kv head) to finish (an atomic counter per pair, reset by that CTA for the next launch) merges
//    the splits itself, so split-KV costs no second kernel (attn_merge_kernel remains for batches
//    with more pairs than counters). The number of splits depends on the batch size only
//    (graph-safe); empty splits report -inf.
#include <cuda/atomic>

#include <cfloat>

#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/ops/checks.h"

namespace nanovllm {

using namespace cuda;

constexpr float kLog2e = 1.4426950408889634f;

// ---------------------------------------------------------------- tiled (prefill) kernel

constexpr int kTileKeys = 32;
constexpr int kRowsPerWarp = 4;
constexpr int kWarps = 4;
constexpr int kMaxRows = kRowsPerWarp * kWarps;  // 16

struct AttnParams {
  const bf16* qkv;
  const bf16* kc;
  const bf16* vc;
  bf16* out;
  const int32_t* cu_q;
  const int32_t* ctx_lens;
  const int32_t* block_tables;
  int max_blocks, Hq, Hkv, D, bs, G, TQ, tiles_per_seq;
  int64_t W;
  float scale_log2;
};

// NCH = ceil(D / 64): lane owns output dims {64 c + 2 lane, 64 c + 2 lane + 1}.
template <int NCH>
__global__ void __launch_bounds__(kWarps * 32) attn_tiled_kernel(const AttnParams P) {
  extern __shared__ float smem[];
  pdl_begin();
  const int D = P.D;
  float* qs = smem;                                           // [kMaxRows][D] (pre-scaled, log2 domain)
  float* ks = qs + kMaxRows * D;                              // [D][kTileKeys + 1] transposed keys
  bf16* vs = reinterpret_cast<bf16*>(ks + D * (kTileKeys + 1));  // [kTileKeys][D]

  const int b = blockIdx.x / P.tiles_per_seq, tile = blockIdx.x % P.tiles_per_seq, h = blockIdx.y;
  const int q0 = P.cu_q[b], qlen = P.cu_q[b + 1] - q0;
  const int tok0 = tile * P.TQ;
  if (tok0 >= qlen) return;
  const int ntok = min(P.TQ, qlen - tok0), rows = ntok * P.G;
  const int ctx = P.ctx_lens[b];
  const int kmax = ctx - qlen + tok0 + ntok;  // keys visible to the tile's last token
  const int32_t* table = P.block_tables + int64_t(b) * P.max_blocks;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  for (int idx = tid; idx < rows * D; idx += blockDim.x) {
    const int r = idx / D, d = idx % D;
    const int i = tok0 + r / P.G, head = h * P.G + r % P.G;
    qs[idx] = __bfloat162float(P.qkv[int64_t(q0 + i) * P.W + int64_t(head) * D + d]) * P.scale_log2;
  }

  float m[kRowsPerWarp], l[kRowsPerWarp], o[kRowsPerWarp][NCH][2];
  int nk[kRowsPerWarp];
#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j) {
    m[j] = -INFINITY;
    l[j] = 0.f;
    const int r = warp * kRowsPerWarp + j;
    nk[j] = r < rows ? ctx - qlen + tok0 + r / P.G + 1 : 0;
#pragma unroll
    for (int c = 0; c < NCH; ++c) o[j][c][0] = o[j][c][1] = 0.f;
  }
  const int row0 = warp * kRowsPerWarp;
  const int dv = D / 8;  // 16-byte pieces per key row

  for (int kt = 0; kt < kmax; kt += kTileKeys) {
    __syncthreads();  // previous tile consumed (and q loaded, first time)
    for (int idx = tid; idx < kTileKeys * dv; idx += blockDim.x) {
      const int key = idx / dv, part = idx % dv, j = kt + key;
      uint4 kk = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
      if (j < kmax) {
        const int64_t slot = int64_t(table[j / P.bs]) * P.bs + j % P.bs;
        const int64_t off = (slot * P.Hkv + h) * D + part * 8;
        kk = *reinterpret_cast<const uint4*>(P.kc + off);
        vv = *reinterpret_cast<const uint4*>(P.vc + off);
      }
      float f[8];
      unpack8(kk, f);
#pragma unroll
      for (int e = 0; e < 8; ++e) ks[(part * 8 + e) * (kTileKeys + 1) + key] = f[e];
      *reinterpret_cast<uint4*>(vs + key * D + part * 8) = vv;
    }
    __syncthreads();
    if (row0 >= rows) continue;

    // Scores of key kt + lane for the warp's rows.
    float s[kRowsPerWarp];
#pragma unroll
    for (int j = 0; j < kRowsPerWarp; ++j) s[j] = 0.f;
    for (int d = 0; d < D; ++d) {
      const float kv = ks[d * (kTileKeys + 1) + lane];
#pragma unroll
      for (int j = 0; j < kRowsPerWarp; ++j) s[j] += qs[(row0 + j) * D + d] * kv;
    }
    float p[kRowsPerWarp];
#pragma unroll
    for (int j = 0; j < kRowsPerWarp; ++j) {
      if (kt + lane >= nk[j]) s[j] = -INFINITY;
      const float mnew = fmaxf(m[j], warp_max(s[j]));
      const float corr = mnew == -INFINITY ? 1.f : exp2f(m[j] - mnew);
      p[j] = mnew == -INFINITY ? 0.f : exp2f(s[j] - mnew);
      l[j] = l[j] * corr + p[j];  // lane-partial; summed over lanes at the end
      m[j] = mnew;
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        o[j][c][0] *= corr;
        o[j][c][1] *= corr;
      }
    }
    // o += P V over the tile's keys.
    const int klim = min(kTileKeys, kmax - kt);
    for (int k = 0; k < klim; ++k) {
      float2 v[NCH];
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        const int d = 64 * c + 2 * lane;
        v[c] = d < D ? __bfloat1622float2(*reinterpret_cast<const bf162*>(vs + k * D + d)) : make_float2(0.f, 0.f);
      }
#pragma unroll
      for (int j = 0; j < kRowsPerWarp; ++j) {
        const float pk = __shfl_sync(0xffffffffu, p[j], k);
#pragma unroll
        for (int c = 0; c < NCH; ++c) {
          o[j][c][0] += pk * v[c].x;
          o[j][c][1] += pk * v[c].y;
        }
      }
    }
  }

#pragma unroll
  for (int j = 0; j < kRowsPerWarp; ++j) {
    const int r = row0 + j;
    const float lsum = warp_sum(l[j]);
    if (r >= rows) continue;
    const float inv = lsum > 0.f ? 1.f / lsum : 0.f;
    const int i = tok0 + r / P.G, head = h * P.G + r % P.G;
    bf16* orow = P.out + int64_t(q0 + i) * P.Hq * D + int64_t(head) * D;
#pragma unroll
    for (int c = 0; c < NCH; ++c) {
      const int d = 64 * c + 2 * lane;
      if (d < D) *reinterpret_cast<bf162*>(orow + d) = __floats2bfloat162_rn(o[j][c][0] * inv, o[j][c][1] * inv);
    }
  }
}

// ---------------------------------------------------------------- decode kernel

constexpr int kDecodeWarps = 4;
constexpr int kMaxSplits = 32;  // KV splits per (sequence, kv head), at most

struct DecodeParams {
  const bf16* qkv;
  const bf16* kc;
  const bf16* vc;
  bf16* out;
  float* part_o;    // [B, Hq, S, D] normalised partial outputs (S > 1)
  float* part_lse;  // [B, Hq, S] log2-sum-exp of each split's scores
  int* counters;    // [B, Hkv] finished splits, zero between launches; null: merge in a second kernel
  const int32_t* ctx_lens;
  const int32_t* block_tables;
  int max_blocks, Hq, Hkv, bs, G, S;
  int64_t W;
  float scale_log2;
};

// Element d of the merged output of (sequence, query head) row bh: sum_s w_s o_s / sum_s w_s with
// w_s = 2^(lse_s - max lse). Reads through L2 (__ldcg): the partials were written by other CTAs.
// Bit-identical to the decode kernel's own merge (same order of sums, same rounding), so a batch
// gives the same tokens whichever path its size selects.
__device__ __forceinline__ float merge_splits(const float* __restrict__ part_o, const float* __restrict__ part_lse,
                                              int64_t bh, int S, int D, int d) {
  const float* lse = part_lse + bh * S;
  float mx = -INFINITY;
  for (int s = 0; s < S; ++s) mx = fmaxf(mx, __ldcg(lse + s));
  float acc = 0.f, wsum = 0.f;
  if (mx != -INFINITY)
    for (int s = 0; s < S; ++s) {
      const float w = exp2f(__ldcg(lse + s) - mx);
      wsum += w;
      acc += w * __ldcg(part_o + (bh * S + s) * D + d);
    }
  return acc * (wsum > 0.f ? 1.f / wsum : 0.f);  // the same rounding as the in-kernel merge
}

template <int D, int G>
__global__ void __launch_bounds__(kDecodeWarps * 32) attn_decode_kernel(const DecodeParams P) {
  constexpr int L = D / 8;       // lanes per key
  constexpr int KPW = 32 / L;    // keys per warp per step
  __shared__ float sm_m[kDecodeWarps][G], sm_l[kDecodeWarps][G];
  __shared__ float sm_o[kDecodeWarps][G][D];
  const int b = blockIdx.x, h = blockIdx.y, split = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int sub = lane / L, li = lane % L;
  const int ctx = P.ctx_lens[b];
  const int chunk = (ctx + P.S - 1) / P.S;
  const int kbeg = split * chunk, kend = min(ctx, kbeg + chunk);
  const int32_t* table = P.block_tables + int64_t(b) * P.max_blocks;
  constexpr int STEP = kDecodeWarps * KPW;
  // Before the wait on the previous kernel: the first keys of this warp are prefetched into L2,
  // except the step's own token (ctx - 1, stored by the kernel just before). Lengths, tables and
  // older cache rows are written by uploads and earlier steps, so this DRAM latency overlaps that
  // kernel's tail. (Into L2, not registers: holding them cost 13 registers per thread, one CTA
  // per SM less, and at batch 256 that took 4% off throughput.)
  auto kv_offset = [&](int k) {
    const int64_t slot = int64_t(table[k / P.bs]) * P.bs + k % P.bs;
    return (slot * P.Hkv + h) * D + li * 8;
  };
  const int kfirst = kbeg + warp * KPW;
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int k = kfirst + u * STEP + sub;
    if (k < kend && k < ctx - 1) {
      const int64_t off = kv_offset(k);
      prefetch_l2(P.kc + off);
      prefetch_l2(P.vc + off);
    }
  }
  pdl_begin();

  float q[G][8], o[G][8], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) o[g][e] = q[g][e] = 0.f;
    {
      uint4 u = *reinterpret_cast<const uint4*>(P.qkv + int64_t(b) * P.W + int64_t(h * G + g) * D + li * 8);
      unpack8(u, q[g]);
#pragma unroll
      for (int e = 0; e < 8; ++e) q[g][e] *= P.scale_log2;
    }
  }

  for (int k0 = kfirst; k0 < kend; k0 += 2 * STEP) {
    // Two keys per lane group in flight.
    uint4 kk[2], vv[2];
    bool ok[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int k = k0 + u * STEP + sub;
      ok[u] = k < kend;
      kk[u] = vv[u] = make_uint4(0, 0, 0, 0);
      if (ok[u]) {
        const int64_t off = kv_offset(k);
        kk[u] = *reinterpret_cast<const uint4*>(P.kc + off);
        vv[u] = *reinterpret_cast<const uint4*>(P.vc + off);
      }
    }
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      float kf[8], vf[8];
      unpack8(kk[u], kf);
      unpack8(vv[u], vf);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float s = 0.f;
#pragma unroll
        for (int e = 0; e < 8; ++e) s += q[g][e] * kf[e];
#pragma unroll
        for (int off = L / 2; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (!ok[u]) continue;
        const float mnew = fmaxf(m[g], s);
        const float corr = exp2f(m[g] - mnew);  // m = -inf -> 0
        const float p = exp2f(s - mnew);
        l[g] = l[g] * corr + p;
        m[g] = mnew;
#pragma unroll
        for (int e = 0; e < 8; ++e) o[g][e] = o[g][e] * corr + p * vf[e];
      }
    }
  }

  // Merge the KPW lane groups of the warp (same li, different sub).
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int off = L; off < 32; off <<= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m[g], off);
      const float l2 = __shfl_xor_sync(0xffffffffu, l[g], off);
      const float mn = fmaxf(m[g], m2);
      const float c1 = mn == -INFINITY ? 0.f : exp2f(m[g] - mn), c2 = mn == -INFINITY ? 0.f : exp2f(m2 - mn);
      l[g] = l[g] * c1 + l2 * c2;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float o2 = __shfl_xor_sync(0xffffffffu, o[g][e], off);
        o[g][e] = o[g][e] * c1 + o2 * c2;
      }
      m[g] = mn;
    }
    if (sub == 0) {
#pragma unroll
      for (int e = 0; e < 8; ++e) sm_o[warp][g][li * 8 + e] = o[g][e];
      if (li == 0) {
        sm_m[warp][g] = m[g];
        sm_l[warp][g] = l[g];
      }
    }
  }
  __syncthreads();
  // Merge the warps: thread t handles (g, d) pairs.
  for (int idx = threadIdx.x; idx < G * D; idx += blockDim.x) {
    const int g = idx / D, d = idx % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) mx = fmaxf(mx, sm_m[w][g]);
    float lsum = 0.f, acc = 0.f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kDecodeWarps; ++w) {
        const float c = exp2f(sm_m[w][g] - mx);
        lsum += sm_l[w][g] * c;
        acc += sm_o[w][g][d] * c;
      }
    }
    const int hq = h * G + g;
    const float val = lsum > 0.f ? acc / lsum : 0.f;
    if (P.S == 1) {
      P.out[int64_t(b) * P.Hq * D + int64_t(hq) * D + d] = __float2bfloat16(val);
    } else {
      const int64_t pi = (int64_t(b) * P.Hq + hq) * P.S + split;
      P.part_o[pi * D + d] = val;
      if (d == 0) P.part_lse[pi] = lsum > 0.f ? mx + log2f(lsum) : -INFINITY;
    }
  }
  if (P.S == 1 || P.counters == nullptr) return;
  // Split-KV: the last of the S CTAs of (b, h) merges. The barrier orders the CTA's partial writes
  // before thread 0's counter update, whose release half publishes them device-wide (release is
  // cumulative) and whose acquire half, in the last CTA, makes every other CTA's partials visible
  // to it (the barrier below passes that on to its other threads). One thread fences, not 128.
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    ::cuda::atomic_ref<int, ::cuda::thread_scope_device> cnt(P.counters[int64_t(b) * P.Hkv + h]);
    last = cnt.fetch_add(1, ::cuda::memory_order_acq_rel) == P.S - 1;
    if (last) cnt.store(0, ::cuda::memory_order_relaxed);  // all S have counted: ready for the next launch
  }
  __syncthreads();
  if (!last) return;
  // The merge is on the step's critical path (every other CTA has finished), so it must not wait
  // on one L2 round trip per split: the G x S log-sum-exps are read at once, each head's weights
  // w_s = 2^(lse_s - max lse) computed once, then each thread sums a float4 column of the
  // partials with all S loads in flight. Same sums in the same order as merge_splits().
  __shared__ float sm_w[G][kMaxSplits], sm_inv[G];
  const int64_t bh0 = int64_t(b) * P.Hq + h * G;
  for (int i = threadIdx.x; i < G * P.S; i += blockDim.x) sm_w[i / P.S][i % P.S] = __ldcg(P.part_lse + bh0 * P.S + i);
  __syncthreads();
  if (threadIdx.x < G) {
    const int g = threadIdx.x;
    float mx = -INFINITY, wsum = 0.f;
    for (int s = 0; s < P.S; ++s) mx = fmaxf(mx, sm_w[g][s]);
    for (int s = 0; s < P.S; ++s) {
      const float w = mx == -INFINITY ? 0.f : exp2f(sm_w[g][s] - mx);
      sm_w[g][s] = w;
      wsum += w;
    }
    sm_inv[g] = wsum > 0.f ? 1.f / wsum : 0.f;
  }
  __syncthreads();
  constexpr int D4 = D / 4;
  for (int idx = threadIdx.x; idx < G * D4; idx += blockDim.x) {
    const int g = idx / D4, d4 = idx % D4;
    const float4* src = reinterpret_cast<const float4*>(P.part_o + (bh0 + g) * P.S * D) + d4;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int s = 0; s < kMaxSplits; ++s) {
      if (s >= P.S) break;
      const float4 v = __ldcg(src + s * D4);
      const float w = sm_w[g][s];
      acc.x += w * v.x;
      acc.y += w * v.y;
      acc.z += w * v.z;
      acc.w += w * v.w;
    }
    const float inv = sm_inv[g];
    bf16* dst = P.out + (bh0 + g) * D + d4 * 4;
    reinterpret_cast<bf162*>(dst)[0] = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
    reinterpret_cast<bf162*>(dst)[1] = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
  }
}

// out[b, hq] = sum_s w_s o_s / sum_s w_s, w_s = 2^(lse_s - max lse). grid B*Hq, block D threads.
__global__ void attn_merge_kernel(const float* __restrict__ part_o, const float* __restrict__ part_lse,
                                  bf16* __restrict__ out, int S, int D) {
  pdl_begin();
  const int64_t bh = blockIdx.x;
  for (int d = threadIdx.x; d < D; d += blockDim.x) out[bh * D + d] = __float2bfloat16(merge_splits(part_o, part_lse, bh, S, D, d));
}

int CudaBackend::decode_splits(int64_t num_seqs, int64_t num_kv_heads) const {
  const int64_t ctas = std::max<int64_t>(1, num_seqs * num_kv_heads);
  const int64_t want = (2 * int64_t(num_sms_) + ctas - 1) / ctas;
  return int(std::clamp<int64_t>(want, 1, std::clamp(max_decode_splits_, 1, kMaxSplits)));
}

// The GQA group size G is a template argument: the per-head loops unroll completely, so the four
// (or eight) heads' score reductions interleave instead of running one after another.
template <int D, int G>
static void launch_decode(const DecodeParams& p, int B, int Hkv, Stream s) {
  dim3 grid(unsigned(B), unsigned(Hkv), unsigned(p.S));
  launch(attn_decode_kernel<D, G>, grid, kDecodeWarps * 32, 0, s, p);
}

template <int D>
static void launch_decode_g(const DecodeParams& p, int B, int Hkv, Stream s) {
  switch (p.G) {
    case 1: return launch_decode<D, 1>(p, B, Hkv, s);
    case 2: return launch_decode<D, 2>(p, B, Hkv, s);
    case 3: return launch_decode<D, 3>(p, B, Hkv, s);
    case 4: return launch_decode<D, 4>(p, B, Hkv, s);
    case 5: return launch_decode<D, 5>(p, B, Hkv, s);
    case 6: return launch_decode<D, 6>(p, B, Hkv, s);
    case 7: return launch_decode<D, 7>(p, B, Hkv, s);
    default: return launch_decode<D, 8>(p, B, Hkv, s);
  }
}

template <int NCH>
static void launch_tiled(const AttnParams& p, unsigned gx, unsigned gy, size_t smem, Stream s) {
  if (smem > 48 * 1024) NV_CUDA_CHECK(cudaFuncSetAttribute(attn_tiled_kernel<NCH>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  launch(attn_tiled_kernel<NCH>, dim3(gx, gy), kWarps * 32, smem, s, p);
}

void CudaBackend::attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache, Tensor& out,
                            int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float scale,
                            const AttentionMetadata& md) {
  check_qkv(qkv, num_heads, num_kv_heads, head_dim, "attention");
  check_kv_cache(k_cache, v_cache, num_kv_heads, head_dim);
  check_metadata(md, qkv.size(0), k_cache.size(0) * k_cache.size(1));
  const int64_t T = qkv.size(0), D = head_dim;
  if (out.dim() != 2 || out.size(0) != T || out.size(1) != num_heads * D)
    throw Error("attention: out must be [T, Hq*D], got " + shape_str(out.shape()));
  if (qkv.dtype() != DType::BF16 || k_cache.dtype() != DType::BF16 || v_cache.dtype() != DType::BF16 ||
      out.dtype() != DType::BF16)
    throw Error("attention: qkv, caches and out must be BF16");
  if (D % 8 != 0 || D > 256) throw Error("attention: head_dim " + std::to_string(D) + " must be a multiple of 8, at most 256");
  if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0) throw Error("attention: num_heads must be a multiple of num_kv_heads");
  const int64_t G = num_heads / num_kv_heads;
  if (G > kMaxRows) throw Error("attention: more than 16 query heads per kv head are not supported");
  if (!md.d_cu_seqlens_q.defined()) throw Error("attention: prepare_metadata() was not called for this batch");
  if (T == 0 || md.num_seqs == 0) return;
  const Stream s = on_stream();
  const int64_t B = md.num_seqs;
  const float scale_log2 = scale * kLog2e;

  const bool decode = !md.is_prefill && T == B && (D == 64 || D == 128) && G <= 8;
  if (decode) {
    DecodeParams p{};
    p.qkv = qkv.data<bf16>();
    p.kc = k_cache.data<bf16>();
    p.vc = v_cache.data<bf16>();
    p.out = out.data<bf16>();
    p.ctx_lens = md.d_context_lens.data<int32_t>();
    p.block_tables = md.max_blocks > 0 ? md.d_block_tables.data<int32_t>() : nullptr;
    p.max_blocks = int(md.max_blocks);
    p.Hq = int(num_heads);
    p.Hkv = int(num_kv_heads);
    p.bs = int(k_cache.size(1));
    p.G = int(G);
    p.S = decode_splits(B, num_kv_heads);
    p.W = qkv.size(1);
    p.scale_log2 = scale_log2;
    Tensor part_o, part_lse;
    if (p.S > 1) {
      part_o = empty({B * num_heads * p.S * D}, DType::F32);
      part_lse = empty({B * num_heads * p.S}, DType::F32);
      p.part_o = part_o.data<float>();
      p.part_lse = part_lse.data<float>();
      if (B * num_kv_heads <= kDecodeCounters) p.counters = decode_counters_;
    }
    const int Bi = int(B), Hkv = int(num_kv_heads);
    if (D == 128) launch_decode_g<128>(p, Bi, Hkv, s);
    else launch_decode_g<64>(p, Bi, Hkv, s);
    NV_LAUNCH_CHECK();
    if (p.S > 1 && p.counters == nullptr) {
      launch(attn_merge_kernel, unsigned(B * num_heads), unsigned(std::min<int64_t>(D, 128)), 0, s, p.part_o,
             p.part_lse, out.data<bf16>(), p.S, int(D));
    }
    return;
  }

  AttnParams p{};
  p.qkv = qkv.data<bf16>();
  p.kc = k_cache.data<bf16>();
  p.vc = v_cache.data<bf16>();
  p.out = out.data<bf16>();
  p.cu_q = md.d_cu_seqlens_q.data<int32_t>();
  p.ctx_lens = md.d_context_lens.data<int32_t>();
  p.block_tables = md.max_blocks > 0 ? md.d_block_tables.data<int32_t>() : nullptr;
  p.max_blocks = int(md.max_blocks);
  p.Hq = int(num_heads);
  p.Hkv = int(num_kv_heads);
  p.D = int(D);
  p.bs = int(k_cache.size(1));
  p.G = int(G);
  p.TQ = int(std::max<int64_t>(1, kMaxRows / G));
  int64_t max_q = 0;
  for (int64_t b = 0; b < B; ++b) max_q = std::max<int64_t>(max_q, md.cu_seqlens_q[size_t(b + 1)] - md.cu_seqlens_q[size_t(b)]);
  p.tiles_per_seq = int((max_q + p.TQ - 1) / p.TQ);
  if (p.tiles_per_seq == 0) return;
  p.W = qkv.size(1);
  p.scale_log2 = scale_log2;
  const size_t smem = size_t(kMaxRows) * D * 4 + size_t(D) * (kTileKeys + 1) * 4 + size_t(kTileKeys) * D * 2;
  const unsigned gx = unsigned(B * p.tiles_per_seq), gy = unsigned(num_kv_heads);
  if (D <= 64) launch_tiled<1>(p, gx, gy, smem, s);
  else if (D <= 128) launch_tiled<2>(p, gx, gy, smem, s);
  else launch_tiled<4>(p, gx, gy, smem, s);
  NV_LAUNCH_CHECK();
}

}  // namespace nanovllm
