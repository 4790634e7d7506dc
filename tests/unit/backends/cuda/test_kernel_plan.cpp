// The CUDA backend's plan functions (backends/cuda/kernel_plan.h), on the CPU: with the default
// options they choose the kernels that the backend chose before the plans existed (the rules that
// the GEMV and the decode launch applied inline, transcribed below as `before_*`), over a sweep of
// shapes and every option value; plus the cases the measurements are about. (Which attention
// kernel runs at all is attention.cu's plan_attention.)
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>

#include "nanovllm/backends/cuda/kernel_plan.h"
#include "nanovllm/utils/error.h"

using namespace nanovllm;
using namespace nanovllm::cuda;

namespace {

// ---- the inline rules of commit 1836a82 (gemm_cublaslt.cu, gemv.cu, attention.cu)

// gemv_bf16 returned true (it launched) for these arguments; max_grid 0: no wave limit.
bool before_gemv_accepts(const LinearProblem& p, bool norm, int64_t max_grid) {
  if (p.T < 1 || p.T > 4 || p.K % 8 != 0 || !p.aligned16 || p.N > int64_t(1) << 30 || p.K > int64_t(1) << 30)
    return false;
  if (p.f32_out && p.silu_mul) return false;
  if (norm && (p.f32_out || p.T * p.K * 2 > (48 << 10))) return false;
  const int64_t grid = (p.N + (p.silu_mul ? 2 : 4) - 1) / (p.silu_mul ? 2 : 4);
  if (norm && max_grid > 0 && grid > max_grid) return false;
  return true;
}

// linear / linear_silu_mul: the GEMV when it accepted (N == 0 returned before).
bool before_linear_gemv(const LinearProblem& p) { return p.N > 0 && before_gemv_accepts(p, false, 0); }

// add_rms_norm_linear: fused when the mode allowed and the GEMV accepted with the norm.
bool before_norm_fused(const LinearProblem& p, int mode, int64_t wave) {
  if (!(mode != 0 && p.bf16 && p.T > 0 && p.T <= 4 && p.N > 0 && (mode == 2 || p.K <= 2048))) return false;
  return before_gemv_accepts(p, true, mode == 1 ? wave : 0);
}

struct BeforeDecode {
  int splits, warps;
  bool cluster;
};
BeforeDecode before_decode(const DecodeAttentionProblem& p, int sms, int device_cluster_limit, const KernelOptions& o) {
  const int64_t G = p.num_heads / p.num_kv_heads;
  BeforeDecode d{};
  const int64_t ctas = std::max<int64_t>(1, p.num_seqs * p.num_kv_heads);
  const int64_t want = (2 * int64_t(sms) + ctas - 1) / ctas;
  d.splits = int(std::clamp<int64_t>(want, 1, std::clamp(o.max_decode_splits, 1, 16)));
  d.warps = d.splits > 1 && o.decode_warps >= 8 && 8 * G * p.head_dim <= 8192 ? 8 : 4;  // decode_attention()
  const int limit = o.decode_cluster ? device_cluster_limit : 1;
  d.cluster = d.splits > 1 && d.splits <= limit;
  return d;
}

KernelOptions with_gemv_norm(GemvNormFusion g) {
  KernelOptions o;
  o.gemv_norm = g;
  return o;
}

// ---- tests

TEST(KernelPlan, LinearChoosesAsBeforeForEveryShape) {
  int cases = 0, gemvs = 0, fused = 0;
  for (int64_t T : {0, 1, 2, 3, 4, 5, 17, 256})
    for (int64_t N : {0, 1, 77, 1024, 4099, 12288, 151936})
      for (int64_t K : {100, 1024, 1032, 2048, 2056, 4096, 6144, 12288, 24576, 30000})
        for (int flags = 0; flags < 16; ++flags) {
          LinearProblem p;
          p.T = T, p.N = N, p.K = K;
          p.silu_mul = flags & 1, p.f32_out = flags & 2, p.aligned16 = !(flags & 4), p.bf16 = !(flags & 8);
          // linear / linear_silu_mul (bf16 is required there: the ops throw otherwise)
          if (p.bf16) {
            const bool gemv = plan_linear(p, KernelOptions(), [] { return int64_t(0); }).kernel == LinearKernel::Gemv;
            ASSERT_EQ(gemv, before_linear_gemv(p)) << T << " " << N << " " << K << " flags " << flags;
            gemvs += gemv;
          }
          // add_rms_norm_linear, every mode, waves below, at and above the grid
          p.norm = true;
          for (int mode : {0, 1, 2})
            for (int64_t wave : {int64_t(1), int64_t(264), int64_t(528), int64_t(1) << 40}) {
              int64_t asked = 0;
              const LinearPlan plan = plan_linear(p, with_gemv_norm(GemvNormFusion(mode)), [&] {
                ++asked;
                return wave;
              });
              ASSERT_EQ(plan.fused_norm, before_norm_fused(p, mode, wave))
                  << T << " " << N << " " << K << " flags " << flags << " mode " << mode << " wave " << wave;
              if (plan.fused_norm) ASSERT_EQ(plan.kernel, LinearKernel::Gemv);
              if (mode != 1) ASSERT_EQ(asked, 0) << "the occupancy query is only for auto";
              fused += plan.fused_norm;
              ++cases;
            }
          p.norm = false;
        }
  // The sweep reaches both kernels and both norm paths.
  EXPECT_GT(gemvs, 100);
  EXPECT_GT(fused, 100);
  EXPECT_GT(cases, fused * 2);
}

TEST(KernelPlan, LinearMeasuredCases) {
  const KernelOptions def;
  auto wave = [] { return int64_t(264); };  // e.g. 2 CTAs per SM on 132 SMs
  LinearProblem p;
  // Qwen3-0.6B decode at batch 1: qkv (N 4096, K 1024) through the GEMV, its norm fused (1,024 CTAs > one
  // wave of 264: not fused; gate_up N 3072 with SiLU: 1,536 CTAs: not fused either).
  p.T = 1, p.N = 4096, p.K = 1024, p.norm = true;
  EXPECT_EQ(plan_linear(p, def, wave).kernel, LinearKernel::Gemv);
  EXPECT_FALSE(plan_linear(p, def, wave).fused_norm);
  EXPECT_TRUE(plan_linear(p, def, [] { return int64_t(1024); }).fused_norm);  // exactly one wave
  EXPECT_FALSE(plan_linear(p, def, [] { return int64_t(1023); }).fused_norm);
  // auto fuses up to K = 2048 (Qwen3-1.7B's hidden size), not beyond.
  p.K = 2048;
  EXPECT_TRUE(plan_linear(p, def, [] { return int64_t(1) << 40; }).fused_norm);
  p.K = 2056;
  EXPECT_FALSE(plan_linear(p, def, [] { return int64_t(1) << 40; }).fused_norm);
  // Qwen3-8B (K 4096): auto never fuses; always does.
  p.K = 4096;
  EXPECT_FALSE(plan_linear(p, def, [] { return int64_t(1) << 40; }).fused_norm);
  EXPECT_TRUE(plan_linear(p, with_gemv_norm(GemvNormFusion::Always), wave).fused_norm);
  EXPECT_FALSE(plan_linear(p, with_gemv_norm(GemvNormFusion::Never), wave).fused_norm);
  // Batch 5 and prefill: cuBLASLt, no fusion.
  p.T = 5;
  EXPECT_EQ(plan_linear(p, with_gemv_norm(GemvNormFusion::Always), wave).kernel, LinearKernel::CublasLt);
  EXPECT_FALSE(plan_linear(p, with_gemv_norm(GemvNormFusion::Always), wave).fused_norm);
  // F32 output (row-parallel partials): the GEMV takes it, but not with SiLU.
  LinearProblem q;
  q.T = 1, q.N = 1024, q.K = 4096, q.f32_out = true;
  EXPECT_EQ(plan_linear(q, def, wave).kernel, LinearKernel::Gemv);
  q.silu_mul = true;
  EXPECT_EQ(plan_linear(q, def, wave).kernel, LinearKernel::CublasLt);
  EXPECT_EQ(gemv_grid(q), 512);  // SiLU CTAs take 2 outputs
}

// gemm=wgmma: our Hopper GEMM past the GEMV wherever its limits hold, cuBLASLt elsewhere.
TEST(KernelPlan, LinearOurHopperGemmWhereItApplies) {
  KernelOptions wg, lt;
  wg.gemm = Gemm::Wgmma, lt.gemm = Gemm::CublasLt;
  auto wave = [] { return int64_t(264); };
  LinearProblem p;  // Qwen3-0.6B's gate_up at a 16,384-token prefill step
  p.T = 16384, p.N = 3072, p.K = 1024, p.silu_mul = true, p.wgmma = true;
  EXPECT_EQ(plan_linear(p, wg, wave).kernel, LinearKernel::Wgmma);
  EXPECT_TRUE(gemm_wgmma_applies(p, wg));
  EXPECT_EQ(plan_linear(p, lt, wave).kernel, LinearKernel::CublasLt);
  p.norm = true;  // add_rms_norm_linear: the norm first, then this product
  EXPECT_EQ(plan_linear(p, wg, wave).kernel, LinearKernel::Wgmma);
  EXPECT_FALSE(plan_linear(p, wg, wave).fused_norm);
  auto kernel_with = [&](auto change) {
    LinearProblem q = p;
    change(q);
    return plan_linear(q, wg, wave).kernel;
  };
  EXPECT_EQ(kernel_with([](LinearProblem& q) { q.T = kGemmWgmmaMinRows; }), LinearKernel::Wgmma);
  EXPECT_EQ(kernel_with([](LinearProblem& q) { q.T = kGemmWgmmaMinRows - 1; }), LinearKernel::CublasLt);
  EXPECT_EQ(kernel_with([](LinearProblem& q) { q.T = 4; }), LinearKernel::Gemv);
  EXPECT_EQ(kernel_with([](LinearProblem& q) { q.wgmma = false; }), LinearKernel::CublasLt);  // not sm_90a
  EXPECT_EQ(kernel_with([](LinearProblem& q) { q.silu_mul = false, q.f32_out = true; }), LinearKernel::CublasLt);
  EXPECT_EQ(kernel_with([](LinearProblem& q) { q.N = 3076; }), LinearKernel::CublasLt);  // N % 8
  EXPECT_EQ(kernel_with([](LinearProblem& q) { q.K = 1028; }), LinearKernel::CublasLt);  // K % 8
  EXPECT_EQ(kernel_with([](LinearProblem& q) { q.aligned16 = false; }), LinearKernel::CublasLt);
  EXPECT_EQ(kernel_with([](LinearProblem& q) { q.bf16 = false; }), LinearKernel::CublasLt);
  EXPECT_EQ(kernel_with([](LinearProblem& q) { q.silu_mul = false; }), LinearKernel::Wgmma);
}

// gemm=auto (the default): our GEMM only where its epilogue takes a kernel's work, from
// kGemmWgmmaAutoRows rows at K <= kGemmWgmmaAutoMaxK (measured: bench/RESULTS.md, "gemm=auto").
TEST(KernelPlan, LinearAutoTakesTheFusedEpiloguesWhereMeasuredFaster) {
  const KernelOptions def;
  auto wave = [] { return int64_t(264); };
  LinearProblem p;  // Qwen3-0.6B's gate_up at a 16,384-token step
  p.T = 16384, p.N = 3072, p.K = 1024, p.silu_mul = true, p.wgmma = true;
  EXPECT_EQ(plan_linear(p, def, wave).kernel, LinearKernel::Wgmma);
  LinearProblem q = p;
  q.T = kGemmWgmmaAutoRows - 1;
  EXPECT_EQ(plan_linear(q, def, wave).kernel, LinearKernel::CublasLt);
  q = p, q.K = 4096;  // Qwen3-8B's hidden size
  EXPECT_EQ(plan_linear(q, def, wave).kernel, LinearKernel::CublasLt);
  q = p, q.silu_mul = false;  // a plain product: cuBLASLt
  EXPECT_EQ(plan_linear(q, def, wave).kernel, LinearKernel::CublasLt);
  q = p, q.wgmma = false;
  EXPECT_EQ(plan_linear(q, def, wave).kernel, LinearKernel::CublasLt);
  // The qkv product with the q/k norm + RoPE + KV store: 16 q + 8 + 8 kv heads of 128.
  LinearProblem r;
  r.T = 16384, r.N = 4096, r.K = 1024, r.wgmma = true;
  EXPECT_TRUE(linear_rope_fuses(r, 128, 32, true, def));
  EXPECT_FALSE(linear_rope_fuses(r, 128, 32, false, def));  // an FP8 KV cache
  EXPECT_FALSE(linear_rope_fuses(r, 64, 64, true, def));    // head_dim 64
  LinearProblem odd = r;
  odd.N = 33 * 128;  // an odd count of heads: a tile would split one
  EXPECT_FALSE(linear_rope_fuses(odd, 128, 33, true, def));
  LinearProblem few = r;
  few.T = kGemmWgmmaAutoRows - 1;
  EXPECT_FALSE(linear_rope_fuses(few, 128, 32, true, def));
  KernelOptions wg, lt;
  wg.gemm = Gemm::Wgmma, lt.gemm = Gemm::CublasLt;
  EXPECT_TRUE(linear_rope_fuses(few, 128, 32, true, wg));
  EXPECT_FALSE(linear_rope_fuses(r, 128, 32, true, lt));
}

// The residual add + RMSNorm in o_proj's / down_proj's epilogue (linear_add_norm_fuses) under
// gemm_norm=on: H a multiple of 256 up to 2,048 (a cluster of H / 256 CTAs), from kGemmWgmmaAutoRows
// rows under gemm=auto at any K, from kGemmWgmmaMinRows under gemm=wgmma, never under cublaslt; never
// with gemm_norm=off (the default: measured slower).
TEST(KernelPlan, AddNormEpilogueWhereAClusterHoldsTheRow) {
  KernelOptions def;
  EXPECT_FALSE(def.gemm_norm);
  def.gemm_norm = true;
  LinearProblem p;
  p.T = 16384, p.N = 1024, p.K = 3072, p.wgmma = true;  // Qwen3-0.6B's down_proj
  EXPECT_TRUE(linear_add_norm_fuses(p, def));
  LinearProblem big = p;
  big.N = 4096;  // Qwen3-8B: 16 CTAs a cluster
  EXPECT_FALSE(linear_add_norm_fuses(big, def));
  LinearProblem odd = p;
  odd.N = 1000;
  EXPECT_FALSE(linear_add_norm_fuses(odd, def));
  LinearProblem f32 = p;
  f32.f32_out = true;  // tensor parallelism's partial sums
  EXPECT_FALSE(linear_add_norm_fuses(f32, def));
  LinearProblem no_sm90a = p;
  no_sm90a.wgmma = false;
  EXPECT_FALSE(linear_add_norm_fuses(no_sm90a, def));
  LinearProblem few = p;
  few.T = kGemmWgmmaAutoRows - 1;
  EXPECT_FALSE(linear_add_norm_fuses(few, def));
  KernelOptions wg = def, lt = def, off;
  wg.gemm = Gemm::Wgmma, lt.gemm = Gemm::CublasLt;
  EXPECT_TRUE(linear_add_norm_fuses(few, wg));
  few.T = kGemmWgmmaMinRows - 1;
  EXPECT_FALSE(linear_add_norm_fuses(few, wg));
  EXPECT_FALSE(linear_add_norm_fuses(p, lt));
  EXPECT_FALSE(linear_add_norm_fuses(p, off));
}

// The GEMV's CTA shape (gemv_shape): 2 weight rows per CTA at one row of x, else 4; the norm
// prologue keeps 4 (its wave rule counts CTAs of 4 rows).
TEST(KernelPlan, GemvShapeTwoRowsAtBatchOne) {
  auto rows = [](int64_t T, int64_t K, bool norm, bool silu, GemvNormFusion fusion) {
    LinearProblem p;
    p.T = T, p.N = 1024, p.K = K, p.norm = norm, p.silu_mul = silu;
    KernelOptions o;
    o.gemv_norm = fusion;
    const LinearPlan plan = plan_linear(p, o, [] { return int64_t(1) << 40; });
    EXPECT_EQ(plan.kernel, LinearKernel::Gemv);
    return plan.gemv.rows;
  };
  for (int64_t K : {8, 1024, 2048, 3072, 4096, 12288})
    for (bool silu : {false, true}) {
      EXPECT_EQ(rows(1, K, false, silu, GemvNormFusion::Auto), 2) << K;
      EXPECT_EQ(rows(1, K, true, silu, GemvNormFusion::Never), 2) << K;  // add_rms_norm, then the GEMV
      EXPECT_EQ(rows(1, K, true, silu, GemvNormFusion::Always), kGemvRows) << K;
      for (int64_t T : {2, 3, 4}) EXPECT_EQ(rows(T, K, false, silu, GemvNormFusion::Auto), kGemvRows) << T << " " << K;
    }
  EXPECT_EQ(gemv_shape(1, false).rows, 2);
  EXPECT_EQ(gemv_shape(1, true).rows, kGemvRows);
  EXPECT_EQ(gemv_shape(4, false).rows, kGemvRows);
}

TEST(KernelPlan, DecodeAttentionChoosesAsBeforeForEveryShape) {
  int cases = 0, clusters = 0, merges = 0;
  for (int sms : {1, 8, 108, 132})
    for (int limit : {1, 2, 8, 16})
      for (int max_splits : {1, 2, 5, 16})
        for (bool cl : {true, false})
          for (int warps : {4, 8}) {
            KernelOptions o;
            o.max_decode_splits = max_splits, o.decode_cluster = cl, o.decode_warps = warps;
            for (int64_t B : {1, 2, 7, 11, 17, 64, 256, 512})
              for (int64_t hkv : {1, 2, 4, 8})
                for (int64_t G : {1, 2, 3, 4, 5, 8})  // the decode kernel's groups and head dims
                  for (int64_t D : {64, 128}) {
                    DecodeAttentionProblem p;
                    p.num_seqs = B, p.num_kv_heads = hkv, p.num_heads = hkv * G, p.head_dim = D;
                    const DecodeAttentionPlan plan = plan_decode_attention(p, sms, limit, o);
                    const BeforeDecode want = before_decode(p, sms, limit, o);
                    ASSERT_EQ(plan.splits, want.splits) << sms << " " << B << " " << hkv;
                    ASSERT_EQ(plan.warps, want.warps) << G << " " << D << " splits " << plan.splits;
                    ASSERT_EQ(plan.cluster, want.cluster) << limit << " splits " << plan.splits;
                    ++cases;
                    clusters += plan.cluster;
                    merges += plan.splits > 1 && !plan.cluster;
                  }
          }
  EXPECT_GT(clusters, 500);
  EXPECT_GT(merges, 500);
  EXPECT_GT(cases, clusters + merges);
}

TEST(KernelPlan, DecodeAttentionMeasuredCases) {
  const KernelOptions def;
  DecodeAttentionProblem p;
  p.num_heads = 32, p.num_kv_heads = 8, p.head_dim = 128;  // Qwen3-8B
  // Batch 1 on an H100 (132 SMs, clusters of 16): 8 CTAs want 33 splits, capped at 16; the merge
  // kernel merges them (decode_cluster is off by default), or with the option one cluster each.
  p.num_seqs = 1;
  DecodeAttentionPlan plan = plan_decode_attention(p, 132, 16, def);
  EXPECT_EQ(plan.splits, 16);
  EXPECT_EQ(plan.warps, 8);
  EXPECT_FALSE(plan.cluster);
  KernelOptions with_clusters;
  with_clusters.decode_cluster = true;
  EXPECT_TRUE(plan_decode_attention(p, 132, 16, with_clusters).cluster);
  // Batch 7: ceil(264 / 56) = 5 splits; batch 256: one CTA per (sequence, KV head), 4 warps.
  p.num_seqs = 7;
  EXPECT_EQ(plan_decode_attention(p, 132, 16, def).splits, 5);
  p.num_seqs = 256;
  plan = plan_decode_attention(p, 132, 16, def);
  EXPECT_EQ(plan.splits, 1);
  EXPECT_EQ(plan.warps, 4);
  EXPECT_FALSE(plan.cluster);
  // Before sm_90 (cluster limit 1): the merge kernel, even with decode_cluster on.
  p.num_seqs = 1;
  EXPECT_FALSE(plan_decode_attention(p, 108, 1, with_clusters).cluster);
  KernelOptions o;
  o.decode_cluster = false;
  o.max_decode_splits = 4;
  o.decode_warps = 4;
  plan = plan_decode_attention(p, 132, 16, o);
  EXPECT_EQ(plan.splits, 4);
  EXPECT_EQ(plan.warps, 4);
  EXPECT_FALSE(plan.cluster);
  // Eight warps need 8 x G x D <= 8192 floats: the largest decode group (G = 8 at D = 128) just fits.
  p.num_heads = 64;
  plan = plan_decode_attention(p, 132, 16, def);
  EXPECT_EQ(plan.warps, 8);
  EXPECT_TRUE(decode_eight_warps_fit(128, 8));
  EXPECT_FALSE(decode_eight_warps_fit(128, 9));
}

// Read-ahead (kernel_plan.h): 48% of the L2, 16-byte multiples, only where the merge kernel runs, at
// the GEMV's batches, in steps without prefill rows, with the option on.
TEST(KernelPlan, DecodeAttentionReadAhead) {
  const KernelOptions def;
  DecodeAttentionProblem p;
  p.num_heads = 16, p.num_kv_heads = 8, p.head_dim = 128, p.num_seqs = 1;  // Qwen3-0.6B
  p.l2_bytes = 50 << 20;                                                   // an H100
  DecodeAttentionPlan plan = plan_decode_attention(p, 132, 16, def);
  ASSERT_GT(plan.splits, 1);
  EXPECT_EQ(plan.read_ahead_bytes, int64_t(24) << 20);
  p.l2_bytes = 40 << 20;  // an A100
  EXPECT_EQ(plan_decode_attention(p, 108, 1, def).read_ahead_bytes, (int64_t(40) << 20) * 48 / 100 / 16 * 16);
  EXPECT_EQ(plan_decode_attention(p, 108, 1, def).read_ahead_bytes % 16, 0);
  p.l2_bytes = 50 << 20;
  for (int64_t B : {2, kGemvMaxM}) {
    p.num_seqs = B;
    EXPECT_GT(plan_decode_attention(p, 132, 16, def).read_ahead_bytes, 0) << B;
  }
  p.num_seqs = kGemvMaxM + 1;  // cuBLASLt batches read each weight once for all rows
  EXPECT_EQ(plan_decode_attention(p, 132, 16, def).read_ahead_bytes, 0);
  p.num_seqs = 1;
  p.mixed_step = true;  // prefill attention follows: the weights are not next
  EXPECT_EQ(plan_decode_attention(p, 132, 16, def).read_ahead_bytes, 0);
  p.mixed_step = false;
  KernelOptions off = def;
  off.decode_read_ahead = false;
  EXPECT_EQ(plan_decode_attention(p, 132, 16, off).read_ahead_bytes, 0);
  KernelOptions clusters = def;
  clusters.decode_cluster = true;  // no merge kernel to issue it
  plan = plan_decode_attention(p, 132, 16, clusters);
  ASSERT_TRUE(plan.cluster);
  EXPECT_EQ(plan.read_ahead_bytes, 0);
  KernelOptions one = def;
  one.max_decode_splits = 1;  // no split, no merge kernel
  EXPECT_EQ(plan_decode_attention(p, 132, 16, one).read_ahead_bytes, 0);
  p.l2_bytes = 0;  // unknown L2
  EXPECT_EQ(plan_decode_attention(p, 132, 16, def).read_ahead_bytes, 0);
}

// Long contexts at small batch (kernel_plan.h): from long_decode_context keys on, batches of at most
// 16 sequences take one full wave of split CTAs, floor(resident x SMs / (B x Hkv)) splits (at
// least the short-context plan's, at most long_decode_splits), merged by the merge kernel beyond a
// cluster; shorter contexts, larger batches and long_decode_context = 0 keep the plan above. The
// graph runner's ranges are the same threshold.
TEST(KernelPlan, DecodeAttentionLongContext) {
  const KernelOptions def;
  const auto resident = [](int n, bool want_fp8 = false) {
    return [n, want_fp8](int64_t, int64_t, int warps, bool fp8) {
      EXPECT_EQ(warps, 8);
      EXPECT_EQ(fp8, want_fp8);  // the FP8 cache's kernel asks for its own residency
      return n;
    };
  };
  DecodeAttentionProblem p;
  p.num_heads = 16, p.num_kv_heads = 8, p.head_dim = 128;  // Qwen3-0.6B
  p.num_seqs = 1;
  p.max_context = def.long_decode_context - 1;
  KernelOptions with_clusters;
  with_clusters.decode_cluster = true;
  DecodeAttentionPlan plan = plan_decode_attention(p, 132, 16, with_clusters, resident(3));
  EXPECT_EQ(plan.splits, 16);
  EXPECT_TRUE(plan.cluster);
  // 8 CTAs per split; 3 resident per SM: floor(396 / 8) = 49 splits, through the merge kernel.
  p.max_context = def.long_decode_context;
  plan = plan_decode_attention(p, 132, 16, with_clusters, resident(3));
  EXPECT_EQ(plan.splits, 49);
  EXPECT_EQ(plan.warps, 8);
  EXPECT_FALSE(plan.cluster);
  EXPECT_EQ(plan_decode_attention(p, 132, 16, def, resident(2)).splits, 33);  // Qwen3-8B's kernel: 2 per SM
  p.fp8 = true;
  EXPECT_EQ(plan_decode_attention(p, 132, 16, def, resident(2, true)).splits, 33);
  p.fp8 = false;
  EXPECT_EQ(plan_decode_attention(p, 132, 16, def).splits, 33);               // residency unknown: 2
  EXPECT_EQ(plan_decode_attention(p, 132, 16, def, resident(8)).splits, 64);  // long_decode_splits caps
  KernelOptions o;
  o.long_decode_splits = 128;
  EXPECT_EQ(plan_decode_attention(p, 132, 16, o, resident(8)).splits, 128);
  o.long_decode_splits = 8;  // never fewer splits than the short-context plan
  EXPECT_EQ(plan_decode_attention(p, 132, 16, o, resident(3)).splits, 16);
  // Batch 4: 32 CTAs, floor(396 / 32) = 12 splits, with decode_cluster a cluster of 12 (short
  // contexts: ceil(264 / 32) = 9).
  p.num_seqs = 4;
  plan = plan_decode_attention(p, 132, 16, with_clusters, resident(3));
  EXPECT_EQ(plan.splits, 12);
  EXPECT_TRUE(plan.cluster);
  EXPECT_FALSE(plan_decode_attention(p, 132, 16, def, resident(3)).cluster);
  p.max_context = 100;
  EXPECT_EQ(plan_decode_attention(p, 132, 16, def, resident(3)).splits, 9);
  // Batch 17, or the rule off: the short plan at any context.
  p.max_context = 1 << 20;
  p.num_seqs = 17;
  EXPECT_EQ(plan_decode_attention(p, 132, 16, def, resident(3)).splits, 2);
  o = def;
  o.long_decode_context = 0;
  p.num_seqs = 1;
  EXPECT_EQ(plan_decode_attention(p, 132, 16, o, resident(3)).splits, 16);
  // The graph runner's context ranges.
  EXPECT_EQ(decode_context_breaks(1, def), std::vector<int64_t>{def.long_decode_context});
  EXPECT_EQ(decode_context_breaks(16, def), std::vector<int64_t>{def.long_decode_context});
  EXPECT_TRUE(decode_context_breaks(17, def).empty());
  EXPECT_TRUE(decode_context_breaks(1, o).empty());
}

}  // namespace

