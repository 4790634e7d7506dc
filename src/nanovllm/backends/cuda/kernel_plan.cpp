// The plan functions of the CUDA backend's ops; the rules and the measurements behind them are in
// kernel_plan.h. Plain C++: built into every configuration, so the CPU tests check the rules.
#include "nanovllm/backends/cuda/kernel_plan.h"

#include <algorithm>

namespace nanovllm::cuda {

static_assert(KernelOptions::kMaxDecodeSplits == kDecodeMaxSplits, "the option's range is the kernel's");

int64_t gemv_grid(const LinearProblem& p) {
  const int64_t per_cta = p.silu_mul ? kGemvRows / 2 : kGemvRows;
  return (p.N + per_cta - 1) / per_cta;
}

LinearPlan plan_linear(const LinearProblem& p, const KernelOptions& o, const std::function<int64_t()>& norm_wave) {
  LinearPlan plan;
  const bool gemv = p.bf16 && p.aligned16 && p.T >= 1 && p.T <= kGemvMaxM && p.N >= 1 && p.K % 8 == 0 &&
                    p.N <= kGemvMaxDim && p.K <= kGemvMaxDim && !(p.f32_out && p.silu_mul);
  if (!gemv) return plan;
  plan.kernel = LinearKernel::Gemv;
  if (!p.norm || p.f32_out || p.T * p.K * 2 > kGemvNormSmem) return plan;
  switch (o.gemv_norm) {
    case GemvNormFusion::Never: break;
    case GemvNormFusion::Always: plan.fused_norm = true; break;
    case GemvNormFusion::Auto: plan.fused_norm = p.K <= 2048 && gemv_grid(p) <= norm_wave(); break;
  }
  return plan;
}

DecodeAttentionPlan plan_decode_attention(const DecodeAttentionProblem& p, int num_sms, int cluster_limit,
                                          const KernelOptions& o) {
  DecodeAttentionPlan plan;
  const int64_t group = p.num_kv_heads > 0 ? p.num_heads / p.num_kv_heads : 1;
  const int64_t ctas = std::max<int64_t>(1, p.num_seqs * p.num_kv_heads);
  const int64_t want = (2 * int64_t(num_sms) + ctas - 1) / ctas;
  plan.splits = int(std::clamp<int64_t>(want, 1, std::clamp(o.max_decode_splits, 1, kDecodeMaxSplits)));
  plan.warps = plan.splits > 1 && o.decode_warps >= 8 && decode_eight_warps_fit(p.head_dim, group) ? 8 : 4;
  plan.cluster = o.decode_cluster && plan.splits > 1 && plan.splits <= cluster_limit;
  return plan;
}

}  // namespace nanovllm::cuda
