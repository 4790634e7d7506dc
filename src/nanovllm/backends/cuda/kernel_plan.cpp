// The plan functions of the CUDA backend's ops; the rules and the measurements behind them are in
// kernel_plan.h. Plain C++: built into every configuration, so the CPU tests check the rules.
#include "nanovllm/backends/cuda/kernel_plan.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "nanovllm/utils/error.h"

namespace nanovllm::cuda {

static_assert(KernelOptions::kMaxDecodeSplits == kDecodeMaxSplits, "the option's range is the kernel's");
static_assert(KernelOptions::kMaxLongDecodeSplits == kDecodeMaxSplitsGlobal, "the option's range is the kernel's");

int64_t gemm_heuristic_rows(int64_t T) {
  if (T <= 64) {
    int64_t b = 8;
    while (b < T) b *= 2;
    return b;
  }
  const int64_t step = T <= 512 ? 64 : T <= 4096 ? 256 : 1024;
  return (T + step - 1) / step * step;
}

int64_t gemv_grid(const LinearProblem& p) {
  const int64_t per_cta = p.silu_mul ? kGemvRows / 2 : kGemvRows;
  return (p.N + per_cta - 1) / per_cta;
}

GemvShape gemv_shape(int64_t T, bool norm) {
  GemvShape s;
  if (T == 1 && !norm) s.rows = 2;
  return s;
}

bool gemm_wgmma_applies(const LinearProblem& p, const KernelOptions& o) {
  if (o.gemm == Gemm::CublasLt || !p.wgmma || !p.bf16 || p.f32_out || !p.aligned16 || p.T < kGemmWgmmaMinRows ||
      p.N % 8 != 0 || p.K % 8 != 0 || p.N > kGemvMaxDim || p.K > kGemvMaxDim || p.T > kGemvMaxDim)
    return false;
  if (o.gemm == Gemm::Wgmma) return true;
  // auto: only where the epilogue takes a kernel's work (SiLU-and-mul, or the q/k norm + RoPE + KV
  // store), at the sizes where that measured faster than cuBLASLt and the separate kernel.
  return (p.silu_mul || p.rope || p.add_norm) && p.T >= kGemmWgmmaAutoRows && (p.add_norm || p.K <= kGemmWgmmaAutoMaxK);
}

bool linear_add_norm_fuses(const LinearProblem& p, const KernelOptions& o) {
  LinearProblem q = p;
  q.add_norm = true;
  return o.gemm_norm && !p.silu_mul && !p.f32_out && p.N % 256 == 0 && p.N <= 2048 && gemm_wgmma_applies(q, o);
}

bool linear_rope_fuses(const LinearProblem& p, int64_t head_dim, int64_t heads, bool kv_bf16, const KernelOptions& o) {
  LinearProblem q = p;
  q.rope = true;
  return !p.silu_mul && head_dim == 128 && heads % 2 == 0 && p.N == heads * head_dim && kv_bf16 &&
         gemm_wgmma_applies(q, o);
}

LinearPlan plan_linear(const LinearProblem& p, const KernelOptions& o, const std::function<int64_t()>& norm_wave) {
  LinearPlan plan;
  const bool gemv = p.bf16 && p.aligned16 && p.T >= 1 && p.T <= kGemvMaxM && p.N >= 1 && p.K % 8 == 0 &&
                    p.N <= kGemvMaxDim && p.K <= kGemvMaxDim && !(p.f32_out && p.silu_mul);
  if (!gemv) {
    if (gemm_wgmma_applies(p, o)) plan.kernel = LinearKernel::Wgmma;
    return plan;
  }
  plan.kernel = LinearKernel::Gemv;
  if (p.norm && !p.f32_out && p.T * p.K * 2 <= kGemvNormSmem) {
    switch (o.gemv_norm) {
      case GemvNormFusion::Never: break;
      case GemvNormFusion::Always: plan.fused_norm = true; break;
      case GemvNormFusion::Auto: plan.fused_norm = p.K <= 2048 && gemv_grid(p) <= norm_wave(); break;
    }
  }
  plan.gemv = gemv_shape(p.T, plan.fused_norm);
  return plan;
}

namespace {

// The kernel for sequences with several new tokens (or single ones the decode kernel cannot take).
AttentionKernel prefill_kernel(const AttentionProblem& p, bool wgmma, const KernelOptions& o) {
  const int64_t D = p.head_dim, G = p.group;
  const bool tc = prefill_tc_supports(D, G);
  const auto shape = "head_dim " + std::to_string(D) + ", " + std::to_string(G) + " query heads per KV head";
  if (p.fp8_kv && p.decode_step) {
    if (!tc)
      throw UserError("--kv-cache-dtype fp8: no decode attention kernel reads an FP8 KV cache at " + shape +
                      " (head_dim 64 or 128, at most 64 query heads per KV head)");
    return AttentionKernel::PrefillMma;
  }
  switch (o.prefill_attention) {
    case PrefillAttention::WgmmaTma:
      if (!tc || !wgmma || !tma_block_size_ok(p.block_size))
        throw UserError(
            "kernel option prefill_attention=wgmma_tma: the TMA kernel needs an sm_90 GPU, a build with sm_90a, "
            "head_dim 64 or 128, at most 64 query heads per KV head and a block size that is a multiple of 8 (" +
            shape + ", block size " + std::to_string(p.block_size) + ")");
      return AttentionKernel::PrefillWgmmaTma;
    case PrefillAttention::Wgmma:
      if (!tc || !wgmma)
        throw UserError(
            "kernel option prefill_attention=wgmma: the wgmma kernel needs an sm_90 GPU, a build with "
            "sm_90a, head_dim 64 or 128 and at most 64 query heads per KV head (" +
            shape + ")");
      return AttentionKernel::PrefillWgmma;
    case PrefillAttention::Mma:
      if (!tc)
        throw UserError(
            "kernel option prefill_attention=mma: the mma.sync kernel needs head_dim 64 or 128 and at "
            "most 64 query heads per KV head (" +
            shape + ")");
      return AttentionKernel::PrefillMma;
    case PrefillAttention::Auto:
      if (tc && wgmma)
        return tma_block_size_ok(p.block_size) ? AttentionKernel::PrefillWgmmaTma : AttentionKernel::PrefillWgmma;
      if (tc) return AttentionKernel::PrefillMma;
      break;
    case PrefillAttention::Tiled: break;
  }
  if (D % 8 != 0 || D > 256 || G > kTiledMaxGroup)
    throw UserError("attention: no kernel for " + shape +
                    " (the CUDA-core kernel takes head_dim a multiple of 8 up "
                    "to 256 and at most 16 query heads per KV head)");
  return AttentionKernel::PrefillTiled;
}

}  // namespace

AttentionPlan plan_attention(const AttentionProblem& p, bool wgmma, const KernelOptions& o) {
  AttentionPlan plan;
  const int64_t D = p.head_dim, G = p.group;
  if ((D == 64 || D == 128) && G <= 8) plan.decode_seqs = std::clamp<int64_t>(p.leading_single, 0, p.num_seqs);
  if (plan.decode_seqs < p.num_seqs) plan.rest = prefill_kernel(p, wgmma, o);
  return plan;
}

DecodeAttentionPlan plan_decode_attention(const DecodeAttentionProblem& p, int num_sms, int cluster_limit,
                                          const KernelOptions& o, const DecodeResidency& resident) {
  DecodeAttentionPlan plan;
  const int64_t group = p.num_kv_heads > 0 ? p.num_heads / p.num_kv_heads : 1;
  const int64_t ctas = std::max<int64_t>(1, p.num_seqs * p.num_kv_heads);
  const int64_t want = (2 * int64_t(num_sms) + ctas - 1) / ctas;
  plan.splits = int(std::clamp<int64_t>(want, 1, std::clamp(o.max_decode_splits, 1, kDecodeMaxSplits)));
  if (!decode_context_breaks(p.num_seqs, o).empty() && p.max_context >= o.long_decode_context) {
    const int warps = o.decode_warps >= 8 && decode_eight_warps_fit(p.head_dim, group) ? 8 : 4;
    // (Residency is asked only of shapes the decode kernel has: plan_attention sends no others.)
    const bool kernel_exists = (p.head_dim == 64 || p.head_dim == 128) && group >= 1 && group <= 8;
    const int per_sm = resident && kernel_exists ? std::max(1, resident(p.head_dim, group, warps, p.fp8)) : 2;
    const int64_t wave = int64_t(per_sm) * num_sms / ctas;
    const int cap = std::clamp(o.long_decode_splits, 1, kDecodeMaxSplitsGlobal);
    plan.splits = std::max(plan.splits, int(std::min<int64_t>(wave, cap)));
  }
  plan.warps = plan.splits > 1 && o.decode_warps >= 8 && decode_eight_warps_fit(p.head_dim, group) ? 8 : 4;
  plan.cluster = o.decode_cluster && plan.splits > 1 && plan.splits <= cluster_limit;
  if (o.decode_read_ahead && plan.splits > 1 && !plan.cluster && p.num_seqs <= kGemvMaxM && !p.mixed_step)
    plan.read_ahead_bytes = p.l2_bytes * 48 / 100 / 16 * 16;
  return plan;
}

std::vector<int64_t> decode_context_breaks(int64_t batch, const KernelOptions& o) {
  if (o.long_decode_context <= 0 || batch > kLongDecodeMaxBatch) return {};
  return {o.long_decode_context};
}

Fp8LinearKernel plan_fp8_linear(const Fp8LinearProblem& p) {
  const bool gemv = p.T >= 1 && p.T <= kFp8GemvMaxM && p.K % 16 == 0 && p.aligned16 && p.N <= kGemvMaxDim &&
                    p.K <= kGemvMaxDim && (p.block_k == 0 || p.block_k % 16 == 0);
  if (gemv) return Fp8LinearKernel::Gemv;
  const bool fp8_gemm = p.fp8_activations && p.K % 16 == 0 && p.N % 16 == 0 && p.aligned16;
  if (fp8_gemm && p.block_k == 0) return Fp8LinearKernel::CublasLtFp8;
  if (fp8_gemm && p.block_k == 128 && p.K % 128 == 0) return Fp8LinearKernel::CublasLtFp8Block;
  return Fp8LinearKernel::DequantizeGemm;
}

IntLinearKernel plan_int_linear(const IntLinearProblem& p) {
  const bool gemv = p.T >= 1 && p.T <= kIntGemvMaxT && p.N >= 1 && (!p.silu_mul || p.N % kIntRowBlock == 0);
  if (gemv) return IntLinearKernel::Gemv;
  if (p.T <= kIntGemvMaxT || p.T > kIntGemmMaxT || p.N < 1) return IntLinearKernel::DequantizeGemm;
  switch (p.gemm) {
    case IntGemm::Mma: return IntLinearKernel::Gemm;
    case IntGemm::Wgmma:
    case IntGemm::WgmmaWide:
    case IntGemm::WgmmaSs: return p.wgmma ? IntLinearKernel::GemmWgmma : IntLinearKernel::Gemm;
    case IntGemm::Auto:
      if (p.wgmma) return IntLinearKernel::GemmWgmma;
      return p.T <= kIntGemmMmaMaxT ? IntLinearKernel::Gemm : IntLinearKernel::DequantizeGemm;
    case IntGemm::Dequantize: break;
  }
  return IntLinearKernel::DequantizeGemm;
}

int int_gemm_splits(int64_t T, int64_t outs, bool silu, int64_t K, int num_sms, int64_t cols, int ctas_per_sm) {
  const int64_t tiles = int_gemm_row_tiles(outs, silu) * ((T + cols - 1) / std::max<int64_t>(cols, 1));
  const int64_t slots = int64_t(std::max(ctas_per_sm, 1)) * std::max(num_sms, 1);
  if (tiles <= 0) return 1;
  const int64_t s = std::min({slots / tiles, int64_t(kIntGemmMaxSplits), K / kIntGemmSplitK});
  return int(std::max<int64_t>(s, 1));
}

IntGemmCluster plan_int_gemm_cluster(IntGemmCluster most, int64_t RT, int64_t CT, bool silu) {
  auto side = [](int limit, int64_t tiles) {
    int v = 1;
    while (v * 2 <= limit && v * 2 <= tiles) v *= 2;
    return v;
  };
  IntGemmCluster c{side(most.rows, RT), side(silu ? std::min(most.cols, 2) : most.cols, CT)};
  while (!int_gemm_cluster_ok(c, silu)) c.cols /= 2;  // a 4 x 4 option: 4 x 2
  return c;
}

int int_gemv_v3_splits(int64_t T, int64_t outs, bool silu, int64_t K, int64_t G, int bits, int num_sms, bool clusters) {
  const int64_t TK = int_tile_k(bits), KT = (K + TK - 1) / TK;
  const int64_t rows = silu ? outs / kIntRowBlock : (outs + kIntRowBlock - 1) / kIntRowBlock;
  if (!clusters || rows < 1 || num_sms < 1) return 1;
  const bool general = G % TK != 0 || K % TK != 0;
  const int ring = int_gemv_v3_ring(silu ? 2 : 1, int_gemv_ntiles(T), general);
  const int64_t min_tiles = std::max(2, ring / 2);             // per warp
  const double slots = double(num_sms) * kIntGemvV3CtasPerSm;  // splits only below half of it: never wide
  auto fill = [&](int64_t s) {                                 // the last wave's share of a full one, over all waves
    const double waves = double(rows * s) / slots;
    return waves / std::ceil(waves);
  };
  // Splitting halves (or more) each CTA's bytes in flight: on an H200 qkv (384 row blocks on 264
  // slots) ran 12.05 us split in 2 against 9.49 unsplit (bench/RESULTS.md), so only a grid that
  // fills less than half a wave unsplit (small N: tensor-parallel shards, small models) splits.
  if (double(rows) >= slots / 2) return 1;
  int best = 1;
  for (int s = 2; s <= kIntGemvV3MaxSplits; ++s)
    if (KT % (int64_t(s) * kIntGemvV3Warps) == 0 && KT / (int64_t(s) * kIntGemvV3Warps) >= min_tiles &&
        fill(s) > fill(best) + 0.05)
      best = s;
  return best;
}

bool rope_token_applies(const QkNormRopeProblem& p) {
  const int64_t D = p.head_dim;
  return p.aligned16 && D >= 8 && D <= 256 && D % 8 == 0 && p.num_heads >= 1 && p.num_kv_heads >= 1;
}

QkNormRopePlan plan_qk_norm_rope(const QkNormRopeProblem& p, int num_sms, const KernelOptions& o) {
  QkNormRopePlan plan;
  const int64_t heads = p.num_heads + p.num_kv_heads, T = std::max<int64_t>(p.T, 1);
  plan.threads = heads >= 8 ? kRopeHeadThreads : kRopeHeadThreads / 2;
  const int64_t per_cta = plan.threads / 32, full_groups = (heads + per_cta - 1) / per_cta;
  bool token = false;
  switch (o.rope_kernel) {
    case RopeKernel::Head: break;
    case RopeKernel::Token: token = rope_token_applies(p); break;
    case RopeKernel::Auto: token = rope_token_applies(p) && T * full_groups > num_sms; break;
  }
  if (!token) {
    // Head groups: a warp per head while T * groups fits the SMs (batch-1 Qwen3-8B: 5 CTAs, not 1).
    int64_t groups = full_groups;
    while (groups > 1 && T * groups > num_sms) --groups;
    plan.head_groups = int(groups);
    plan.ctas = T;
    return plan;
  }
  plan.kernel = QkNormRopeKernel::Token;
  const int64_t half = p.head_dim / 2;
  plan.vec = half % 8 == 0 ? 8 : 4;
  const int64_t chunks = half / plan.vec;
  plan.lanes = 1;
  while (plan.lanes < chunks) plan.lanes *= 2;
  const int64_t slots = heads + (p.store ? p.num_kv_heads : 0);
  plan.slot_splits = int((slots * plan.lanes + kRopeTokenMaxThreads - 1) / kRopeTokenMaxThreads);
  plan.slots_per_cta = int((slots + plan.slot_splits - 1) / plan.slot_splits);
  const int row_threads = plan.slots_per_cta * plan.lanes;
  plan.rows = plan.slot_splits == 1 ? std::clamp(kRopeTokenRowThreads / row_threads, 1, kRopeTokenMaxTokens) : 1;
  plan.threads = (plan.rows * row_threads + 31) / 32 * 32;
  const int64_t pairs = (T + 2 * plan.rows - 1) / (2 * plan.rows);
  plan.tokens_per_thread =
      2 * plan.rows <= kRopeTokenMaxTokens && pairs * plan.slot_splits >= kRopeTokenWaves * num_sms ? 2 : 1;
  const int64_t per = int64_t(plan.rows) * plan.tokens_per_thread;
  plan.ctas = (T + per - 1) / per;
  return plan;
}

}  // namespace nanovllm::cuda
