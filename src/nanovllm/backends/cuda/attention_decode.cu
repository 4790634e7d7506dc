// Decode attention: one new token per sequence against its paged BF16 cache
// [num_blocks, bs, Hkv, D], FP32 softmax in the log2 domain.
//
// The FP8 KV cache (F8: E4M3 codes, --kv-cache-dtype fp8) keeps the same thread mapping: a lane
// still owns 8 elements of a key row, now one 8-byte load instead of 16 (16 elements per lane
// would double the q and o registers of every group head), converted in registers (e4m3x2 ->
// f16x2 -> f32). The key scale is folded into q (q . (c k_scale) = (q k_scale) . c) and the value
// scale into the CTA's normalized output (o is linear in v), so the inner loop has no extra work.
//
// A CTA per (sequence b, kv head h, KV split): the split takes a contiguous range of the sequence's
// keys (with a sliding window W, of its last W keys only: the splits divide those), and its GQA
// group of G query heads shares every K/V load. Within a CTA, a key row is read
// by a lane group of D/8 lanes (one 16-byte load of 8 BF16 each), so a warp walks 32/(D/8) keys at
// a time and each lane group keeps an online-softmax state {m, l, o[8 dims]} per group head. Each
// lane group has kKeysInFlight keys loaded at once, and their scores share one rescale of the state
// (for group sizes where the registers allow, the next kKeysInFlight keys are in flight meanwhile).
// States are merged across the lane groups of a warp (shuffles), across warps (shared memory), and
// across splits:
//  * by default the partials (normalized o and log2-sum-exp per head) go to global memory and
//    attn_merge_kernel merges them;
//  * with the kernel option decode_cluster (sm_90+, at most 16 splits), the S splits of (b, h) form
//    one thread-block cluster: each CTA leaves its result in its shared memory, and after a cluster
//    barrier every CTA merges a 1/S slice of the G x D outputs, reading the others' shared memory
//    directly (distributed shared memory). Slower than the merge kernel since that takes one L2
//    round trip (kernel_plan.h).
// The merge kernel also reads the layer's next weights ahead into L2 (DecodeAttnArgs::ahead).
// PDL (cuda_common.cuh): before its wait a CTA prefetches its first keys into L2 and loads the
// first U of each lane group into registers (not the step's own token, which the kernel before
// stores); it lets its successor launch only after its key loop, so that successor's weight loads
// (the o_proj GEMV's) do not queue before these. With the trigger at the wait, most CTAs reached
// their wait after the q/k norm kernel had finished, their prefetch still ahead of them; the
// register loads, the late trigger and the q/k norm kernel's early trigger (qk_norm_rope.cu),
// which lets these CTAs start during the qkv GEMV, made batch-1 decode faster (bench/RESULTS.md:
// "Where decode attention's fixed ~11 us goes", and the row after it).
// Why so many splits and warps at small batch: one sequence has Hkv CTAs without splits, so at
// batch 1 the kernel is a chain of latencies (DRAM round trips per key step, then the merges);
// more CTAs and warps shorten the chain each CTA walks. The number of splits depends on the batch
// size, and at small batches on the longest context's range (kernel_plan.h: long contexts), for
// which the graph runner captures a graph per range: a graph stays valid at any context of its range.
#include <cooperative_groups.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <type_traits>

#include "nanovllm/backends/cuda/attention_decode.cuh"
#include "nanovllm/backends/cuda/fp8.cuh"

