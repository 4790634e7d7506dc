// out[T, N] = x[T, K] @ value[N, K]^T for FP8 weights on the FP8 tensor cores through cuBLASLt
// (kernel_plan.h: plan_fp8_linear chose it for T > 8), vLLM's dynamic FP8 activations:
//  * per-channel weights (value = code x w_scale[n]; --quantization fp8):
//     1. quantize_act_fp8_kernel: each row of x to E4M3 codes with its own scale a_scale[t] =
//        amax(|x[t, :]|) / 448 (1 for a zero row), code = rn_satfinite(x / a_scale);
//     2. cuBLASLt: E4M3 x E4M3 with FP32 accumulation, both operands' scales as outer vectors
//        (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, cuBLAS 12.9+): out^T[n, t] = w_scale[n] x
//        a_scale[t] x sum_k code_w[n, k] code_x[t, k], in BF16 or F32;
//  * 128 x 128 block scales (Qwen's FP8 checkpoints; value = code x w_scale[n / 128][k / 128]):
//     1. quantize_act_fp8_block128_kernel: each 128-column group of each row of x with its own
//        scale, a_scale[k / 128][t] (vLLM's per-token-group quantization for block FP8);
//     2. expand_block_scales_kernel: the weight's scales to one per row and 128 columns,
//        [K / 128][N] (the layout of cuBLASLt's VEC128 mode; ~1 us a GEMM, into the step arena);
//     3. cuBLASLt with both operands in CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F: out^T[n, t] =
//        sum_g w_scale[g][n] x a_scale[g][t] x sum_{k in g} code_w[n, k] code_x[t, k]. Its rows of
//        a_scale must be 16-byte aligned: linear_quantized gives it fp8_block_gemm_rows(T) rows
//        (kernel_plan.h) and the last ones to the GEMV.
// backends/fp8_weights.h's fake_quantize_activations_fp8 (block_k 0 or 128) is the host reference of
// the activation rounding.
// The layout and plan cache are gemm_cublaslt.cu's (column-major out^T = (w^T)^T x^T, "TN", the
// form FP8 matmuls need; GemmOperands::Fp8RowScaled / Fp8Block128): descriptors per (T, N, K, F32
// out), the algorithm per bucket of T. The scale pointers are set on every call (each layer has its
// own), so a captured graph holds them. Codes and scales of x live in the step arena.
// Accuracy: quantizing activations adds ~2.5% rel_l2 per GEMM against weight-only (measured in
// CudaFp8Weights.LinearAwkwardShapesAgainstTheCpu); decode (the GEMV) stays weight-only.
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/fp8.cuh"

namespace nanovllm {

namespace cuda {
namespace {

// Row t of x [T, K] (BF16) -> codes [T, K] and scale[t]. One CTA per row; K % 8 == 0.
__global__ void quantize_act_fp8_kernel(const bf16* __restrict__ x, uint8_t* __restrict__ codes,
                                        float* __restrict__ scale, int K) {
  __shared__ float red[32];
  pdl_begin();
  const uint4* xv = reinterpret_cast<const uint4*>(x + int64_t(blockIdx.x) * K);
  uint2* cv = reinterpret_cast<uint2*>(codes + int64_t(blockIdx.x) * K);
  const int KC = K / 8;
  float amax = 0.f;
  for (int c = threadIdx.x; c < KC; c += blockDim.x) {
    float f[8];
    unpack8(xv[c], f);
#pragma unroll
    for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(f[e]));
  }
  amax = warp_max(amax);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = amax;
  __syncthreads();
  amax = 0.f;
  for (int i = 0; i < int(blockDim.x >> 5); ++i) amax = fmaxf(amax, red[i]);
  const float s = amax > 0.f ? amax / 448.0f : 1.0f;
  for (int c = threadIdx.x; c < KC; c += blockDim.x) {
    float f[8];
    unpack8(xv[c], f);
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = f[e] / s;  // division, as the host reference
    cv[c] = pack8_e4m3(f, 1.0f);
  }
  if (threadIdx.x == 0) scale[blockIdx.x] = s;
}

// Row t of x [T, K] (BF16, K % 128 == 0) -> codes [T, K] and scale [K / 128][T], one scale per
// 128-column group: one CTA per row, each half-warp (16 lanes x 8 values) one group at a time (both
// halves of a warp step together: the amax shuffles stay inside a half).
__global__ void quantize_act_fp8_block128_kernel(const bf16* __restrict__ x, uint8_t* __restrict__ codes,
                                                 float* __restrict__ scale, int K, int T) {
  pdl_begin();
  const int lane16 = threadIdx.x & 15, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int G = K / 128;
  const uint4* xv = reinterpret_cast<const uint4*>(x + int64_t(blockIdx.x) * K);
  uint2* cv = reinterpret_cast<uint2*>(codes + int64_t(blockIdx.x) * K);
  for (int base = 2 * warp; base < G; base += 2 * warps) {
    const int g = base + ((threadIdx.x >> 4) & 1);
    const bool on = g < G;
    float f[8] = {};
    if (on) unpack8(xv[g * 16 + lane16], f);
    float amax = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(f[e]));
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float s = amax > 0.f ? amax / 448.0f : 1.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = f[e] / s;  // division, as the host reference
    if (on) {
      cv[g * 16 + lane16] = pack8_e4m3(f, 1.0f);
      if (lane16 == 0) scale[int64_t(g) * T + blockIdx.x] = s;
    }
  }
}

// Block scales s [ceil(N / block_n)][KB] -> out [KB][N]: out[g][n] = s[n / block_n][g].
__global__ void expand_block_scales_kernel(const float* __restrict__ s, float* __restrict__ out, int N, int KB,
                                           int block_n) {
  pdl_begin();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(KB) * N) return;
  const int g = int(i / N), n = int(i % N);
  out[i] = __ldg(s + int64_t(n / block_n) * KB + g);
}

}  // namespace
}  // namespace cuda

