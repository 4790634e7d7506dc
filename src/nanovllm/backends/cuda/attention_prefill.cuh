// Prefill attention (any number of new tokens per sequence) over the paged BF16 KV cache: the
// interface between CudaBackend::attention (attention.cu, which checks shapes and runs the kernel
// that kernel_plan.h's plan_attention chose) and the kernels that compute it, one file each, named
// after the KernelOptions::prefill_attention value that selects it:
//  * attention_prefill_wgmma_tma.cu (wgmma_tma): FlashAttention-3's structure on Hopper, a TMA
//    producer warp feeding two wgmma consumer warpgroups; head dims 64 and 128, block sizes a
//    multiple of 8: the path every Qwen3 prefill takes on an H100/H200 by default;
//  * attention_prefill_wgmma.cu (wgmma): flash-attention on Hopper's warpgroup MMA with cp.async
//    loads, head dims 64 and 128: the Hopper path for the other block sizes;
//  * attention_prefill_mma.cu (mma): flash-attention-2 on tensor cores (mma.sync m16n8k16), head
//    dims 64 and 128: the same on sm_80+ (A100) and builds without sm_90a, and sliding windows;
//  * attention_tiled.cu (tiled): the same function on CUDA cores, for the head dims and GQA groups
//    the tensor-core kernels lack (and as their reference for timing).
// Sequence b computes its new tokens cu_q[b]..cu_q[b+1]), the last of its ctx_lens[b] keys: new
// token i sees keys [0, ctx - qlen + i], with a sliding window W only the last W of them (the
// mma.sync and CUDA-core kernels implement the window; the Hopper ones do not, and attention.cu
// does not route windowed layers to them). Every key, the new tokens' own included, is read from
// the paged cache through the block table (prefix-cache hits and earlier prefill chunks alike).
#pragma once
#include <cstdint>

#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/tma_desc.h"

namespace nanovllm::cuda {

struct PrefillAttnArgs {
  const bf16* qkv = nullptr;  // [T, W]: token t's query heads at columns [0, Hq * D)
  const bf16* kc = nullptr;   // [num_blocks, bs, Hkv, D]
  const bf16* vc = nullptr;
  // The FP8 KV cache instead (kc, vc null): E4M3 codes, read as code x k_scale / v_scale. Only the
  // mma.sync kernel reads it; for the Hopper kernels attention.cu converts the blocks to BF16 first
  // (kv_fp8_to_bf16_scratch below).
  const uint8_t* kc8 = nullptr;
  const uint8_t* vc8 = nullptr;
  float k_scale = 1.f, v_scale = 1.f;
  bf16* out = nullptr;                    // [T, Hq * D]
  const int32_t* cu_q = nullptr;          // [B + 1] new-token offsets
  const int32_t* ctx_lens = nullptr;      // [B] keys per sequence, the new tokens included
  const int32_t* block_tables = nullptr;  // [B, max_blocks]
  int max_blocks = 0, B = 0, Hq = 0, Hkv = 0, D = 0, bs = 0;
  int window = 0;  // > 0: token i reads only keys (ctx - qlen + i - window, ctx - qlen + i] (mma and tiled kernels)
  int max_q = 0;   // new tokens of the longest sequence (host-side: sizes the grid)
  int64_t W = 0;
  float scale_log2 = 0.f;  // softmax scale * log2(e)
};

// Launches the mma.sync kernel (attention_prefill_mma.cu) on `st` (sm_80+; where kernel_plan.h's
// plan_attention chose it), each warp owning 16 or 32 query rows (rows_per_warp).
void prefill_attention_mma(const PrefillAttnArgs& a, Stream st, int rows_per_warp);
// Launches the Hopper kernel (wgmma, attention_prefill_wgmma.cu) on `st`: same coverage as
// prefill_attention_mma, only where prefill_attention_wgmma_init() returned true.
void prefill_attention_wgmma(const PrefillAttnArgs& a, Stream st);
// Called once per backend: true when the device is sm_90 and this build carries sm_90a code.
bool prefill_attention_wgmma_init();
// Launches FlashAttention-3's structure on Hopper (TMA producer warp, wgmma consumers,
// attention_prefill_wgmma_tma.cu) on `st`: where the wgmma kernel runs and kernel_plan.h's
// tma_block_size_ok(block size); k and v describe this layer's caches (make_cache_tma). A grid of at
// most persistent_ctas CTAs (the SM count: one CTA an SM) that walk the work items in turn, or one
// CTA an item where persistent_ctas is 0.
void prefill_attention_wgmma_tma(const PrefillAttnArgs& a, const TmaDesc& k, const TmaDesc& v, int persistent_ctas,
                                 Stream st);
// The TMA descriptor of a paged cache seen as [slots][row_elems] BF16 (row_elems = Hkv x D), boxes
// of 64 columns x tma_box_rows(block_size) slots (kernel_plan.h), 128-byte swizzle.
TmaDesc make_cache_tma(const void* cache, int64_t slots, int64_t row_elems, int64_t block_size);
// Called once per backend where the wgmma kernel runs (shared-memory limits of the TMA kernel).
void prefill_attention_wgmma_tma_init();
// The FP8 KV cache's blocks that B prefill sequences read, converted to a BF16 scratch cache with a
// block table onto it, so the Hopper kernels above (BF16 tiles by TMA) serve --kv-cache-dtype fp8
// (kv_fp8_scratch.cu has the layout). n: sum over b of ceil(ctx_lens[b] / bs), on the host.
struct KvFp8ScratchArgs {
  const uint8_t* k8 = nullptr;  // [num_blocks, bs, Hkv, D] E4M3 codes
  const uint8_t* v8 = nullptr;
  float k_scale = 1.f, v_scale = 1.f;
  const int32_t* block_tables = nullptr;  // [B, max_blocks]
  const int32_t* ctx_lens = nullptr;      // [B]
  bf16* kb = nullptr;                     // [n, bs, Hkv, D]
  bf16* vb = nullptr;
  int32_t* tables_out = nullptr;  // [B, max_blocks]
  int B = 0, max_blocks = 0, bs = 0, Hkv = 0, D = 0;
};
void kv_fp8_to_bf16_scratch(const KvFp8ScratchArgs& a, int64_t n, Stream st);
// Launches the CUDA-core kernel on `st` (D % 8 == 0, D <= 256, G <= 16).
void prefill_attention_tiled(const PrefillAttnArgs& a, Stream st);
// Called once per backend: raises the mma.sync kernel's dynamic shared-memory limit.
void prefill_attention_mma_init();

}  // namespace nanovllm::cuda