namespace nanovllm::cuda {
namespace {

namespace cg = cooperative_groups;

// Per lane group and loop step; 4 is slower (bench/RESULTS.md: "4 keys in flight per lane group").
constexpr int kKeysInFlight = 2;
// The FP8 cache at group sizes 1-2: a key row is half the bytes for the same arithmetic, so a lane
// group needs twice the keys in flight to cover the same DRAM latency, and the 8-byte rows of few
// heads leave the registers for it: 4 keys, pipelined, faster at batch 256 and at long contexts
// (8 keys slower). Not at group 4: there it costs resident CTAs, and Qwen3-8B's long-context
// decode slowed down (bench/RESULTS.md: "FP8 KV decode attention with 4 keys in flight").
template <bool F8, int G>
constexpr bool deep_fp8() {
  return F8 && G <= 2;
}
constexpr int kKeysInFlightDeepFp8 = 4;

// Combines N online-softmax states {m_i, l_i, o_i} (log2 domain; m_i = -inf: an empty state) into
// m = max m_i, l = sum l_i 2^(m_i - m), o = sum o_i 2^(m_i - m); all empty: m = -inf, l = o = 0.
// The decode kernel merges its warps with it, the merge kernel its splits (l_i = 1: a split's o is
// normalized and m its log-sum-exp) and then its warps.
template <int N, class MOf, class LOf, class OOf>
__device__ __forceinline__ void merge_states(MOf m_of, LOf l_of, OOf o_of, float& m, float& l, float& o) {
  m = -INFINITY;
#pragma unroll
  for (int i = 0; i < N; ++i) m = fmaxf(m, m_of(i));
  l = 0.f;
  o = 0.f;
  if (m == -INFINITY) return;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const float c = exp2f(m_of(i) - m);  // an empty state weighs 0
    l += l_of(i) * c;
    o += o_of(i) * c;
  }
}

// out[b, hq, d] = sum_s w_s o_s[d] / sum_s w_s over the S partials of row bh = b * Hq + hq, with
// w_s = 2^(lse_s - max lse); grid (B*Hq, D/32), block kMergeWarps warps. A CTA takes 32 dims (a
// lane each); warp w takes splits w, w + kMergeWarps, ... and loads all of them (log-sum-exp and
// value) at once, so the kernel waits for one L2 round trip, not one per split; each warp then
// merges its splits with its own max, and warp 0 merges the warps. (A CTA per row walking the
// splits 8 loads at a time, after reading the log-sum-exps first, waited for a chain of L2 round
// trips; bench/RESULTS.md: "merge kernel 7.2 us a layer".) Reads go through L2 (__ldcg): other
// CTAs wrote them.
constexpr int kMergeWarps = 8;
constexpr int kMergePerWarp = kDecodeMaxSplitsGlobal / kMergeWarps;
static_assert(kDecodeMaxSplitsGlobal % kMergeWarps == 0, "splits per warp");

__global__ void __launch_bounds__(kMergeWarps * 32)
    attn_merge_kernel(const float* __restrict__ part_o, const float* __restrict__ part_lse, bf16* __restrict__ out,
                      int S, int D, L2ReadAhead ahead) {
  __shared__ float sm_m[kMergeWarps], sm_l[kMergeWarps], sm_acc[kMergeWarps][32];
  // Launched once every decode CTA has left its key loop: the weights of o_proj, the MLP and the
  // next qkv_proj stream into L2 from here on, while the decode CTAs merge their warps and this
  // kernel waits, merges and hands over (kernel_plan.h: read-ahead).
  read_ahead_l2(ahead, int64_t(blockIdx.y) * gridDim.x + blockIdx.x, int64_t(gridDim.x) * gridDim.y);
  pdl_begin();
  const int64_t bh = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, d = int(blockIdx.y) * 32 + lane;
  float lse[kMergePerWarp], v[kMergePerWarp];
#pragma unroll
  for (int i = 0; i < kMergePerWarp; ++i) {
    const int s = warp + i * kMergeWarps;
    lse[i] = -INFINITY;
    v[i] = 0.f;
    if (s < S) {
      lse[i] = __ldcg(part_lse + bh * S + s);
      v[i] = __ldcg(part_o + (bh * S + s) * D + d);
    }
  }
  float m, l, acc;
  merge_states<kMergePerWarp>([&](int i) { return lse[i]; }, [](int) { return 1.f; }, [&](int i) { return v[i]; }, m, l,
                              acc);
  sm_acc[warp][lane] = acc;
  if (lane == 0) {
    sm_m[warp] = m;
    sm_l[warp] = l;
  }
  __syncthreads();
  if (warp != 0) return;
  float mx, lsum, total;
  merge_states<kMergeWarps>([&](int w) { return sm_m[w]; }, [&](int w) { return sm_l[w]; },
                            [&](int w) { return sm_acc[w][lane]; }, mx, lsum, total);
  if (d < D) out[bh * D + d] = __float2bfloat16(lsum > 0.f ? total / lsum : 0.f);
}

// grid (B, Hkv, S), block NW warps; with P.cluster, launched as clusters of (1, 1, S). F8: the
// caches hold E4M3 codes.
template <int D, int G, int NW, bool F8>
__global__ void __launch_bounds__(NW * 32) attn_decode_kernel(const DecodeAttnArgs P) {
  using KV = std::conditional_t<F8, uint2, uint4>;  // a lane's 8 elements of a key row
  using Elem = std::conditional_t<F8, uint8_t, bf16>;
  const Elem* kc = static_cast<const Elem*>(P.kc);
  const Elem* vc = static_cast<const Elem*>(P.vc);
  constexpr int L = D / 8;        // lanes per key row
  constexpr int KPW = 32 / L;     // lane groups per warp
  constexpr int STEP = NW * KPW;  // lane groups per CTA: keys per loop step (times U)
  constexpr int U = deep_fp8<F8, G>() ? kKeysInFlightDeepFp8 : kKeysInFlight;
  __shared__ float sm_m[NW][G], sm_l[NW][G];
  __shared__ float sm_o[NW][G][D];  // each warp's state; row [0] then holds the CTA's normalized output
  __shared__ float sm_lse[G];       // the CTA's log2-sum-exp per head (cluster merge)
  const int b = blockIdx.x, h = blockIdx.y, split = blockIdx.z, S = gridDim.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int sub = lane / L, li = lane % L;
  const int ctx = P.ctx_lens[b];
  const int kstart = P.window > 0 ? max(0, ctx - P.window) : 0;  // keys before the window are never read
  const int chunk = (ctx - kstart + S - 1) / S;
  const int kbeg = kstart + split * chunk, kend = min(ctx, kbeg + chunk);
  const int32_t* table = P.block_tables + int64_t(b) * P.max_blocks;
  auto kv_offset = [&](int k) {
    const int64_t slot = int64_t(table[k / P.bs]) * P.bs + k % P.bs;
    return (slot * P.Hkv + h) * D + li * 8;
  };
  // The warp's keys: kfirst + i * STEP + sub, i = 0, 1, ... (the loop bound is warp-uniform, so
  // the shuffles below see every lane). Before the wait on the previous kernel, the first of them
  // are prefetched into L2 (not registers: that would cost occupancy at large batch), except the
  // step's own token (ctx - 1, stored by the kernel just before). Lengths, tables and older cache
  // rows were written by uploads and earlier steps, so this DRAM latency overlaps that kernel.
  const int kfirst = kbeg + warp * KPW;
  constexpr int kPrefetch = NW > 4 ? 4 * U : U;
  KV kk[U], vv[U];
  bool ok[U];
  auto fetch = [&](int k, KV& dk, KV& dv) {
    const int64_t off = kv_offset(k);
    dk = *reinterpret_cast<const KV*>(kc + off);
    dv = *reinterpret_cast<const KV*>(vc + off);
  };
  auto load = [&](int k0, KV(&dk)[U], KV(&dv)[U], bool(&dok)[U], int below) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int k = k0 + u * STEP + sub;
      dok[u] = k < kend;
      dk[u] = dv[u] = KV{};
      if (dok[u] && k < below) fetch(k, dk[u], dv[u]);
    }
  };
  // The first U keys of each lane group go straight into registers before the wait, except the
  // step's own token (loaded after it): at batch 1 that is most of a short context's keys.
  load(kfirst, kk, vv, ok, ctx - 1);
