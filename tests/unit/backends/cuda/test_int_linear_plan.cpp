// plan_int_linear, int_gemm_splits and int_layout_supports (backends/cuda/kernel_plan.h): which
// kernel multiplies group-quantized U4/U8 weights on CUDA, how the tensor-core GEMM splits K, and
// which shapes the prepared layout covers.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "nanovllm/backends/cuda/kernel_plan.h"

namespace nanovllm {
namespace {

TEST(IntLinearPlan, GemvThenTensorCoreGemmThenDequantize) {
  for (int64_t T : {int64_t(1), int64_t(3), int64_t(8), int64_t(9), int64_t(17), int64_t(cuda::kIntGemvMaxT)})
    EXPECT_EQ(cuda::plan_int_linear({T, 4096, false}), cuda::IntLinearKernel::Gemv) << T;
  for (int64_t T : {int64_t(cuda::kIntGemvMaxT) + 1, int64_t(100), int64_t(cuda::kIntGemmMaxT)}) {
    EXPECT_EQ(cuda::plan_int_linear({T, 4096, false, IntGemm::Mma}), cuda::IntLinearKernel::Gemm) << T;
    EXPECT_EQ(cuda::plan_int_linear({T, 40, true, IntGemm::Mma}), cuda::IntLinearKernel::Gemm) << T;  // GEMM + silu
    EXPECT_EQ(cuda::plan_int_linear({T, 4096, false, IntGemm::Dequantize}), cuda::IntLinearKernel::DequantizeGemm) << T;
    // wgmma where the Hopper kernel takes the weight, else the mma.sync GEMM.
    EXPECT_EQ(cuda::plan_int_linear({T, 4096, false, IntGemm::Wgmma, true}), cuda::IntLinearKernel::GemmWgmma) << T;
    EXPECT_EQ(cuda::plan_int_linear({T, 4096, false, IntGemm::Wgmma, false}), cuda::IntLinearKernel::Gemm) << T;
    // auto: the Hopper kernel where it applies; else mma.sync up to kIntGemmMmaMaxT, dequantize above.
    EXPECT_EQ(cuda::plan_int_linear({T, 4096, true, IntGemm::Auto, true}), cuda::IntLinearKernel::GemmWgmma) << T;
    EXPECT_EQ(cuda::plan_int_linear({T, 4096, false}),
              T <= cuda::kIntGemmMmaMaxT ? cuda::IntLinearKernel::Gemm : cuda::IntLinearKernel::DequantizeGemm)
        << T;
  }
  EXPECT_TRUE(cuda::int_gemm_wgmma_applies(4, 4096, 128, true));
  EXPECT_TRUE(cuda::int_gemm_wgmma_applies(4, 4096, 4096, true));   // channel-wise
  EXPECT_FALSE(cuda::int_gemm_wgmma_applies(4, 4096, 128, false));  // not sm_90a
  EXPECT_FALSE(cuda::int_gemm_wgmma_applies(8, 4096, 128, true));
  EXPECT_FALSE(cuda::int_gemm_wgmma_applies(4, 4096, 32, true));
  EXPECT_FALSE(cuda::int_gemm_wgmma_applies(4, 4112, 16, true));
  EXPECT_TRUE(cuda::int_gemm_wgmma_applies(4, 4096, 64, true));
  EXPECT_FALSE(cuda::int_gemm_wgmma_applies(4, 4160, 64, true));   // K not a multiple of 128
  EXPECT_FALSE(cuda::int_gemm_wgmma_applies(4, 4608, 192, true));  // a 128-column stage in two groups of 192
  for (int64_t T : {int64_t(cuda::kIntGemmMaxT) + 1, int64_t(300), int64_t(8192)})
    EXPECT_EQ(cuda::plan_int_linear({T, 4096, false}), cuda::IntLinearKernel::DequantizeGemm) << T;
  EXPECT_EQ(cuda::plan_int_linear({0, 4096, false}), cuda::IntLinearKernel::DequantizeGemm);
  // The fused gated MLP needs whole 16-row blocks of gate rows (the up block starts at row I).
  EXPECT_EQ(cuda::plan_int_linear({1, 12288, true}), cuda::IntLinearKernel::Gemv);
  EXPECT_EQ(cuda::plan_int_linear({1, 40, true}), cuda::IntLinearKernel::DequantizeGemm);
  EXPECT_EQ(cuda::plan_int_linear({1, 40, false}), cuda::IntLinearKernel::Gemv);  // padded row block
}

// v1 runs passes of 8 rows of x; v2 one pass of up to 32 rows in 1, 2 or 4 n-tiles of 8 rows.
TEST(IntLinearPlan, GemvPassesAndNTilesByVariant) {
  EXPECT_EQ(cuda::int_gemv_slice(IntGemv::V1), 8);
  EXPECT_EQ(cuda::int_gemv_slice(IntGemv::V2), cuda::kIntGemvMaxT);
  EXPECT_EQ(cuda::int_gemv_slice(IntGemv::V3), cuda::kIntGemvMaxT);
  EXPECT_EQ(cuda::int_gemv_slice(IntGemv::V4), cuda::kIntGemvMaxT);
  EXPECT_EQ(KernelOptions().int_gemv, IntGemv::Auto);  // measured: bench/RESULTS.md (issue 45)
  const std::pair<int64_t, int> cases[] = {{1, 1}, {8, 1}, {9, 2}, {16, 2}, {17, 4}, {24, 4}, {32, 4}};
  for (const auto& [T, nt] : cases) {
    EXPECT_EQ(cuda::int_gemv_ntiles(T), nt) << T;
    EXPECT_GE(cuda::int_gemv_ntiles(T) * cuda::kIntGemvSlice, T) << T;  // every row in the pass
  }
}

// v3's K splits (a cluster per row block) at Qwen3-8B's shapes on an H200 (132 SMs, 264 CTA slots):
// qkv's 384 row blocks fill 1.45 waves, split in two they fill 2.9; o, down (256 blocks: 0.97 of
// a wave) and gate_up (768 gated blocks: 2.9) stay whole. A split always gives every warp the same
// whole run of tiles, at least half its ring; no clusters (before sm_90), no split.
TEST(IntLinearPlan, GemvV3SplitsFillTheLastWave) {
  // qkv (384 row blocks on 264 slots) ran slower split (H200): grids of half a wave or more stay whole.
  EXPECT_EQ(cuda::int_gemv_v3_splits(1, 6144, false, 4096, 128, 4, 132, true), 1);
  EXPECT_EQ(cuda::int_gemv_v3_splits(1, 1024, false, 4096, 128, 4, 132, true), 2);   // 64 row blocks
  EXPECT_EQ(cuda::int_gemv_v3_splits(1, 1024, false, 4096, 128, 4, 132, false), 1);  // no clusters
  EXPECT_EQ(cuda::int_gemv_v3_splits(1, 4096, false, 4096, 128, 4, 132, true), 1);
  EXPECT_EQ(cuda::int_gemv_v3_splits(1, 12288, true, 4096, 128, 4, 132, true), 1);
  EXPECT_EQ(cuda::int_gemv_v3_splits(1, 4096, false, 12288, 128, 4, 132, true), 1);
  for (int64_t T : {1, 8, 12, 32})
    for (int64_t rows : {1, 7, 100, 297, 384, 2000})
      for (int64_t K : {256, 1024, 4096, 12288})
        for (bool silu : {false, true}) {
          const int s = cuda::int_gemv_v3_splits(T, rows * 16, silu, K, 128, 4, 132, true);
          ASSERT_GE(s, 1);
          ASSERT_LE(s, cuda::kIntGemvV3MaxSplits);
          if (s == 1) continue;
          const int64_t KT = K / 64, per_warp = KT / (s * cuda::kIntGemvV3Warps);
          EXPECT_EQ(KT % (s * cuda::kIntGemvV3Warps), 0) << T << " " << rows << " " << K;
          EXPECT_GE(2 * per_warp, cuda::int_gemv_v3_ring(silu ? 2 : 1, cuda::int_gemv_ntiles(T), false));
        }
  // 69 row blocks on 264 slots (a quarter wave): split (the GPU test's shape).
  EXPECT_GT(cuda::int_gemv_v3_splits(1, 69 * 16, false, 4096, 128, 4, 132, true), 1);
  EXPECT_EQ(cuda::int_gemv_v3_splits(1, 297 * 16, false, 4096, 128, 4, 132, true), 1);
}

// v4's persistent grid: one wave of kIntGemvV4CtasPerSm CTAs per SM, or one CTA per row block when
// there are fewer (Qwen3-8B on an H200's 132 SMs: qkv 384, o and down 256, gate_up 768 gated blocks).
TEST(IntLinearPlan, GemvV4GridIsOneWave) {
  EXPECT_EQ(cuda::kIntGemvV4CtasPerSm, 2);
  EXPECT_EQ(cuda::int_gemv_v4_grid(384, 132), 264);
  EXPECT_EQ(cuda::int_gemv_v4_grid(768, 132), 264);
  EXPECT_EQ(cuda::int_gemv_v4_grid(256, 132), 256);
  EXPECT_EQ(cuda::int_gemv_v4_grid(1, 132), 1);
  EXPECT_EQ(cuda::int_gemv_v4_grid(100, 0), 2);  // no SM count: one SM's worth
  // Row blocks: Qwen3-8B's gated MLP (I 12,288: 768 gate blocks), qkv (6,144 outputs: 384), and
  // outputs past a whole block (130: 9).
  EXPECT_EQ(cuda::int_gemv_row_blocks(12288, true), 768);
  EXPECT_EQ(cuda::int_gemv_row_blocks(6144, false), 384);
  EXPECT_EQ(cuda::int_gemv_row_blocks(130, false), 9);
  EXPECT_EQ(cuda::int_gemv_v4_ring(1, 1, false), 8);
  // v4 past one wave of v3 CTAs (Qwen3-8B, 132 SMs): qkv at T 1 (384 row blocks on 396 three-CTA
  // slots) and o / down run v3; gate_up (768 on 264) and qkv at T 9 (384 on 264) run v4.
  EXPECT_FALSE(cuda::int_gemv_v4_applies(384, false, 1, 132));
  EXPECT_FALSE(cuda::int_gemv_v4_applies(256, false, 8, 132));
  EXPECT_TRUE(cuda::int_gemv_v4_applies(384, false, 9, 132));
  EXPECT_TRUE(cuda::int_gemv_v4_applies(768, true, 1, 132));
  EXPECT_TRUE(cuda::int_gemv_v4_applies(397, false, 1, 132));
  EXPECT_EQ(cuda::int_gemv_v3_ring(1, 1, false), 8);
  EXPECT_EQ(cuda::int_gemv_v3_ring(1, 1, false, /*wide=*/true), 6);  // three CTAs an SM
  EXPECT_EQ(cuda::int_gemv_v3_ctas_per_sm(true), 3);
  EXPECT_EQ(cuda::int_gemv_v3_ctas_per_sm(false), 2);
  // v3 goes wide past two CTAs an SM, plain products at one n-tile only: qkv (384 row blocks) at
  // T 1..8, not o / down (256), not the gated MLP, not T 9.
  EXPECT_TRUE(cuda::int_gemv_v3_wide(384, false, 8, 132));
  EXPECT_FALSE(cuda::int_gemv_v3_wide(256, false, 1, 132));
  EXPECT_FALSE(cuda::int_gemv_v3_wide(384, true, 1, 132));
  EXPECT_FALSE(cuda::int_gemv_v3_wide(384, false, 9, 132));
  // v5 under auto: Qwen3-8B's down (K 12,288) at T 1..8; not K 4096, not U8, not the gated MLP.
  EXPECT_TRUE(cuda::int_gemv_v5_applies(false, 1, 12288, 4));
  EXPECT_FALSE(cuda::int_gemv_v5_applies(false, 9, 12288, 4));
  EXPECT_FALSE(cuda::int_gemv_v5_applies(false, 1, 4096, 4));
  EXPECT_FALSE(cuda::int_gemv_v5_applies(false, 1, 12288, 8));
  EXPECT_FALSE(cuda::int_gemv_v5_applies(true, 1, 12288, 4));
}

// K splits of the tensor-core GEMM: one wave of CTA tiles at most (so the partials fit
// int_gemm_workspace_floats), at least kIntGemmSplitK columns each, one when the tiles fill a wave.
TEST(IntLinearPlan, GemmSplitsFillOneWave) {
  const int sms = 132;
  const int64_t slots = int64_t(cuda::kIntGemmCtasPerSm) * sms;
  // Qwen3-8B o (4096 x 4096) at T 64: 32 tiles -> 8 splits; at T 256: 128 tiles -> 2.
  EXPECT_EQ(cuda::int_gemm_splits(64, 4096, false, 4096, sms), 8);
  EXPECT_EQ(cuda::int_gemm_splits(256, 4096, false, 4096, sms), 2);
  // gate_up fused (I 12288: 192 row tiles) at T 128: 384 tiles, more than a wave -> 1.
  EXPECT_EQ(cuda::int_gemm_row_tiles(12288, true), 192);
  EXPECT_EQ(cuda::int_gemm_splits(128, 12288, true, 4096, sms), 1);
  // Few tiles: capped by kIntGemmMaxSplits, and by K (256 columns a split).
  EXPECT_EQ(cuda::int_gemm_splits(40, 200, false, 1 << 16, sms), cuda::kIntGemmMaxSplits);
  EXPECT_EQ(cuda::int_gemm_splits(40, 200, false, 1024, sms), 4);
  EXPECT_EQ(cuda::int_gemm_splits(40, 200, false, 192, sms), 1);
  for (int64_t T : {33, 64, 100, 256})
    for (int64_t N : {40, 1024, 4096, 6144, 24576})
      for (int64_t K : {512, 4096, 12288}) {
        const int64_t tiles = cuda::int_gemm_row_tiles(N, false) * ((T + 63) / 64);
        const int s = cuda::int_gemm_splits(T, N, false, K, sms);
        EXPECT_GE(s, 1);
        EXPECT_TRUE(s == 1 || s * tiles <= slots) << T << " " << N << " " << K;
        EXPECT_LE(s * tiles * cuda::kIntGemmRows * cuda::kIntGemmCols,
                  std::max(cuda::int_gemm_workspace_floats(sms), tiles * cuda::kIntGemmRows * cuda::kIntGemmCols));
      }
  // The wide Hopper GEMM (two column tiles a CTA): the splits fill one wave of its CTAs, and their
  // partials (narrow tiles: workspace layout [splits][RT][CT]) still fit the workspace.
  EXPECT_EQ(cuda::int_gemm_splits(256, 6144, false, 4096, sms, 2 * cuda::kIntGemmCols), 2);  // qkv: 96 CTAs
  EXPECT_EQ(cuda::int_gemm_splits(256, 4096, false, 4096, sms, 2 * cuda::kIntGemmCols), 4);  // o: 64 CTAs
  for (int64_t T : {65, 100, 130, 200, 256})
    for (int64_t N : {40, 1000, 4096, 6144, 24576})
      for (int64_t K : {512, 4096, 12288}) {
        const int64_t ctas = cuda::int_gemm_row_tiles(N, false) * ((T + 127) / 128);
        const int64_t tiles = cuda::int_gemm_row_tiles(N, false) * ((T + 63) / 64);
        const int s = cuda::int_gemm_splits(T, N, false, K, sms, 2 * cuda::kIntGemmCols);
        EXPECT_TRUE(s == 1 || s * ctas <= slots) << T << " " << N << " " << K;
        EXPECT_LE(s * tiles * cuda::kIntGemmRows * cuda::kIntGemmCols,
                  std::max(cuda::int_gemm_workspace_floats(sms), tiles * cuda::kIntGemmRows * cuda::kIntGemmCols));
      }
  EXPECT_TRUE(cuda::int_gemm_fuses_silu(12288));
  EXPECT_TRUE(cuda::int_gemm_fuses_silu(64));
  EXPECT_FALSE(cuda::int_gemm_fuses_silu(48));
  EXPECT_EQ(cuda::int_gemm_row_tiles(200, false), 2);
  EXPECT_EQ(KernelOptions().int_gemm, IntGemm::Auto);
}

// The Hopper GEMM's wide form past one column tile (the Hopper GEMM's plan, its 64-row form up to
// 64 rows), never in clusters: under int_gemm wgmma_wide for every product, under auto for the
// plain ones (the gated MLP measured slower wide), never under the other values.
TEST(IntLinearPlan, GemmWideFormPastOneColumnTile) {
  EXPECT_EQ(cuda::plan_int_linear({256, 4096, false, IntGemm::WgmmaWide, true}), cuda::IntLinearKernel::GemmWgmma);
  EXPECT_EQ(cuda::plan_int_linear({256, 4096, false, IntGemm::WgmmaWide, false}), cuda::IntLinearKernel::Gemm);
  for (bool silu : {false, true}) {
    EXPECT_FALSE(cuda::int_gemm_wgmma_wide(IntGemm::WgmmaWide, 64, {1, 1}, silu));
    EXPECT_TRUE(cuda::int_gemm_wgmma_wide(IntGemm::WgmmaWide, 65, {1, 1}, silu));
    EXPECT_TRUE(cuda::int_gemm_wgmma_wide(IntGemm::WgmmaWide, 256, {1, 1}, silu));
    EXPECT_FALSE(cuda::int_gemm_wgmma_wide(IntGemm::WgmmaWide, 256, {2, 1}, silu));
    EXPECT_FALSE(cuda::int_gemm_wgmma_wide(IntGemm::WgmmaWide, 256, {1, 2}, silu));
    EXPECT_FALSE(cuda::int_gemm_wgmma_wide(IntGemm::Auto, 64, {1, 1}, silu));
    EXPECT_FALSE(cuda::int_gemm_wgmma_wide(IntGemm::Auto, 256, {4, 1}, silu));
    for (IntGemm g : {IntGemm::Wgmma, IntGemm::Mma, IntGemm::Dequantize})
      EXPECT_FALSE(cuda::int_gemm_wgmma_wide(g, 256, {1, 1}, silu));
  }
  EXPECT_TRUE(cuda::int_gemm_wgmma_wide(IntGemm::Auto, 65, {1, 1}, false));
  EXPECT_TRUE(cuda::int_gemm_wgmma_wide(IntGemm::Auto, 256, {1, 1}, false));
  EXPECT_FALSE(cuda::int_gemm_wgmma_wide(IntGemm::Auto, 256, {1, 1}, true));
}

// int_gemm wgmma_ss: the wide form's tiles past one column tile for every product (the Hopper
// GEMM's plan), run by int_gemm_wgmma_ss.cu at one CTA an SM, so K splits fill one CTA an SM; no
// other value takes it.
TEST(IntLinearPlan, GemmSsFormWhereAsked) {
  EXPECT_EQ(cuda::plan_int_linear({256, 4096, false, IntGemm::WgmmaSs, true}), cuda::IntLinearKernel::GemmWgmma);
  EXPECT_EQ(cuda::plan_int_linear({256, 4096, false, IntGemm::WgmmaSs, false}), cuda::IntLinearKernel::Gemm);
  for (bool silu : {false, true}) {
    EXPECT_FALSE(cuda::int_gemm_wgmma_ss(IntGemm::WgmmaSs, 64, {1, 1}, silu));
    EXPECT_TRUE(cuda::int_gemm_wgmma_ss(IntGemm::WgmmaSs, 65, {1, 1}, silu));
    EXPECT_TRUE(cuda::int_gemm_wgmma_wide(IntGemm::WgmmaSs, 256, {1, 1}, silu));
    EXPECT_FALSE(cuda::int_gemm_wgmma_ss(IntGemm::WgmmaSs, 256, {2, 1}, silu));
    for (IntGemm g : {IntGemm::Auto, IntGemm::Wgmma, IntGemm::WgmmaWide, IntGemm::Mma, IntGemm::Dequantize})
      EXPECT_FALSE(cuda::int_gemm_wgmma_ss(g, 256, {1, 1}, silu));
  }
  // Qwen3-8B's o at T 256 on 132 SMs: 32 row tiles x 2 CTAs of column tiles; 4 splits at two CTAs
  // an SM (256 CTAs), 2 at one (128). qkv (96 CTAs): 2 and 1.
  EXPECT_EQ(cuda::int_gemm_splits(256, 4096, false, 4096, 132, 2 * cuda::kIntGemmCols), 4);
  EXPECT_EQ(cuda::int_gemm_splits(256, 4096, false, 4096, 132, 2 * cuda::kIntGemmCols, cuda::kIntGemmSsCtasPerSm), 2);
  EXPECT_EQ(cuda::int_gemm_splits(256, 6144, false, 4096, 132, 2 * cuda::kIntGemmCols), 2);
  EXPECT_EQ(cuda::int_gemm_splits(256, 6144, false, 4096, 132, 2 * cuda::kIntGemmCols, cuda::kIntGemmSsCtasPerSm), 1);
}

// Which GEMV a decode call runs: options other than v4 and auto as they are; auto: v5 for the plain
// U4 product at K >= 8192, then (auto and v4) v4 past one wave of v3, else v3.
TEST(IntLinearPlan, GemvPick) {
  for (IntGemv v : {IntGemv::V1, IntGemv::V2, IntGemv::V3, IntGemv::V5})
    EXPECT_EQ(cuda::int_gemv_pick(v, 768, true, 1, 4096, 4, 132), v);
  EXPECT_EQ(cuda::int_gemv_pick(IntGemv::Auto, 256, false, 1, 12288, 4, 132), IntGemv::V5);  // down
  EXPECT_EQ(cuda::int_gemv_pick(IntGemv::V4, 256, false, 1, 12288, 4, 132), IntGemv::V3);    // v5 only under auto
  EXPECT_EQ(cuda::int_gemv_pick(IntGemv::Auto, 256, false, 1, 12288, 8, 132), IntGemv::V3);  // U8
  EXPECT_EQ(cuda::int_gemv_pick(IntGemv::Auto, 384, false, 1, 4096, 4, 132), IntGemv::V3);   // qkv: v3 wide
  EXPECT_EQ(cuda::int_gemv_pick(IntGemv::Auto, 768, true, 1, 4096, 4, 132), IntGemv::V4);    // gate_up
  EXPECT_EQ(cuda::int_gemv_pick(IntGemv::V4, 768, true, 1, 4096, 4, 132), IntGemv::V4);
  EXPECT_EQ(cuda::int_gemv_pick(IntGemv::Auto, 256, false, 4, 4096, 4, 132), IntGemv::V3);  // o
}

// The norm as the INT GEMV's prologue: under gemv_norm auto / always, for v3 / v4, 1..8 rows within
// kIntGemvNormSmem, the fast path (K and G multiples of the tile: 64 for U4, 32 for U8), no act order.
TEST(IntLinearPlan, NormPrologueWhereTheGemvHasOne) {
  using cuda::int_gemv_norm_fuses;
  const auto A = GemvNormFusion::Auto;
  for (GemvNormFusion f : {GemvNormFusion::Auto, GemvNormFusion::Always})
    for (IntGemv v : {IntGemv::V3, IntGemv::V4}) {
      EXPECT_TRUE(int_gemv_norm_fuses(f, v, 1, 4096, 128, 4, false));
      EXPECT_TRUE(int_gemv_norm_fuses(f, v, 3, 4096, 128, 4, false));  // 3 x 4112 x 2 bytes
      EXPECT_TRUE(int_gemv_norm_fuses(f, v, 8, 1024, 64, 4, false));
      EXPECT_TRUE(int_gemv_norm_fuses(f, v, 2, 2048, 32, 8, false));
    }
  EXPECT_FALSE(int_gemv_norm_fuses(GemvNormFusion::Never, IntGemv::V3, 1, 4096, 128, 4, false));
  for (IntGemv v : {IntGemv::V1, IntGemv::V2, IntGemv::V5})
    EXPECT_FALSE(int_gemv_norm_fuses(A, v, 1, 4096, 128, 4, false));
  EXPECT_FALSE(int_gemv_norm_fuses(A, IntGemv::V3, 4, 4096, 128, 4, false));  // 32.9 KB of rows
  EXPECT_FALSE(int_gemv_norm_fuses(A, IntGemv::V3, 9, 1024, 128, 4, false));  // two n-tiles
  EXPECT_FALSE(int_gemv_norm_fuses(A, IntGemv::V3, 0, 1024, 128, 4, false));
  EXPECT_FALSE(int_gemv_norm_fuses(A, IntGemv::V3, 1, 1056, 48, 4, false));  // groups split a tile
  EXPECT_FALSE(int_gemv_norm_fuses(A, IntGemv::V3, 1, 1040, 80, 8, false));  // U8: K past a tile
  EXPECT_FALSE(int_gemv_norm_fuses(A, IntGemv::V4, 1, 4096, 128, 4, true));  // act order
  // The shapes alone (the kernels' check, int_gemv_norm_ok, shares them): the same limits.
  EXPECT_TRUE(cuda::int_gemv_norm_fits(3, 4096, 128, 4));
  EXPECT_FALSE(cuda::int_gemv_norm_fits(4, 4096, 128, 4));
  EXPECT_FALSE(cuda::int_gemv_norm_fits(9, 1024, 128, 4));
  EXPECT_FALSE(cuda::int_gemv_norm_fits(1, 1056, 48, 4));
  EXPECT_TRUE(cuda::int_gemv_norm_fits(2, 2048, 32, 8));
  EXPECT_LE(cuda::kIntGemvNormMaxT * cuda::int_gemv_norm_ld(1024) * 2, cuda::kIntGemvNormSmem);
  EXPECT_EQ(cuda::int_gemv_norm_ld(4096) % 16, 0);      // 16-byte rows
  EXPECT_EQ(cuda::int_gemv_norm_ld(4096) / 2 % 32, 8);  // 8-row B fragments: distinct banks a half warp
}

// The Hopper GEMM's clusters: within the option, each side the largest power of two its tiles fill,
// at most 8 CTAs, with silu at most 2 column tiles (128-byte aligned scale copies).
TEST(IntLinearPlan, GemmClustersFitTheTiles) {
  auto plan = [](int rows, int cols, int64_t RT, int64_t CT, bool silu) {
    const cuda::IntGemmCluster c = cuda::plan_int_gemm_cluster({rows, cols}, RT, CT, silu);
    return std::to_string(c.rows) + "x" + std::to_string(c.cols);
  };
  EXPECT_EQ(plan(1, 1, 48, 4, false), "1x1");
  EXPECT_EQ(plan(4, 2, 48, 4, false), "4x2");  // Qwen3-8B qkv at T 256
  EXPECT_EQ(plan(4, 2, 48, 1, false), "4x1");  // T <= 64: one column tile
  EXPECT_EQ(plan(2, 4, 32, 3, false), "2x2");  // T 130: 3 column tiles
  EXPECT_EQ(plan(4, 4, 192, 4, true), "4x2");  // silu: at most 2 column tiles
  EXPECT_EQ(plan(4, 1, 3, 1, false), "2x1");   // 3 row tiles: 2 (one padded cluster tile)
  EXPECT_EQ(plan(4, 1, 1, 1, false), "1x1");
  EXPECT_EQ(plan(1, 4, 1, 4, true), "1x2");
  for (int r : {1, 2, 4})
    for (int c : {1, 2, 4})
      for (bool silu : {false, true})
        for (int64_t RT : {1, 2, 3, 7, 48})
          for (int64_t CT : {1, 2, 3, 4}) {
            const cuda::IntGemmCluster got = cuda::plan_int_gemm_cluster({r, c}, RT, CT, silu);
            EXPECT_TRUE(cuda::int_gemm_cluster_ok(got, silu)) << r << "x" << c << " " << RT << " " << CT;
            EXPECT_LE(got.rows, std::max<int64_t>(RT, 1));
            EXPECT_LE(got.cols, std::max<int64_t>(CT, 1));
          }
  EXPECT_FALSE(cuda::int_gemm_cluster_ok({4, 4}, false));
  EXPECT_FALSE(cuda::int_gemm_cluster_ok({1, 4}, true));
  EXPECT_FALSE(cuda::int_gemm_cluster_ok({3, 1}, false));
  EXPECT_TRUE(cuda::int_gemm_cluster_ok({2, 4}, false));
}

// The Hopper GEMM's grid in clusters (int_gemm_cluster_tile, which the kernel runs): every tile of
// the padded grid exactly once; a cluster's CTAs in one block of RT x CT tiles; xmask the CTAs of the
// cluster in the same column tile (they need the same x), cmask those in the same row tile (the
// same codes); their shares of x's rows and of the row blocks cover each exactly once.
TEST(IntLinearPlan, GemmClusterTilesCoverTheGridOnce) {
  for (const cuda::IntGemmCluster c :
       {cuda::IntGemmCluster{1, 1}, {2, 1}, {4, 1}, {1, 2}, {2, 2}, {4, 2}, {1, 4}, {2, 4}})
    for (bool silu : {false, true}) {
      if (!cuda::int_gemm_cluster_ok(c, silu)) continue;
      for (int RT : {1, 3, 8})
        for (int CT : {1, 3, 4}) {
          const int n = c.rows * c.cols;
          const int RTc = (RT + c.rows - 1) / c.rows * c.rows, CTc = (CT + c.cols - 1) / c.cols * c.cols;
          std::vector<int> seen(size_t(RTc * CTc), 0);
          const std::string at = std::to_string(c.rows) + "x" + std::to_string(c.cols) + " RT " + std::to_string(RT) +
                                 " CT " + std::to_string(CT) + (silu ? " silu" : "");
          for (int q = 0; q < RTc * CTc / n; ++q) {  // one cluster
            std::vector<cuda::IntGemmClusterTile> t;
            for (int r = 0; r < n; ++r) t.push_back(cuda::int_gemm_cluster_tile(q * n + r, c, CT, silu));
            std::vector<int> x_rows(size_t(n), 0), blocks(size_t(n), 0);  // per rank: covered rows / blocks
            for (int r = 0; r < n; ++r) {
              ASSERT_GE(t[size_t(r)].rt, 0) << at;
              ASSERT_LT(t[size_t(r)].rt, RTc) << at;
              ASSERT_LT(t[size_t(r)].ct, CTc) << at;
              ++seen[size_t(t[size_t(r)].rt * CTc + t[size_t(r)].ct)];
              EXPECT_EQ(t[size_t(r)].rt / c.rows, t[0].rt / c.rows) << at;  // one block of tiles
              EXPECT_EQ(t[size_t(r)].ct / c.cols, t[0].ct / c.cols) << at;
              for (int o = 0; o < n; ++o) {
                const bool same_ct = t[size_t(o)].ct == t[size_t(r)].ct, same_rt = t[size_t(o)].rt == t[size_t(r)].rt;
                EXPECT_EQ(((t[size_t(r)].xmask >> o) & 1u) != 0, same_ct) << at << " rank " << r << " peer " << o;
                EXPECT_EQ(((t[size_t(r)].cmask >> o) & 1u) != 0, same_rt) << at << " rank " << r << " peer " << o;
                // What rank r copies lands in o when o shares r's column (x) or row (codes) tile.
                if (same_ct) x_rows[size_t(o)] += t[size_t(r)].x_rows;
                if (same_rt) blocks[size_t(o)] += t[size_t(r)].blocks;
              }
              EXPECT_EQ(t[size_t(r)].x_row0 % 8, 0) << at;  // whole 1024-byte swizzle atoms (8 rows of 128 bytes)
            }
            for (int o = 0; o < n; ++o) {
              EXPECT_EQ(x_rows[size_t(o)], cuda::kIntGemmCols) << at << " rank " << o;
              EXPECT_EQ(blocks[size_t(o)], silu ? 4 : 8) << at << " rank " << o;
            }
            // Distinct shares: the x rows of a column tile's CTAs and the blocks of a row tile's.
            for (int r = 0; r < n; ++r)
              for (int o = r + 1; o < n; ++o) {
                if (t[size_t(o)].ct == t[size_t(r)].ct) EXPECT_NE(t[size_t(o)].x_row0, t[size_t(r)].x_row0) << at;
                if (t[size_t(o)].rt == t[size_t(r)].rt) EXPECT_NE(t[size_t(o)].block0, t[size_t(r)].block0) << at;
              }
          }
          for (int v : seen) EXPECT_EQ(v, 1) << at;
        }
    }
}

TEST(IntLinearPlan, LayoutCoversGroupsOfSixteenColumns) {
  for (int bits : {4, 8}) {
    EXPECT_TRUE(cuda::int_layout_supports(bits, 4096, 128));
    EXPECT_TRUE(cuda::int_layout_supports(bits, 4096, 32));
    EXPECT_TRUE(cuda::int_layout_supports(bits, 160, 160));  // channel-wise, K past a 64-column tile
    EXPECT_TRUE(cuda::int_layout_supports(bits, 96, 48));
    EXPECT_FALSE(cuda::int_layout_supports(bits, 96, 8));   // a k-step would straddle groups
    EXPECT_FALSE(cuda::int_layout_supports(bits, 96, 40));  // 40 does not divide 96
    EXPECT_FALSE(cuda::int_layout_supports(bits, 0, 16));
  }
  EXPECT_FALSE(cuda::int_layout_supports(2, 4096, 128));
  EXPECT_EQ(cuda::int_tile_k(4), 64);
  EXPECT_EQ(cuda::int_tile_k(8), 32);
}

}  // namespace
}  // namespace nanovllm