// Which attention kernels: the leading one-token sequences (a decode batch, or the decodes of a
// mixed step) go to the split-KV kernel where it applies; the rest to wgmma on Hopper builds, else
// mma.sync, else the CUDA-core kernel; a forced kernel that cannot run the shape is a UserError
// naming the option.
// An FP8 KV cache: the same kernels as BF16 (attention.cu gives the Hopper and CUDA-core kernels a
// BF16 scratch copy of the blocks they read), except in decode steps: mma.sync, or a UserError.
TEST(KernelPlan, Fp8KVCacheTakesTheSameKernels) {
  using nanovllm::UserError;
  using K = AttentionKernel;
  KernelOptions o;
  auto plan = [&](int64_t B, int64_t single, int64_t D, int64_t G, bool wgmma) {
    AttentionProblem p{B, single, D, G, 256};
    p.fp8_kv = true;
    const AttentionPlan r = plan_attention(p, wgmma, o);
    return std::pair<int64_t, K>{r.decode_seqs, r.rest};
  };
  using P = std::pair<int64_t, K>;
  EXPECT_EQ(plan(8, 8, 128, 2, true), P(8, K::None));
  EXPECT_EQ(plan(65, 64, 128, 4, true), P(64, K::PrefillWgmmaTma));
  EXPECT_EQ(plan(65, 64, 128, 4, false), P(64, K::PrefillMma));  // no sm_90a: mma.sync reads the codes
  EXPECT_EQ(plan(3, 0, 64, 8, true), P(0, K::PrefillWgmmaTma));
  EXPECT_EQ(plan(8, 8, 128, 16, true), P(0, K::PrefillWgmmaTma));  // G > 8: no decode kernel
  EXPECT_EQ(plan(3, 0, 96, 2, true), P(0, K::PrefillTiled));       // only the CUDA-core kernel takes D = 96
  EXPECT_THROW(plan(3, 0, 128, 65, false), UserError);
  const std::pair<PrefillAttention, K> forced[] = {{PrefillAttention::WgmmaTma, K::PrefillWgmmaTma},
                                                   {PrefillAttention::Wgmma, K::PrefillWgmma},
                                                   {PrefillAttention::Mma, K::PrefillMma},
                                                   {PrefillAttention::Tiled, K::PrefillTiled}};
  for (auto [option, kernel] : forced) {
    o.prefill_attention = option;
    EXPECT_EQ(plan(3, 0, 128, 4, true), P(0, kernel));
  }
  o = KernelOptions{};
  auto decode = [&](int64_t B, int64_t D, int64_t G) {
    AttentionProblem p{B, B, D, G, 256};
    p.fp8_kv = p.decode_step = true;
    const AttentionPlan r = plan_attention(p, true, o);
    return std::pair<int64_t, K>{r.decode_seqs, r.rest};
  };
  EXPECT_EQ(decode(8, 128, 2), P(8, K::None));
  EXPECT_EQ(decode(8, 128, 16), P(0, K::PrefillMma));  // G > 8: not the decode kernel, not the scratch
  try {
    decode(8, 32, 2);
    ADD_FAILURE() << "an FP8 decode step at head_dim 32 was planned";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("no decode attention kernel reads an FP8 KV cache at head_dim 32"),
              std::string::npos)
        << e.what();
  }
}