#pragma unroll
  for (int i = U; i < kPrefetch; ++i) {
    const int k = kfirst + i * STEP + sub;
    if (k < kend && k < ctx - 1) {
      const int64_t off = kv_offset(k);
      prefetch_l2(kc + off);
      prefetch_l2(vc + off);
    }
  }
  pdl_wait();
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int k = kfirst + u * STEP + sub;
    if (k == ctx - 1 && ok[u]) fetch(k, kk[u], vv[u]);
  }

  float q[G][8], o[G][8], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
    const uint4 u = *reinterpret_cast<const uint4*>(P.qkv + int64_t(b) * P.W + int64_t(h * G + g) * D + li * 8);
    unpack8(u, q[g]);
    const float qscale = F8 ? P.scale_log2 * P.k_scale : P.scale_log2;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      q[g][e] *= qscale;
      o[g][e] = 0.f;
    }
  }

  // Software pipeline where it is free: the loads of the next U keys are issued before the current
  // ones are used, so each lane group keeps 2U key rows in flight across the softmax arithmetic.
  // It costs 8-20 registers a thread: at 8 warps (sm_90 ptxas) G = 3, 4, 6, 7, 8 keep their CTAs
  // per SM and pipeline; G = 1, 2, 5 would lose one, and for G = 2 that was slower (a smaller wave
  // of split CTAs), while G = 4 gained (bench/RESULTS.md:
  // "Decode attention with the next keys' loads in flight"). The FP8 cache pipelines at groups 1-2
  // too (with 4 keys, above).
  constexpr bool kPipelined = deep_fp8<F8, G>() || G == 3 || G == 4 || G >= 6;
  auto unpack = [](const KV& x, float* f) {
    if constexpr (F8)
      unpack8_e4m3(x, f);
    else
      unpack8(x, f);
  };
  for (int k0 = kfirst; k0 < kend; k0 += U * STEP) {
    KV nk[U], nv[U];
    bool nok[U];
    if constexpr (kPipelined) load(k0 + U * STEP, nk, nv, nok, INT_MAX);
    // Scores s[u][g] = q_g . k_u, reduced over the lane group (every lane shuffles).
    float s[U][G];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float kf[8];
      unpack(kk[u], kf);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float acc = 0.f;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc += q[g][e] * kf[e];
#pragma unroll
        for (int off = L / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
        s[u][g] = acc;
      }
    }
    float vf[U][8];
