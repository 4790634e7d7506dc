// Prefill attention on Hopper's warpgroup MMA (wgmma, sm_90a): the flash-attention-2 loop of
// attention_prefill_mma.cu with both products issued by a warpgroup of 4 warps on 64 query rows, as
// FlashAttention-3 does (without its warp specialization and TMA: every thread copies tiles with
// cp.async, double-buffered). Same function, arguments and packed GQA rows as that kernel.
//
// Work: a CTA per (sequence, tile of kBM = 128 packed query rows, kv head), 2 warpgroups; warp w
// holds rows 16w..16w+15 (warpgroup w / 4 owns rows 64 (w / 4) .. +63). Per key tile of kBN = 64:
//   S (64 x 64 per warpgroup) = Q K^T: D/16 wgmma.m64n64k16, Q and K read by the tensor cores
//                               straight from shared memory (K-major, 128-byte swizzle);
//   mask + online softmax:      softmax_tile() on the accumulators, which wgmma leaves in the
//                               m16n8 layout per warp (attention_prefill_tile.cuh);
//   O (64 x D) += P V:          4 wgmma.m64nDk16 with P from registers (the accumulators rounded
//                               to BF16 pairs are the A fragment) and V MN-major from shared memory.
// Shared memory: Q [128][D], K and V [2][64][D], each stored as D/64 tiles of 128-byte rows
// (wgmma.cuh): 96 KiB at D = 128, two CTAs per SM (128 registers per thread, no spills).
// Faster than the mma.sync kernel, well short of PyTorch's SDPA (bench/RESULTS.md:
// "wgmma kernel 306.8"). 4 warpgroups per CTA (half the L2 -> SM bytes per FLOP) ran the same
// (bench/RESULTS.md: "4 warpgroups per CTA (not kept)"): the loads are not the limit. What is: the
// CTA's warpgroups run in lockstep (one __syncthreads per tile), each waiting for its own S product
// before its softmax, so the tensor cores idle during softmax unless the SM's other CTA fills them.
// One CTA per SM with 2 or 3 warpgroups, and FlashAttention-3's intra-warpgroup overlap (softmax of
// S_t while P_{t-1} V_{t-1} and S_t run, three K/V stages) on those shapes, gained nothing, so the
// softmax alone is not what stalls the tensor cores (bench/RESULTS.md:
// "What limits the wgmma prefill kernel"). FlashAttention-3's producer warp, TMA loads of the K/V
// tiles with mbarriers so that the consumer warpgroups issue nothing but MMAs and softmax, is what
// attention_prefill_wgmma_tma.cu adds (the faster kernel, where the block size is a multiple of 8);
// this one serves the other block sizes.
#include <cfloat>

#include "nanovllm/backends/cuda/attention_prefill.cuh"
#include "nanovllm/backends/cuda/attention_prefill_tile.cuh"
#include "nanovllm/backends/cuda/wgmma.cuh"

namespace nanovllm::cuda {
namespace {

constexpr int kBM = 128;  // query rows per CTA (2 warpgroups x 64)
constexpr int kBN = 64;   // keys per tile
constexpr int kThreads = 256;

template <int D>
constexpr size_t wgmma_smem_bytes() {
  return size_t(kBM + 4 * kBN) * D * sizeof(bf16) + 1024;  // + alignment slack for 1024-byte tiles
}

// Element offset of 16-byte chunk c of row r in a [rows][D] tile stored as D/64 swizzled
// [rows][64] halves.
__device__ __forceinline__ int sw128(int rows, int r, int c) {
  return (c >> 3) * rows * 64 + r * 64 + (((c & 7) ^ (r & 7)) << 3);
}

template <int D>
__global__ void __launch_bounds__(kThreads, 2)
    prefill_attn_wgmma_kernel(const PrefillAttnArgs P, int G, int tiles_per_seq) {
  constexpr int CH = D / 8;   // 16-byte chunks per row
  constexpr int KS = D / 16;  // k-steps of Q K^T
  constexpr int NT = kBN / 8;
  constexpr int DT = D / 8;
  extern __shared__ unsigned char smem_raw[];
  bf16* qs = reinterpret_cast<bf16*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  bf16* ks = qs + kBM * D;      // [2][kBN][D]
  bf16* vs = ks + 2 * kBN * D;  // [2][kBN][D]
  pdl_begin();

  const int h = blockIdx.y;
  const int b = blockIdx.x / tiles_per_seq;
  const int tile = tiles_per_seq - 1 - blockIdx.x % tiles_per_seq;
  const int q0 = P.cu_q[b], qlen = P.cu_q[b + 1] - q0;
  const int TQ = kBM / G;
  const int tok0 = tile * TQ;
  if (tok0 >= qlen) return;
  const int rows = min(TQ, qlen - tok0) * G;
  const int past = P.ctx_lens[b] - qlen;
  const int kmax = past + tok0 + rows / G;
  const int kfull = past + tok0 + 1;
  const int32_t* table = P.block_tables + int64_t(b) * P.max_blocks;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;

  for (int idx = tid; idx < kBM * CH; idx += kThreads) {
    const int r = idx / CH, c = idx % CH;
    const bool ok = r < rows;
    const bf16* src = ok ? P.qkv + int64_t(q0 + tok0 + r / G) * P.W + int64_t(h * G + r % G) * D + c * 8 : P.qkv;
    cp_async16(qs + sw128(kBM, r, c), src, ok ? 16 : 0);
  }
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
      cp_async16(kd + sw128(kBN, key, c), P.kc + off, ok ? 16 : 0);
      cp_async16(vd + sw128(kBN, key, c), P.vc + off, ok ? 16 : 0);
    }
  };
  load_kv(0, 0);
  cp_async_commit();

