// out[T, N] = x[T, K] @ value[N, K]^T for per-channel FP8 weights (value = code x w_scale[n]) on
// the FP8 tensor cores through cuBLASLt (kernel_plan.h: plan_fp8_linear chose it for T > 8):
//   1. quantize_act_fp8_kernel: each row of x to E4M3 codes with its own scale a_scale[t] =
//      amax(|x[t, :]|) / 448 (1 for a zero row), code = rn_satfinite(x / a_scale) (vLLM's dynamic
//      per-token activation scales; ops/fp8_weights.h's fake_quantize_activations_fp8 on the host);
//   2. cuBLASLt: E4M3 x E4M3 with FP32 accumulation, both operands' scales as outer vectors
//      (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, cuBLAS 12.9+): out^T[n, t] = w_scale[n] x
//      a_scale[t] x sum_k code_w[n, k] code_x[t, k], in BF16 or F32.
// The layout is gemm_cublaslt.cu's (column-major out^T = (w^T)^T x^T, "TN", the form FP8 matmuls
// need). Descriptors are cached per (T, N, K, F32 out), the algorithm per bucket of T; the scale
// pointers are set on every call (each layer has its own), so the captured graph holds them. The
// codes and scales of x live in the step arena.
#include <cublasLt.h>

#include <string>

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

void check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLASLt error: status ") + std::to_string(int(st)) + " in " + what + " (FP8 GEMM)");
}

}  // namespace
}  // namespace cuda

struct CudaBackend::Fp8GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;  // else: no FP8 algorithm for this shape (the caller dequantizes)
  ~Fp8GemmPlan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

void CudaBackend::destroy_fp8_gemm() {
  for (auto& [k, p] : fp8_gemm_plans_) delete p;
  fp8_gemm_plans_.clear();
}

// The plan of (T, N, K, f32_out). As linear() does for BF16 (gemm_cublaslt.cu), the heuristic is
// asked once per bucket of row counts (gemm_heuristic_rows; bucket plans are kept under -bucket in
// the same map), and its algorithm serves every T of the bucket that cublasLtMatmulAlgoCheck
// accepts, so prefills of new lengths do not query it mid-step.
bool CudaBackend::linear_fp8_cublaslt(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out) {
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
  const bool f32_out = out.dtype() == DType::F32;
  auto h = static_cast<cublasLtHandle_t>(cublaslt_);
  // Descriptors of out^T [N, T] = (w^T)^T x^T with FP8 operands and outer-vector scales; `modes`
  // false where this cuBLASLt refuses the scale mode (no FP8 plan then: the caller dequantizes).
  auto make_fp8_plan = [](int64_t T, int64_t N, int64_t K, bool f32_out, bool& modes) {
    auto* p = new Fp8GemmPlan();
    try {
      cuda::check(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
      cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      cuda::check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)), "transa");
      cuda::check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)), "transb");
      const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
      modes = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)) ==
                  CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)) ==
                  CUBLAS_STATUS_SUCCESS;
      cuda::check(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_8F_E4M3, uint64_t(K), uint64_t(N), K), "A");  // w^T
      cuda::check(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_8F_E4M3, uint64_t(K), uint64_t(T), K), "B");  // x^T
      cuda::check(cublasLtMatrixLayoutCreate(&p->c, f32_out ? CUDA_R_32F : CUDA_R_16BF, uint64_t(N), uint64_t(T), N),
                  "C");
    } catch (...) {
      delete p;
      throw;
    }
    return p;
  };
  auto heuristic = [&](Fp8GemmPlan& p, bool modes) {
    cublasLtMatmulPreference_t pref;
    cuda::check(cublasLtMatmulPreferenceCreate(&pref), "preference");
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                         sizeof(workspace_bytes_));
    cublasLtMatmulHeuristicResult_t res{};
    int found = 0;
    const cublasStatus_t st = modes
                                  ? cublasLtMatmulAlgoGetHeuristic(h, p.desc, p.a, p.b, p.c, p.c, pref, 1, &res, &found)
                                  : CUBLAS_STATUS_NOT_SUPPORTED;
    cublasLtMatmulPreferenceDestroy(pref);
    p.found = st == CUBLAS_STATUS_SUCCESS && found > 0;
    if (p.found) p.algo = res.algo;
  };
  auto it = fp8_gemm_plans_.find(std::make_tuple(T, N, K, f32_out));
  if (it == fp8_gemm_plans_.end()) {
    bool modes = false;
    Fp8GemmPlan* p = make_fp8_plan(T, N, K, f32_out, modes);
    try {
      const int64_t Tb = cuda::gemm_heuristic_rows(T);
      const auto bkey = std::make_tuple(-Tb, N, K, f32_out);
      auto bit = fp8_gemm_plans_.find(bkey);
      if (bit == fp8_gemm_plans_.end()) {
        bool bmodes = false;
        Fp8GemmPlan* b = make_fp8_plan(Tb, N, K, f32_out, bmodes);
        try {
          heuristic(*b, bmodes);
        } catch (...) {
          delete b;
          throw;
        }
        bit = fp8_gemm_plans_.emplace(bkey, b).first;
      }
      cublasLtMatmulHeuristicResult_t check{};
      if (modes && bit->second->found &&
          cublasLtMatmulAlgoCheck(h, p->desc, p->a, p->b, p->c, p->c, &bit->second->algo, &check) ==
              CUBLAS_STATUS_SUCCESS &&
          check.workspaceSize <= workspace_bytes_) {
        p->algo = bit->second->algo;
        p->found = true;
      } else {
        heuristic(*p, modes);
      }
    } catch (...) {
      delete p;
      throw;
    }
    it = fp8_gemm_plans_.emplace(std::make_tuple(T, N, K, f32_out), p).first;
  }
  Fp8GemmPlan& p = *it->second;
  if (!p.found) return false;
  Tensor codes = empty({T, K}, DType::F8E4M3), a_scale = empty({T}, DType::F32);
  cuda::launch(cuda::quantize_act_fp8_kernel, dim3(unsigned(T)), dim3(256), 0, on_stream(), x.data<cuda::bf16>(),
               codes.data<uint8_t>(), a_scale.data<float>(), int(K));
  NV_LAUNCH_CHECK();
  const void* ws = scales.scale.raw();  // A = w^T: one scale per column of C^T's rows (n)
  const void* xs = a_scale.raw();       // B = x^T: one per token
  cuda::check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &ws, sizeof(ws)),
              "A scale pointer");
  cuda::check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &xs, sizeof(xs)),
              "B scale pointer");
  const float alpha = 1.0f, beta = 0.0f;
  cuda::check(cublasLtMatmul(h, p.desc, &alpha, w.raw(), p.a, codes.raw(), p.b, &beta, out.raw(), p.c, out.raw(), p.c,
                             &p.algo, workspace_, workspace_bytes_, static_cast<cudaStream_t>(stream_)),
              "cublasLtMatmul");
  return true;
}

}  // namespace nanovllm
