// out[T, N] = x[T, K] @ w[N, K]^T through cuBLASLt: BF16 operands, FP32 accumulation, BF16 out.
// Row-major x/w/out are column-major x^T [K, T], w^T [K, N], out^T [N, T], so cuBLASLt computes
// out^T = op(w^T)^T... i.e. C[N, T] = A^T B with A = w^T (K x N, ld K, transposed) and B = x^T
// (K x T, ld K). Descriptors are cached per (T, N, K, operands); the heuristic's algorithm per
// (rows bucket, N, K, operands) (gemm_heuristic_rows, kernel_plan.h), checked for each T it is used
// with; the workspace is allocated once, so linear() is graph-capturable. The same plans serve the
// FP8 GEMM of fp8_gemm_cublaslt.cu (E4M3 operands with per-row scales). Each op asks plan_linear
// (kernel_plan.h) first: decode batches of at most 4 rows go to gemv.cu instead.
#include <cublasLt.h>

#include <cstdint>

#include "nanovllm/backends/checks.h"
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/gemm_wgmma.h"

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
  bool found = false;  // else cuBLASLt has no algorithm for this problem
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

CudaBackend::GemmPlan* CudaBackend::make_gemm_plan(const GemmKey& k) {
  const auto [T, N, K, f32_out, ops] = k;
  const bool fp8 = ops != GemmOperands::BF16;
  const cudaDataType_t in = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  auto* p = new GemmPlan();
  try {
    NV_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;  // "TN": the form FP8 matmuls need
    NV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    NV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    if (fp8) {
      // Fp8RowScaled: one F32 scale per row of each operand: A = w^T's N output channels, B = x^T's
      // T tokens (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, cuBLAS 12.9+). Fp8Block128: one per row
      // and 128 K-columns of each, laid out [K / 128][rows] (CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      // probed on an H100 with cuBLASLt 13.1: the BLK128x128 mode for A was not accepted).
      // cuBLASLt 13.1 answers "not supported" to a heuristic query of scaled modes whose scale
      // pointers are unset (measured on an H100), so placeholders are set here; run_gemm sets the
      // real ones on every call.
      const int32_t mode = ops == GemmOperands::Fp8RowScaled ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                                                             : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
      const void* placeholder = workspace_;
      for (auto attr : {CUBLASLT_MATMUL_DESC_A_SCALE_MODE, CUBLASLT_MATMUL_DESC_B_SCALE_MODE})
        NV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, attr, &mode, sizeof(mode)));
      for (auto attr : {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER})
        NV_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, attr, &placeholder, sizeof(placeholder)));
    }
    NV_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, in, uint64_t(K), uint64_t(N), K));  // w^T
    NV_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, in, uint64_t(K), uint64_t(T), K));  // x^T
    NV_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&p->c, f32_out ? CUDA_R_32F : CUDA_R_16BF, uint64_t(N), uint64_t(T), N));  // out^T
  } catch (...) {
    delete p;
    throw;
  }
  return p;
}