  int lim[2];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int r = warp * 16 + (lane >> 2) + 8 * hf;
    lim[hf] = r < rows ? past + tok0 + r / G : kmax - 1;
  }
  float o[DT][4];
#pragma unroll
  for (int i = 0; i < DT; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const bf16* q_wg = qs + wg * 64 * 64;  // the warpgroup's 64 rows in each half

  const int ntiles = (kmax + kBN - 1) / kBN;
  for (int t = 0; t < ntiles; ++t) {
    cp_async_wait<0>();
    fence_proxy_async_smem();  // the copies are read next by the tensor cores (async proxy)
    __syncthreads();
    if (t + 1 < ntiles) load_kv((t + 1) & 1, (t + 1) * kBN);
    cp_async_commit();
    const bf16* kb = ks + (t & 1) * kBN * D;
    const bf16* vb = vs + (t & 1) * kBN * D;

    float s[NT][4];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      const int half = kk >> 2, koff = (kk & 3) * 16;
      const uint64_t da = wgmma_desc_sw128(q_wg + half * kBM * 64 + koff, 16, 1024);
      const uint64_t db = wgmma_desc_sw128(kb + half * kBN * 64 + koff, 16, 1024);
      wgmma_m64n64k16_ss(s, da, db, kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();

    softmax_tile(s, o, m, l, lim, t * kBN, kfull, P.scale_log2, lane);

    uint32_t pf[kBN / 16][4];
    probs_fragments(s, pf);  // before the fence (attention_prefill_tile.cuh)
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      const uint64_t dv = wgmma_desc_sw128(vb + kk * 16 * 64, kBN * 128, 1024);
      if constexpr (D == 128)
        wgmma_m64n128k16_rs_t(o, pf[kk], dv);
      else
        wgmma_m64n64k16_rs_t(o, pf[kk], dv);
    }
    wgmma_commit();
    wgmma_wait<0>();
  }

  store_rows(o, l, warp * 16, rows, G, h, q0 + tok0, int64_t(P.Hq) * D, P.out, lane);
}

template <int D>
void launch_wgmma(const PrefillAttnArgs& a, Stream st) {
  const int G = a.Hq / a.Hkv, TQ = kBM / G;
  const int tiles = (a.max_q + TQ - 1) / TQ;
  if (tiles == 0) return;
  launch(prefill_attn_wgmma_kernel<D>, dim3(unsigned(a.B) * unsigned(tiles), unsigned(a.Hkv)), dim3(kThreads),
         wgmma_smem_bytes<D>(), st, a, G, tiles);
}

}  // namespace

void prefill_attention_wgmma(const PrefillAttnArgs& a, Stream st) {
  if (a.D == 64)
    launch_wgmma<64>(a, st);
  else
    launch_wgmma<128>(a, st);
}

// 1 when this kernel image carries the wgmma code (built for sm_90a and running on sm_90), else 0.
__global__ void wgmma_probe_kernel(int* out) {
#ifdef NANOVLLM_WGMMA
  *out = 1;
#else
  *out = 0;
#endif
}

bool prefill_attention_wgmma_init() {
  int major = 0, dev = 0;
  NV_CUDA_CHECK(cudaGetDevice(&dev));
  NV_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major != 9) return false;
  int* flag = nullptr;
  NV_CUDA_CHECK(cudaMalloc(&flag, sizeof(int)));
  int host = 0;
  wgmma_probe_kernel<<<1, 1>>>(flag);
  const cudaError_t launched = cudaGetLastError();
  if (launched == cudaSuccess) NV_CUDA_CHECK(cudaMemcpy(&host, flag, sizeof(int), cudaMemcpyDeviceToHost));
  NV_CUDA_CHECK(cudaFree(flag));
  if (launched != cudaSuccess || host != 1) return false;
  NV_CUDA_CHECK(cudaFuncSetAttribute(prefill_attn_wgmma_kernel<64>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(wgmma_smem_bytes<64>())));
  NV_CUDA_CHECK(cudaFuncSetAttribute(prefill_attn_wgmma_kernel<128>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(wgmma_smem_bytes<128>())));
  return true;
}

}  // namespace nanovllm::cuda