#pragma unroll
    for (int u = 0; u < U; ++u) unpack(vv[u], vf[u]);
      // One rescale for the U keys: m' = max(m, s_u), o' = o 2^(m - m') + sum_u 2^(s_u - m') v_u.
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float mx = m[g];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (ok[u]) mx = fmaxf(mx, s[u][g]);
      if (mx == -INFINITY) continue;        // no key of this lane group yet
      const float corr = exp2f(m[g] - mx);  // m = -inf -> 0
      float p[U], psum = 0.f;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        p[u] = ok[u] ? exp2f(s[u][g] - mx) : 0.f;
        psum += p[u];
      }
      l[g] = l[g] * corr + psum;
      m[g] = mx;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        float acc = o[g][e] * corr;
#pragma unroll
        for (int u = 0; u < U; ++u) acc += p[u] * vf[u][e];
        o[g][e] = acc;
      }
    }
    if constexpr (kPipelined) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        kk[u] = nk[u];
        vv[u] = nv[u];
        ok[u] = nok[u];
      }
    } else {
      load(k0 + U * STEP, kk, vv, ok, INT_MAX);
    }
  }

  pdl_trigger();  // the keys are read: the successor (merge kernel or o_proj GEMV) may launch
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
  // Merge the warps: a thread per (g, d); only that thread touches element (g, d) of sm_o.
  for (int idx = threadIdx.x; idx < G * D; idx += NW * 32) {
    const int g = idx / D, d = idx % D;
    float mx, lsum, acc;
    merge_states<NW>([&](int w) { return sm_m[w][g]; }, [&](int w) { return sm_l[w][g]; },
                     [&](int w) { return sm_o[w][g][d]; }, mx, lsum, acc);
    const float val = lsum > 0.f ? (F8 ? acc / lsum * P.v_scale : acc / lsum) : 0.f;
    const float lse = lsum > 0.f ? mx + log2f(lsum) : -INFINITY;  // empty split: weight 0
    const int hq = h * G + g;
    if (S == 1) {
      P.out[int64_t(b) * P.Hq * D + int64_t(hq) * D + d] = __float2bfloat16(val);
    } else if (!P.cluster) {
      const int64_t pi = (int64_t(b) * P.Hq + hq) * S + split;
      P.part_o[pi * D + d] = val;
      if (d == 0) P.part_lse[pi] = lse;
    } else {
      sm_o[0][g][d] = val;
      if (d == 0) sm_lse[g] = lse;
    }
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (S == 1 || !P.cluster) return;
  // Cluster merge. The barrier publishes every CTA's sm_o[0] / sm_lse to the cluster (arrive has
  // release, wait acquire semantics); CTA `rank` then merges elements rank, rank + S, ... of the
  // G x D outputs, all 2S remote loads of an element in flight.
  cg::cluster_group cl = cg::this_cluster();
  cl.sync();
  const int rank = int(cl.block_rank());
  for (int idx = rank + S * int(threadIdx.x); idx < G * D; idx += S * NW * 32) {
    const int g = idx / D, d = idx % D;
    float lse[kDecodeMaxSplits], v[kDecodeMaxSplits];
#pragma unroll
    for (int s = 0; s < kDecodeMaxSplits; ++s) {
      if (s < S) {
        lse[s] = *cl.map_shared_rank(&sm_lse[g], s);
        v[s] = *cl.map_shared_rank(&sm_o[0][g][d], s);
      }
    }
    float mx = -INFINITY;
#pragma unroll
    for (int s = 0; s < kDecodeMaxSplits; ++s)
      if (s < S) mx = fmaxf(mx, lse[s]);
    float acc = 0.f, wsum = 0.f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int s = 0; s < kDecodeMaxSplits; ++s) {
        if (s < S) {
          const float w = exp2f(lse[s] - mx);
          wsum += w;
          acc += w * v[s];
        }
      }
    }
    P.out[(int64_t(b) * P.Hq + h * G + g) * D + d] = __float2bfloat16(acc * (wsum > 0.f ? 1.f / wsum : 0.f));
  }
  cl.sync();  // the others may still read this CTA's shared memory: it must outlive their loads