// Sets p.algo to the heuristic's first algorithm for the plan's problem; false where it has none.
bool CudaBackend::gemm_heuristic(GemmPlan& p) {
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
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  NV_CUBLAS_CHECK(st);
  p.found = found > 0;
  if (p.found) p.algo = res.algo;
  return p.found;
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

std::vector<int64_t> CudaBackend::plan_row_counts(int64_t max_rows) const {
  std::vector<int64_t> rows;
  for (int64_t T = 1; T <= max_rows; ++T) {
    const int64_t top = std::min(cuda::gemm_heuristic_rows(T), max_rows);
    if (rows.empty() || rows.back() != top) rows.push_back(top);
    T = std::max(T, top);
  }
  return rows;
}

const CudaBackend::GemmPlan* CudaBackend::gemm_plan(const GemmKey& k) {
  auto it = gemm_plans_.find(k);
  if (it == gemm_plans_.end()) {
    // Descriptors for this T; the algorithm is the heuristic's for the T bucket (mixed steps and
    // prefills see many row counts: a heuristic query each, mid-step, cost milliseconds), used
    // where cuBLASLt confirms it runs this T within the workspace, else this T's own.
    auto h = static_cast<cublasLtHandle_t>(cublaslt_);
    GemmPlan* p = make_gemm_plan(k);
    try {
      GemmKey bkey = k;
      std::get<0>(bkey) = cuda::gemm_heuristic_rows(std::get<0>(k));
      auto bit = gemm_bucket_plans_.find(bkey);
      if (bit == gemm_bucket_plans_.end()) {
        GemmPlan* b = make_gemm_plan(bkey);
        try {
          gemm_heuristic(*b);
        } catch (...) {
          delete b;
          throw;
        }
        bit = gemm_bucket_plans_.emplace(bkey, b).first;
      }
      cublasLtMatmulHeuristicResult_t check{};
      if (bit->second->found &&
          cublasLtMatmulAlgoCheck(h, p->desc, p->a, p->b, p->c, p->c, &bit->second->algo, &check) ==
              CUBLAS_STATUS_SUCCESS &&
          check.workspaceSize <= workspace_bytes_) {
        p->algo = bit->second->algo;
        p->found = true;
      } else {
        gemm_heuristic(*p);
      }
    } catch (...) {
      delete p;
      throw;
    }
    it = gemm_plans_.emplace(k, p).first;
  }
  return it->second->found ? it->second : nullptr;
}

void CudaBackend::run_gemm(const GemmPlan& p, const void* w, const void* x, void* out, const void* w_scale,
                           const void* x_scale, bool accumulate) {
  if (w_scale || x_scale) {  // the descriptor is this backend's: the pointers of this call (graphs capture them)
    NV_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof(w_scale)));
    NV_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale, sizeof(x_scale)));
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  NV_CUBLAS_CHECK(cublasLtMatmul(static_cast<cublasLtHandle_t>(cublaslt_), p.desc, &alpha, w, p.a, x, p.b, &beta, out,
                                 p.c, out, p.c, &p.algo, workspace_, workspace_bytes_,
                                 static_cast<cudaStream_t>(stream_)));
}

void CudaBackend::linear(const Tensor& x, const Tensor& w, Tensor& out) {
  check_linear(x, w, out);
  if (x.dtype() != DType::BF16 || w.dtype() != DType::BF16 || (out.dtype() != DType::BF16 && out.dtype() != DType::F32))
    throw Error(std::string("linear: x and w must be BF16, out BF16 or F32 (got ") + dtype_name(x.dtype()) + ", " +
                dtype_name(w.dtype()) + ", " + dtype_name(out.dtype()) + ")");
  const bool f32_out = out.dtype() == DType::F32;
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
  if (T == 0 || N == 0) return;
  cuda::LinearProblem prob;
  prob.T = T, prob.N = N, prob.K = K, prob.f32_out = f32_out,
  prob.aligned16 = cuda::aligned16({x.raw(), w.raw(), out.raw()});
  const cuda::LinearPlan plan = plan_linear(prob);
  if (plan.kernel == cuda::LinearKernel::Gemv) {
    cuda::gemv_bf16(x.raw(), w.raw(), out.raw(), T, N, K, on_stream(), false, f32_out, nullptr, plan.gemv);
    return;
  }
  if (plan.kernel == cuda::LinearKernel::Wgmma) {
    const bool pair = gemm_pairs();
    return cuda::gemm_wgmma(x.raw(), w.raw(), out.raw(), T, N, K,
                            cuda::gemm_wgmma_form(false, pair, options_.gemm_pingpong == GemmPingPong::On),
                            gemm_resident(pair), stream_);
  }
  const GemmPlan* p = gemm_plan({T, N, K, f32_out, GemmOperands::BF16});
  if (!p)
    throw Error("linear: cuBLASLt has no algorithm for [" + std::to_string(T) + ", " + std::to_string(K) + "] x [" +
                std::to_string(N) + ", " + std::to_string(K) + "]^T");
  run_gemm(*p, w.raw(), x.raw(), out.raw());
}

