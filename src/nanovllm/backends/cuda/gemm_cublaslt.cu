// out[T, N] = x[T, K] @ w[N, K]^T through cuBLASLt: BF16 operands, FP32 accumulation, BF16 out.
// Row-major x/w/out are column-major x^T [K, T], w^T [K, N], out^T [N, T], so cuBLASLt computes
// out^T = op(w^T)^T... i.e. C[N, T] = A^T B with A = w^T (K x N, ld K, transposed) and B = x^T
// (K x T, ld K). Descriptors are cached per (T, N, K); the heuristic's algorithm per (rows
// bucket, N, K) (gemm_heuristic_rows, kernel_plan.h), checked for each T it is used with; the
// workspace is allocated once, so linear() is graph-capturable. Each op asks plan_linear
// (kernel_plan.h) first: decode batches of at most 4 rows go to gemv.cu instead.
#include <cublasLt.h>

#include <cstdint>
#include <initializer_list>

#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/ops/checks.h"

namespace nanovllm {

#define NV_CUBLAS_CHECK(x)                                                                                            \
  do {                                                                                                                \
    cublasStatus_t st_ = (x);                                                                                         \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                                 \
      throw Error(std::string("cuBLASLt error: status ") + std::to_string(int(st_)) + " in " #x " at " __FILE__ ":" + \
                  std::to_string(__LINE__));                                                                          \
  } while (0)

struct CudaBackend::GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~GemmPlan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

void CudaBackend::init_gemm() {
  cublasLtHandle_t h;
  NV_CUBLAS_CHECK(cublasLtCreate(&h));
  cublaslt_ = h;
  workspace_bytes_ = size_t(32) << 20;
  NV_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

CudaBackend::GemmPlan* CudaBackend::make_gemm_plan(int64_t T, int64_t N, int64_t K, bool f32_out) {
  auto* p = new GemmPlan();
  try {
    NV_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    NV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    NV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    NV_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, uint64_t(K), uint64_t(N), K));  // w^T
    NV_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, uint64_t(K), uint64_t(T), K));  // x^T
    NV_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&p->c, f32_out ? CUDA_R_32F : CUDA_R_16BF, uint64_t(N), uint64_t(T), N));  // out^T
  } catch (...) {
    delete p;
    throw;
  }
  return p;
}

// Sets p.algo to the heuristic's first algorithm for the plan's problem (T rows, N, K).
void CudaBackend::gemm_heuristic(GemmPlan& p, int64_t T, int64_t N, int64_t K) {
  auto h = static_cast<cublasLtHandle_t>(cublaslt_);
  cublasLtMatmulPreference_t pref;
  NV_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                       sizeof(workspace_bytes_));
  // Split-K partial sums are added in FP32 (the compute type), never in the BF16 output type
  // (the INPLACE / OUTPUT_TYPE schemes): each of those extra BF16 roundings adds error to every
  // output of the GEMM, and over 28 layers that showed (cosine against a float32 reference).
  const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reduction,
                                                           sizeof(reduction));
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(h, p.desc, p.a, p.b, p.c, p.c, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  NV_CUBLAS_CHECK(st);
  if (found == 0)
    throw Error("linear: cuBLASLt has no algorithm for [" + std::to_string(T) + ", " + std::to_string(K) + "] x [" +
                std::to_string(N) + ", " + std::to_string(K) + "]^T");
  p.algo = res.algo;
}

void CudaBackend::destroy_gemm() {
  for (auto& [k, p] : gemm_plans_) delete p;
  gemm_plans_.clear();
  for (auto& [k, p] : gemm_bucket_plans_) delete p;
  gemm_bucket_plans_.clear();
  if (workspace_) cudaFree(workspace_);
  workspace_ = nullptr;
  if (cublaslt_) cublasLtDestroy(static_cast<cublasLtHandle_t>(cublaslt_));
  cublaslt_ = nullptr;
}