bool CudaBackend::linear_fp8_cublaslt(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out) {
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
  const GemmPlan* p = gemm_plan({T, N, K, out.dtype() == DType::F32, GemmOperands::Fp8RowScaled});
  if (!p) return false;
  Tensor codes = empty({T, K}, DType::F8E4M3), a_scale = empty({T}, DType::F32);
  cuda::launch(cuda::quantize_act_fp8_kernel, dim3(unsigned(T)), dim3(256), 0, on_stream(), x.data<cuda::bf16>(),
               codes.data<uint8_t>(), a_scale.data<float>(), int(K));
  NV_LAUNCH_CHECK();
  // A = w^T: one scale per output channel n; B = x^T: one per token.
  run_gemm(*p, w.raw(), codes.raw(), out.raw(), scales.scale.raw(), a_scale.raw());
  return true;
}

bool CudaBackend::fp8_block_gemm_runs(int64_t T, int64_t N, int64_t K, bool f32_out) {
  const int64_t T4 = cuda::fp8_block_gemm_rows(T);
  return T4 > 0 && gemm_plan({T4, N, K, f32_out, GemmOperands::Fp8Block128}) != nullptr;
}

bool CudaBackend::linear_fp8_block_cublaslt(const Tensor& x, const Tensor& w, const WeightScales& scales,
                                            Tensor& out) {
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0), KB = K / 128;
  if (scales.block_k != 128 || K % 128 != 0)
    throw Error("linear (FP8 block weights): the VEC128 GEMM needs 128-column scale blocks and K % 128 == 0 (got "
                "block_k " + std::to_string(scales.block_k) + ", K " + std::to_string(K) + ")");
  const GemmPlan* p = gemm_plan({T, N, K, out.dtype() == DType::F32, GemmOperands::Fp8Block128});
  if (!p) return false;
  Tensor codes = empty({T, K}, DType::F8E4M3), a_scale = empty({KB, T}, DType::F32), w_scale = empty({KB, N}, DType::F32);
  cuda::launch(cuda::expand_block_scales_kernel, dim3(cuda::ceil_div(KB * N, 256)), dim3(256), 0, on_stream(),
               scales.scale.data<float>(), w_scale.data<float>(), int(N), int(KB), int(scales.block_n));
  NV_LAUNCH_CHECK();
  cuda::launch(cuda::quantize_act_fp8_block128_kernel, dim3(unsigned(T)), dim3(128), 0, on_stream(),
               x.data<cuda::bf16>(), codes.data<uint8_t>(), a_scale.data<float>(), int(K), int(T));
  NV_LAUNCH_CHECK();
  run_gemm(*p, w.raw(), codes.raw(), out.raw(), w_scale.raw(), a_scale.raw());
  return true;
}

}  // namespace nanovllm