void CudaBackend::linear_silu_mul(const Tensor& x, const Tensor& w, Tensor& out) {
  check_linear_silu_mul(x, w, out);
  const int64_t T = x.size(0), K = x.size(1), I = out.size(1);
  if (x.dtype() != DType::BF16 || w.dtype() != DType::BF16 || out.dtype() != DType::BF16)
    throw Error("linear_silu_mul: x, w and out must be BF16");
  if (T == 0 || I == 0) return;
  cuda::LinearProblem prob;
  prob.T = T, prob.N = I, prob.K = K, prob.silu_mul = true,
  prob.aligned16 = cuda::aligned16({x.raw(), w.raw(), out.raw()});
  const cuda::LinearPlan plan = plan_linear(prob);
  if (plan.kernel == cuda::LinearKernel::Gemv)  // GEMM + SiLU
    cuda::gemv_bf16(x.raw(), w.raw(), out.raw(), T, I, K, on_stream(), /*silu_mul=*/true, false, nullptr, plan.gemv);
  else if (plan.kernel == cuda::LinearKernel::Wgmma)  // GEMM + SiLU in the epilogue
  {
    const bool pair = gemm_pairs();
    cuda::gemm_wgmma(x.raw(), w.raw(), out.raw(), T, I, K,
                     cuda::gemm_wgmma_form(true, pair, options_.gemm_pingpong == GemmPingPong::On), gemm_resident(pair),
                     stream_);
  } else
    Backend::linear_silu_mul(x, w, out);  // cuBLASLt, then silu_and_mul
}

bool CudaBackend::linear_add_rms_norm(const Tensor& x, const Tensor& w, Tensor& residual, const Tensor& norm_w,
                                      float eps, Tensor& out) {
  check_linear(x, w, out);
  check_rms_norm(out, norm_w, residual);
  const int64_t T = x.size(0), K = x.size(1), H = w.size(0);
  cuda::LinearProblem prob;
  prob.T = T, prob.N = H, prob.K = K, prob.wgmma = wgmma_;
  prob.bf16 = x.dtype() == DType::BF16 && w.dtype() == DType::BF16 && residual.dtype() == DType::BF16 &&
              norm_w.dtype() == DType::BF16 && out.dtype() == DType::BF16;
  prob.aligned16 = cuda::aligned16({x.raw(), w.raw(), residual.raw(), norm_w.raw(), out.raw()});
  if (!cuda::linear_add_norm_fuses(prob, options_)) return false;
  auto it = add_norm_clusters_.find(H);
  if (it == add_norm_clusters_.end())
    it = add_norm_clusters_.emplace(H, cuda::gemm_wgmma_add_rms_norm_max_clusters(H)).first;
  if (it->second < 1) return false;  // no cluster of H / 256 CTAs fits this device
  if (T > 0)
    cuda::gemm_wgmma_add_rms_norm(x.raw(), w.raw(), residual.raw(), norm_w.raw(), eps, out.raw(), T, H, K, it->second,
                                  stream_);
  return true;
}

void CudaBackend::add_rms_norm_linear(Tensor& x, Tensor& residual, const Tensor& norm_w, float eps, const Tensor& w,
                                      Tensor& out, bool silu_mul) {
  check_add_rms_norm_linear(x, residual, norm_w, w, out, silu_mul);
  const bool bf16 = x.dtype() == DType::BF16 && residual.dtype() == DType::BF16 && norm_w.dtype() == DType::BF16 &&
                    w.dtype() == DType::BF16 && out.dtype() == DType::BF16;
  const int64_t T = x.size(0), K = x.size(1), N = out.size(1);
  cuda::LinearProblem prob;
  prob.T = T, prob.N = N, prob.K = K, prob.silu_mul = silu_mul, prob.norm = true, prob.bf16 = bf16;
  // (the new residual: an arena block)
  prob.aligned16 = cuda::aligned16({x.raw(), w.raw(), residual.raw(), norm_w.raw()});
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