namespace {

bool aligned16(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

}  // namespace

void CudaBackend::linear(const Tensor& x, const Tensor& w, Tensor& out) {
  check_linear(x, w, out);
  if (x.dtype() != DType::BF16 || w.dtype() != DType::BF16 || (out.dtype() != DType::BF16 && out.dtype() != DType::F32))
    throw Error(std::string("linear: x and w must be BF16, out BF16 or F32 (got ") + dtype_name(x.dtype()) + ", " +
                dtype_name(w.dtype()) + ", " + dtype_name(out.dtype()) + ")");
  const bool f32_out = out.dtype() == DType::F32;
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
  if (T == 0 || N == 0) return;
  cuda::LinearProblem prob;
  prob.T = T, prob.N = N, prob.K = K, prob.f32_out = f32_out, prob.aligned16 = aligned16({x.raw(), w.raw()});
  if (plan_linear(prob).kernel == cuda::LinearKernel::Gemv) {
    cuda::gemv_bf16(x.raw(), w.raw(), out.raw(), T, N, K, on_stream(), false, f32_out);
    return;
  }
  auto h = static_cast<cublasLtHandle_t>(cublaslt_);
  auto key = std::make_tuple(T, N, K, f32_out);
  auto it = gemm_plans_.find(key);
  if (it == gemm_plans_.end()) {
    // Descriptors for this T; the algorithm is the heuristic's for the T bucket (mixed steps and
    // prefills see many row counts: a heuristic query each, mid-step, cost milliseconds), used
    // where cuBLASLt confirms it runs this T within the workspace, else this T's own.
    GemmPlan* p = make_gemm_plan(T, N, K, f32_out);
    try {
      const int64_t Tb = cuda::gemm_heuristic_rows(T);
      auto bkey = std::make_tuple(Tb, N, K, f32_out);
      auto bit = gemm_bucket_plans_.find(bkey);
      if (bit == gemm_bucket_plans_.end()) {
        GemmPlan* b = make_gemm_plan(Tb, N, K, f32_out);
        try {
          gemm_heuristic(*b, Tb, N, K);
        } catch (...) {
          delete b;
          throw;
        }
        bit = gemm_bucket_plans_.emplace(bkey, b).first;
      }
      cublasLtMatmulHeuristicResult_t check{};
      if (cublasLtMatmulAlgoCheck(h, p->desc, p->a, p->b, p->c, p->c, &bit->second->algo, &check) ==
              CUBLAS_STATUS_SUCCESS &&
          check.workspaceSize <= workspace_bytes_)
        p->algo = bit->second->algo;
      else
        gemm_heuristic(*p, T, N, K);
    } catch (...) {
      delete p;
      throw;
    }
    it = gemm_plans_.emplace(key, p).first;
  }
  const GemmPlan& p = *it->second;
  const float alpha = 1.0f, beta = 0.0f;
  NV_CUBLAS_CHECK(cublasLtMatmul(h, p.desc, &alpha, w.raw(), p.a, x.raw(), p.b, &beta, out.raw(), p.c, out.raw(), p.c,
                                 &p.algo, workspace_, workspace_bytes_, static_cast<cudaStream_t>(stream_)));
}

void CudaBackend::linear_silu_mul(const Tensor& x, const Tensor& w, Tensor& out) {
  check_linear_silu_mul(x, w, out);
  const int64_t T = x.size(0), K = x.size(1), I = out.size(1);
  if (x.dtype() != DType::BF16 || w.dtype() != DType::BF16 || out.dtype() != DType::BF16)
    throw Error("linear_silu_mul: x, w and out must be BF16");
  if (T == 0 || I == 0) return;
  cuda::LinearProblem prob;
  prob.T = T, prob.N = I, prob.K = K, prob.silu_mul = true, prob.aligned16 = aligned16({x.raw(), w.raw()});
  if (plan_linear(prob).kernel == cuda::LinearKernel::Gemv)
    cuda::gemv_bf16(x.raw(), w.raw(), out.raw(), T, I, K, on_stream(), /*silu_mul=*/true);  // GEMM + SiLU
  else
    Backend::linear_silu_mul(x, w, out);  // cuBLASLt, then silu_and_mul
}

void CudaBackend::add_rms_norm_linear(Tensor& x, Tensor& residual, const Tensor& norm_w, float eps, const Tensor& w,
                                      Tensor& out, bool silu_mul) {
  check_add_rms_norm_linear(x, residual, norm_w, w, out, silu_mul);
  const bool bf16 = x.dtype() == DType::BF16 && residual.dtype() == DType::BF16 && norm_w.dtype() == DType::BF16 &&
                    w.dtype() == DType::BF16 && out.dtype() == DType::BF16;
  const int64_t T = x.size(0), K = x.size(1), N = out.size(1);
  cuda::LinearProblem prob;
  prob.T = T, prob.N = N, prob.K = K, prob.silu_mul = silu_mul, prob.norm = true, prob.bf16 = bf16;
  prob.aligned16 = aligned16({x.raw(), w.raw(), residual.raw(), norm_w.raw()});  // the new residual: an arena block
  if (!plan_linear(prob).fused_norm) {
    Backend::add_rms_norm_linear(x, residual, norm_w, eps, w, out, silu_mul);  // add_rms_norm, then the product
    return;
  }
  // The norm runs as the GEMV's prologue (one kernel instead of two). The kernel cannot update
  // the residual in place (every CTA reads it): residual becomes a new buffer holding the sum.
  Tensor sum = empty(residual.shape(), residual.dtype());
  const cuda::GemvNorm norm{residual.data<cuda::bf16>(), sum.data<cuda::bf16>(), norm_w.data<cuda::bf16>(), eps};
  cuda::gemv_bf16(x.raw(), w.raw(), out.raw(), T, N, K, on_stream(), silu_mul, false, &norm);
  residual = sum;
}

}  // namespace nanovllm