TEST(KernelPlan, AttentionKernelChoice) {
  using nanovllm::UserError;
  using K = AttentionKernel;
  KernelOptions o;
  int64_t bs = 256;  // block size of the paged cache
  auto plan = [&](int64_t B, int64_t single, int64_t D, int64_t G, bool wgmma) {
    const AttentionPlan p = plan_attention({B, single, D, G, bs}, wgmma, o);
    return std::pair<int64_t, K>{p.decode_seqs, p.rest};
  };
  using P = std::pair<int64_t, K>;
  EXPECT_EQ(plan(8, 8, 128, 2, true), P(8, K::None));                // a decode batch
  EXPECT_EQ(plan(8, 8, 128, 16, true), P(0, K::PrefillWgmmaTma));    // G > 8: no decode kernel
  EXPECT_EQ(plan(8, 8, 96, 2, false), P(0, K::PrefillTiled));        // D = 96: neither
  EXPECT_EQ(plan(65, 64, 128, 4, true), P(64, K::PrefillWgmmaTma));  // a mixed step: 64 decodes + a chunk
  EXPECT_EQ(plan(3, 0, 128, 4, true), P(0, K::PrefillWgmmaTma));
  EXPECT_EQ(plan(3, 0, 128, 4, false), P(0, K::PrefillMma));  // no sm_90a: mma.sync
  bs = 12;                                                    // a block size no TMA box holds: wgmma
  EXPECT_EQ(plan(3, 0, 128, 4, true), P(0, K::PrefillWgmma));
  bs = 256;
  EXPECT_EQ(plan(3, 0, 64, 64, false), P(0, K::PrefillMma));
  EXPECT_EQ(plan(3, 1, 24, 3, true), P(0, K::PrefillTiled));
  EXPECT_THROW(plan(3, 0, 128, 65, true), UserError);  // nothing takes 65 heads per KV head
  EXPECT_THROW(plan(3, 0, 96, 32, true), UserError);
  EXPECT_THROW(plan(3, 3, 128, 65, true), UserError);  // one-token rows too: no decode kernel for G = 65
  // Forced, the TMA kernel only for block sizes a TMA box holds.
  o.prefill_attention = PrefillAttention::WgmmaTma;
  for (int64_t b : {1, 4, 12, 100}) {
    bs = b;
    EXPECT_THROW(plan(3, 0, 128, 4, true), UserError) << b;
  }
  for (int64_t b : {8, 16, 32, 48, 64, 128, 192, 512}) {
    bs = b;
    EXPECT_EQ(plan(3, 0, 128, 4, true), P(0, K::PrefillWgmmaTma)) << b;
  }
  bs = 16;
  o.prefill_attention = PrefillAttention::Mma;
  EXPECT_EQ(plan(3, 0, 128, 4, true), P(0, K::PrefillMma));
  EXPECT_THROW(plan(3, 0, 96, 2, true), UserError);
  o.prefill_attention = PrefillAttention::Wgmma;
  EXPECT_EQ(plan(3, 0, 128, 4, true), P(0, K::PrefillWgmma));
  EXPECT_THROW(plan(3, 0, 128, 4, false), UserError);
  EXPECT_EQ(plan(3, 3, 128, 4, false), P(3, K::None));  // decode is not prefill: the option does not apply
  o.prefill_attention = PrefillAttention::WgmmaTma;
  EXPECT_EQ(plan(3, 0, 128, 4, true), P(0, K::PrefillWgmmaTma));
  EXPECT_THROW(plan(3, 0, 128, 4, false), UserError);
  bs = 1;
  EXPECT_THROW(plan(3, 0, 128, 4, true), UserError);
  o.prefill_attention = PrefillAttention::Tiled;
  EXPECT_EQ(plan(3, 0, 128, 4, true), P(0, K::PrefillTiled));
  EXPECT_THROW(plan(3, 0, 128, 32, true), UserError);
}

// cuBLASLt heuristic buckets: every T maps to a bucket >= T, within 2x below 64 rows and within
// one step (64 / 256 / 1024) above (8 at least); a bucket maps to itself.
TEST(KernelPlan, GemmHeuristicBuckets) {
  EXPECT_EQ(gemm_heuristic_rows(1), 8);
  EXPECT_EQ(gemm_heuristic_rows(9), 16);
  EXPECT_EQ(gemm_heuristic_rows(64), 64);
  EXPECT_EQ(gemm_heuristic_rows(65), 128);
  EXPECT_EQ(gemm_heuristic_rows(640), 768);
  EXPECT_EQ(gemm_heuristic_rows(4096), 4096);
  EXPECT_EQ(gemm_heuristic_rows(4097), 5120);
  for (int64_t T = 1; T <= 40000; ++T) {
    const int64_t b = gemm_heuristic_rows(T);
    ASSERT_GE(b, T);
    ASSERT_EQ(gemm_heuristic_rows(b), b) << T;
    ASSERT_LT(b, T <= 64 ? std::max<int64_t>(8 + 1, 2 * T) : T + (T <= 512 ? 64 : T <= 4096 ? 256 : 1024)) << T;
  }
}
