// plan_int_linear, int_gemm_splits, plan_int_wgmma and int_layout_supports (backends/cuda/
// kernel_plan.h): which kernel multiplies group-quantized U4/U8 weights on CUDA, how the tensor-core
// GEMMs tile and split K, and which shapes the prepared layout covers.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

#include "nanovllm/backends/cuda/kernel_plan.h"

namespace nanovllm {
namespace {

TEST(IntLinearPlan, GemvThenTensorCoreGemmThenDequantize) {
  for (int64_t T : {int64_t(1), int64_t(3), int64_t(8), int64_t(9), int64_t(17), int64_t(cuda::kIntGemvMaxT)})
    EXPECT_EQ(cuda::plan_int_linear({T, 4096, false, IntGemm::Auto, true}), cuda::IntLinearKernel::Gemv) << T;
  for (int64_t T : {int64_t(cuda::kIntGemvMaxT) + 1, int64_t(100), int64_t(cuda::kIntGemmMaxT)}) {
    // auto: the wgmma GEMM where it runs (sm_90a), else dequantize + cuBLASLt; mma: the mma.sync GEMM.
    EXPECT_EQ(cuda::plan_int_linear({T, 4096, false, IntGemm::Auto, true}), cuda::IntLinearKernel::GemmWgmma) << T;
    EXPECT_EQ(cuda::plan_int_linear({T, 40, true, IntGemm::Auto, true}), cuda::IntLinearKernel::GemmWgmma) << T;
    EXPECT_EQ(cuda::plan_int_linear({T, 4096, false, IntGemm::Auto, false}), cuda::IntLinearKernel::DequantizeGemm)
        << T;
    EXPECT_EQ(cuda::plan_int_linear({T, 4096, false, IntGemm::Mma}), cuda::IntLinearKernel::Gemm) << T;
    EXPECT_EQ(cuda::plan_int_linear({T, 40, true, IntGemm::Mma, true}), cuda::IntLinearKernel::Gemm) << T;
    EXPECT_EQ(cuda::plan_int_linear({T, 4096, false, IntGemm::Dequantize, true}), cuda::IntLinearKernel::DequantizeGemm)
        << T;
  }
  for (int64_t T : {int64_t(cuda::kIntGemmMaxT) + 1, int64_t(300), int64_t(8192)})
    for (IntGemm g : {IntGemm::Auto, IntGemm::Mma})
      EXPECT_EQ(cuda::plan_int_linear({T, 4096, false, g, true}), cuda::IntLinearKernel::DequantizeGemm) << T;
  EXPECT_EQ(cuda::plan_int_linear({0, 4096, false, IntGemm::Auto, true}), cuda::IntLinearKernel::DequantizeGemm);
  // The fused gated MLP needs whole 16-row blocks of gate rows (the up block starts at row I).
  EXPECT_EQ(cuda::plan_int_linear({1, 12288, true}), cuda::IntLinearKernel::Gemv);
  EXPECT_EQ(cuda::plan_int_linear({1, 40, true}), cuda::IntLinearKernel::DequantizeGemm);
  EXPECT_EQ(cuda::plan_int_linear({1, 40, false}), cuda::IntLinearKernel::Gemv);  // padded row block
  EXPECT_EQ(KernelOptions().int_gemm, IntGemm::Auto);                             // the wgmma GEMM wherever it runs
}

// v1 runs passes of 8 rows of x; v2 one pass of up to 32 rows in 1, 2 or 4 n-tiles of 8 rows.
TEST(IntLinearPlan, GemvPassesAndNTilesByVariant) {
  EXPECT_EQ(cuda::int_gemv_slice(IntGemv::V1), 8);
  EXPECT_EQ(cuda::int_gemv_slice(IntGemv::V2), cuda::kIntGemvMaxT);
  EXPECT_EQ(cuda::int_gemv_slice(IntGemv::V3), cuda::kIntGemvMaxT);
  EXPECT_EQ(KernelOptions().int_gemv, IntGemv::V3);  // measured: bench/RESULTS.md (issue 45)
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
  EXPECT_TRUE(cuda::int_gemm_fuses_silu(12288));
  EXPECT_TRUE(cuda::int_gemm_fuses_silu(64));
  EXPECT_FALSE(cuda::int_gemm_fuses_silu(48));
  EXPECT_EQ(cuda::int_gemm_row_tiles(200, false), 2);
}

// The wgmma GEMM's K splits: the S (1..8, two stages of 64 columns each at least) that minimises
// waves(S) x (stages per split + a CTA's fixed cost of 3 stages). Qwen3-8B on an H200 (132 SMs),
// tiles of 64 x 4 warpgroups (one CTA a SM): o / down at T 64 (16 tiles) -> 8 splits; qkv (24) -> 5
// (120 CTAs); gate_up fused (96) -> 4 (384 CTAs: 2.9 waves, against 0.73 of one unsplit); 2
// warpgroups (two CTAs a SM) take twice the tiles on twice the slots.
TEST(IntLinearPlan, WgmmaSplitsMinimiseWavesTimesStages) {
  EXPECT_EQ(cuda::int_wgmma_splits(16, 4096, 1, 132), 8);
  EXPECT_EQ(cuda::int_wgmma_splits(16, 12288, 1, 132), 8);
  EXPECT_EQ(cuda::int_wgmma_splits(24, 4096, 1, 132), 5);
  EXPECT_EQ(cuda::int_wgmma_splits(96, 4096, 1, 132), 4);
  EXPECT_EQ(cuda::int_wgmma_splits(48, 4096, 1, 132), 5);
  EXPECT_EQ(cuda::int_wgmma_splits(48, 4096, 2, 132), 5);
  EXPECT_EQ(cuda::int_wgmma_splits(264, 4096, 2, 132), 1);  // a full wave
  EXPECT_EQ(cuda::int_wgmma_splits(4, 256, 1, 132), 2);     // 4 stages: two a split at least
  EXPECT_EQ(cuda::int_wgmma_splits(4, 64, 1, 132), 1);      // one stage
  EXPECT_EQ(cuda::int_wgmma_splits(0, 4096, 1, 132), 1);
  for (int64_t tiles : {1, 5, 16, 24, 96, 131, 133, 200, 1000})
    for (int64_t K : {128, 1024, 4096, 12288})
      for (int cps : {1, 2}) {
        const int s = cuda::int_wgmma_splits(tiles, K, cps, 132);
        ASSERT_GE(s, 1);
        ASSERT_LE(s, cuda::kIntWgmmaMaxSplits);
        const int64_t stages = K / cuda::kIntWgmmaStageK;
        EXPECT_TRUE(s == 1 || stages / s >= cuda::kIntWgmmaMinStages) << tiles << " " << K;
        auto cost = [&](int64_t x) {
          const int64_t slots = 132 * cps;
          return (tiles * x + slots - 1) / slots * ((stages + x - 1) / x + cuda::kIntWgmmaSplitCost);
        };
        for (int64_t x = 1; x <= std::min<int64_t>(8, stages / 2); ++x)
          EXPECT_LE(cost(s), cost(x)) << tiles << " " << K;
      }
}

// The wgmma GEMM's tile: 64 rows of x up to T 64, else 128; 4 warpgroups (256 weight rows, 128 gate
// rows fused) where the shape allows; U8 and groups that split a 64-column stage: 64 x 2 only. The
// kernel options' values replace the plan's where the shape has that tile.
TEST(IntLinearPlan, WgmmaTileByRowsAndShape) {
  auto plan = [](int64_t T, int64_t outs, bool silu, int64_t G, int bits, int cols = 0, int wgs = 0, int splits = 0) {
    cuda::IntWgmmaProblem p{T, outs, 4096, G, bits, silu, 132};
    p.cols = cols, p.warpgroups = wgs, p.splits = splits;
    return cuda::plan_int_wgmma(p);
  };
  EXPECT_EQ(plan(33, 6144, false, 128, 4).cols, 64);
  EXPECT_EQ(plan(64, 6144, false, 128, 4).cols, 64);
  EXPECT_EQ(plan(65, 6144, false, 128, 4).cols, 128);
  EXPECT_EQ(plan(256, 6144, false, 128, 4).cols, 128);
  EXPECT_EQ(plan(64, 6144, false, 128, 4).warpgroups, 4);
  EXPECT_EQ(plan(64, 6144, false, 128, 4).splits, 5);      // 24 tiles
  EXPECT_EQ(plan(64, 12288, true, 128, 4).warpgroups, 4);  // I a multiple of 128
  EXPECT_EQ(plan(64, 192, true, 128, 4).warpgroups, 2);    // 192 = 3 x 64: 64 gate rows a tile
  EXPECT_EQ(plan(256, 6144, false, 32, 4).cols, 64);       // groups of 32 split a stage
  EXPECT_EQ(plan(256, 6144, false, 32, 4).warpgroups, 2);
  EXPECT_EQ(plan(256, 6144, false, 128, 8).cols, 64);  // U8
  EXPECT_EQ(plan(256, 6144, false, 128, 8).warpgroups, 2);
  const cuda::IntWgmmaPlan forced = plan(256, 6144, false, 128, 4, 64, 2, 3);
  EXPECT_EQ(forced.cols, 64);
  EXPECT_EQ(forced.warpgroups, 2);
  EXPECT_EQ(forced.splits, 3);
  EXPECT_EQ(plan(64, 192, true, 128, 4, 0, 4).warpgroups, 2);  // a tile the shape lacks: the plan's
  EXPECT_EQ(plan(64, 6144, false, 128, 8, 128, 4).cols, 64);
  EXPECT_TRUE(cuda::int_wgmma_fuses_silu(64));
  EXPECT_TRUE(cuda::int_wgmma_fuses_silu(12288));
  EXPECT_FALSE(cuda::int_wgmma_fuses_silu(96));
  EXPECT_EQ(cuda::int_wgmma_row_tiles(6144, false, 4), 24);
  EXPECT_EQ(cuda::int_wgmma_row_tiles(200, false, 4), 1);
  EXPECT_EQ(cuda::int_wgmma_row_tiles(12288, true, 4), 96);
  EXPECT_EQ(cuda::int_wgmma_row_tiles(12288, true, 2), 192);
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