#endif
}

using DecodeKernel = void (*)(DecodeAttnArgs);

// 8 warps when asked for and their per-warp states fit 32 KiB of static shared memory, else 4.
template <int D, int G, bool F8>
DecodeKernel kernel_for_g(int warps) {
  if constexpr (decode_eight_warps_fit(D, G))
    if (warps >= 8) return attn_decode_kernel<D, G, 8, F8>;
  return attn_decode_kernel<D, G, 4, F8>;
}

// The instantiation for head dim D (64 or 128), group size G (1..8) and `warps` (4 or 8).
template <int D, bool F8>
DecodeKernel kernel_for_d(int G, int warps) {
  switch (G) {
    case 1: return kernel_for_g<D, 1, F8>(warps);
    case 2: return kernel_for_g<D, 2, F8>(warps);
    case 3: return kernel_for_g<D, 3, F8>(warps);
    case 4: return kernel_for_g<D, 4, F8>(warps);
    case 5: return kernel_for_g<D, 5, F8>(warps);
    case 6: return kernel_for_g<D, 6, F8>(warps);
    case 7: return kernel_for_g<D, 7, F8>(warps);
    default: return kernel_for_g<D, 8, F8>(warps);
  }
}

DecodeKernel kernel_for(int D, int G, int warps, bool f8 = false) {
  if (f8) return D == 128 ? kernel_for_d<128, true>(G, warps) : kernel_for_d<64, true>(G, warps);
  return D == 128 ? kernel_for_d<128, false>(G, warps) : kernel_for_d<64, false>(G, warps);
}

}  // namespace

