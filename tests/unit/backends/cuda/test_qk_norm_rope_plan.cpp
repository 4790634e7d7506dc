// plan_qk_norm_rope (backends/cuda/kernel_plan.h): the head kernel keeps its decode launch (the
// head groups the op computed inline before the plan existed, transcribed below), the token kernel
// takes prefills under auto, rope_kernel forces either, and the token kernel's shapes stay within
// what it supports (lanes cover half a head, at most 512 threads and 16 tokens per CTA).
#include <gtest/gtest.h>

#include "nanovllm/backends/cuda/kernel_plan.h"

using namespace nanovllm;
using namespace nanovllm::cuda;

namespace {

constexpr int kSms = 132;  // an H200

// qk_norm_rope.cu's launch before the plan: threads and head groups.
std::pair<int, int64_t> before_head_launch(int64_t T, int64_t hq, int64_t hkv, int sms) {
  const int threads = hq + hkv >= 8 ? 256 : 128;
  const int64_t heads = hq + hkv, per_cta = threads / 32;
  int64_t groups = (heads + per_cta - 1) / per_cta;
  while (groups > 1 && T * groups > sms) --groups;
  return {threads, groups};
}

KernelOptions with_rope(RopeKernel r) {
  KernelOptions o;
  o.rope_kernel = r;
  return o;
}

TEST(QkNormRopePlan, HeadKernelLaunchesAsBefore) {
  for (int64_t T : {1, 2, 7, 16, 26, 27, 64, 132, 300, 16384})
    for (auto [hq, hkv] : {std::pair<int64_t, int64_t>{16, 8}, {32, 8}, {4, 2}, {9, 3}, {64, 8}})
      for (int64_t D : {16, 24, 64, 128, 256, 18})
        for (bool store : {false, true}) {
          const QkNormRopeProblem p{T, hq, hkv, D, store, true};
          const QkNormRopePlan plan = plan_qk_norm_rope(p, kSms, with_rope(RopeKernel::Head));
          ASSERT_EQ(plan.kernel, QkNormRopeKernel::Head);
          const auto [threads, groups] = before_head_launch(T, hq, hkv, kSms);
          EXPECT_EQ(plan.threads, threads);
          EXPECT_EQ(plan.head_groups, groups);
          EXPECT_EQ(plan.ctas, T);
          // auto runs the head kernel exactly where it gives every head a warp of its own.
          const QkNormRopePlan a = plan_qk_norm_rope(p, kSms, KernelOptions());
          const int64_t full = (hq + hkv + threads / 32 - 1) / (threads / 32);
          const bool token = D % 8 == 0 && T * full > kSms;
          EXPECT_EQ(a.kernel == QkNormRopeKernel::Token, token) << T << " " << hq << " " << D;
          if (!token) EXPECT_EQ(a.head_groups, groups);
        }
}

TEST(QkNormRopePlan, DecodeKeepsTheHeadKernel) {
  // Qwen3-8B (40 q + k heads: 5 groups of 8 warps) up to T = 26 on 132 SMs; Qwen3-0.6B (24: 3) up to 44.
  EXPECT_EQ(plan_qk_norm_rope({1, 32, 8, 128, true, true}, kSms, {}).kernel, QkNormRopeKernel::Head);
  EXPECT_EQ(plan_qk_norm_rope({1, 32, 8, 128, true, true}, kSms, {}).head_groups, 5);
  EXPECT_EQ(plan_qk_norm_rope({26, 32, 8, 128, true, true}, kSms, {}).kernel, QkNormRopeKernel::Head);
  EXPECT_EQ(plan_qk_norm_rope({27, 32, 8, 128, true, true}, kSms, {}).kernel, QkNormRopeKernel::Token);
  EXPECT_EQ(plan_qk_norm_rope({44, 16, 8, 128, true, true}, kSms, {}).kernel, QkNormRopeKernel::Head);
  EXPECT_EQ(plan_qk_norm_rope({45, 16, 8, 128, true, true}, kSms, {}).kernel, QkNormRopeKernel::Token);
  // token forced: wherever it applies, at any T.
  EXPECT_EQ(plan_qk_norm_rope({1, 32, 8, 128, true, true}, kSms, with_rope(RopeKernel::Token)).kernel,
            QkNormRopeKernel::Token);
  // It does not apply: head_dim not a multiple of 8, or qkv not 16-byte aligned.
  EXPECT_EQ(plan_qk_norm_rope({4096, 16, 8, 18, true, true}, kSms, with_rope(RopeKernel::Token)).kernel,
            QkNormRopeKernel::Head);
  EXPECT_EQ(plan_qk_norm_rope({4096, 16, 8, 128, true, false}, kSms, with_rope(RopeKernel::Token)).kernel,
            QkNormRopeKernel::Head);
}

TEST(QkNormRopePlan, TokenKernelShapes) {
  // Qwen3-0.6B at the embeddings benchmark's 16K-token steps: 32 slots (q, k, v) of 8 lanes x 8
  // values, one token row of 256 threads, two tokens per thread: 8,192 CTAs.
  QkNormRopePlan p = plan_qk_norm_rope({16384, 16, 8, 128, true, true}, kSms, {});
  EXPECT_EQ(p.kernel, QkNormRopeKernel::Token);
  EXPECT_EQ(p.vec, 8);
  EXPECT_EQ(p.lanes, 8);
  EXPECT_EQ(p.slots_per_cta, 32);
  EXPECT_EQ(p.slot_splits, 1);
  EXPECT_EQ(p.rows, 1);
  EXPECT_EQ(p.threads, 256);
  EXPECT_EQ(p.tokens_per_thread, 2);
  EXPECT_EQ(p.ctas, 8192);
  // Without the store the v heads are not touched: 24 slots.
  p = plan_qk_norm_rope({16384, 16, 8, 128, false, true}, kSms, {});
  EXPECT_EQ(p.slots_per_cta, 24);
  EXPECT_EQ(p.threads, 192);
  // Qwen3-8B at T = 300: 48 slots, 384 threads, one token per thread (two would leave < 4 CTAs per SM).
  p = plan_qk_norm_rope({300, 32, 8, 128, true, true}, kSms, {});
  EXPECT_EQ(p.threads, 384);
  EXPECT_EQ(p.tokens_per_thread, 1);
  EXPECT_EQ(p.ctas, 300);
  // head_dim 24: 4-value lanes, 3 of 4 lanes busy; 10 slots x 4 lanes = 40 threads a row, 6 rows.
  p = plan_qk_norm_rope({4097, 6, 2, 24, true, true}, kSms, {});
  EXPECT_EQ(p.vec, 4);
  EXPECT_EQ(p.lanes, 4);
  EXPECT_EQ(p.rows, 6);
  EXPECT_EQ(p.threads, 256);
  EXPECT_EQ(p.ctas, (4097 + 5) / 6);
  // head_dim 256 with 48 slots of 16 lanes: 768 threads, over two CTAs of 24 slots.
  p = plan_qk_norm_rope({1000, 32, 8, 256, true, true}, kSms, {});
  EXPECT_EQ(p.lanes, 16);
  EXPECT_EQ(p.slot_splits, 2);
  EXPECT_EQ(p.slots_per_cta, 24);
  EXPECT_EQ(p.threads, 384);
  // Every shape: the lanes cover half a head, within the kernel's limits.
  for (int64_t T : {1, 17, 300, 4097, 16384})
    for (int64_t hq : {1, 4, 9, 16, 32, 64, 128})
      for (int64_t D = 8; D <= 256; D += 8)
        for (bool store : {false, true}) {
          const int64_t hkv = hq >= 8 ? 8 : 1;
          const QkNormRopePlan t = plan_qk_norm_rope({T, hq, hkv, D, store, true}, kSms, with_rope(RopeKernel::Token));
          ASSERT_EQ(t.kernel, QkNormRopeKernel::Token);
          ASSERT_TRUE(t.vec == 8 || t.vec == 4);
          ASSERT_EQ(D / 2 % t.vec, 0);
          ASSERT_GE(t.lanes * t.vec, D / 2);
          ASSERT_LT(t.lanes / 2 * t.vec, D / 2);
          ASSERT_LE(t.lanes, 32);
          ASSERT_LE(t.threads, kRopeTokenMaxThreads);
          ASSERT_EQ(t.threads % 32, 0);
          ASSERT_GE(t.threads, t.rows * t.slots_per_cta * t.lanes);
          ASSERT_LE(t.rows * t.tokens_per_thread, kRopeTokenMaxTokens);
          ASSERT_GE(int64_t(t.slot_splits) * t.slots_per_cta, hq + hkv + (store ? hkv : 0));
          ASSERT_GE(t.ctas * t.rows * t.tokens_per_thread, T);
          ASSERT_LT((t.ctas - 1) * t.rows * t.tokens_per_thread, T);
        }
}

}  // namespace
