// out[T, N] = x[T, K] @ value[N, K]^T for per-channel FP8 weights (value = code x w_scale[n]) on
// the FP8 tensor cores through cuBLASLt (kernel_plan.h: plan_fp8_linear chose it for T > 8):
//   1. quantize_act_fp8_kernel: each row of x to E4M3 codes with its own scale a_scale[t] =
//      amax(|x[t, :]|) / 448 (1 for a zero row), code = rn_satfinite(x / a_scale) (vLLM's dynamic
//      per-token activation scales; ops/fp8_weights.h's fake_quantize_activations_fp8 on the host);
//   2. cuBLASLt: E4M3 x E4M3 with FP32 accumulation, both operands' scales as outer vectors
//      (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, cuBLAS 12.9+): out^T[n, t] = w_scale[n] x
//      a_scale[t] x sum_k code_w[n, k] code_x[t, k], in BF16 or F32.
// The layout and plan cache are gemm_cublaslt.cu's (column-major out^T = (w^T)^T x^T, "TN", the
// form FP8 matmuls need; GemmOperands::Fp8RowScaled): descriptors per (T, N, K, F32 out), the
// algorithm per bucket of T. The scale pointers are set on every call (each layer has its own), so
// a captured graph holds them. The codes and scales of x live in the step arena.
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

}  // namespace nanovllm