void decode_attention(const DecodeAttnArgs& a, Stream st) {
  const int G = a.Hq / a.Hkv;
  // The plan's warps (plan_decode_attention): 8 only for split CTAs whose 8 warps' states fit.
  const int nw = a.warps;
  if (!(nw == 4 || (nw == 8 && a.S > 1 && decode_eight_warps_fit(a.D, G))))
    throw Error("decode attention: " + std::to_string(nw) + " warps for " + std::to_string(a.S) +
                " splits at head_dim " + std::to_string(a.D) + ", group " + std::to_string(G) +
                " is not a plan of plan_decode_attention");
  if (a.S < 1 || a.S > kDecodeMaxSplitsGlobal || (a.cluster && a.S > kDecodeMaxSplits))
    throw Error("decode attention: " + std::to_string(a.S) + " splits" + (a.cluster ? " in a cluster" : "") +
                " is not a plan of plan_decode_attention");
  const DecodeKernel k = kernel_for(a.D, G, nw, a.fp8);
  const dim3 grid(unsigned(a.B), unsigned(a.Hkv), unsigned(a.S));
  launch_clustered(k, grid, dim3(unsigned(nw * 32)), 0, st, dim3(1, 1, a.cluster ? unsigned(a.S) : 1u), a);
  NV_LAUNCH_CHECK();
  if (a.S > 1 && !a.cluster) {
    launch(attn_merge_kernel, dim3(unsigned(a.B * a.Hq), unsigned(a.D / 32)), dim3(unsigned(kMergeWarps * 32)), 0, st,
           a.part_o, a.part_lse, a.out, a.S, a.D, a.ahead);
    NV_LAUNCH_CHECK();
  }
}

int decode_resident_ctas(int head_dim, int group, int warps, bool fp8) {
  if ((head_dim != 64 && head_dim != 128) || group < 1 || group > 8 || (warps != 4 && warps != 8))
    throw Error("decode attention: no split kernel for head_dim " + std::to_string(head_dim) + ", group " +
                std::to_string(group) + ", " + std::to_string(warps) + " warps");
  int n = 0;
  NV_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel_for(head_dim, group, warps, fp8), warps * 32, 0));
  return n;
}

int decode_cluster_limit() {
  int dev = 0, major = 0;
  NV_CUDA_CHECK(cudaGetDevice(&dev));
  NV_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major < 9) return 1;
  // Clusters of more than 8 CTAs are "non-portable": each kernel must opt in.
  for (int D : {64, 128})
    for (int G = 1; G <= 8; ++G)
      for (int warps : {4, 8})
        for (bool f8 : {false, true})
          NV_CUDA_CHECK(
              cudaFuncSetAttribute(kernel_for(D, G, warps, f8), cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  // The biggest CTA (most shared memory) decides: can a cluster of n of them be resident at once?
  for (int n = kDecodeMaxSplits; n > 1; n /= 2) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(1, 1, unsigned(n));
    cfg.blockDim = dim3(8 * 32);
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 1;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = unsigned(n);
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, kernel_for(128, 8, 8), &cfg) == cudaSuccess && clusters > 0) return n;
    (void)cudaGetLastError();
  }
  return 1;
}

}  // namespace nanovllm::cuda
