// Decode attention (one new token per sequence) over the paged BF16 or FP8 KV cache: the interface
// between CudaBackend::attention (attention.cu, which checks shapes and takes the plan of
// plan_decode_attention, kernel_plan.h) and the split-KV kernel of attention_decode.cu.
#pragma once
#include <cstdint>

#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/kernel_plan.h"  // kDecodeMaxSplits, decode_eight_warps_fit

namespace nanovllm::cuda {

struct DecodeAttnArgs {
  const bf16* qkv = nullptr;  // [B, W]: q heads first, row stride W
  const void* kc = nullptr;   // [num_blocks, bs, Hkv, D]: BF16, or E4M3 codes with fp8
  const void* vc = nullptr;
  bool fp8 = false;  // the FP8 KV cache: keys are code x k_scale, values code x v_scale
  float k_scale = 1.f, v_scale = 1.f;
  bf16* out = nullptr;                    // [B, Hq * D]
  const int32_t* ctx_lens = nullptr;      // [B] keys per sequence, the new token's included
  const int32_t* block_tables = nullptr;  // [B, max_blocks]
  int max_blocks = 0, B = 0, Hq = 0, Hkv = 0, D = 0, bs = 0;
  int window = 0;             // > 0: the token reads only its last `window` keys (sliding window)
  int S = 1;                  // KV splits (1..kDecodeMaxSplits)
  int warps = 4;              // warps per CTA: 8 (split CTAs whose 8 warps' states fit) or 4
  bool cluster = false;       // S > 1: merge the splits through distributed shared memory (sm_90+)
  float* part_o = nullptr;    // S > 1 without clusters: [B, Hq, S, D] partial outputs, merged by a second kernel
  float* part_lse = nullptr;  // and [B, Hq, S] their log2-sum-exps
  int64_t W = 0;
  float scale_log2 = 0.f;  // softmax scale * log2(e)
  // What the layer reads next (plan_decode_attention's read-ahead), brought into L2 by the merge
  // kernel's CTAs before their wait: only with that kernel (S > 1 without clusters).
  L2ReadAhead ahead;
};

// Launches the decode kernel (and, for S > 1 without clusters, the merge kernel) on `st`.
void decode_attention(const DecodeAttnArgs& a, Stream st);

// Called once per backend: lets every decode kernel launch clusters of more than 8 CTAs (the
// "non-portable" sizes need an opt-in per kernel), then returns the largest cluster of splits (a
// power of two, <= kDecodeMaxSplits) that the current device can schedule for the biggest decode
// CTA; 1 on devices without thread-block clusters (before sm_90).
int decode_cluster_limit();
// CTAs of the split decode kernel for (head_dim 64/128, group 1..8, warps 4/8, BF16 or FP8 cache)
// that one SM holds at once.
int decode_resident_ctas(int head_dim, int group, int warps, bool fp8);

}  // namespace nanovllm::cuda
