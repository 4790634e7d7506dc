// plan_int_linear and int_layout_supports (backends/cuda/kernel_plan.h): which kernel multiplies
// group-quantized U4/U8 weights on CUDA, and which shapes the prepared layout covers.
#include <gtest/gtest.h>

#include <utility>

#include "nanovllm/backends/cuda/kernel_plan.h"

namespace nanovllm {
namespace {

TEST(IntLinearPlan, GemvInPassesOfEightRowsUpToTheLimitThenDequantize) {
  for (int64_t T : {int64_t(1), int64_t(3), int64_t(8), int64_t(9), int64_t(17), int64_t(cuda::kIntGemvMaxT)})
    EXPECT_EQ(cuda::plan_int_linear({T, 4096, false}), cuda::IntLinearKernel::Gemv) << T;
  for (int64_t T : {int64_t(cuda::kIntGemvMaxT) + 1, int64_t(300), int64_t(8192)})
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
  EXPECT_EQ(KernelOptions().int_gemv, IntGemv::V2);  // measured: bench/RESULTS.md (issue 45)
  const std::pair<int64_t, int> cases[] = {{1, 1}, {8, 1}, {9, 2}, {16, 2}, {17, 4}, {24, 4}, {32, 4}};
  for (const auto& [T, nt] : cases) {
    EXPECT_EQ(cuda::int_gemv_ntiles(T), nt) << T;
    EXPECT_GE(cuda::int_gemv_ntiles(T) * cuda::kIntGemvSlice, T) << T;  // every row in the pass
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
