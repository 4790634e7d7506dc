// Prefill attention over an FP8 KV cache (--kv-cache-dtype fp8) on the Hopper kernels, which load
// BF16 tiles by TMA: once per layer, the blocks that the step's prefill sequences read are
// converted into a BF16 scratch cache, and those sequences get a block table onto the scratch.
//
//   codes:   k8, v8 [num_blocks, bs, Hkv, D] E4M3; value = code x k_scale (v_scale)
//   in:      block_tables [B, max_blocks], ctx_lens [B] of the prefill sequences
//   scratch: kb, vb [n, bs, Hkv, D] BF16, n = sum_b ceil(ctx_lens[b] / bs): sequence b's j-th block
//            at start(b) + j, start = the exclusive prefix sum of ceil(ctx_lens / bs)
//   tables:  [B, max_blocks]: start(b) + j where j < ceil(ctx_lens[b] / bs), else untouched
//
// Numerics equal the mma.sync kernel's FP8 path: float(code) x scale, rounded to BF16. Slots past a
// sequence's context in its last block are written as zeros (the codes there are whatever the
// pool held: E4M3 has NaN codes, and a masked P = 0 times a NaN V would still be NaN).
//
// Grid: (n, 2, chunks): x the scratch block, y K or V, z a chunk of the block; 256 threads. Each
// CTA finds its (b, j) by a block scan of ceil(ctx_lens / bs) in rounds of 256 sequences, then
// converts its chunk of the block's bs x Hkv x D codes (a contiguous run: 256 KiB for bs 256, 8 KV
// heads, D 128): kPerThread 16-code loads per thread, all issued before any is used.
// Why: the TMA kernel runs at about twice mma.sync's rate on long prompts (bench/RESULTS.md:
// "TMA kernel fixed and made auto"). Why chunks: one CTA per block walked its 256 KiB in 64
// dependent steps, which added a constant few milliseconds to every prefill (bench/RESULTS.md:
// "a constant ~5-6 ms with FP8").
#include <cub/block/block_scan.cuh>

#include "nanovllm/backends/cuda/attention_prefill.cuh"
#include "nanovllm/backends/cuda/fp8.cuh"

namespace nanovllm::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 4;  // 16-code loads in flight per thread

__global__ void __launch_bounds__(kThreads) kv_fp8_to_bf16_kernel(KvFp8ScratchArgs a) {
  pdl_begin();
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ int found_b, found_j;
  const int idx = blockIdx.x, tid = threadIdx.x;
  int base = 0;  // blocks of the sequences before this round
  for (int b0 = 0; b0 < a.B; b0 += kThreads) {
    const int b = b0 + tid;
    const int nb = b < a.B ? (a.ctx_lens[b] + a.bs - 1) / a.bs : 0;
    int start = 0, total = 0;
    Scan(scan_tmp).ExclusiveSum(nb, start, total);
    start += base;
    if (idx >= start && idx < start + nb) {  // exactly one thread of one round
      found_b = b;
      found_j = idx - start;
    }
    base += total;
    __syncthreads();  // scan_tmp is reused by the next round
  }
  const int b = found_b, j = found_j;
  const int row = a.Hkv * a.D;  // elements per slot
  const int valid = min(a.bs, a.ctx_lens[b] - j * a.bs);
  const int64_t src_block = a.block_tables[int64_t(b) * a.max_blocks + j];
  const bool v = blockIdx.y == 1;
  if (tid == 0 && !v && blockIdx.z == 0) a.tables_out[int64_t(b) * a.max_blocks + j] = idx;
  const uint8_t* src = (v ? a.v8 : a.k8) + src_block * a.bs * row;
  bf16* dst = (v ? a.vb : a.kb) + int64_t(idx) * a.bs * row;
  const float scale = v ? a.v_scale : a.k_scale;
  const int n16 = a.bs * row / 16, valid16 = valid * row / 16;  // row is a multiple of 16
  const int i0 = blockIdx.z * kThreads * kPerThread + tid;
  uint4 u[kPerThread];
#pragma unroll
  for (int r = 0; r < kPerThread; ++r) {
    const int i = i0 + r * kThreads;
    u[r] = i < valid16 ? reinterpret_cast<const uint4*>(src)[i] : make_uint4(0, 0, 0, 0);  // code 0 is +0
  }
#pragma unroll
  for (int r = 0; r < kPerThread; ++r) {
    const int i = i0 + r * kThreads;
    if (i >= n16) break;
    float f[16];
    unpack16_e4m3(u[r], f);
#pragma unroll
    for (int e = 0; e < 16; ++e) f[e] *= scale;
    uint4* o = reinterpret_cast<uint4*>(dst) + 2 * int64_t(i);
    o[0] = pack8(f);
    o[1] = pack8(f + 8);
  }
}

}  // namespace

void kv_fp8_to_bf16_scratch(const KvFp8ScratchArgs& a, int64_t n, Stream st) {
  if (n == 0) return;
  if ((a.Hkv * a.D) % 16 != 0) throw Error("kv_fp8_to_bf16_scratch: Hkv x D must be a multiple of 16");
  const int64_t n16 = int64_t(a.bs) * a.Hkv * a.D / 16, per_cta = kThreads * kPerThread;
  launch(kv_fp8_to_bf16_kernel, dim3(unsigned(n), 2, unsigned((n16 + per_cta - 1) / per_cta)), dim3(kThreads), 0, st,
         a);
  NV_LAUNCH_CHECK();
}

}  // namespace nanovllm::cuda
