// plan_fp8_linear (backends/cuda/kernel_plan.h): which kernel multiplies FP8 weights on CUDA.
#include <gtest/gtest.h>

#include "nanovllm/backends/cuda/kernel_plan.h"

namespace nanovllm {
namespace {

TEST(Fp8LinearPlan, GemvForDecodeRowsFp8GemmForPerChannelAndBlock128ElseDequantize) {
  cuda::Fp8LinearProblem p;
  p.N = 4096, p.K = 4096;
  for (int64_t T : {1, 8}) {
    p.T = T;
    EXPECT_EQ(cuda::plan_fp8_linear(p), cuda::Fp8LinearKernel::Gemv) << T;
  }
  p.T = 9;
  EXPECT_EQ(cuda::plan_fp8_linear(p), cuda::Fp8LinearKernel::CublasLtFp8);
  p.fp8_activations = false;  // --kernel-options fp8_gemm=dequantize: weight-only
  EXPECT_EQ(cuda::plan_fp8_linear(p), cuda::Fp8LinearKernel::DequantizeGemm);
  p.fp8_activations = true;
  p.block_k = 128;  // 128 x 128 block scales: cuBLASLt's VEC128 mode
  EXPECT_EQ(cuda::plan_fp8_linear(p), cuda::Fp8LinearKernel::CublasLtFp8Block);
  p.K = 4160;  // K not whole 128-column groups
  EXPECT_EQ(cuda::plan_fp8_linear(p), cuda::Fp8LinearKernel::DequantizeGemm);
  p.K = 4096, p.block_k = 64;  // groups other than 128 columns
  EXPECT_EQ(cuda::plan_fp8_linear(p), cuda::Fp8LinearKernel::DequantizeGemm);
  p.block_k = 128, p.fp8_activations = false;  // fp8_gemm=dequantize
  EXPECT_EQ(cuda::plan_fp8_linear(p), cuda::Fp8LinearKernel::DequantizeGemm);
  p.fp8_activations = true, p.block_k = 0;
  p.block_k = 0, p.N = 4100;  // C's rows not whole 16-element groups
  EXPECT_EQ(cuda::plan_fp8_linear(p), cuda::Fp8LinearKernel::DequantizeGemm);
  p.N = 4096;
  p.T = 1, p.K = 200;  // not whole 16-byte chunks of codes
  EXPECT_EQ(cuda::plan_fp8_linear(p), cuda::Fp8LinearKernel::DequantizeGemm);
  p.K = 4096, p.aligned16 = false;
  EXPECT_EQ(cuda::plan_fp8_linear(p), cuda::Fp8LinearKernel::DequantizeGemm);
  p.aligned16 = true, p.block_k = 40;  // a chunk would straddle two scale blocks
  EXPECT_EQ(cuda::plan_fp8_linear(p), cuda::Fp8LinearKernel::DequantizeGemm);
  p.block_k = 128;
  EXPECT_EQ(cuda::plan_fp8_linear(p), cuda::Fp8LinearKernel::Gemv);
}

}  // namespace
}  // namespace nanovllm
