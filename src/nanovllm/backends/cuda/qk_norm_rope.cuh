// The fused q/k RMSNorm + RoPE (+ KV-cache store) op's two kernels share these: what a launch
// carries (the inverse frequencies by value, where k/v go) and the one cos/sin formula, so the head
// kernel (qk_norm_rope.cu) and the token kernel (qk_norm_rope_tokens.cu) compute the same bits.
// Which kernel runs: plan_qk_norm_rope (kernel_plan.h).
#pragma once
#include <cstdint>

#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/kernel_plan.h"

namespace nanovllm::cuda {

constexpr int kMaxHeadDim = 256;
struct InvFreq {
  float v[kMaxHeadDim / 2];
};
// Where the fused form stores k/v: caches [num_blocks * block_size, Hkv, D]; k == nullptr: no store.
// fp8: the caches hold E4M3 codes of value x inv_k (keys) / inv_v (values).
struct KVDest {
  void* k = nullptr;
  void* v = nullptr;
  const int32_t* slots = nullptr;
  bool fp8 = false;
  float inv_k = 1.f, inv_v = 1.f;
};

// cos and sin at position p (float(pos[t])) and inverse frequency f as the CPU reference computes
// them: angle = p * f in FP32, cos/sin in double rounded to float, times the attention scaling in
// FP32, rounded to BF16 (transformers hands them out in the activation dtype).
__device__ __forceinline__ void rope_cos_sin(float p, float f, float rope_scale, float& c_out, float& s_out) {
  const float angle = p * f;
  double s, c;
  sincos(double(angle), &s, &c);
  c_out = bf16_round(float(c) * rope_scale);
  s_out = bf16_round(float(s) * rope_scale);
}

// out [T][D/2]: (cos, sin) of row t's position at each inverse frequency, rope_cos_sin's values
// (BF16, exact) as a BF16 pair, cos in the low half: the table of gemm_wgmma_rope's epilogue.
void launch_rope_cos_sin_table(const int32_t* pos, const InvFreq& inv_freq, float rope_scale, int64_t T, int half,
                               uint32_t* out, Stream st);

// The token kernel on `st` with `plan` (kernel Token). qkv [T, W] in place; qw/kw null: no norm.
// CTAs whose linear index is below early_ctas (the first wave, which may start while the qkv GEMM
// still runs) compute their cos/sin table before the wait on it; the others after issuing their loads.
void launch_qk_norm_rope_tokens(const QkNormRopePlan& plan, bf16* qkv, const bf16* qw, const bf16* kw,
                                const int32_t* pos, const InvFreq& inv_freq, float rope_scale, int64_t T, int64_t W,
                                int Hq, int Hkv, int D, float eps, const KVDest& kv, int64_t early_ctas, Stream st);

}  // namespace nanovllm::cuda
